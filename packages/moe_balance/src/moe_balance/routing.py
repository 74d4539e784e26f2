"""Token-to-expert routing: scores, (group-limited) top-k selection, bias-adjusted selection and gates.

The readable torch path with autograd. ``moe_balance.router_stats.router_stats`` computes the same routing together with
the balancing statistics in one fused pass; ``moe_balance.reference`` holds the per-token loop both are tested against.

Conventions (those of Megatron-LM and DeepSeek-V3):

- scores are ``softmax(logits)`` or ``sigmoid(logits)``, computed in float32 at least;
- the experts are *selected* on ``scores + bias`` (the aux-loss-free expert bias), but the gates are taken from the
  *unbiased* scores: the bias steers load and never scales an expert's output;
- group-limited routing (DeepSeek-V3's node limit) keeps, per token, the ``group_topk`` best of ``num_groups`` equal
  expert groups, a group scored by the sum of its top ``top_k // group_topk`` selection scores; the other groups are
  masked with ``-inf`` (never 0: biased sigmoid scores can be negative, so a 0 could still win);
- gates are normalised over the selected experts when ``normalize`` (for softmax this equals a softmax over the
  selected logits, as in Mixtral and Megatron's default), then multiplied by ``scale``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_balance._checks import check_routing, check_score, compute_dtype


@dataclass(frozen=True)
class Routing:
    """Where each token goes and with which weight."""

    topk_idx: torch.Tensor  # (tokens, top_k) int64, best selection score first
    gates: torch.Tensor  # (tokens, top_k) combine weights from the unbiased scores
    tokens_per_expert: torch.Tensor  # (experts,) int64 assignments per expert; sums to tokens * top_k
    scores: torch.Tensor  # (tokens, experts) unbiased scores (softmax or sigmoid)

    @property
    def num_tokens(self) -> int:
        return self.topk_idx.shape[0]

    @property
    def top_k(self) -> int:
        return self.topk_idx.shape[1]


def compute_scores(logits: torch.Tensor, score: str = "softmax") -> torch.Tensor:
    """(tokens, experts) logits -> (tokens, experts) scores in float32 (float64 stays float64)."""
    check_score(score)
    x = logits.to(compute_dtype(logits))
    return torch.softmax(x, dim=-1) if score == "softmax" else torch.sigmoid(x)


def group_limited_mask(selection_scores: torch.Tensor, top_k: int, num_groups: int, group_topk: int) -> torch.Tensor:
    """(tokens, experts) selection scores -> (tokens, experts) bool, True where the expert's group is kept."""
    num_tokens, num_experts = selection_scores.shape
    grouped = selection_scores.view(num_tokens, num_groups, num_experts // num_groups)  # (tokens, groups, size)
    group_scores = grouped.topk(top_k // group_topk, dim=-1).values.sum(dim=-1)  # (tokens, groups)
    best_groups = group_scores.topk(group_topk, dim=-1).indices  # (tokens, group_topk)
    keep_group = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best_groups, True)
    return keep_group.unsqueeze(-1).expand_as(grouped).reshape(num_tokens, num_experts)


def select_experts(
    selection_scores: torch.Tensor, top_k: int, num_groups: int | None = None, group_topk: int | None = None
) -> torch.Tensor:
    """(tokens, experts) -> (tokens, top_k) int64 expert ids, best first; group-limited when groups are given."""
    if num_groups is not None and group_topk is not None and group_topk < num_groups:
        keep = group_limited_mask(selection_scores, top_k, num_groups, group_topk)
        selection_scores = selection_scores.masked_fill(~keep, float("-inf"))
    return selection_scores.topk(top_k, dim=-1).indices


def gates_from_scores(
    scores: torch.Tensor, topk_idx: torch.Tensor, *, normalize: bool = True, scale: float = 1.0
) -> torch.Tensor:
    """Gather the unbiased scores of the selected experts; normalise over them; multiply by ``scale``."""
    gates = scores.gather(1, topk_idx)  # (tokens, top_k)
    if normalize:
        gates = gates / gates.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(gates.dtype).tiny)
    return gates * scale if scale != 1.0 else gates


def count_tokens(topk_idx: torch.Tensor, num_experts: int) -> torch.Tensor:
    """(tokens, top_k) expert ids -> (experts,) int64 number of assignments per expert."""
    return torch.bincount(topk_idx.reshape(-1), minlength=num_experts)


def route(
    logits: torch.Tensor,
    top_k: int,
    *,
    score: str = "softmax",
    bias: torch.Tensor | None = None,
    num_groups: int | None = None,
    group_topk: int | None = None,
    scale: float = 1.0,
    normalize: bool = True,
    check_finite: bool | None = None,
) -> Routing:
    """Route (tokens, experts) logits to ``top_k`` experts per token.

    ``bias`` (experts,) shifts the selection only (see the module docstring); ``num_groups``/``group_topk`` turn on
    DeepSeek-V3 group-limited routing. Gates carry gradients to ``logits``; the selection and counts do not.
    ``check_finite`` as in ``moe_balance._checks.check_logits`` (checked on CPU, skipped on accelerators by default).
    """
    num_experts = check_routing(logits, top_k, score, bias, num_groups, group_topk, check_finite=check_finite)

    scores = compute_scores(logits, score)  # (tokens, experts)
    with torch.no_grad():
        selection = scores if bias is None else scores + bias.to(scores.dtype)
        topk_idx = select_experts(selection, top_k, num_groups, group_topk)  # (tokens, top_k)
    gates = gates_from_scores(scores, topk_idx, normalize=normalize, scale=scale)
    return Routing(topk_idx=topk_idx, gates=gates, tokens_per_expert=count_tokens(topk_idx, num_experts), scores=scores)
