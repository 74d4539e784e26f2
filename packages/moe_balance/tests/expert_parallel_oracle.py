"""Test oracle of the expert-parallel layer: the same MoE on one process, every token-expert pair computed in place,
and the synthetic routings the distributed tests share. It lives beside the tests; the package ships only what runs."""

from __future__ import annotations

import torch
from torch.nn import functional

EXPERTS, D_MODEL, D_FF, TOP_K, TOKENS_PER_RANK = 8, 8, 16, 2, 24


def expert_weights(num_experts: int = EXPERTS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w1, w3: (experts, d_model, d_ff); w2: (experts, d_ff, d_model), float32, fixed seed."""
    generator = torch.Generator().manual_seed(7)
    w1 = torch.randn(num_experts, D_MODEL, D_FF, generator=generator) / D_MODEL**0.5
    w2 = torch.randn(num_experts, D_FF, D_MODEL, generator=generator) / D_FF**0.5
    w3 = torch.randn(num_experts, D_MODEL, D_FF, generator=generator) / D_MODEL**0.5
    return w1, w2, w3


def routing(
    rank: int, kind: str, num_experts: int = EXPERTS, tokens: int = TOKENS_PER_RANK
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One rank's micro-batch: x (tokens, d_model), topk_idx (tokens, k) distinct experts, gates (tokens, k), and the
    upstream gradient (tokens, d_model). ``skewed``: 70 % of the pairs on the first quarter of the experts (all homed
    on rank 0), drawn at random; ``uniform``: every expert equally likely, drawn at random; ``balanced``: token t takes
    experts 2t and 2t + 1 (mod E), so every expert gets the same count on every rank; ``idle-rank``: skewed, but rank 1
    has no tokens at all."""
    if kind == "idle-rank":
        kind, tokens = "skewed", 0 if rank == 1 else tokens
    generator = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(tokens, D_MODEL, generator=generator)
    weight = torch.ones(num_experts)
    if kind == "skewed":
        hot = num_experts // 4
        weight[:hot] = 0.7 / hot
        weight[hot:] = 0.3 / (num_experts - hot)
    draws = [torch.multinomial(weight, TOP_K, generator=generator) for _token in range(tokens)]
    topk_idx = torch.stack(draws) if draws else torch.zeros((0, TOP_K), dtype=torch.int64)
    if kind == "balanced":
        topk_idx = (TOP_K * torch.arange(tokens).unsqueeze(1) + torch.arange(TOP_K)) % num_experts
    gates = torch.softmax(torch.randn(tokens, TOP_K, generator=generator), dim=-1)
    upstream = torch.randn(tokens, D_MODEL, generator=generator)
    return x, topk_idx, gates, upstream


def reference_moe(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    gates: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    w3: torch.Tensor,
) -> torch.Tensor:
    """sum_i gate_i * expert_{topk_idx_i}(x), one expert and one top-k position at a time. (tokens, d_model)."""
    y = torch.zeros_like(x)
    for expert in range(w1.shape[0]):
        for position in range(topk_idx.shape[1]):
            hit = topk_idx[:, position] == expert
            rows = x[hit]
            out = (functional.silu(rows @ w1[expert]) * (rows @ w3[expert])) @ w2[expert]
            y = y.index_add(0, hit.nonzero().flatten(), gates[hit, position].unsqueeze(1) * out)
    return y


def reference_run(
    world_size: int, kind: str, num_experts: int = EXPERTS
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """The reference over every rank's micro-batch: outputs and input gradients (per rank), weight gradients."""
    batches = [routing(rank, kind, num_experts) for rank in range(world_size)]
    weights = [w.clone().requires_grad_() for w in expert_weights(num_experts)]
    outputs, input_grads = [], []
    xs = [batch[0].clone().requires_grad_() for batch in batches]
    loss = torch.zeros(())
    for x, (_x, topk_idx, gates, upstream) in zip(xs, batches, strict=True):
        y = reference_moe(x, topk_idx, gates, *weights)
        outputs.append(y.detach())
        loss = loss + (y * upstream).sum()
    loss.backward()
    input_grads = [x.grad for x in xs]
    return outputs, input_grads, [w.grad for w in weights]
