"""gpu_check's expert_parallel step: ``ExpertParallelMoE`` on every GPU of the host (NCCL) against one process.

The equality check of ``tests/test_expert_parallel_layer.py``, with the backend a GPU host trains on: one process per
GPU (``torch.cuda.set_device(rank)`` before ``init_process_group``), NCCL, a FileStore in a temporary folder for the
rendezvous and the loopback interface for NCCL's own bootstrap, a process-group timeout and a deadline for the whole
spawn. Each rank runs skewed routing (70 % of the pairs on a quarter of the experts) through the layer, forward and
backward, in three cases: without replicas, with a replica plan (guest weights sent point to point), and with
redundant slots as well (``sum_replica_gradients``). The forward outputs, the input gradients and every expert
weight's gradient must equal the single-process reference of ``tests/expert_parallel_oracle.py`` (loaded by path: it
needs torch only, so the check runs without pytest).

With one GPU the step is skipped; in the dry run it runs the same code on 2 CPU ranks with gloo, at the oracle's tiny
sizes, so ``make test`` exercises it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from oracles import load_test_oracle

if TYPE_CHECKING:  # for the annotation only: _layer imports it where it builds the layer
    from moe_balance.expert_parallel import ExpertParallelMoE

CASES = {  # name: (spare slots per rank for the replica plan, redundant slots per rank in the placement)
    "skewed-no-replicas": (0, 0),
    "skewed-replicas": (2, 0),
    "skewed-redundant-slots-and-replicas": (2, 1),
}
HOME_SLOTS_PER_RANK = 4  # experts = 4 x ranks, so any GPU count divides them
DRY_RUN_RANKS = 2
GROUP_TIMEOUT_S = 20  # a collective nobody answers raises after this long
SPAWN_DEADLINE_S = 35  # start-up, NCCL's communicators and every case; under the step's limit
# NOTE: float32 on both sides; the GPU's matmuls sum in another order than the CPU reference (TF32 is switched off).
TOLERANCE = {"gloo": 1e-5, "nccl": 1e-4}
ERROR_TAIL_CHARS = 1500


def load_oracle() -> ModuleType:
    """tests/expert_parallel_oracle.py by path (it imports torch only), without putting tests/ on sys.path."""
    return load_test_oracle("expert_parallel_oracle")


def inputs_for(oracle: ModuleType, world_size: int) -> dict[str, Any]:
    """The sizes, the full expert weights and every rank's skewed micro-batch, from the oracle."""
    experts = HOME_SLOTS_PER_RANK * world_size
    sizes = {
        "experts": experts,
        "d_model": oracle.D_MODEL,
        "d_ff": oracle.D_FF,
        "top_k": oracle.TOP_K,
        "tokens_per_rank": oracle.TOKENS_PER_RANK,
        "home_slots_per_rank": HOME_SLOTS_PER_RANK,
    }
    batches = [oracle.routing(rank, "skewed", experts) for rank in range(world_size)]  # (x, topk_idx, gates, upstream)
    return {"sizes": sizes, "weights": oracle.expert_weights(experts), "batches": batches}


def _layer(
    rank: int, world_size: int, inputs: dict, device: torch.device, spares: int, redundant: int
) -> ExpertParallelMoE:
    """An ``ExpertParallelMoE`` whose slots hold the rows of the full weights that the default placement gives them."""
    from moe_balance.expert_parallel import ExpertParallelConfig, ExpertParallelMoE

    sizes = inputs["sizes"]
    slots = HOME_SLOTS_PER_RANK + redundant  # the default placement gives slot s expert s mod E
    config = ExpertParallelConfig(
        num_experts=sizes["experts"],
        slots_per_rank=slots,
        d_model=sizes["d_model"],
        d_ff=sizes["d_ff"],
        ranks_per_node=world_size,  # one host
        spare_slots_per_rank=spares,
    )
    layer = ExpertParallelMoE(config, device=device)
    mine = layer.phy2log[rank * slots : (rank + 1) * slots]
    with torch.no_grad():
        for weight, full in zip(layer.experts.weights(), inputs["weights"], strict=True):
            weight.copy_(full[mine])
    return layer


