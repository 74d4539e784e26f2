"""gpu_check's router steps: the fused pass against eager formulas at training sizes, exact ties, the int32 boundary.

Each step takes the mode (``"gpu"``, or ``"dry-run"``: CPU under ``TRITON_INTERPRET=1``, small shapes) and returns a
JSON-ready dict with ``ok``; ``gpu_check.py`` runs each in a process of its own with a timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from gpu_check_measure import (
    MIB,
    boundary_ties,
    device_for,
    median_s,
    peak_mib,
    routing_agreement,
    time_call_s,
)
from router import AUX_COEFF, Z_COEFF, compare, megatron_eager

from moe_balance import router_stats
from moe_balance.kernels.router_stats_torch import router_stats_torch
from moe_balance.routing import RouterConfig, compute_scores, group_limited_mask

# DeepSeek-V3's router as its config.json states it (huggingface.co/deepseek-ai/DeepSeek-V3, config.json):
# n_routed_experts 256, num_experts_per_tok 8, n_group 8, topk_group 4, scoring_func "sigmoid", norm_topk_prob true,
# routed_scaling_factor 2.5, topk_method "noaux_tc" (selection on sigmoid + e_score_correction_bias). Megatron-LM's
# DeepSeek-V3 recipe sets the same: --num-experts 256 --moe-router-topk 8 --moe-router-num-groups 8
# --moe-router-group-topk 4 --moe-router-score-function sigmoid --moe-router-enable-expert-bias
# --moe-router-topk-scaling-factor 2.5 --moe-router-dtype fp32.
DEEPSEEK_V3 = RouterConfig(top_k=8, score="sigmoid", num_groups=8, group_topk=4, scale=2.5)
DEEPSEEK_V3_EXPERTS = 256
SOFTMAX_TOP8 = RouterConfig(top_k=8)  # benchmarks/router.py's comparison: Megatron's softmax default
ROUTERS = (("softmax_top8", SOFTMAX_TOP8), ("deepseek_v3", DEEPSEEK_V3))
DTYPES = (("fp32", torch.float32), ("bf16", torch.bfloat16))
NEAR_TIE = 1e-6  # rows whose k-th and (k+1)-th selection values are this close may be routed either way
# A router pass: (logits, config, bias) -> (gates (T, k), top indices (T, k), counts (E,), aux, z)
RouterPath = Callable[[torch.Tensor, RouterConfig, torch.Tensor | None], tuple[torch.Tensor, ...]]


def router(mode: str) -> dict[str, Any]:
    """benchmarks/router.py's compare(): the fused pass against the eager Megatron formulas, gradients included."""
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


