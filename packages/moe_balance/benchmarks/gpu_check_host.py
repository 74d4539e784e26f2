"""gpu_check's host steps: cold Triton compile times, and the kernels launched on every GPU of the host.

Each step takes the mode (``"gpu"`` or ``"dry-run"``) and returns a JSON-ready dict with ``ok``. Run as a script
(``python gpu_check_host.py --first-calls MODE``), this file times each kernel's first and warm calls in a fresh
process and prints them as JSON: ``cold_compile`` runs it in child processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from gpu_check_measure import device_for, routing_agreement, sync, time_call_s
from gpu_check_placement import skewed_load
from gpu_check_router import DEEPSEEK_V3, ROUTERS, SOFTMAX_TOP8, tied_rows

from moe_balance import router_stats
from moe_balance.placement import plan_replicas
from moe_balance.placement._sinkhorn_triton import sinkhorn_flow_triton
from moe_balance.placement.replica import rank_cost_matrix
from moe_balance.placement.replica_torch import sinkhorn_flow

OUTPUT_TAIL_CHARS = 3000


def kernel_calls(mode: str, device: torch.device) -> list[tuple[str, Callable[[], Any]]]:
    """One call per kernel specialisation, named; the torch path of each runs here once, so torch's own lazy start-up
    is not counted in the kernel's first call."""
    tokens, experts = (65_536, 256) if mode == "gpu" else (128, 64)
    generator = torch.Generator().manual_seed(0)
    calls: list[tuple[str, Callable[[], Any]]] = []
    for name, config, dtype in (
        ("router_stats softmax_top8 fp32", SOFTMAX_TOP8, torch.float32),
        ("router_stats deepseek_v3 bf16", DEEPSEEK_V3, torch.bfloat16),
    ):
        logits = torch.randn(tokens, experts, generator=generator).to(device=device, dtype=dtype)
        bias = torch.zeros(experts, device=device) if config.group_limited else None
        router_stats(logits, config, bias=bias, backend="torch")
        calls.append((name, partial(router_stats, logits, config, bias=bias, backend="triton")))
    ranks = 32 if mode == "gpu" else 8
    supply = torch.rand(ranks, generator=generator) * (torch.arange(ranks) % 2 == 0)
    demand = torch.rand(ranks, generator=generator) * (torch.arange(ranks) % 2 == 1)
    supply, demand, cost = supply / supply.sum(), demand / demand.sum(), rank_cost_matrix(ranks, 8, 3.0)
    sinkhorn_flow(supply, demand, cost, 0.25, 64)
    calls.append(("sinkhorn", lambda: sinkhorn_flow_triton(supply, demand, cost, 0.25, 64)))
    load = skewed_load(ranks, 256 if mode == "gpu" else 32)
    plan_replicas(load, spare_slots_per_rank=2, ranks_per_node=8, backend="torch")
    on_device = load.to(device)

    def plan() -> Any:
        return plan_replicas(on_device, spare_slots_per_rank=2, ranks_per_node=8, backend="triton")

    calls.append(("replica_plan matching (Sinkhorn compiled before)", plan))
    return calls


def first_calls(mode: str) -> list[dict[str, Any]]:
    """First and warm call of each kernel in this process: each specialisation compiles on its first call."""
    device = device_for(mode)
    torch.zeros(1, device=device)  # the CUDA context, before any timing
    sync(device)
    results = []
    for name, call in kernel_calls(mode, device):
        first_s = time_call_s(call, device)[0]
        warm_s = min(time_call_s(call, device)[0] for _ in range(3 if mode == "gpu" else 1))
        results.append({"kernel": name, "first_call_s": round(first_s, 4), "warm_call_s": round(warm_s, 4)})
    return results


