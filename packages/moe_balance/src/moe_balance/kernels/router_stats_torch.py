"""Torch version of the fused router-statistics pass: the reference of the Triton kernel and its CPU fallback.

Both return the same five tensors from (tokens, experts) logits, without autograd:

- ``topk_idx``     (tokens, top_k) int64 selected experts, best selection score first, the lower expert id first
  on exact ties (as the kernel; ``routing.top_indices``)
- ``topk_scores``  (tokens, top_k) unbiased scores of those experts (gates before normalisation and scale)
- ``counts``       (experts,) int64 assignments per expert
- ``aux_counts``   (experts,) int64 assignments of a plain top-k on the unbiased scores (no bias, no group limit),
  the counts the aux loss uses (Megatron-LM since its 2025 aux-loss fix, DeepSeek-V3); ``counts`` itself unless
  ``separate_aux_counts``
- ``prob_sum``     (experts,) sum over tokens of the aux-loss probability rows (softmax, or normalised sigmoid)
- ``lse``          (tokens,) logsumexp of each row (for the z-loss and the backward pass)
"""

from __future__ import annotations

import torch

from moe_balance._checks import compute_dtype
from moe_balance.routing import RouterConfig, count_tokens, select_experts


@torch.no_grad()
def router_stats_torch(
    logits: torch.Tensor,
    config: RouterConfig,
    bias: torch.Tensor | None = None,
    *,
    separate_aux_counts: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens, experts) logits -> (topk_idx, topk_scores, counts, aux_counts, prob_sum, lse); see the docstring."""
    x = logits.to(compute_dtype(logits))  # (tokens, experts)
    lse = torch.logsumexp(x, dim=-1)  # (tokens,)
    if config.score == "softmax":
        scores = torch.exp(x - lse.unsqueeze(1))  # (tokens, experts)
        prob_sum = scores.sum(dim=0)
    else:
        scores = torch.sigmoid(x)
        prob_sum = (scores / scores.sum(dim=-1, keepdim=True)).sum(dim=0)
    selection = scores if bias is None else scores + bias.to(scores.dtype)
    group_input = x if config.group_score == "logits" else None
    topk_idx = select_experts(selection, config.top_k, config.num_groups, config.group_topk, group_input)
    topk_scores = scores.gather(1, topk_idx)  # (tokens, top_k)
    counts = count_tokens(topk_idx, x.shape[1])
    aux_counts = count_tokens(select_experts(scores, config.top_k), x.shape[1]) if separate_aux_counts else counts
    return topk_idx, topk_scores, counts, aux_counts, prob_sum, lse
