"""Torch version of the fused router-statistics pass: the reference of the Triton kernel and its CPU fallback.

Both return the same five tensors from (tokens, experts) logits, without autograd:

- ``topk_idx``     (tokens, top_k) int64 selected experts, best selection score first
- ``topk_scores``  (tokens, top_k) unbiased scores of those experts (gates before normalisation and scale)
- ``counts``       (experts,) int64 assignments per expert
- ``prob_sum``     (experts,) sum over tokens of the aux-loss probability rows (softmax, or normalised sigmoid)
- ``lse``          (tokens,) logsumexp of each row (for the z-loss and the backward pass)
"""

from __future__ import annotations

import torch

from moe_balance._checks import compute_dtype
from moe_balance.routing import count_tokens, select_experts


@torch.no_grad()
def router_stats_torch(
    logits: torch.Tensor,
    top_k: int,
    *,
    score: str = "softmax",
    bias: torch.Tensor | None = None,
    num_groups: int | None = None,
    group_topk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x = logits.to(compute_dtype(logits))  # (tokens, experts)
    lse = torch.logsumexp(x, dim=-1)  # (tokens,)
    if score == "softmax":
        scores = torch.exp(x - lse.unsqueeze(1))  # (tokens, experts)
        prob_sum = scores.sum(dim=0)
    else:
        scores = torch.sigmoid(x)
        prob_sum = (scores / scores.sum(dim=-1, keepdim=True)).sum(dim=0)
    selection = scores if bias is None else scores + bias.to(scores.dtype)
    topk_idx = select_experts(selection, top_k, num_groups, group_topk)  # (tokens, top_k)
    topk_scores = scores.gather(1, topk_idx)  # (tokens, top_k)
    return topk_idx, topk_scores, count_tokens(topk_idx, x.shape[1]), prob_sum, lse