def _one_case(rank: int, world_size: int, inputs: dict, device: torch.device, spares: int, redundant: int) -> dict:
    """One case on this rank: forward and backward, timed, then the replicas' gradient sum and the group's record."""
    from moe_balance.expert_parallel import gather_execution_record

    layer = _layer(rank, world_size, inputs, device, spares, redundant)
    x, topk_idx, gates, upstream = (t.to(device, copy=True) for t in inputs["batches"][rank])  # fresh per case
    x.requires_grad_()
    _sync(device)
    start = time.perf_counter()
    y = layer(x, topk_idx, gates)
    (y * upstream).sum().backward()
    _sync(device)
    fwd_bwd_ms = 1000 * (time.perf_counter() - start)
    weight_grads = [_host_copy(w.grad) for w in layer.experts.weights()]  # before the replicas' sum
    layer.sum_replica_gradients()
    stats = layer.last_stats
    if stats is None:  # not reached: every forward sets it
        raise RuntimeError("the layer kept no stats of its forward")
    record = gather_execution_record(
        stats, step=0, layer=0, ranks_per_node=world_size, spare_slots_per_rank=spares
    )
    return {
        "y": _host_copy(y),
        "x_grad": _host_copy(x.grad),
        "weight_grads": weight_grads,
        "summed_grads": [_host_copy(w.grad) for w in layer.experts.weights()],
        "phy2log": _host_copy(layer.phy2log),
        "record": record,
        "fwd_bwd_ms": fwd_bwd_ms,
    }


def _host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU copy (``.cpu()`` of a CPU tensor is the tensor itself, which a later in-place update would change)."""
    return tensor.detach().to("cpu", copy=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rank_main(rank: int, world_size: int, backend: str, folder: str) -> None:
    """One rank: join the group, run every case, write the outcome (or the error) to rank{rank}.pt."""
    os.environ["GLOO_SOCKET_IFNAME"] = os.environ["NCCL_SOCKET_IFNAME"] = "lo"  # loopback only
    device = torch.device("cpu")
    options: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(rank)  # NOTE: before the group: NCCL and all_gather_object use the current device
        torch.backends.cuda.matmul.allow_tf32 = False
        device = options["device_id"] = torch.device("cuda", rank)
    else:
        torch.set_num_threads(1)
    store = dist.FileStore(os.path.join(folder, "store"), world_size)
    timeout = timedelta(seconds=GROUP_TIMEOUT_S)
    try:
        dist.init_process_group(backend, rank=rank, world_size=world_size, store=store, timeout=timeout, **options)
        inputs = torch.load(os.path.join(folder, "inputs.pt"), weights_only=False)
        cases = {name: _one_case(rank, world_size, inputs, device, *slots) for name, slots in CASES.items()}
        outcome: dict[str, Any] = {"value": cases}
        dist.destroy_process_group()
    except Exception as error:  # reported by the parent, with the rank
        outcome = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()[-ERROR_TAIL_CHARS:]}
    torch.save(outcome, os.path.join(folder, f"rank{rank}.pt"))
    # NOTE: the outcome is on disk; skip the interpreter's teardown, which takes seconds with torch loaded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ranks(world_size: int, backend: str, inputs: dict) -> list[dict]:
    """Every case on ``world_size`` ranks, one process each; per rank ``{"value": cases}`` or ``{"error": ...}``."""
    with tempfile.TemporaryDirectory() as folder:
        torch.save(inputs, os.path.join(folder, "inputs.pt"))
        context = mp.start_processes(
            _rank_main, args=(world_size, backend, folder), nprocs=world_size, join=False, start_method="spawn"
        )
        deadline = time.monotonic() + SPAWN_DEADLINE_S
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.kill()
                raise TimeoutError(f"{world_size} {backend} ranks did not finish within {SPAWN_DEADLINE_S} s")
        return [torch.load(Path(folder) / f"rank{rank}.pt", weights_only=False) for rank in range(world_size)]


def _max_abs(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max()) if want.numel() else 0.0


def compare_case(per_rank: list[dict], reference: tuple, tolerance: float, spares: int) -> dict[str, Any]:
    """One case's figures across ranks against the reference (outputs, input grads, weight grads per expert)."""
    outputs, input_grads, weight_grads = reference
    phy2log = per_rank[0]["phy2log"]
    per_slot = [torch.cat([r["weight_grads"][i] for r in per_rank]) for i in range(len(weight_grads))]  # (R, ...)
    summed = [torch.cat([r["summed_grads"][i] for r in per_rank]) for i in range(len(weight_grads))]
    diffs = {
        "output": max(_max_abs(r["y"], want) for r, want in zip(per_rank, outputs, strict=True)),
        "input_grad": max(_max_abs(r["x_grad"], want) for r, want in zip(per_rank, input_grads, strict=True)),
        "weight_grad": max(
            _max_abs(torch.zeros_like(want).index_add_(0, phy2log, got), want)  # an expert's slots add up
            for got, want in zip(per_slot, weight_grads, strict=True)
        ),
        "summed_weight_grad": max(_max_abs(got, want[phy2log]) for got, want in zip(summed, weight_grads, strict=True)),
    }
    record = per_rank[0]["record"]
    keys = ("replicas", "tokens_routed_per_rank", "tokens_computed_per_rank", "tokens_predicted_per_rank")
    figures = {key: record[key] for key in keys}
    for key in ("routed_max_over_mean", "computed_max_over_mean", "predicted_max_over_mean"):
        figures[key] = round(record[key], 4)
    figures["computed_equals_predicted"] = record["tokens_computed_per_rank"] == record["tokens_predicted_per_rank"]
    figures["weight_bytes"] = record["weight_bytes_within_node"] + record["weight_bytes_across_nodes"]
    within = all(diff <= tolerance for diff in diffs.values())
    fills_a_spare = spares == 0 or record["replicas"] > 0  # else the guest weights' exchange went untested
    return {
        "ok": within and figures["computed_equals_predicted"] and fills_a_spare,
        "max_abs_diff": {key: float(f"{diff:.3g}") for key, diff in diffs.items()},
        **figures,
        "fwd_bwd_ms_max_over_ranks": round(max(r["fwd_bwd_ms"] for r in per_rank), 2),
    }


