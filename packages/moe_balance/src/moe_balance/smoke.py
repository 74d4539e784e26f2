"""The installation smoke test behind ``python -m moe_balance smoke``: is this host able to balance experts?

Checks, each small enough for a 2-core CPU (the whole run takes a few seconds):

- ``known_answers``: aux loss (both conventions), sequence-wise loss and z-loss on a fixed 8 x 4 input against
  values computed independently from the formulas;
- ``fused_vs_reference``: the fused router pass (the Triton kernel where one runs, else torch) against the per-token
  Python reference, for softmax routing and for biased, group-limited sigmoid routing;
- ``fractions_sum_to_one``: sum f = 1 and sum P = 1;
- ``analytic_gradients``: the fused pass's closed-form gradient against autograd through the plain path;
- ``bias_balancing``: a synthetic skewed run where the aux-loss-free bias takes max/mean from above 2 to below 1.2.

They run on every chosen device (``--device auto`` = every GPU torch sees, else the CPU), each with that device made
current (Triton launches on the current device); the first device's checks are the top-level ``checks``, the others
are summed up in ``other_devices`` and listed in ``devices``. Optional checks, for hosts that must prove their GPUs
rather than fall back to the CPU quietly:

- ``gpu_required``: every device is a GPU, and torch sees the number of GPUs the caller expects (``--expect-gpus``:
  the GPUs visible to torch, i.e. after ``CUDA_VISIBLE_DEVICES`` and with MIG instances counted as torch counts them,
  not the driver's physical count);
- ``allreduce``: one process per device all-reduces a tensor through torch.distributed (NCCL on GPUs, gloo on CPUs)
  and gets the exact sum, with its time and algorithm bandwidth.

``runtime`` records what the result depends on: torch, ``torch.version.cuda``, cuDNN, NCCL, the driver and the GPU
models.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from moe_balance import reference
from moe_balance.bias import BiasBalancer
from moe_balance.kernels import interpreter_enabled, kernel_can_run, triton_available
from moe_balance.kernels._device import device_guard
from moe_balance.losses import aux_loss, aux_scores, load_balancing_loss, z_loss
from moe_balance.metrics import balance_stats, make_record
from moe_balance.router_stats import router_stats
from moe_balance.routing import route

# Known answers for logits[t][e] = ((7t + 3e) % 11) / 5 - 1, t < 8, e < 4, top-2 (float64).
KNOWN_AUX_MEGATRON = 1.0203895006879142
KNOWN_AUX_HF = 2.0407790013758285
KNOWN_SEQ_AUX = 1.051613460820978  # seq_len 4, batch 2, rows s*batch + b
KNOWN_Z_LOSS = 2.4296248806839933


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "device": str(device),
        "torch": torch.__version__,
        "triton": _package_version("triton") if triton_available() else None,
        "cuda_available": torch.cuda.is_available(),
        "triton_interpreter": interpreter_enabled(),
        "cpu_threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
    info["kernel_backend"] = "triton" if kernel_can_run(torch.empty(0, device=device)) else "torch"
    return info


def known_logits() -> torch.Tensor:
    return torch.tensor([[((7 * t + 3 * e) % 11) / 5 - 1 for e in range(4)] for t in range(8)], dtype=torch.float64)


def check_known_answers(device: torch.device) -> dict[str, Any]:
    x = known_logits().to(device)
    got = {
        "aux_megatron": float(aux_loss(x, 2)),
        "aux_hf": float(aux_loss(x, 2, convention="hf")),
        "seq_aux": float(aux_loss(x, 2, seq_len=4)),
        "z_loss": float(z_loss(x)),
    }
    want = {
        "aux_megatron": KNOWN_AUX_MEGATRON,
        "aux_hf": KNOWN_AUX_HF,
        "seq_aux": KNOWN_SEQ_AUX,
        "z_loss": KNOWN_Z_LOSS,
    }
    worst = max(abs(got[k] - want[k]) for k in want)
    return {"ok": worst < 1e-9, "detail": {"values": got, "max_abs_error": worst}}


def check_fused_vs_reference(device: torch.device, generator: torch.Generator) -> dict[str, Any]:
    cases: list[dict[str, Any]] = [
        {"score": "softmax", "bias": None, "num_groups": None, "group_topk": None, "top_k": 4},
        {"score": "sigmoid", "bias": 0.05, "num_groups": 4, "group_topk": 2, "top_k": 4},
    ]
    details, ok = [], True
    backend = "triton" if kernel_can_run(torch.empty(0, device=device)) else "torch"
    for case in cases:
        x = torch.randn(96, 16, generator=generator, dtype=torch.float32).to(device)
        bias = None if case["bias"] is None else (torch.randn(16, generator=generator) * case["bias"]).to(device)
        stats = router_stats(
            x,
            case["top_k"],
            score=case["score"],
            bias=bias,
            num_groups=case["num_groups"],
            group_topk=case["group_topk"],
            backend=backend,
        )
        idx, gates, counts = reference.route_reference(
            x.cpu(),
            case["top_k"],
            score=case["score"],
            bias=None if bias is None else bias.cpu(),
            num_groups=case["num_groups"],
            group_topk=case["group_topk"],
        )
        same_idx = stats.topk_idx.cpu().tolist() == idx
        gate_err = float((stats.gates.cpu().double() - torch.tensor(gates, dtype=torch.float64)).abs().max())
        same_counts = stats.tokens_per_expert.cpu().tolist() == counts
        z_err = abs(float(stats.z_loss) - reference.z_loss_reference(x.cpu()))
        aux_err = abs(float(stats.aux_loss) - reference.aux_loss_reference(x.cpu(), case["top_k"], score=case["score"]))
        case_ok = same_idx and same_counts and gate_err < 1e-5 and z_err < 1e-4 and (bias is not None or aux_err < 1e-5)
        ok = ok and case_ok
        details.append(
            {
                "score": case["score"],
                "group_limited": case["num_groups"] is not None,
                "biased": bias is not None,
                "same_topk": same_idx,
                "same_counts": same_counts,
                "gate_max_abs_error": gate_err,
                "z_loss_abs_error": z_err,
                "aux_loss_abs_error": aux_err if bias is None else None,
            }
        )
    return {"ok": ok, "detail": {"backend": backend, "cases": details}}


def check_fractions(device: torch.device, generator: torch.Generator) -> dict[str, Any]:
    x = torch.randn(4096, 64, generator=generator).to(device)
    stats = router_stats(x, 8)
    f_sum = float(stats.assignment_fractions.sum())
    p_sum = float(stats.prob_mean.sum())
    return {"ok": abs(f_sum - 1) < 1e-6 and abs(p_sum - 1) < 1e-4, "detail": {"sum_f": f_sum, "sum_P": p_sum}}


def check_gradients(device: torch.device, generator: torch.Generator) -> dict[str, Any]:
    x = torch.randn(64, 16, generator=generator, dtype=torch.float64).to(device)
    upstream = torch.randn(64, 4, generator=generator, dtype=torch.float64).to(device)
    errors = {}
    for score in ("softmax", "sigmoid"):
        a = x.clone().requires_grad_(True)
        stats = router_stats(a, 4, score=score, backend="torch")
        ((stats.gates * upstream).sum() + 0.01 * stats.aux_loss + 0.001 * stats.z_loss).backward()
        b = x.clone().requires_grad_(True)
        plain = route(b, 4, score=score)
        aux = load_balancing_loss(aux_scores(b, score), plain.tokens_per_expert, 4)
        ((plain.gates * upstream).sum() + 0.01 * aux + 0.001 * z_loss(b)).backward()
        errors[score] = float((a.grad - b.grad).abs().max())
    return {"ok": max(errors.values()) < 1e-10, "detail": {"max_abs_error": errors}}


def run_bias_balancing(
    device: torch.device,
    generator: torch.Generator,
    *,
    num_layers: int = 4,
    num_experts: int = 64,
    top_k: int = 4,
    num_tokens: int = 512,
    steps: int = 150,
    window_steps: int = 20,
    rate: float = 0.01,
) -> tuple[dict[str, Any], list[dict]]:
    """Skewed sigmoid routers (a fixed per-expert logit offset) balanced by BiasBalancer; returns check + records.

    The rate is larger than DeepSeek-V3's 1e-3 so that a run of 150 steps converges; "after" is measured over the
    last ``window_steps`` steps, the window the records describe.
    """
    before, after, records = [], [], []
    for layer in range(num_layers):
        offsets = torch.linspace(-1.5, 1.5, num_experts)[torch.randperm(num_experts, generator=generator)].to(device)
        balancer = BiasBalancer(num_experts, rate=rate, device=device)
        window = torch.zeros(num_experts, dtype=torch.int64, device=device)
        for step in range(steps):
            logits = torch.randn(num_tokens, num_experts, generator=generator).to(device) + offsets
            routing = route(logits, top_k, score="sigmoid", bias=balancer.bias)
            if step == 0:
                before.append(balance_stats(routing.tokens_per_expert)["max_over_mean"])
            if step >= steps - window_steps:
                window += routing.tokens_per_expert
            balancer.update(routing.tokens_per_expert)
        after.append(balance_stats(window)["max_over_mean"])
        records.append(
            make_record(
                step=steps - 1,
                layer=layer,
                tokens_per_expert=window.cpu(),
                top_k=top_k,
                num_tokens=num_tokens * window_steps,
                run="smoke",
            )
        )
    ok = min(before) > 2.0 and max(after) < 1.2
    detail = {
        "max_over_mean_before": before,
        "max_over_mean_after": after,
        "steps": steps,
        "rate": rate,
        "window_steps": window_steps,
    }
    return {"ok": ok, "detail": detail}, records


def resolve_devices(spec: str) -> list[torch.device]:
    """``auto`` (every GPU torch sees, else the CPU), ``all`` (every GPU), ``cpu``, ``cuda``, ``cuda:1``, ``0,2``."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if spec == "auto":
        return [torch.device("cuda", i) for i in range(count)] or [torch.device("cpu")]
    if spec == "all":
        return [torch.device("cuda", i) for i in range(count)]
    if re.fullmatch(r"\d+(,\d+)*", spec):
        return [torch.device("cuda", int(i)) for i in spec.split(",")]
    return [torch.device(spec)]


