"""First-GPU check: every step in a process of its own with its own time limit, one JSON object out.

Run from packages/moe_balance, with nothing but torch, triton and numpy (pytest for the kernel tests) installed; no
network, no Ansible:

    python benchmarks/gpu_check.py --out gpu-check.json             # on a CUDA/ROCm GPU: under 10 minutes in all
    python benchmarks/gpu_check.py --dry-run --out gpu-check.json   # CPU, Triton's interpreter, small shapes

The steps, in order (``STEPS``; written in ``gpu_check_tests.py``, ``gpu_check_router.py``, ``gpu_check_host.py``,
``gpu_check_placement.py`` and ``gpu_check_expert_parallel.py``):

- ``kernel_tests``: the kernel test files under pytest, compiled on a GPU; a file whose imports are missing (e.g.
  hypothesis) is listed in ``files_skipped``; without pytest the step is skipped;
- ``router``: ``benchmarks/router.py``'s fused pass against the eager Megatron formulas, gradients included;
- ``router_at_scale``: time and peak memory, fused against eager, at 65,536 and 262,144 tokens x 256 experts, fp32 and
  bf16, softmax top-8 and the DeepSeek-V3 router;
- ``cold_compile``: each kernel's first call in a fresh process with an empty Triton cache, against its warm call;
- ``cross_device``: with 2 or more GPUs, every kernel with its tensors on each cuda:i while cuda:0 is current;
- ``placement``: the Sinkhorn kernel and the replica plan, Triton against torch;
- ``matching_largest``: the matching kernel at the largest shape one program holds, and one past it refused;
- ``bf16_ties``: bf16 logits on 4 levels, so rows tie: the kernel must choose the torch path's experts;
- ``expert_parallel``: with 2 or more GPUs, the expert-parallel layer on NCCL, one process per GPU, against the
  single-process reference (gloo on 2 CPU ranks in the dry run);
- ``int32_boundary``: more than 2**31 logits (2048 experts), last, as an illegal address ends the process.

The JSON (``--out``; ``-`` for stdout): ``ok``, ``mode`` (``gpu`` or ``dry-run``), ``versions``, ``limits_s``,
``steps`` (each with ``ok``, ``wall_s``, ``timeout_s`` and its figures; ``skipped`` with the reason where it does not
apply; a failed step also carries ``error`` and ``output_tail``, and ``timed_out`` when it ran past its limit),
``failed``, ``skipped`` and ``timings_s``. Exit code 1 when a step failed.

Without a GPU, or with ``--dry-run``, every step runs on the CPU under ``TRITON_INTERPRET=1`` with small shapes: it
proves the script and the kernels' logic, and its figures say nothing about GPU speed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
PACKAGE = BENCHMARKS.parent
OUTPUT_TAIL_CHARS = 3000
MIN_STEP_S = 5.0  # a step is not started with less than this left of the total


@dataclass(frozen=True)
class Step:
    """One step: ``target`` ("module:function", called with the mode) runs in a child process for at most the
    mode's timeout; ``dry_run_skip``, when set, is why the dry run does not start it."""

    name: str
    target: str
    gpu_timeout_s: float
    dry_run_timeout_s: float = 120.0
    dry_run_skip: str | None = None

    def timeout_s(self, mode: str) -> float:
        return self.gpu_timeout_s if mode == "gpu" else self.dry_run_timeout_s


# On a GPU the limits add up to 615 s; the run stops at TOTAL_TIMEOUT_S, so even one where every step hangs ends
# within 10 minutes.
STEPS = [
    Step("kernel_tests", "gpu_check_tests:kernel_tests", 120),
    Step("router", "gpu_check_router:router", 45),
    Step("router_at_scale", "gpu_check_router:router_at_scale", 120),
    Step("cold_compile", "gpu_check_host:cold_compile", 60),
    Step("cross_device", "gpu_check_host:cross_device", 30),
    Step("placement", "gpu_check_placement:placement", 30),
    Step("matching_largest", "gpu_check_placement:matching_largest", 45),
    Step("bf16_ties", "gpu_check_router:bf16_ties", 30),
    Step("expert_parallel", "gpu_check_expert_parallel:expert_parallel", 45),
    # Last: an illegal address ends its process. 2**31 fp32 logits are 8 GiB, more than a CPU run should allocate.
    Step("int32_boundary", "gpu_check_router:int32_boundary", 90, dry_run_skip="needs > 8 GiB on a GPU"),
]
TOTAL_TIMEOUT_S = 570.0


def choose_mode(dry_run: bool) -> str:
    """'gpu' when a GPU is there and no dry run is asked; 'dry-run' otherwise."""
    import torch

    return "dry-run" if dry_run or not torch.cuda.is_available() else "gpu"


