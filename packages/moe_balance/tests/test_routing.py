"""Routing: the torch path against the per-token reference, group limits, bias-vs-gate separation."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_balance import route
from moe_balance.reference import route_reference
from moe_balance.routing import group_limited_mask

FAST = settings(max_examples=25, deadline=None)


@st.composite
def routing_cases(draw):
    """Random logits (continuous values, so no exact ties) with a valid routing configuration."""
    num_groups = draw(st.sampled_from([None, 2, 4]))
    group_size = draw(st.integers(1, 4)) if num_groups else None
    num_experts = num_groups * group_size if num_groups else draw(st.integers(1, 12))
    if num_groups:
        group_topk = draw(st.integers(1, num_groups))
        per_group = draw(st.integers(1, group_size))
        top_k = group_topk * per_group
    else:
        group_topk = None
        top_k = draw(st.integers(1, num_experts))
    num_tokens = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(num_tokens, num_experts, generator=gen, dtype=torch.float64) * 2
    bias = torch.randn(num_experts, generator=gen, dtype=torch.float64) * 0.2 if draw(st.booleans()) else None
    return {
        "logits": logits,
        "top_k": top_k,
        "score": draw(st.sampled_from(["softmax", "sigmoid"])),
        "bias": bias,
        "num_groups": num_groups,
        "group_topk": group_topk,
        "scale": draw(st.sampled_from([1.0, 2.5])),
        "normalize": draw(st.booleans()),
    }


@FAST
@given(routing_cases())
def test_route_matches_the_per_token_reference(case):
    options = {k: v for k, v in case.items() if k != "logits"}
    routing = route(case["logits"], **options)
    idx, gates, counts = route_reference(case["logits"], **options)
    assert routing.topk_idx.tolist() == idx
    torch.testing.assert_close(routing.gates, torch.tensor(gates, dtype=torch.float64), rtol=0, atol=1e-12)
    assert routing.tokens_per_expert.tolist() == counts


def test_counts_sum_to_tokens_times_k():
    routing = route(torch.randn(50, 16), 4)
    assert int(routing.tokens_per_expert.sum()) == 50 * 4
    assert routing.topk_idx.shape == routing.gates.shape == (50, 4)


def test_softmax_gates_equal_a_softmax_over_the_selected_logits():
    logits = torch.randn(20, 8, dtype=torch.float64)
    routing = route(logits, 3)
    expected = torch.softmax(logits.gather(1, routing.topk_idx), dim=-1)
    torch.testing.assert_close(routing.gates, expected)


def test_scale_multiplies_normalised_gates():
    logits = torch.randn(10, 8, dtype=torch.float64)
    torch.testing.assert_close(
        route(logits, 2, scale=2.5).gates.sum(dim=1), torch.full((10,), 2.5, dtype=torch.float64)
    )


def test_bias_changes_the_selection_but_not_the_gate_values():
    logits = torch.zeros(4, 4, dtype=torch.float64)
    logits[:, 0] = 1.0  # expert 0 is everyone's favourite
    bias = torch.tensor([-1.0, 0.0, 0.0, 0.5], dtype=torch.float64)
    routing = route(logits, 1, score="sigmoid", bias=bias, normalize=False)
    assert routing.topk_idx[:, 0].tolist() == [3, 3, 3, 3]
    torch.testing.assert_close(routing.gates[:, 0], torch.full((4,), 0.5, dtype=torch.float64))  # sigmoid(0)


def test_group_limit_masks_with_minus_infinity_not_zero():
    # Biased sigmoid scores can be negative: a 0 mask would make a masked expert beat every kept one.
    logits = torch.tensor([[4.0, 4.0, -4.0, -4.0]], dtype=torch.float64)
    bias = torch.tensor([-2.0, -2.0, -3.0, -3.0], dtype=torch.float64)  # all selection scores negative
    routing = route(logits, 2, score="sigmoid", bias=bias, num_groups=2, group_topk=1)
    assert sorted(routing.topk_idx[0].tolist()) == [0, 1]


def test_group_limit_keeps_the_groups_with_the_best_top_scores():
    # Group 0 = {0,1}: top-1 score 0.9; group 1 = {2,3}: top-1 0.6 but a larger sum. Scored by top (k/group_topk)=1.
    scores = torch.tensor([[0.9, 0.0, 0.6, 0.5]])
    by_top2_sum = group_limited_mask(scores, top_k=4, num_groups=2, group_topk=2)  # keeps both groups
    assert by_top2_sum.all()
    by_top2_sum = group_limited_mask(scores, top_k=2, num_groups=2, group_topk=1)  # 0.9 + 0.0 < 0.6 + 0.5
    assert by_top2_sum.tolist() == [[False, False, True, True]]
    by_top1 = group_limited_mask(torch.tensor([[0.9, 0.0, 0.6, 0.5]]), top_k=1, num_groups=2, group_topk=1)
    assert by_top1.tolist() == [[True, True, False, False]]


def test_group_limited_selection_stays_inside_the_kept_groups():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(64, 32, generator=gen)
    routing = route(logits, 8, score="sigmoid", num_groups=8, group_topk=4)
    groups_per_token = [len(set((row // 4).tolist())) for row in routing.topk_idx]
    assert max(groups_per_token) <= 4


def test_gates_carry_gradient_to_the_logits():
    logits = torch.randn(6, 5, requires_grad=True)
    route(logits, 2).gates[:, 0].sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
