"""The installation smoke test behind ``python -m moe_balance smoke``: is this host able to balance experts?

Checks, each small enough for a 2-core CPU (the whole run takes a few seconds):

- ``known_answers``: aux loss (both conventions), sequence-wise loss and z-loss on a fixed 8 x 4 input against
  values computed independently from the formulas;
- ``fused_vs_reference``: the fused router pass (the Triton kernel where one runs, else torch) against the per-token
  Python reference, for softmax routing and for biased, group-limited sigmoid routing;
- ``fractions_sum_to_one``: sum f = 1 and sum P = 1;
- ``analytic_gradients``: the fused pass's closed-form gradient against autograd through the plain path;
- ``bias_balancing``: a synthetic skewed run where the aux-loss-free bias takes max/mean from above 2 to below 1.2.
"""

from __future__ import annotations

import importlib.metadata
import platform
import time
from typing import Any

import torch

from moe_balance import reference
from moe_balance.bias import BiasBalancer
from moe_balance.kernels import interpreter_enabled, kernel_can_run, triton_available
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
    cases = [
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


def run_smoke(device: str = "auto", seed: int = 0) -> dict[str, Any]:
    """Run every check; returns the JSON-ready result (``ok`` is the conjunction of the checks)."""
    started = time.perf_counter()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    generator = torch.Generator().manual_seed(seed)
    checks, timings, records = [], {}, []

    def run(name, fn, *args):
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
    timings["total"] = round(time.perf_counter() - started, 4)
    from moe_balance import __version__

    return {
        "ok": all(c["ok"] for c in checks),
        "version": __version__,
        "device": device_info(dev),
        "checks": checks,
        "timings_s": timings,
        "records": records,
    }
