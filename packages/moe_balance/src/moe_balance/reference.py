"""Slow, obvious references: one token at a time, plain Python floats (float64), straight from the formulas.

Every fast path in the package (routing, losses, the fused router statistics and its Triton kernel, capacity, the
bias update) is tested against these. They favour clarity over speed: use them on small inputs only. Ties between
equal scores are broken towards the lower expert id, here as in every fast path (torch and Triton).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from moe_balance.routing import RouterConfig


def _rows(logits: Any) -> list[list[float]]:
    return [[float(v) for v in row] for row in (logits.tolist() if isinstance(logits, torch.Tensor) else logits)]


def softmax_row(row: list[float]) -> list[float]:
    top = max(row)
    exps = [math.exp(v - top) for v in row]
    total = sum(exps)
    return [e / total for e in exps]


def sigmoid_row(row: list[float]) -> list[float]:
    return [1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v)) for v in row]


def logsumexp_row(row: list[float]) -> float:
    top = max(row)
    return top + math.log(sum(math.exp(v - top) for v in row))


def best_first(values: list[float], count: int, allowed: list[bool] | None = None) -> list[int]:
    """Indices of the ``count`` largest values, largest first, lower index first on ties."""
    candidates = [i for i in range(len(values)) if allowed is None or allowed[i]]
    return sorted(candidates, key=lambda i: (-values[i], i))[:count]


def route_reference(
    logits: Any, top_k: int | RouterConfig, *, bias: Any = None, **options: Any
) -> tuple[list[list[int]], list[list[float]], list[int]]:
    """Returns (topk_idx, gates, tokens_per_expert) as Python lists; ``top_k``/``options`` as for ``route``."""
    config = RouterConfig.of(top_k, **options)
    rows = _rows(logits)
    num_experts = len(rows[0])
    bias_values = [0.0] * num_experts if bias is None else [float(b) for b in bias]
    counts = [0] * num_experts
    all_idx, all_gates = [], []
    for row in rows:
        scores = softmax_row(row) if config.score == "softmax" else sigmoid_row(row)
        selection = [s + b for s, b in zip(scores, bias_values, strict=True)]
        allowed = [True] * num_experts
        num_groups, group_topk = config.num_groups, config.group_topk
        if config.group_limited and num_groups is not None and group_topk is not None:  # group_limited: both set
            size = num_experts // num_groups
            ranked = row if config.group_score == "logits" else selection
            group_score: list[float] = []
            for g in range(num_groups):
                members = ranked[g * size : (g + 1) * size]
                group_score.append(sum(sorted(members, reverse=True)[: config.top_k // group_topk]))
            kept_groups = set(best_first(group_score, group_topk))
            allowed = [e // size in kept_groups for e in range(num_experts)]
        chosen = best_first(selection, config.top_k, allowed)
        gates = [scores[e] for e in chosen]
        if config.normalizes_gates:
            total = sum(gates)
            gates = [g / total for g in gates]
        all_idx.append(chosen)
        all_gates.append([g * config.scale for g in gates])
        for e in chosen:
            counts[e] += 1
    return all_idx, all_gates, counts


def aux_probs_row(row: list[float], score: str) -> list[float]:
    if score == "softmax":
        return softmax_row(row)
    s = sigmoid_row(row)
    total = sum(s)
    return [v / total for v in s]


def aux_loss_reference(
    logits: Any, top_k: int, *, convention: str = "megatron", seq_len: int | None = None, score: str = "softmax"
) -> float:
    """E * sum_i f_i P_i, f_i = count_i / (T*k), P_i = mean_t p_ti; hf multiplies by k; seq: per sequence, mean."""
    rows = _rows(logits)
    num_tokens, num_experts = len(rows), len(rows[0])
    factor = top_k if convention == "hf" else 1
    if seq_len is None:
        groups = [list(range(num_tokens))]
    else:
        batch = num_tokens // seq_len
        groups = [[s * batch + b for s in range(seq_len)] for b in range(batch)]
    losses = []
    for tokens in groups:
        counts = [0] * num_experts
        prob_sum = [0.0] * num_experts
        for t in tokens:
            probs = aux_probs_row(rows[t], score)
            for e in best_first(probs, top_k):
                counts[e] += 1
            for e in range(num_experts):
                prob_sum[e] += probs[e]
        f = [c / (len(tokens) * top_k) for c in counts]
        p = [s / len(tokens) for s in prob_sum]
        losses.append(num_experts * factor * sum(fi * pi for fi, pi in zip(f, p, strict=True)))
    return sum(losses) / len(losses)


def z_loss_reference(logits: Any) -> float:
    rows = _rows(logits)
    return sum(logsumexp_row(row) ** 2 for row in rows) / len(rows)


def bias_update_reference(bias: Any, tokens_per_expert: Any, rate: float, recenter: bool = False) -> list[float]:
    """b_i += rate * sign(mean(count) - count_i); optionally shift to zero mean."""
    counts = [float(c) for c in tokens_per_expert]
    mean = sum(counts) / len(counts)
    new = [float(b) + rate * ((mean > c) - (mean < c)) for b, c in zip(bias, counts, strict=True)]
    if recenter:
        centre = sum(new) / len(new)
        new = [b - centre for b in new]
    return new


def capacity_keep_reference(
    topk_idx: Any, gates: Any, num_experts: int, capacity: int, policy: str
) -> list[list[bool]]:
    """Which (token, slot) assignments survive: per expert, the ``capacity`` best by gate (ties: earlier token,
    then earlier slot) for ``policy="probability"``, or the ``capacity`` earliest tokens for ``policy="position"``."""
    idx = [[int(e) for e in row] for row in (topk_idx.tolist() if isinstance(topk_idx, torch.Tensor) else topk_idx)]
    g = [[float(v) for v in row] for row in (gates.tolist() if isinstance(gates, torch.Tensor) else gates)]
    keep = [[False] * len(row) for row in idx]
    for expert in range(num_experts):
        claims = [(t, j) for t, row in enumerate(idx) for j, e in enumerate(row) if e == expert]
        if policy == "probability":
            claims.sort(key=lambda tj: (-g[tj[0]][tj[1]], tj[0], tj[1]))
        for t, j in claims[:capacity]:
            keep[t][j] = True
    return keep
