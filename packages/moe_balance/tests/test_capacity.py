"""Capacity: exact formula, conservation, both drop policies against the reference, padding table."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_balance import apply_capacity, expert_capacity, route
from moe_balance.reference import capacity_keep_reference

FAST = settings(max_examples=30, deadline=None)


@pytest.mark.parametrize(
    ("tokens", "experts", "top_k", "factor", "expected"),
    [
        (8, 4, 2, 1.0, 4),
        (10, 3, 1, 1.0, 4),  # ceil(3.33)
        (10, 3, 1, 3.0, 10),  # 10/3*3 is 10.000000000000002 in floats; exactly 10 here
        (4096, 64, 8, 1.25, 640),
        (100, 7, 2, 1.1, 32),  # ceil(31.428...)
        (0, 4, 2, 1.0, 0),
    ],
)
def test_capacity_formula(tokens, experts, top_k, factor, expected):
    assert expert_capacity(tokens, experts, top_k, factor) == expected


@pytest.mark.parametrize("factor", [0, -1.0, float("inf"), float("nan")])
def test_bad_capacity_factor_is_refused(factor):
    with pytest.raises(ValueError, match="capacity_factor"):
        expert_capacity(8, 4, 2, factor)


@st.composite
def assignments(draw):
    experts = draw(st.integers(1, 8))
    top_k = draw(st.integers(1, experts))
    tokens = draw(st.integers(1, 30))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    logits = torch.randn(tokens, experts, generator=gen, dtype=torch.float64)
    if draw(st.booleans()):
        logits = logits.round()  # many equal gates: ties must be broken by position
    routing = route(logits, top_k)
    return routing, experts, draw(st.integers(0, tokens * top_k))


@FAST
@given(assignments(), st.sampled_from(["probability", "position"]))
def test_kept_plus_dropped_equals_routed(case, policy):
    routing, experts, capacity = case
    result = apply_capacity(routing.topk_idx, routing.gates, experts, capacity=capacity, policy=policy)
    assert torch.equal(result.kept_per_expert + result.dropped_per_expert, routing.tokens_per_expert)
    assert int(result.keep.sum()) + result.dropped == routing.num_tokens * routing.top_k
    assert (result.kept_per_expert <= capacity).all()
    assert result.dropped_share == pytest.approx(result.dropped / (routing.num_tokens * routing.top_k))


@FAST
@given(assignments(), st.sampled_from(["probability", "position"]))
def test_drops_match_the_reference(case, policy):
    routing, experts, capacity = case
    result = apply_capacity(routing.topk_idx, routing.gates, experts, capacity=capacity, policy=policy)
    expected = capacity_keep_reference(routing.topk_idx, routing.gates, experts, capacity, policy)
    assert result.keep.tolist() == expected


def test_position_policy_is_first_come_by_token_not_by_slot():
    # Token 0 lists expert 1 in its second slot, token 1 in its first: first come is still token 0.
    topk_idx = torch.tensor([[0, 1], [1, 2], [1, 3]])
    gates = torch.full((3, 2), 0.5)
    result = apply_capacity(topk_idx, gates, 4, capacity=1, policy="position")
    assert result.keep.tolist() == [[True, True], [False, True], [False, True]]
    swapped = apply_capacity(topk_idx.flip(1), gates, 4, capacity=1, policy="position")
    assert swapped.keep.flip(1).tolist() == result.keep.tolist()


def test_probability_policy_keeps_the_highest_gates():
    topk_idx = torch.tensor([[0], [0], [0]])
    gates = torch.tensor([[0.2], [0.9], [0.5]])
    result = apply_capacity(topk_idx, gates, 1, capacity=2, policy="probability")
    assert result.keep[:, 0].tolist() == [False, True, True]
    assert result.slot[:, 0].tolist() == [-1, 0, 1]
    assert result.gates[:, 0].tolist() == pytest.approx([0.0, 0.9, 0.5])


def test_pad_to_capacity_table():
    topk_idx = torch.tensor([[0, 1], [0, 2], [0, 1]])
    gates = torch.ones(3, 2)
    result = apply_capacity(topk_idx, gates, 4, capacity=2, policy="position", pad_to_capacity=True)
    assert result.dispatch_index is not None
    assert result.dispatch_index.tolist() == [[0, 1], [0, 2], [1, -1], [-1, -1]]
    assert result.dropped == 1 and result.dropped_share == pytest.approx(1 / 6)


def test_capacity_factor_is_accepted_in_place_of_capacity():
    routing = route(torch.randn(40, 8), 2)
    result = apply_capacity(routing.topk_idx, routing.gates, 8, capacity_factor=1.0)
    assert result.capacity == 10


def test_capacity_arguments_are_exclusive():
    with pytest.raises(ValueError, match="exactly one of capacity"):
        apply_capacity(torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1), 2, capacity=1, capacity_factor=1.0)


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="policy='random' is not supported"):
        apply_capacity(torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1), 2, capacity=1, policy="random")