def expert_parallel(mode: str) -> dict[str, Any]:
    """NCCL over every GPU (2 or more) against the single-process reference; gloo on 2 CPU ranks in the dry run."""
    gpus = torch.cuda.device_count() if mode == "gpu" else 0
    if mode == "gpu" and gpus < 2:
        return {"ok": True, "skipped": f"{gpus} GPU"}
    backend, world_size = ("nccl", gpus) if mode == "gpu" else ("gloo", DRY_RUN_RANKS)
    oracle = load_oracle()
    inputs = inputs_for(oracle, world_size)
    start = time.perf_counter()
    outcomes = run_ranks(world_size, backend, inputs)
    ranks_wall_s = time.perf_counter() - start
    failed = [rank for rank, outcome in enumerate(outcomes) if "error" in outcome]
    if failed:
        return {
            "ok": False,
            "backend": backend,
            "ranks": world_size,
            "error": "; ".join(f"rank {rank}: {outcomes[rank]['error']}" for rank in failed),
            "rank_tracebacks": {f"rank {rank}": outcomes[rank]["traceback"] for rank in failed},
        }
    reference = oracle.reference_run(world_size, "skewed", inputs["sizes"]["experts"])
    tolerance = TOLERANCE[backend]
    cases = {
        name: compare_case([o["value"][name] for o in outcomes], reference, tolerance, CASES[name][0]) for name in CASES
    }
    result: dict[str, Any] = {
        "ok": all(case["ok"] for case in cases.values()),
        "backend": backend,
        "device": "cuda" if backend == "nccl" else "cpu",
        "ranks": world_size,
        "sizes": inputs["sizes"],
        "tolerance": tolerance,
        "ranks_wall_s": round(ranks_wall_s, 2),
        "cases": cases,
    }
    if mode != "gpu":
        result["note"] = "dry run: gloo on 2 CPU ranks proves the step's code; NCCL runs on a host with 2 or more GPUs"
    return result