def deepseek_eager(logits: torch.Tensor, config: RouterConfig, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Eager group-limited sigmoid router, as Megatron-LM's ``topk_routing_with_score_function`` writes it with an
    expert bias, plus its aux loss (plain top-k counts, normalised sigmoid P) and z-loss, under autograd.
    Returns (dense gates (T, E), top indices (T, k), counts (E,), aux, z) like ``router.megatron_eager``."""
    x = logits.float()  # --moe-router-dtype fp32
    num_tokens, num_experts = x.shape
    top_k, groups, group_topk = config.top_k, config.num_groups, config.group_topk
    if groups is None or group_topk is None:
        raise ValueError("deepseek_eager is the group-limited router: give num_groups and group_topk")
    z = torch.square(torch.logsumexp(x, dim=-1)).mean() * Z_COEFF
    scores = torch.sigmoid(x)  # (T, E)
    selection = scores.detach() + bias
    group_scores = selection.view(num_tokens, groups, -1).topk(top_k // group_topk, dim=-1).values.sum(-1)
    group_idx = group_scores.topk(group_topk, dim=-1, sorted=False).indices  # (T, group_topk)
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)  # (T, groups)
    score_mask = group_mask.unsqueeze(-1).expand(num_tokens, groups, num_experts // groups).reshape(num_tokens, -1)
    top_idx = selection.masked_fill(~score_mask.bool(), float("-inf")).topk(top_k, dim=-1).indices  # (T, k)
    top_scores = scores.gather(1, top_idx)
    gates = top_scores / (top_scores.sum(dim=-1, keepdim=True) + 1e-20) * config.scale
    probs = torch.zeros_like(scores).scatter(1, top_idx, gates)  # (T, E)
    counts = torch.zeros_like(x, dtype=torch.bool).scatter(1, top_idx, True).sum(dim=0)  # (E,)
    aux_counts = torch.zeros_like(x, dtype=torch.bool).scatter(1, scores.topk(top_k, dim=-1).indices, True).sum(0)
    aux_probs = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)
    aux = (aux_probs.sum(dim=0) * aux_counts).sum() * (num_experts * AUX_COEFF / (top_k * num_tokens * num_tokens))
    return probs, top_idx, counts, aux, z


def tied_rows(logits: torch.Tensor, config: RouterConfig, bias: torch.Tensor | None) -> torch.Tensor:
    """(tokens,) bool: rows a correct router may route either way (a near tie at the k-th expert or, group-limited,
    at the last kept group), on the logits and on the scores."""
    x = logits.float()
    scores = compute_scores(x, config.score)
    selection = scores if bias is None else scores + bias
    tied = boundary_ties(selection, config.top_k, NEAR_TIE)
    groups, group_topk = config.num_groups, config.group_topk
    if config.group_limited and groups is not None and group_topk is not None:  # group_limited: both are set
        grouped = selection.view(x.shape[0], groups, -1)
        group_scores = grouped.topk(config.top_k // group_topk, dim=-1).values.sum(dim=-1)
        keep = group_limited_mask(selection, config.top_k, groups, group_topk)
        tied |= boundary_ties(group_scores, group_topk, NEAR_TIE)
        tied |= boundary_ties(selection.masked_fill(~keep, float("-inf")), config.top_k, NEAR_TIE)
    else:
        tied |= boundary_ties(x, config.top_k, NEAR_TIE)
    return tied


def _fused(logits: torch.Tensor, config: RouterConfig, bias: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    stats = router_stats(logits, config, bias=bias, backend="triton")
    return stats.gates, stats.topk_idx, stats.tokens_per_expert, stats.aux_loss * AUX_COEFF, stats.z_loss * Z_COEFF


def _eager(logits: torch.Tensor, config: RouterConfig, bias: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    """The eager formulas, with the gates of the selected experts (T, k) like ``_fused`` (Megatron keeps them dense)."""
    eager = (
        deepseek_eager(logits, config, bias) if config.group_limited else megatron_eager(logits.float(), config.top_k)
    )
    dense_gates, top_idx, *rest = eager
    return (dense_gates.gather(1, top_idx), top_idx, *rest)


def _scale_case(device: torch.device, tokens: int, experts: int, dtype_name: str, name: str, repeats: int) -> dict:
    """One (tokens, experts, dtype, router): time and peak memory of forward and forward+backward, fused vs eager."""
    config = dict(ROUTERS)[name]
    generator = torch.Generator().manual_seed(tokens + experts)
    logits = torch.randn(tokens, experts, generator=generator).to(device=device, dtype=dict(DTYPES)[dtype_name])
    upstream = torch.randn(tokens, experts, generator=generator).to(device)  # gradient arriving at each expert's gate
    bias = (0.01 * torch.randn(experts, generator=generator)).to(device) if config.group_limited else None

    def forward(path: RouterPath) -> tuple[torch.Tensor, ...]:
        with torch.no_grad():
            return path(logits, config, bias)

    def step(path: RouterPath) -> torch.Tensor:
        x = logits.detach().requires_grad_(True)
        gates, idx, _, aux, z = path(x, config, bias)
        ((gates * upstream.gather(1, idx)).sum() + aux + z).backward()
        return x.grad

    fused_out, eager_out = forward(_fused), forward(_eager)  # also the warm-up: the kernel compiles here
    tied = tied_rows(logits, config, bias)
    agreement = routing_agreement(fused_out[1], fused_out[0], eager_out[1], eager_out[0], tied)  # (idx, gates) each
    agreement["same_counts"] = bool(torch.equal(fused_out[2].cpu(), eager_out[2].cpu()))
    agreement["aux_rel_diff"] = float(abs(fused_out[3] - eager_out[3]) / abs(eager_out[3]))
    agreement["z_rel_diff"] = float(abs(fused_out[4] - eager_out[4]) / abs(eager_out[4]))
    del fused_out, eager_out
    warm_up = device.type == "cuda"
    result: dict[str, Any] = {"router": name, "tokens": tokens, "experts": experts, "dtype": dtype_name}
    result["repeats"] = repeats
    for label, path in (("fused", _fused), ("eager", _eager)):
        forward_s = median_s(partial(forward, path), device, repeats, warm_up=False)
        fwd_bwd_s = median_s(partial(step, path), device, repeats, warm_up=warm_up)
        result[f"{label}_forward_ms"] = round(forward_s * 1e3, 3)
        result[f"{label}_fwd_bwd_ms"] = round(fwd_bwd_s * 1e3, 3)
        result[f"{label}_forward_peak_mib"] = peak_mib(partial(forward, path), device)
        result[f"{label}_fwd_bwd_peak_mib"] = peak_mib(partial(step, path), device)
    result["eager_over_fused_fwd_bwd"] = round(result["eager_fwd_bwd_ms"] / max(result["fused_fwd_bwd_ms"], 1e-9), 3)
    result["agreement"] = agreement
    result["ok"] = (
        agreement["rows_differing_untied"] == 0
        and agreement["gates_max_abs_diff"] < 1e-4
        and agreement["aux_rel_diff"] < 1e-3
        and agreement["z_rel_diff"] < 1e-4
    )
    return result


def router_at_scale(mode: str) -> dict[str, Any]:
    """Fused against eager at 65,536 and 262,144 tokens x 256 experts, fp32 and bf16, softmax top-8 and DeepSeek-V3;
    the dry run at 512 tokens x 32 experts (8 groups of 4)."""
    device = device_for(mode)
    sizes = ((65_536, 20), (262_144, 10)) if mode == "gpu" else ((512, 1),)
    experts = DEEPSEEK_V3_EXPERTS if mode == "gpu" else 32
    cases = [
        _scale_case(device, tokens, experts, dtype_name, name, repeats)
        for tokens, repeats in sizes
        for dtype_name, _ in DTYPES
        for name, _ in ROUTERS
    ]
    memory = "torch.cuda.max_memory_allocated above the inputs" if device.type == "cuda" else None
    return {
        "ok": all(case["ok"] for case in cases),
        "peak_memory": memory or "not measured on the CPU (null): torch's CPU allocator keeps no peak",
        "cases": cases,
    }


def bf16_ties(mode: str) -> dict[str, Any]:
    """Logits on 4 levels in bf16, so nearly every row ties at the k-th expert: the kernel must choose the experts the
    torch path chooses (both break ties toward the lower expert id)."""
    device = device_for(mode)
    tokens, experts = (65_536, DEEPSEEK_V3_EXPERTS) if mode == "gpu" else (512, 32)
    levels = torch.randint(0, 4, (tokens, experts), generator=torch.Generator().manual_seed(7))
    logits = (levels.float() * 0.5).to(device=device, dtype=torch.bfloat16)  # values 0, 0.5, 1, 1.5
    cases = []
    for name, config in ROUTERS:
        kernel = router_stats(logits, config, backend="triton").topk_idx
        reference = router_stats(logits, config, backend="torch").topk_idx
        different = (kernel.sort(dim=1).values != reference.sort(dim=1).values).any(dim=1)
        case = {
            "router": name,
            "rows_with_boundary_ties": int(tied_rows(logits, config, None).sum()),
            "rows_with_different_experts": int(different.sum()),
            "rows_with_different_order": int((kernel != reference).any(dim=1).sum()),
        }
        if bool(different.any()):
            row = int(different.nonzero()[0])
            case["first_difference"] = {"row": row, "kernel": kernel[row].tolist(), "torch": reference[row].tolist()}
        case["ok"] = case["rows_with_different_experts"] == 0
        cases.append(case)
    return {"ok": all(case["ok"] for case in cases), "tokens": tokens, "experts": experts, "levels": 4, "cases": cases}


def check_every_row(logits: torch.Tensor, config: RouterConfig, bias: torch.Tensor | None, chunk_rows: int) -> dict:
    """The kernel on all of ``logits`` at once, then the torch path chunk by chunk: rows whose experts differ without a
    tie that allows it, the counts' total, the kernel's time and (on a GPU) the peak allocated memory."""
    device = logits.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with torch.no_grad():
        kernel_s, stats = time_call_s(lambda: router_stats(logits, config, bias=bias, backend="triton"), device)
    result: dict[str, Any] = {"kernel_s": round(kernel_s, 3)}
    on_gpu = device.type == "cuda"
    result["peak_allocated_mib"] = round(torch.cuda.max_memory_allocated(device) / MIB, 1) if on_gpu else None
    result["counts_sum_ok"] = int(stats.tokens_per_expert.sum()) == logits.shape[0] * config.top_k
    differing = untied = 0
    for start in range(0, logits.shape[0], chunk_rows):
        chunk = logits[start : start + chunk_rows]
        reference = router_stats_torch(chunk, config, bias)[0]  # (chunk, k)
        differ = (stats.topk_idx[start : start + chunk_rows].sort(1).values != reference.sort(1).values).any(dim=1)
        differing += int(differ.sum())
        untied += int((differ & ~tied_rows(chunk, config, bias)).sum())
    result.update(rows_differing=differing, rows_differing_untied=untied)
    result["ok"] = result["counts_sum_ok"] and untied == 0
    return result


def int32_boundary(mode: str) -> dict[str, Any]:
    """(tokens, 2048) fp32 logits with more than 2**31 elements, every row against the torch path. GPU only (the dry
    run skips it: gpu_check.STEPS); an illegal address ends this process, hence last and alone.

    2048 experts make a tile one token, so both the logits' element offsets (row * stride) and the partial sums'
    offsets (tile * BLOCK_E, about tokens * 2048) pass 2**31: the two products the kernel widens to int64."""
    experts = 2048
    tokens = 2**31 // experts + 4096  # rows from 2**31 // experts on start past element 2**31
    logits_bytes = tokens * experts * 4
    need_bytes = 6 * logits_bytes  # logits, up to three (tiles, 2048) partial buffers, their int64 sums
    free_bytes, _ = torch.cuda.mem_get_info()
    if free_bytes < need_bytes:
        return {"ok": True, "skipped": f"needs {need_bytes / 2**30:.0f} GiB free on the GPU; {free_bytes / 2**30:.0f}"}
    device = torch.device("cuda")
    logits = torch.randn(tokens, experts, device=device, generator=torch.Generator(device).manual_seed(3))
    bias = 0.01 * torch.randn(experts, device=device, generator=torch.Generator(device).manual_seed(4))
    result: dict[str, Any] = {"tokens": tokens, "experts": experts, "elements": tokens * experts}
    result["logits_mib"] = round(logits_bytes / MIB, 1)
    result["first_row_past_2_31"] = 2**31 // experts
    result["cases"] = [
        {"router": name, **check_every_row(logits, config, bias if config.group_limited else None, 65_536)}
        for name, config in ROUTERS
    ]
    result["ok"] = all(case["ok"] for case in result["cases"])
    return result
