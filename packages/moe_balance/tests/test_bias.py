"""Aux-loss-free bias balancing: the update rule, its options, eval freezing, and that it balances."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_balance import BiasBalancer, balance_stats, route
from moe_balance.reference import bias_update_reference


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=12), st.booleans())
def test_update_matches_the_reference_rule(counts, recenter):
    balancer = BiasBalancer(len(counts), rate=1e-3, recenter=recenter, dtype=torch.float64)
    balancer.update(torch.tensor(counts))
    expected = bias_update_reference([0.0] * len(counts), counts, 1e-3, recenter)
    assert balancer.bias.tolist() == pytest.approx(expected, abs=1e-15)


def test_default_rate_is_deepseek_v3s():
    assert BiasBalancer(4).rate == 1e-3


def test_an_expert_exactly_at_the_mean_keeps_its_bias():
    balancer = BiasBalancer(3, rate=0.5)
    balancer.update(torch.tensor([1, 2, 3]))
    assert balancer.bias.tolist() == [0.5, 0.0, -0.5]


def test_recentering_keeps_zero_mean():
    balancer = BiasBalancer(4, rate=0.1, recenter=True)
    balancer.update(torch.tensor([10, 0, 0, 0]))
    assert balancer.bias.mean().item() == pytest.approx(0.0, abs=1e-7)
    assert balancer.bias.argmin().item() == 0


def test_micro_batches_accumulate_into_one_update():
    balancer = BiasBalancer(2, rate=1.0)
    balancer.accumulate(torch.tensor([3, 0]))
    balancer.accumulate(torch.tensor([0, 4]))
    assert balancer.bias.tolist() == [0.0, 0.0]  # nothing changes before step()
    assert balancer.step().tolist() == [3, 4]
    assert balancer.bias.tolist() == [1.0, -1.0]
    assert balancer.pending_counts.tolist() == [0, 0]


def test_bias_is_frozen_in_eval_mode():
    balancer = BiasBalancer(2, rate=1.0).eval()
    assert balancer.update(torch.tensor([5, 0])) is None
    balancer.accumulate(torch.tensor([5, 0]))
    assert balancer.step() is None
    assert balancer.bias.tolist() == [0.0, 0.0] and balancer.pending_counts.tolist() == [0, 0]


def test_bias_is_saved_with_the_model_but_pending_counts_are_not():
    state = BiasBalancer(3).state_dict()
    assert list(state) == ["bias"]


def test_bias_needs_no_gradient():
    balancer = BiasBalancer(3)
    assert not balancer.bias.requires_grad and list(balancer.parameters()) == []


def test_counts_of_the_wrong_length_are_refused():
    with pytest.raises(ValueError, match=r"tokens_per_expert has shape \(3,\), expected \(4,\)"):
        BiasBalancer(4).update(torch.tensor([1, 2, 3]))


@pytest.mark.parametrize("score", ["sigmoid", "softmax"])
def test_bias_balances_a_skewed_router(score):
    gen = torch.Generator().manual_seed(0)
    experts, top_k = 16, 2
    offsets = torch.linspace(-1.0, 1.0, experts)
    # Softmax scores are ~1/E in size, so the bias needs a matching step.
    balancer = BiasBalancer(experts, rate=0.01 if score == "sigmoid" else 0.002)
    window = torch.zeros(experts, dtype=torch.int64)
    before = None
    for step in range(150):
        routing = route(torch.randn(512, experts, generator=gen) + offsets, top_k, score=score, bias=balancer.bias)
        if before is None:
            before = balance_stats(routing.tokens_per_expert)["max_over_mean"]
        if step >= 130:
            window += routing.tokens_per_expert
        balancer.update(routing.tokens_per_expert)
    assert before is not None and before > 2.0
    assert balance_stats(window)["max_over_mean"] < 1.2


def megatron_updated_expert_bias(tokens_per_expert, expert_bias, rate):
    """Our transcription of Megatron-LM's ``get_updated_expert_bias`` (megatron/core/transformer/moe/moe_utils.py at
    commit 00611e6eeb0b09b5ee074750956855215ddbd67f), without its all-reduce: b += sign(mean - count) * rate."""
    average = tokens_per_expert.sum(dim=-1, keepdim=True) / tokens_per_expert.shape[-1]
    return expert_bias + torch.sign(average - tokens_per_expert) * rate


def test_valid_counts_step_like_megatron():
    balancer = BiasBalancer(4, rate=1e-3, dtype=torch.float64)
    counts = torch.tensor([5.0, 0.0, 9.0, 2.0], dtype=torch.float64)
    expected = megatron_updated_expert_bias(counts, torch.zeros(4, dtype=torch.float64), 1e-3)
    balancer.update(counts)
    assert torch.equal(balancer.bias, expected)


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), float("-inf"), -1.0, 2.5],
    ids=["nan", "inf", "-inf", "negative", "fractional"],
)
def test_counts_that_are_not_token_counts_are_refused_and_leave_the_bias(bad):
    """Item 2: Megatron's rule would turn NaN into a NaN bias and inf into a full step; here the call fails."""
    balancer = BiasBalancer(4, rate=1e-3)
    counts = torch.tensor([3.0, bad, 1.0, 4.0])
    with pytest.raises(ValueError, match="not token counts"):
        balancer.update(counts)
    assert torch.equal(balancer.bias, torch.zeros(4))
    assert torch.equal(balancer.pending_counts, torch.zeros(4, dtype=torch.int64))


def test_negative_integer_counts_are_refused():
    with pytest.raises(ValueError, match=r"e\.g\. \[-2\]"):
        BiasBalancer(3).accumulate(torch.tensor([1, -2, 3]))


def test_whole_float_counts_are_accepted():
    balancer = BiasBalancer(2, rate=0.5)
    balancer.update(torch.tensor([4.0, 0.0]))
    assert balancer.bias.tolist() == [-0.5, 0.5]
