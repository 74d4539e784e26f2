"""Fused router statistics in one Triton kernel; ``router_stats_torch.py`` beside it computes the same in torch.

One program handles a tile of BLOCK_T tokens x all experts (padded to a power of two) and, reading the logits once:
scores (softmax or sigmoid), the optional selection bias, the optional group limit (DeepSeek-V3), the top-k selection
(largest first, lowest expert id on exact ties), the selected unbiased scores, and per-tile partial sums of the
expert histogram and of the aux-loss probability rows, plus each row's logsumexp. With ``AUX_SEPARATE`` it
also counts a plain top-k on the unbiased scores (no bias, no group limit): the counts the aux loss uses. Partial
sums go to a (tiles, experts) buffer reduced afterwards in torch: no float atomics, so the result is deterministic.

Sigmoid, exp and the reductions run in float32 (float64 for float64 input); logits may be bf16/fp16/fp32/fp64.

Offsets are int64: the program id is widened before any product. ``tile * BLOCK_E`` indexes the (tiles, BLOCK_E)
partial buffers, about tokens * BLOCK_E elements once a tile is one token (from 2048 experts), so an int32 product
wraps past 2**31: about 1M tokens at 2048 experts, 512K at 4096. ``row * stride_row`` and ``row * TOP_K`` are int64
for the same reason.

A NaN selection score ranks above every number and NaNs among themselves by expert id, as ``torch.sort`` orders them
(PyTorch's test/test_sort_and_select.py: NaNs at the beginning of descending sorts), and no expert is picked twice
in a row: a row that reached the kernel unchecked gets TOP_K distinct experts, never TOP_K times the last one.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_balance.kernels._device import device_guard
from moe_balance.routing import RouterConfig


@triton.jit
def _router_stats_kernel(  # type: ignore[no-untyped-def]  # Triton reads parameter annotations (tl.constexpr)
    logits_ptr,  # (tokens, experts), row stride stride_row, column stride 1
    bias_ptr,  # (experts,) or a dummy when HAS_BIAS is False
    topk_idx_ptr,  # out (tokens, TOP_K) int64
    topk_score_ptr,  # out (tokens, TOP_K) compute dtype
    lse_ptr,  # out (tokens,) compute dtype
    partial_counts_ptr,  # out (tiles, BLOCK_E) int32
    partial_prob_ptr,  # out (tiles, BLOCK_E) compute dtype
    partial_aux_counts_ptr,  # out (tiles, BLOCK_E) int32, or a dummy when AUX_SEPARATE is False
    num_tokens,
    num_experts,
    stride_row,
    TOP_K: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_E: tl.constexpr,
    USE_SIGMOID: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    GROUP_LIMITED: tl.constexpr,
    NUM_GROUPS: tl.constexpr,
    GROUP_TOPK: tl.constexpr,
    PER_GROUP_K: tl.constexpr,
    GROUP_SIZE: tl.constexpr,
    GROUP_ON_LOGITS: tl.constexpr,
    AUX_SEPARATE: tl.constexpr,
    COMPUTE_DTYPE: tl.constexpr,
):
    tile = tl.program_id(0).to(tl.int64)  # int64: tile * BLOCK_E passes 2**31 (see the module docstring)
    rows = tile * BLOCK_T + tl.arange(0, BLOCK_T)  # (BLOCK_T,) int64
    cols = tl.arange(0, BLOCK_E)  # (BLOCK_E,)
    row_ok = rows < num_tokens
    col_ok = cols < num_experts
    valid = row_ok[:, None] & col_ok[None, :]  # (BLOCK_T, BLOCK_E)
    neg_inf = float("-inf")

    offsets = rows[:, None] * stride_row + cols[None, :]  # (BLOCK_T, BLOCK_E) int64
    x = tl.load(logits_ptr + offsets, mask=valid, other=0.0).to(COMPUTE_DTYPE)
    x = tl.where(col_ok[None, :], x, neg_inf)  # padded experts never win and add exp(-inf) = 0

    row_max = tl.max(x, axis=1)  # (BLOCK_T,)
    exps = tl.exp(x - row_max[:, None])
    denom = tl.sum(exps, axis=1)
    lse = row_max + tl.log(denom)  # (BLOCK_T,)
    tl.store(lse_ptr + rows, lse, mask=row_ok)

    if USE_SIGMOID:
        scores = tl.where(col_ok[None, :], tl.sigmoid(x), 0.0)
        probs = scores / tl.sum(scores, axis=1)[:, None]
    else:
        scores = exps / denom[:, None]
        probs = scores
    probs = tl.where(row_ok[:, None], probs, 0.0)
    tl.store(partial_prob_ptr + tile * BLOCK_E + cols, tl.sum(probs, axis=0))

    selection = scores
    if HAS_BIAS:
        bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(COMPUTE_DTYPE)
        selection = scores + bias[None, :]
    # x != x holds for NaN only, the same in the interpreter and on a GPU.
    # pylint: disable-next=comparison-with-itself
    selection = tl.where(selection != selection, float("inf"), selection)  # NaN first, as torch.sort ranks it
    selection = tl.where(col_ok[None, :], selection, neg_inf)

    if GROUP_LIMITED:
        group_of_col = cols // GROUP_SIZE  # (BLOCK_E,); padded columns land in groups >= NUM_GROUPS
        group_input = x if GROUP_ON_LOGITS else selection  # Megatron's softmax default ranks groups on logits
        # x != x holds for NaN only, the same in the interpreter and on a GPU.
        # pylint: disable-next=comparison-with-itself
        group_input = tl.where(group_input != group_input, float("inf"), group_input)
        group_score = tl.zeros((BLOCK_T, BLOCK_E), dtype=COMPUTE_DTYPE)
        for g in tl.static_range(NUM_GROUPS):
            member = group_of_col == g
            remaining = tl.where(member[None, :], group_input, neg_inf)
            total = tl.zeros((BLOCK_T,), dtype=COMPUTE_DTYPE)
            for _pick in tl.static_range(PER_GROUP_K):
                best = tl.max(remaining, axis=1)
                total += best
                first = tl.min(tl.where(remaining == best[:, None], cols[None, :], BLOCK_E), axis=1)
                remaining = tl.where(cols[None, :] == first[:, None], neg_inf, remaining)
            group_score = tl.where(member[None, :], total[:, None], group_score)
        kept = tl.zeros((BLOCK_T, BLOCK_E), dtype=tl.int32)
        for _pick in tl.static_range(GROUP_TOPK):
            candidates = tl.where((kept == 0) & col_ok[None, :], group_score, neg_inf)
            best = tl.max(candidates, axis=1)
            best_group = tl.min(tl.where(candidates == best[:, None], group_of_col[None, :], NUM_GROUPS), axis=1)
            kept = tl.where(group_of_col[None, :] == best_group[:, None], 1, kept)
        selection = tl.where(kept != 0, selection, neg_inf)

    k_cols = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    idx_tile = tl.zeros((BLOCK_T, BLOCK_K), dtype=tl.int32)
    score_tile = tl.zeros((BLOCK_T, BLOCK_K), dtype=COMPUTE_DTYPE)
    chosen = tl.zeros((BLOCK_T, BLOCK_E), dtype=tl.int32)
    for j in tl.static_range(TOP_K):
        best = tl.max(selection, axis=1)  # (BLOCK_T,)
        # The lowest unchosen expert at the row maximum: distinct even when the maximum is -inf (all groups masked).
        open_best = (selection == best[:, None]) & (chosen == 0) & col_ok[None, :]  # (BLOCK_T, BLOCK_E)
        pick = tl.min(tl.where(open_best, cols[None, :], BLOCK_E), axis=1)
        pick = tl.minimum(pick, num_experts - 1)  # defence only: with TOP_K <= experts an open column always exists
        hit = cols[None, :] == pick[:, None]  # (BLOCK_T, BLOCK_E)
        picked_score = tl.sum(tl.where(hit, scores, 0.0), axis=1)
        idx_tile = tl.where(k_cols[None, :] == j, pick[:, None], idx_tile)
        score_tile = tl.where(k_cols[None, :] == j, picked_score[:, None], score_tile)
        chosen += hit.to(tl.int32)
        selection = tl.where(hit, neg_inf, selection)

    out_offsets = rows[:, None] * TOP_K + k_cols[None, :]  # (BLOCK_T, BLOCK_K) int64
    out_mask = row_ok[:, None] & (k_cols[None, :] < TOP_K)
    tl.store(topk_idx_ptr + out_offsets, idx_tile.to(tl.int64), mask=out_mask)
    tl.store(topk_score_ptr + out_offsets, score_tile, mask=out_mask)
    chosen = tl.where(row_ok[:, None], chosen, 0)
    tl.store(partial_counts_ptr + tile * BLOCK_E + cols, tl.sum(chosen, axis=0))

    if AUX_SEPARATE:  # plain top-k on the unbiased scores, for the aux loss's counts
        # x != x holds for NaN only, the same in the interpreter and on a GPU.
        # pylint: disable-next=comparison-with-itself
        plain = tl.where(scores != scores, float("inf"), scores)
        plain = tl.where(col_ok[None, :], plain, neg_inf)
        aux_chosen = tl.zeros((BLOCK_T, BLOCK_E), dtype=tl.int32)
        for _pick in tl.static_range(TOP_K):
            best = tl.max(plain, axis=1)
            open_best = (plain == best[:, None]) & (aux_chosen == 0) & col_ok[None, :]
            pick = tl.min(tl.where(open_best, cols[None, :], BLOCK_E), axis=1)
            pick = tl.minimum(pick, num_experts - 1)
            hit = cols[None, :] == pick[:, None]
            aux_chosen += hit.to(tl.int32)
            plain = tl.where(hit, neg_inf, plain)
        aux_chosen = tl.where(row_ok[:, None], aux_chosen, 0)
        tl.store(partial_aux_counts_ptr + tile * BLOCK_E + cols, tl.sum(aux_chosen, axis=0))


def _tokens_per_tile(block_e: int) -> int:
    """About 2048 elements per tile (16 per thread at 4 warps): whole rows, few enough to stay in registers."""
    return max(1, min(64, 2048 // block_e))


def router_stats_triton(
    logits: torch.Tensor,
    config: RouterConfig,
    bias: torch.Tensor | None = None,
    *,
    separate_aux_counts: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Same contract as ``router_stats_torch``; arguments are assumed validated by the caller."""
    num_tokens, num_experts = logits.shape
    top_k = config.top_k
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    block_e = triton.next_power_of_2(num_experts)
    block_t = _tokens_per_tile(block_e)
    tiles = triton.cdiv(num_tokens, block_t)
    device = logits.device

    topk_idx = torch.empty((num_tokens, top_k), dtype=torch.int64, device=device)
    topk_scores = torch.empty((num_tokens, top_k), dtype=dtype, device=device)
    lse = torch.empty((num_tokens,), dtype=dtype, device=device)
    partial_counts = torch.empty((tiles, block_e), dtype=torch.int32, device=device)
    partial_prob = torch.empty((tiles, block_e), dtype=dtype, device=device)
    partial_aux = torch.empty((tiles, block_e), dtype=torch.int32, device=device) if separate_aux_counts else None
    group_limited = config.group_limited
    bias_arg = bias.to(device=device, dtype=dtype).contiguous() if bias is not None else lse  # dummy when unused

    with device_guard(logits):
        _router_stats_kernel[(tiles,)](
            logits,
            bias_arg,
            topk_idx,
            topk_scores,
            lse,
            partial_counts,
            partial_prob,
            partial_aux if separate_aux_counts else partial_counts,  # dummy when unused
            num_tokens,
            num_experts,
            logits.stride(0),
            TOP_K=top_k,
            BLOCK_K=triton.next_power_of_2(top_k),
            BLOCK_T=block_t,
            BLOCK_E=block_e,
            USE_SIGMOID=config.score == "sigmoid",
            HAS_BIAS=bias is not None,
            GROUP_LIMITED=group_limited,
            NUM_GROUPS=config.num_groups if group_limited else 1,
            GROUP_TOPK=config.group_topk if group_limited else 1,
            PER_GROUP_K=top_k // (config.group_topk or 1) if group_limited else 1,  # group_limited: group_topk set
            GROUP_SIZE=num_experts // config.num_groups if group_limited else num_experts,
            GROUP_ON_LOGITS=config.group_score == "logits",
            AUX_SEPARATE=separate_aux_counts,
            COMPUTE_DTYPE=tl.float64 if dtype == torch.float64 else tl.float32,
            num_warps=4 if block_t * block_e <= 2048 else 8,
        )
    counts = partial_counts.sum(dim=0, dtype=torch.int64)[:num_experts]
    aux_counts = partial_aux.sum(dim=0, dtype=torch.int64)[:num_experts] if partial_aux is not None else counts
    prob_sum = partial_prob.sum(dim=0)[:num_experts]
    return topk_idx, topk_scores, counts, aux_counts, prob_sum, lse
