"""First-GPU check: Triton kernels for real, the fused router against eager Megatron formulas, placement kernels.

Run from packages/moe_balance:

    python benchmarks/gpu_check.py --out gpu-check.json             # on a CUDA/ROCm GPU: at most ~5 minutes
    python benchmarks/gpu_check.py --dry-run --out gpu-check.json   # CPU, Triton's interpreter: at most ~2 minutes

Writes one JSON object (``--out``; ``-`` for stdout) and exits 1 when a step fails:

- ``kernel_tests``: the kernel test files (router statistics, replica-plan kernels, fallbacks) under pytest, without
  ``TRITON_INTERPRET`` on a GPU, so the compiled kernels run; counts of passed/failed/skipped and the wall time;
- ``router``: ``benchmarks/router.py``'s comparison (fused pass vs eager Megatron-LM formulas), forward and
  forward+backward as ratios package / eager (below 1.0: the package is faster), with the agreement of the results;
- ``placement``: the Sinkhorn and matching kernels against their torch versions (same plan, times) and the whole
  replica plan with each backend.

Without a GPU (or with ``--dry-run``) every step runs on the CPU under ``TRITON_INTERPRET=1`` with small shapes, so
CI proves the script and the kernels' logic without a GPU; the figures then say nothing about GPU speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1]
KERNEL_TESTS = ("tests/test_kernel_router_stats.py", "tests/test_replica_kernels.py", "tests/test_kernel_fallback.py")


def choose_mode(dry_run: bool) -> str:
    """'gpu' when a GPU is there and no dry run is asked; 'dry-run' otherwise. Sets TRITON_INTERPRET before Triton."""
    import torch

    if dry_run or not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"  # NOTE: read when Triton kernels are first imported
        return "dry-run"
    os.environ.pop("TRITON_INTERPRET", None)
    return "gpu"


def run_kernel_tests(mode: str, timeout_s: float) -> dict[str, Any]:
    """The kernel test files in a child pytest (its own TRITON_INTERPRET), summarised from its JUnit XML."""
    env = dict(os.environ)
    if mode == "gpu":
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE / "src"), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        start = time.perf_counter()
        try:
            completed = subprocess.run(
                [*command, *KERNEL_TESTS], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"the kernel tests ran past {timeout_s:.0f} s"}
        wall_s = time.perf_counter() - start
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if report.exists():
            for suite in ElementTree.parse(report).getroot().iter("testsuite"):
                for key in counts:
                    counts[key] += int(suite.get(key, 0))
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    result = {
        "ok": completed.returncode == 0 and passed > 0,
        "interpreter": mode != "gpu",
        "passed": passed,
        "failed": counts["failures"] + counts["errors"],
        "skipped": counts["skipped"],
        "wall_s": round(wall_s, 2),
    }
    if not result["ok"]:
        result["output_tail"] = (completed.stdout + completed.stderr)[-3000:]
    return result


def run_router_benchmark(mode: str) -> dict[str, Any]:
    """benchmarks/router.py's compare(): the package's fused pass against the eager Megatron formulas."""
    import torch

    sys.path.insert(0, str(PACKAGE / "benchmarks"))
    from router import compare

    if mode == "gpu":
        runs = [
            (torch.device("cuda"), "triton", 16384, 256, 8, 30),
            (torch.device("cuda"), "triton", 65536, 256, 8, 30),
        ]
    else:
        runs = [(torch.device("cpu"), "triton", 128, 64, 4, 1), (torch.device("cpu"), "torch", 4096, 64, 4, 5)]
    results = []
    for device, backend, tokens, experts, top_k, repeats in runs:
        result = compare(device, tokens, experts, top_k, repeats, backend)
        agreement = result["agreement"]
        result["ok"] = (
            agreement["same_topk_sets"]
            and agreement["same_counts"]
            and agreement["gates_max_abs_diff"] < 1e-5
            and agreement["aux_rel_diff"] < 1e-4
            and agreement["z_rel_diff"] < 1e-4
            and agreement["grad_max_abs_diff"] < 1e-4
        )
        results.append(result)
    return {"ok": all(r["ok"] for r in results), "runs": results}


def _best_s(function, repeats: int, device, *, warm_up: bool = True) -> tuple[float, Any]:
    import torch

    times = []
    if warm_up:
        function()  # compiles the kernels on a GPU; under the interpreter it would only double the time
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        result = function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times), result


def run_placement_kernels(mode: str) -> dict[str, Any]:
    """Sinkhorn and matching kernels vs their torch versions, and plan_replicas with each backend."""
    import torch

    from moe_balance.placement import plan_replicas
    from moe_balance.placement._matching_triton import match_slots_triton  # noqa: F401  (a broken module fails here)
    from moe_balance.placement._sinkhorn_triton import sinkhorn_flow_triton
    from moe_balance.placement.replica import rank_cost_matrix
    from moe_balance.placement.replica_torch import sinkhorn_flow

    device = torch.device("cuda" if mode == "gpu" else "cpu")
    repeats = 20 if mode == "gpu" else 1
    generator = torch.Generator().manual_seed(0)
    num_ranks = 32 if mode == "gpu" else 8
    supply = torch.rand(num_ranks, generator=generator) * (torch.arange(num_ranks) % 2 == 0)
    demand = torch.rand(num_ranks, generator=generator) * (torch.arange(num_ranks) % 2 == 1)
    supply, demand = supply / supply.sum(), demand / demand.sum()
    cost = rank_cost_matrix(num_ranks, 8 if mode == "gpu" else 4, 3.0)
    warm_up = mode == "gpu"
    cpu = torch.device("cpu")
    torch_s, want = _best_s(lambda: sinkhorn_flow(supply, demand, cost, 0.25, 64), repeats, cpu, warm_up=warm_up)
    triton_s, got = _best_s(
        lambda: sinkhorn_flow_triton(supply, demand, cost, 0.25, 64), repeats, device, warm_up=warm_up
    )
    sinkhorn = {
        "ranks": num_ranks,
        "torch_ms": round(torch_s * 1e3, 3),
        "triton_ms": round(triton_s * 1e3, 3),
        "max_abs_diff": float((got.cpu() - want).abs().max()),
    }
    sinkhorn["ok"] = sinkhorn["max_abs_diff"] < 1e-5

    num_experts = 256 if mode == "gpu" else 32
    plans = {}
    ranks_per_node = 8 if mode == "gpu" else 4
    for backend in ("torch", "triton"):
        load = _skewed_load(num_ranks, num_experts, generator=torch.Generator().manual_seed(1))
        load = load.to(device) if backend == "triton" else load

        def plan(load=load, backend=backend):
            return plan_replicas(load, spare_slots_per_rank=2, ranks_per_node=ranks_per_node, backend=backend)

        plans[backend] = _best_s(plan, repeats, device if backend == "triton" else cpu, warm_up=warm_up)
    same = torch.equal(plans["torch"][1].slot_expert.cpu(), plans["triton"][1].slot_expert.cpu()) and torch.equal(
        plans["torch"][1].tokens.cpu(), plans["triton"][1].tokens.cpu()
    )
    replica_plan = {
        "ranks": num_ranks,
        "experts": num_experts,
        "torch_ms": round(plans["torch"][0] * 1e3, 3),
        "triton_ms": round(plans["triton"][0] * 1e3, 3),
        "same_plan": same,
        "imbalance_before": plans["torch"][1].imbalance_before,
        "imbalance_after": plans["torch"][1].imbalance_after,
        "ok": same,
    }
    return {"ok": sinkhorn["ok"] and replica_plan["ok"], "sinkhorn": sinkhorn, "replica_plan": replica_plan}


def _skewed_load(num_ranks: int, num_experts: int, generator) -> Any:
    """(ranks, experts) routed counts with lognormal popularity: a few hot experts, so replicas are worth planning."""
    import torch

    popularity = torch.exp(0.8 * torch.randn(num_experts, generator=generator, dtype=torch.float64))
    share = popularity / popularity.sum()
    per_rank = (share * 4096).unsqueeze(0).expand(num_ranks, -1)
    noise = torch.rand((num_ranks, num_experts), generator=generator, dtype=torch.float64) * 0.2 + 0.9
    return (per_rank * noise).round().long()


def versions() -> dict[str, Any]:
    import numpy
    import torch

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU under TRITON_INTERPRET=1, small shapes")
    parser.add_argument("--out", default="gpu-check.json", help="JSON results file, or - for stdout")
    parser.add_argument("--test-timeout-s", type=float, default=None, help="limit for the kernel tests")
    options = parser.parse_args()
    sys.path.insert(0, str(PACKAGE / "src"))  # this checkout's package, installed or not
    started = time.perf_counter()
    mode = choose_mode(options.dry_run)
    timeout_s = options.test_timeout_s or (150.0 if mode == "gpu" else 90.0)
    steps: dict[str, Any] = {}
    timings_s: dict[str, float] = {}
    for name, step in (
        ("kernel_tests", lambda: run_kernel_tests(mode, timeout_s)),
        ("router", lambda: run_router_benchmark(mode)),
        ("placement", lambda: run_placement_kernels(mode)),
    ):
        start = time.perf_counter()
        try:
            steps[name] = step()
        except Exception as error:  # a broken step is a result, not a crash: the others still run
            steps[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        timings_s[name] = round(time.perf_counter() - start, 2)
    timings_s["total"] = round(time.perf_counter() - started, 2)
    result = {
        "ok": all(step["ok"] for step in steps.values()),
        "mode": mode,
        "versions": versions(),
        "steps": steps,
        "timings_s": timings_s,
    }
    text = json.dumps(result, indent=1)
    if options.out == "-":
        print(text)
    else:
        Path(options.out).write_text(text + "\n")
        verdict = "ok" if result["ok"] else "FAILED"
        failed = [name for name, step in steps.items() if not step["ok"]]
        print(f"gpu-check ({mode}): {verdict} in {timings_s['total']:.1f} s -> {options.out}", *failed)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