def _driver_version() -> str | None:
    """The NVIDIA kernel driver's version, from /proc/driver/nvidia/version (no nvidia-smi needed)."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def runtime_info() -> dict[str, Any]:
    """What a GPU result depends on: torch and its CUDA, cuDNN and NCCL builds, the driver, the GPU models."""
    cuda = torch.cuda.is_available()
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": None,
        "driver": _driver_version(),
        "cuda_available": cuda,
        "device_count": torch.cuda.device_count() if cuda else 0,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
    }
    if cuda:
        try:
            version = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        except Exception:  # NCCL is absent from some builds; the record says so instead of failing
            info["nccl"] = None
    return info


def check_gpu_required(devices: list[torch.device], expect_gpus: int | None) -> dict[str, Any]:
    """Every device is a GPU, and torch sees ``expect_gpus`` GPUs (when given).

    ``expect_gpus`` counts the GPUs torch is expected to see, not the driver's physical GPUs: with
    ``CUDA_VISIBLE_DEVICES`` naming a subset, or MIG instances, the two differ on a healthy host.
    """
    seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
    on_cpu = [str(d) for d in devices if d.type != "cuda"]
    problems = []
    if not devices:
        problems.append("no GPU device to test: torch.cuda.is_available() is false")
    if on_cpu:
        problems.append(f"the smoke test would run on {', '.join(on_cpu)}, not on a GPU")
    if expect_gpus is not None and seen != expect_gpus:
        problems.append(
            f"torch sees {seen} GPU(s), expected {expect_gpus}: check CUDA_VISIBLE_DEVICES, the MIG instances, and "
            "that torch's CUDA build runs on this driver (--expect-gpus counts the GPUs visible to torch)"
            + ("; on HGX/NVSwitch boards nvidia-fabricmanager must be running" if seen == 0 else "")
        )
    detail = {"devices": [str(d) for d in devices], "torch_device_count": seen, "expected_gpu_count": expect_gpus}
    return {"ok": not problems, "detail": {**detail, "problems": problems}}


def _allreduce_rank(
    rank: int, world: int, backend: str, devices: list[str], folder: str, numel: int, timeout_s: float
) -> None:
    """One rank of the all-reduce check (a spawned process): sum of (rank + 1) over the ranks, then 5 timed rounds."""
    import torch.distributed as dist

    device = torch.device(devices[rank])
    result: dict[str, Any] = {"rank": rank, "device": str(device), "ok": False}
    try:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(
            backend,
            init_method=f"file://{folder}/store",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        tensor = torch.full((numel,), float(rank + 1), device=device)
        dist.all_reduce(tensor)
        want = world * (world + 1) / 2
        result["ok"] = bool((tensor == want).all())
        result["value"] = float(tensor[0])
        rounds = 5
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        for _round in range(rounds):
            dist.all_reduce(tensor)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - started) / rounds
        result["seconds_per_round"] = round(seconds, 6)
        result["algbw_gb_per_s"] = round(numel * tensor.element_size() / seconds / 1e9, 3)
        dist.destroy_process_group()
    except Exception as error:  # the parent reports it with the rank
        result["error"] = f"{type(error).__name__}: {error}"
    Path(folder, f"rank{rank}.json").write_text(json.dumps(result))


def check_allreduce(devices: list[torch.device], timeout_s: float = 120, numel: int = 1 << 22) -> dict[str, Any]:
    """All-reduce across ``devices``, one process per device (NCCL on GPUs, gloo on CPUs), within ``timeout_s``.

    NOTE: processes are spawned, not forked: a CUDA context does not survive a fork.
    """
    import torch.multiprocessing as mp

    world = len(devices)
    backend = "nccl" if devices and all(d.type == "cuda" for d in devices) else "gloo"
    detail: dict[str, Any] = {"backend": backend, "world_size": world, "numel": numel}
    if world < 2:
        return {"ok": True, "detail": {**detail, "skipped": "one device: nothing to all-reduce across"}}
    with tempfile.TemporaryDirectory(prefix="moe_balance_allreduce_") as folder:
        context = mp.start_processes(
            _allreduce_rank,
            args=(world, backend, [str(d) for d in devices], folder, numel, timeout_s),
            nprocs=world,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + timeout_s + 60
        try:
            while not context.join(timeout=1):
                if time.monotonic() > deadline:
                    for process in context.processes:
                        process.kill()
                    detail["error"] = f"the ranks did not finish within {timeout_s + 60:.0f} s (a hung collective?)"
                    break
        except Exception as error:  # a rank that died (ProcessExitedException) is reported, not raised
            detail["error"] = f"{type(error).__name__}: {error}"
        ranks = []
        for rank in range(world):
            path = Path(folder, f"rank{rank}.json")
            ranks.append(json.loads(path.read_text()) if path.exists() else {"rank": rank, "ok": False})
    detail["ranks"] = ranks
    return {"ok": "error" not in detail and all(r["ok"] for r in ranks), "detail": detail}


def _device_checks(dev: torch.device, seed: int) -> tuple[list[dict], dict[str, float], list[dict]]:
    generator = torch.Generator().manual_seed(seed)
    checks, timings, records = [], {}, []

    def run(name: str, fn: Callable[..., Any], *args: Any) -> None:
        t0 = time.perf_counter()
        try:
            result = fn(*args)
        except Exception as error:  # a smoke test reports every failure instead of stopping at the first
            result = {"ok": False, "detail": f"{type(error).__name__}: {error}"}
        timings[name] = round(time.perf_counter() - t0, 4)
        if isinstance(result, tuple):
            result, produced = result
            records.extend(produced)
        checks.append({"name": name, "ok": bool(result["ok"]), "detail": result["detail"]})

    run("known_answers", check_known_answers, dev)
    run("fused_vs_reference", check_fused_vs_reference, dev, generator)
    run("fractions_sum_to_one", check_fractions, dev, generator)
    run("analytic_gradients", check_gradients, dev, generator)
    run("bias_balancing", run_bias_balancing, dev, generator)
    return checks, timings, records


def _device_summary(dev: torch.device, checks: list[dict], timings: dict[str, float]) -> dict[str, Any]:
    summary: dict[str, Any] = {"device": str(dev), "ok": all(c["ok"] for c in checks)}
    if dev.type == "cuda":
        properties = torch.cuda.get_device_properties(dev)
        summary.update(
            name=properties.name,
            capability=f"{properties.major}.{properties.minor}",
            memory_mib=properties.total_memory // 1048576,
        )
    summary["failed_checks"] = [c for c in checks if not c["ok"]]
    summary["seconds"] = round(sum(timings.values()), 4)
    return summary


def run_smoke(
    device: str = "auto",
    seed: int = 0,
    *,
    require_gpu: bool = False,
    expect_gpus: int | None = None,
    allreduce: bool = False,
    allreduce_ranks: int | None = None,
    allreduce_timeout_s: float = 120,
) -> dict[str, Any]:
    """Run every check on every chosen device; returns the JSON-ready result (``ok`` = all checks are ok).

    ``allreduce_ranks`` repeats the first device (useful for gloo on a CPU); by default one rank per device.
    """
    started = time.perf_counter()
    bad_device: str | None
    try:
        devices = resolve_devices(device)
    except RuntimeError as error:
        devices, bad_device = [], f"{type(error).__name__}: {error}"
    else:
        bad_device = None
    checks: list[dict] = []
    timings: dict[str, float] = {}
    records: list[dict] = []
    summaries = []
    for position, dev in enumerate(devices):
        with device_guard(dev):  # NOTE: Triton launches on the current device, whatever its tensors' device
            device_checks, device_timings, device_records = _device_checks(dev, seed)
            summaries.append(_device_summary(dev, device_checks, device_timings))
        if position == 0:  # the first device's checks, timings and records are the top-level ones
            checks, timings, records = device_checks, device_timings, device_records
    if bad_device or not devices:
        checks.append({"name": "devices", "ok": False, "detail": bad_device or f"--device {device} names no device"})
    if len(devices) > 1:
        failing = {s["device"]: [c["name"] for c in s["failed_checks"]] for s in summaries[1:] if not s["ok"]}
        checks.append({"name": "other_devices", "ok": not failing, "detail": {"failed": failing}})
    if require_gpu or expect_gpus is not None:
        t0 = time.perf_counter()
        checks.append({"name": "gpu_required", **check_gpu_required(devices, expect_gpus)})
        timings["gpu_required"] = round(time.perf_counter() - t0, 4)
    if allreduce:
        ranks = devices if allreduce_ranks is None else devices[:1] * allreduce_ranks
        t0 = time.perf_counter()
        checks.append({"name": "allreduce", **check_allreduce(ranks, timeout_s=allreduce_timeout_s)})
        timings["allreduce"] = round(time.perf_counter() - t0, 4)
    timings["total"] = round(time.perf_counter() - started, 4)
    from moe_balance import __version__

    return {
        "ok": bool(checks) and all(c["ok"] for c in checks),
        "version": __version__,
        "device": device_info(devices[0] if devices else torch.device("cpu")),
        "checks": checks,
        "timings_s": timings,
        "records": records,
        "devices": summaries,
        "runtime": runtime_info(),
    }
