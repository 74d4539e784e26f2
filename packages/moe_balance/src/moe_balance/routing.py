"""Token-to-expert routing: scores, (group-limited) top-k selection, bias-adjusted selection and gates.

The readable torch path with autograd. ``moe_balance.router_stats.router_stats`` computes the same routing together
with the balancing statistics in one fused pass; ``moe_balance.reference`` holds the per-token loop both are tested
against. One frozen ``RouterConfig`` describes a router; every entry point takes it (or its keywords).

Conventions (each an explicit ``RouterConfig`` field; the defaults are DeepSeek-V3's):

- scores are ``softmax(logits)`` or ``sigmoid(logits)``, computed in float32 at least;
- the experts are *selected* on ``scores + bias`` (the aux-loss-free expert bias), but the gates are taken from the
  *unbiased* scores: the bias steers load and never scales an expert's output;
- group-limited routing (DeepSeek-V3's node limit) keeps, per token, the ``group_topk`` best of ``num_groups`` equal
  expert groups, a group scored by the sum of its top ``top_k // group_topk`` selection scores (integer division,
  as Megatron-LM's ``group_limited_topk``: ``top_k`` need not be a multiple of ``group_topk``); the other groups are
  masked with ``-inf`` (never 0: biased sigmoid scores can be negative, so a 0 could still win).
  ``group_score="logits"`` scores the groups on the raw logits instead: Megatron's softmax default
  (``moe_router_pre_softmax=False``), where top-k runs on the logits before the softmax;
- the top-k lists the experts best first, and exact ties go to the lower expert id, on every backend (this torch
  path, the fused torch pass and the Triton kernel); ``torch.topk`` does not promise that order, so selection uses a
  stable descending sort;
- gates are normalised over the selected experts when ``normalize`` (for softmax this equals a softmax over the
  selected logits, as in Mixtral and Megatron's default), then multiplied by ``scale``. With ``top_k == 1`` a
  normalised gate is always 1.0; ``normalize_top1=False`` keeps the raw score there, as Megatron's sigmoid router does.

Recipes: ``RouterConfig.megatron(top_k, score=...)`` matches Megatron-LM's ``topk_routing_with_score_function``
defaults; ``RouterConfig.deepseek_v3()`` matches the DeepSeek-V3 gate (sigmoid, 8 groups keep 4, top-8, scale 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from moe_balance._checks import check_groups, check_routing, check_score, check_top_k, compute_dtype

ScoreFunction = Literal["softmax", "sigmoid"]
GroupScore = Literal["scores", "logits"]
GROUP_SCORES = ("scores", "logits")


@dataclass(frozen=True)
class RouterConfig:
    """How a router picks experts and weighs them; the one definition every routing entry point shares.

    Checks that need no logits run here, at construction; those that need the expert count (groups dividing the
    experts, ``top_k <= experts``) run when the config meets its logits.
    """

    top_k: int  # experts per token
    score: ScoreFunction = "softmax"
    num_groups: int | None = None  # expert groups for group-limited routing (None: no limit)
    group_topk: int | None = None  # groups each token may use
    scale: float = 1.0  # gates are multiplied by this (DeepSeek-V3: 2.5)
    normalize: bool = True  # gates normalised over the selected experts
    normalize_top1: bool = True  # with top_k == 1: normalise (gate 1.0) or keep the raw score (Megatron sigmoid)
    group_score: GroupScore = "scores"  # groups ranked on selection scores, or on raw logits (Megatron softmax)

    def __post_init__(self) -> None:
        check_top_k(self.top_k, None)
        check_score(self.score)
        check_groups(None, self.top_k, self.num_groups, self.group_topk)
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)):
            raise ValueError(f"scale must be a number; got {self.scale!r}")
        for name in ("normalize", "normalize_top1"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False; got {getattr(self, name)!r}")
        if self.group_score not in GROUP_SCORES:
            raise ValueError(f"group_score={self.group_score!r} is not supported: use one of {', '.join(GROUP_SCORES)}")
        if self.group_score == "logits" and self.score != "softmax":
            raise ValueError(
                "group_score='logits' is Megatron's softmax convention (top-k before the softmax); with "
                f"score={self.score!r} use group_score='scores'"
            )

    @classmethod
    def of(cls, config: int | RouterConfig, **options: Any) -> RouterConfig:
        """``config`` itself (with ``options`` applied), or a new config from ``top_k`` and keywords."""
        if isinstance(config, RouterConfig):
            return replace(config, **options) if options else config
        return cls(top_k=config, **options)

    @classmethod
    def megatron(
        cls,
        top_k: int,
        *,
        score: ScoreFunction = "softmax",
        pre_softmax: bool = False,
        num_groups: int | None = None,
        group_topk: int | None = None,
        scaling_factor: float | None = None,
    ) -> RouterConfig:
        """Megatron-LM's ``topk_routing_with_score_function`` (megatron/core/transformer/moe/moe_utils.py).

        softmax, ``pre_softmax=False`` (its default): top-k and group scores on the logits, gates = softmax over the
        selected logits; ``pre_softmax=True``: top-k on the softmax, gates not renormalised. sigmoid: gates
        renormalised only when ``top_k > 1``.
        """
        if score == "softmax":
            return cls(
                top_k=top_k,
                score=score,
                num_groups=num_groups,
                group_topk=group_topk,
                scale=scaling_factor or 1.0,
                normalize=not pre_softmax,
                group_score="scores" if pre_softmax else "logits",
            )
        return cls(
            top_k=top_k,
            score=score,
            num_groups=num_groups,
            group_topk=group_topk,
            scale=scaling_factor or 1.0,
            normalize=True,
            normalize_top1=False,
        )

    @classmethod
    def deepseek_v3(
        cls, top_k: int = 8, *, num_groups: int = 8, group_topk: int = 4, scale: float = 2.5
    ) -> RouterConfig:
        """The DeepSeek-V3 gate: sigmoid scores, bias-adjusted group-limited selection, normalised gates x 2.5."""
        return cls(top_k=top_k, score="sigmoid", num_groups=num_groups, group_topk=group_topk, scale=scale)

    @property
    def group_limited(self) -> bool:
        return self.num_groups is not None and self.group_topk is not None and self.group_topk < self.num_groups

    @property
    def normalizes_gates(self) -> bool:
        """Whether gates are divided by their sum: ``normalize``, except at top-1 when ``normalize_top1`` is off."""
        return self.normalize and (self.top_k > 1 or self.normalize_top1)


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


def group_limited_mask(
    selection_scores: torch.Tensor,
    top_k: int,
    num_groups: int,
    group_topk: int,
    group_input: torch.Tensor | None = None,
) -> torch.Tensor:
    """(tokens, experts) selection scores -> (tokens, experts) bool, True where the expert's group is kept.

    Each group is scored by the sum of its top ``top_k // group_topk`` values of ``group_input`` (default: the
    selection scores; Megatron's softmax default passes the logits).
    """
    ranked = selection_scores if group_input is None else group_input
    num_tokens, num_experts = ranked.shape
    grouped = ranked.view(num_tokens, num_groups, num_experts // num_groups)  # (tokens, groups, size)
    group_scores = grouped.topk(top_k // group_topk, dim=-1).values.sum(dim=-1)  # (tokens, groups); values only
    best_groups = top_indices(group_scores, group_topk)  # (tokens, group_topk), the lower group on ties
    keep_group = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best_groups, True)
    return keep_group.unsqueeze(-1).expand_as(grouped).reshape(num_tokens, num_experts)


def top_indices(values: torch.Tensor, k: int) -> torch.Tensor:
    """(..., n) -> (..., k) int64 indices of the ``k`` largest values, largest first, the lower index on exact ties.

    NOTE: ``torch.topk`` documents no order among equal values, and on bf16 logits (few distinct values) it breaks
    many ties differently from the Triton kernel. ``torch.sort(stable=True)`` preserves the order of equivalent
    elements (its documentation), so a stable descending sort puts the lower index first, as the kernel does; NaN
    sorts before every number (PyTorch's test/test_sort_and_select.py), as the kernel ranks it too.
    """
    return torch.sort(values, dim=-1, descending=True, stable=True).indices[..., :k]


def select_experts(
    selection_scores: torch.Tensor,
    top_k: int,
    num_groups: int | None = None,
    group_topk: int | None = None,
    group_input: torch.Tensor | None = None,
) -> torch.Tensor:
    """(tokens, experts) -> (tokens, top_k) int64 expert ids, best first, the lower id on exact ties; group-limited
    when groups are given."""
    if num_groups is not None and group_topk is not None and group_topk < num_groups:
        keep = group_limited_mask(selection_scores, top_k, num_groups, group_topk, group_input)
        selection_scores = selection_scores.masked_fill(~keep, float("-inf"))
    return top_indices(selection_scores, top_k)


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


def check_config_for_logits(
    logits: torch.Tensor, config: RouterConfig, bias: torch.Tensor | None, *, check_finite: bool = True
) -> int:
    """Checks that need the logits (expert count, bias shape, finiteness); returns the number of experts."""
    num_experts = check_routing(
        logits, config.top_k, config.score, bias, config.num_groups, config.group_topk, check_finite=check_finite
    )
    if bias is not None and config.group_score == "logits":
        raise ValueError(
            "an expert bias with group_score='logits' has no reference meaning (Megatron adds its expert bias to "
            "sigmoid scores only): use group_score='scores' with a bias"
        )
    return num_experts


def route(
    logits: torch.Tensor,
    top_k: int | RouterConfig,
    *,
    bias: torch.Tensor | None = None,
    check_finite: bool = True,
    **options: Any,
) -> Routing:
    """Route (tokens, experts) logits to ``top_k`` experts per token.

    ``top_k`` is a ``RouterConfig`` or the expert count with the config's fields as keywords (``score``,
    ``num_groups``, ``group_topk``, ``scale``, ``normalize``, ``normalize_top1``, ``group_score``). ``bias``
    (experts,) shifts the selection only (see the module docstring). Gates carry gradients to ``logits``; the
    selection and counts do not. ``check_finite`` (default on every device) refuses logits with a NaN or inf row,
    which no top-k can route meaningfully; ``check_finite=False`` skips it and its one host sync per call, for
    callers that check the logits themselves (see ``moe_balance._checks.check_logits``).
    """
    config = RouterConfig.of(top_k, **options)
    num_experts = check_config_for_logits(logits, config, bias, check_finite=check_finite)

    scores = compute_scores(logits, config.score)  # (tokens, experts)
    with torch.no_grad():
        selection = scores if bias is None else scores + bias.to(scores.dtype)
        group_input = logits.to(scores.dtype) if config.group_score == "logits" else None
        topk_idx = select_experts(selection, config.top_k, config.num_groups, config.group_topk, group_input)
    gates = gates_from_scores(scores, topk_idx, normalize=config.normalizes_gates, scale=config.scale)
    return Routing(topk_idx=topk_idx, gates=gates, tokens_per_expert=count_tokens(topk_idx, num_experts), scores=scores)