def child_env(mode: str) -> dict[str, str]:
    """The steps' environment: this checkout's package first, the interpreter in the dry run, unbuffered output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE / "src"), env.get("PYTHONPATH")]))
    if mode == "gpu":
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"  # NOTE: Triton reads it when its kernels are first imported
    return env


def run_step(step: Step, mode: str, timeout_s: float, script: Path) -> dict[str, Any]:
    """Run one step in a child process (its own session, so a timeout kills its children too) and read its result."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "result.json"
        command = [sys.executable, str(script), "--child", step.name, "--mode", mode, "--child-out", str(out)]
        start = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=PACKAGE,
            env=child_env(mode),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may have ended just now
                os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            result = {"ok": False, "timed_out": True, "error": f"ran past its {timeout_s:g} s limit and was killed"}
        else:
            result = json.loads(out.read_text()) if out.exists() else {"ok": False, "error": _death(process.returncode)}
        wall_s = time.perf_counter() - start
    if not result["ok"]:
        result["output_tail"] = output[-OUTPUT_TAIL_CHARS:]
    result.update(wall_s=round(wall_s, 2), timeout_s=timeout_s)
    return result


def _death(returncode: int) -> str:
    how = f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit code {returncode}"
    return f"its process ended with {how} before writing a result"


def run_child(name: str, mode: str, out: Path) -> int:
    """In the child: call the step's function and write its result (an exception becomes a failed result)."""
    for path in (str(PACKAGE / "src"), str(BENCHMARKS)):
        if path not in sys.path:
            sys.path.insert(0, path)
    step = next(step for step in STEPS if step.name == name)
    module, function = step.target.split(":")
    try:
        result = getattr(importlib.import_module(module), function)(mode)
    except Exception as error:  # a broken step is a result, not a crash
        traceback.print_exc()
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    out.write_text(json.dumps(result))
    return 0


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
    info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def parse_timeouts(pairs: list[str], parser: argparse.ArgumentParser) -> dict[str, float]:
    """--timeout-s NAME=SECONDS pairs -> {name: seconds}."""
    names = {step.name for step in STEPS}
    timeouts = {}
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        if name not in names or not seconds.replace(".", "", 1).isdigit():
            parser.error(f"--timeout-s {pair!r}: use NAME=SECONDS with NAME one of {', '.join(sorted(names))}")
        timeouts[name] = float(seconds)
    return timeouts


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU under TRITON_INTERPRET=1, small shapes")
    parser.add_argument("--out", default="gpu-check.json", help="JSON results file, or - for stdout")
    parser.add_argument("--step", action="append", default=[], help="run only this step (repeat for more)")
    parser.add_argument("--timeout-s", action="append", default=[], metavar="NAME=SECONDS", help="one step's limit")
    parser.add_argument("--step-timeout-s", type=float, help="at most this for every step")
    parser.add_argument("--total-timeout-s", type=float, default=TOTAL_TIMEOUT_S, help="limit for all steps together")
    for internal in ("--child", "--mode", "--child-out"):  # how the run starts each step's process
        parser.add_argument(internal, help=argparse.SUPPRESS)
    return parser


def main() -> int:
    parser = build_parser()
    options = parser.parse_args()
    if options.child:
        return run_child(options.child, options.mode, Path(options.child_out))
    unknown = sorted(set(options.step) - {step.name for step in STEPS})
    if unknown:
        parser.error(f"--step {', '.join(unknown)}: no such step; the steps are {', '.join(s.name for s in STEPS)}")
    overrides = parse_timeouts(options.timeout_s, parser)
    mode = choose_mode(options.dry_run)
    script = Path(sys.argv[0]).resolve()  # the steps' processes run this same script (and its STEPS)
    started = time.perf_counter()
    steps: dict[str, Any] = {}
    for step in STEPS:
        if options.step and step.name not in options.step:
            continue
        if mode != "gpu" and step.dry_run_skip:
            steps[step.name] = {"ok": True, "skipped": step.dry_run_skip}
            continue
        left_s = options.total_timeout_s - (time.perf_counter() - started)
        if left_s < MIN_STEP_S:
            steps[step.name] = {"ok": False, "error": f"not started: {left_s:.0f} s left of the run's limit"}
            continue
        timeout_s = min(overrides.get(step.name, step.timeout_s(mode)), options.step_timeout_s or float("inf"), left_s)
        steps[step.name] = run_step(step, mode, round(timeout_s, 1), script)
    timings_s = {name: step.get("wall_s", 0.0) for name, step in steps.items()}
    timings_s["total"] = round(time.perf_counter() - started, 2)
    failed = [name for name, step in steps.items() if not step["ok"]]
    result = {
        "ok": all(step["ok"] for step in steps.values()),
        "mode": mode,
        "versions": versions(),
        "limits_s": {"total": options.total_timeout_s, "step": options.step_timeout_s},
        "steps": steps,
        "failed": failed,
        "skipped": [name for name, step in steps.items() if isinstance(step.get("skipped"), str)],
        "timings_s": timings_s,
    }
    text = json.dumps(result, indent=1)
    if options.out == "-":
        print(text)
    else:
        Path(options.out).write_text(text + "\n")
        verdict = "ok" if result["ok"] else "FAILED: " + ", ".join(failed)
        print(f"gpu-check ({mode}): {verdict} in {timings_s['total']:.1f} s -> {options.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