def _first_calls_in_child(mode: str, cache_dir: str) -> list[dict[str, Any]]:
    env = dict(os.environ, TRITON_CACHE_DIR=cache_dir)
    command = [sys.executable, str(Path(__file__).resolve()), "--first-calls", mode]
    completed = subprocess.run(command, env=env, capture_output=True, text=True)
    if completed.returncode != 0:
        tail = (completed.stdout + completed.stderr)[-OUTPUT_TAIL_CHARS:]
        raise RuntimeError(f"the first-call process ended with exit code {completed.returncode}:\n{tail}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def cold_compile(mode: str) -> dict[str, Any]:
    """Each kernel's first call in a fresh process with an empty Triton cache (the compile), against its warm call;
    then the first call in a second process that finds the compiled kernels in that cache (a job's usual start)."""
    with tempfile.TemporaryDirectory() as cache_dir:
        cold = _first_calls_in_child(mode, cache_dir)
        cached = _first_calls_in_child(mode, cache_dir) if mode == "gpu" else []
    for call, again in zip(cold, cached, strict=False):
        call["compile_s"] = round(call["first_call_s"] - call["warm_call_s"], 4)
        call["first_call_with_disk_cache_s"] = again["first_call_s"]
    result: dict[str, Any] = {"ok": True, "compiled": mode == "gpu", "kernels": cold}
    if mode != "gpu":
        result["note"] = "Triton's interpreter (TRITON_INTERPRET=1) compiles nothing: no compile time to measure"
    return result


def launch_on(device: torch.device, tokens: int) -> dict[str, Any]:
    """Router kernel and replica plan with every tensor on ``device``; the torch path on the CPU is the truth."""
    generator = torch.Generator().manual_seed(device.index or 0)
    result: dict[str, Any] = {"device": str(device)}
    ok = True
    for name, config in ROUTERS:
        logits = torch.randn(tokens, 256, generator=generator)
        bias = 0.01 * torch.randn(256, generator=generator) if config.group_limited else None
        on_gpu = router_stats(
            logits.to(device), config, bias=None if bias is None else bias.to(device), backend="triton"
        )
        sync(device)
        truth = router_stats(logits, config, bias=bias, backend="torch")
        agreement = routing_agreement(
            on_gpu.topk_idx.cpu(), on_gpu.gates.cpu(), truth.topk_idx, truth.gates, tied_rows(logits, config, bias)
        )
        agreement["outputs_on_device"] = on_gpu.topk_idx.device == device and on_gpu.gates.device == device
        agreement["ok"] = (
            agreement["outputs_on_device"]
            and agreement["rows_differing_untied"] == 0
            and agreement["gates_max_abs_diff"] < 1e-5
        )
        result[name] = agreement
        ok = ok and agreement["ok"]
    load = skewed_load(32, 256)
    want = plan_replicas(load, spare_slots_per_rank=2, ranks_per_node=8, backend="torch")
    got = plan_replicas(load.to(device), spare_slots_per_rank=2, ranks_per_node=8, backend="triton")
    same_slots = torch.equal(want.slot_expert, got.slot_expert)
    result["same_replica_plan"] = same_slots and torch.equal(want.tokens, got.tokens)
    result["ok"] = ok and result["same_replica_plan"]
    return result


def cross_device(mode: str) -> dict[str, Any]:
    """With 2 or more GPUs: each kernel with its tensors on every cuda:i while cuda:0 is the current device."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if mode != "gpu" or count < 2:
        return {"ok": True, "skipped": f"{count} GPU(s)" + ("" if mode == "gpu" else ", dry run")}
    torch.cuda.set_device(0)
    devices = []
    for index in range(count):
        result = launch_on(torch.device("cuda", index), 16_384)
        result["current_device_after"] = torch.cuda.current_device()  # the launch must not leave cuda:i current
        result["ok"] = result["ok"] and result["current_device_after"] == 0
        devices.append(result)
    return {"ok": all(d["ok"] for d in devices), "gpus": count, "current_device": 0, "devices": devices}


if __name__ == "__main__" and sys.argv[1:2] == ["--first-calls"]:
    print(json.dumps(first_calls(sys.argv[2])))
