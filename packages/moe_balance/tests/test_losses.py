"""Balancing losses: conventions, balanced value, sum f = sum P = 1, gradients, guards, variants."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_balance import (
    GlobalBatchAuxLoss,
    aux_loss,
    aux_loss_masked_probs,
    load_balancing_loss,
    route,
    router_stats,
    z_loss,
)
from moe_balance.losses import assignment_fractions, aux_scores
from moe_balance.reference import aux_loss_reference, z_loss_reference

FAST = settings(max_examples=25, deadline=None)


@st.composite
def balanced_logits(draw):
    """Every rotation of one row, m times: each expert is selected equally often (uniform f)."""
    num_experts = draw(st.integers(2, 10))
    top_k = draw(st.integers(1, num_experts))
    repeats = draw(st.integers(1, 3))
    base = draw(st.lists(st.integers(-40, 40), min_size=num_experts, max_size=num_experts, unique=True))
    row = torch.tensor(base, dtype=torch.float64) / 10  # distinct by 0.1: no ties in the selection
    logits = torch.stack([torch.roll(row, shift) for _repeat in range(repeats) for shift in range(num_experts)])
    return logits, top_k


@FAST
@given(balanced_logits())
def test_balanced_routing_gives_aux_loss_one(case):
    logits, top_k = case
    assert route(logits, top_k).tokens_per_expert.unique().numel() == 1
    assert aux_loss(logits, top_k).item() == pytest.approx(1.0, abs=1e-12)
    assert aux_loss(logits, top_k, convention="hf").item() == pytest.approx(float(top_k), abs=1e-12)


@st.composite
def random_logits(draw):
    num_experts = draw(st.integers(1, 16))
    top_k = draw(st.integers(1, num_experts))
    num_tokens = draw(st.integers(1, 40))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    return torch.randn(num_tokens, num_experts, generator=gen, dtype=torch.float64) * 3, top_k


@FAST
@given(random_logits(), st.sampled_from(["softmax", "sigmoid"]))
def test_assignment_fractions_and_mean_probabilities_each_sum_to_one(case, score):
    logits, top_k = case
    counts = route(logits, top_k, score=score).tokens_per_expert
    assert assignment_fractions(counts, logits.shape[0], top_k).sum().item() == pytest.approx(1.0, abs=1e-12)
    assert aux_scores(logits, score).mean(dim=0).sum().item() == pytest.approx(1.0, abs=1e-12)


@FAST
@given(random_logits(), st.sampled_from(["megatron", "hf"]), st.sampled_from(["softmax", "sigmoid"]))
def test_aux_loss_matches_the_per_token_reference(case, convention, score):
    logits, top_k = case
    got = aux_loss(logits, top_k, convention=convention, score=score).item()
    assert got == pytest.approx(aux_loss_reference(logits, top_k, convention=convention, score=score), abs=1e-12)


@FAST
@given(random_logits(), st.integers(1, 4))
def test_sequence_aux_loss_matches_the_reference(case, seq_len):
    logits, top_k = case
    logits = logits[: (logits.shape[0] // seq_len) * seq_len]
    if logits.shape[0] == 0:
        return
    got = aux_loss(logits, top_k, seq_len=seq_len).item()
    assert got == pytest.approx(aux_loss_reference(logits, top_k, seq_len=seq_len), abs=1e-12)


@FAST
@given(random_logits())
def test_z_loss_matches_the_reference(case):
    logits, _top_k = case
    assert z_loss(logits).item() == pytest.approx(z_loss_reference(logits), rel=1e-12)


@FAST
@given(random_logits())
def test_gradients_reach_the_router_logits(case):
    logits, top_k = case
    if logits.shape[1] == 1:
        return  # one expert: softmax is constant, nothing to learn
    x = logits.clone().requires_grad_(True)
    (aux_loss(x, top_k) + z_loss(x)).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


def test_aux_loss_gradient_pushes_probability_away_from_the_busiest_expert():
    logits = torch.zeros(32, 4, dtype=torch.float64)
    logits[:, 0] = 2.0  # expert 0 takes every token's first slot
    x = logits.clone().requires_grad_(True)
    aux_loss(x, 1).backward()
    assert (x.grad[:, 0] > 0).all() and (x.grad[:, 1:] < 0).all()  # descent lowers expert 0, raises the rest


def test_the_classic_top_k_bug_is_refused():
    logits = torch.randn(10, 4)
    counts = route(logits, 2).tokens_per_expert
    with pytest.raises(ValueError, match="tokens_per_expert sums to 20.*tokens \\* top_k = 10 \\* 1"):
        load_balancing_loss(torch.softmax(logits, -1), counts, 1)  # k forgotten: f would sum to 2


def test_counts_after_dropping_are_refused():
    logits = torch.randn(10, 4)
    counts = route(logits, 2).tokens_per_expert.clone()
    counts[0] -= 1
    with pytest.raises(ValueError, match="before capacity dropping"):
        load_balancing_loss(torch.softmax(logits, -1), counts, 2)


def test_hf_pools_layers_along_the_tokens():
    gen = torch.Generator().manual_seed(0)
    layers = [torch.randn(12, 6, generator=gen, dtype=torch.float64) for _layer in range(3)]
    pooled = aux_loss(layers, 2, convention="hf").item()
    assert pooled == pytest.approx(2 * aux_loss(torch.cat(layers), 2).item(), abs=1e-12)
    per_layer_mean = sum(aux_loss(x, 2).item() for x in layers) / 3
    assert aux_loss(layers, 2).item() == pytest.approx(per_layer_mean, abs=1e-12)


def test_masked_probability_variant_is_not_the_reference():
    balanced = torch.stack([torch.roll(torch.arange(4.0, dtype=torch.float64), s) for s in range(4)])
    assert aux_loss(balanced, 1).item() == pytest.approx(1.0)
    masked = aux_loss_masked_probs(balanced, 1).item()
    assert masked < 1.0  # unselected probability mass is dropped from P
    assert masked == pytest.approx(torch.softmax(balanced[0], -1).max().item(), abs=1e-12)


def test_global_batch_loss_counts_f_over_all_micro_batches():
    gen = torch.Generator().manual_seed(1)
    micro = [torch.randn(16, 8, generator=gen, dtype=torch.float64) for _micro_batch in range(3)]
    loss = GlobalBatchAuxLoss(8, 2)
    for x in micro:
        value = loss(torch.softmax(x, -1), route(x, 2).tokens_per_expert)
    total_counts = sum(route(x, 2).tokens_per_expert for x in micro).to(torch.float64)
    f = total_counts / (48 * 2)
    expected = 8 * torch.dot(f, torch.softmax(micro[-1], -1).mean(0))
    assert value.item() == pytest.approx(expected.item(), abs=1e-12)
    loss.reset()
    assert loss(torch.softmax(micro[0], -1), route(micro[0], 2).tokens_per_expert).item() == pytest.approx(
        aux_loss(micro[0], 2).item(), abs=1e-12
    )


def test_global_batch_loss_of_a_balanced_batch_is_one():
    balanced = torch.stack([torch.roll(torch.arange(4.0, dtype=torch.float64), s) for s in range(4)])
    loss = GlobalBatchAuxLoss(4, 2)
    assert loss(torch.softmax(balanced, -1), route(balanced, 2).tokens_per_expert).item() == pytest.approx(1.0)


def test_fused_pass_equals_the_plain_losses():
    logits = torch.randn(40, 12, dtype=torch.float64)
    stats = router_stats(logits, 3, backend="torch")
    assert stats.aux_loss.item() == pytest.approx(aux_loss(logits, 3).item(), abs=1e-12)
    assert stats.z_loss.item() == pytest.approx(z_loss(logits).item(), abs=1e-12)
