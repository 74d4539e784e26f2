"""Bad input fails at the call with a ValueError naming the argument, its value, and what to do."""

from __future__ import annotations

import pytest
import torch

from moe_balance import BiasBalancer, aux_loss, aux_loss_masked_probs, route, router_stats, z_loss

ENTRY_POINTS = {
    "route": lambda x, k=2, **kw: route(x, k, **kw),
    "router_stats": lambda x, k=2, **kw: router_stats(x, k, **kw),
    "aux_loss": lambda x, k=2, **kw: aux_loss(x, k, **kw),
    "aux_loss_masked_probs": lambda x, k=2, **kw: aux_loss_masked_probs(x, k, **kw),
    "z_loss": lambda x, k=2, **kw: z_loss(x, **kw),
}
WITH_TOP_K = [name for name in ENTRY_POINTS if name != "z_loss"]
WITH_GROUPS = ["route", "router_stats"]


@pytest.mark.parametrize("name", ENTRY_POINTS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_logits(name, bad):
    x = torch.randn(6, 4)
    x[2, 1] = bad
    with pytest.raises(ValueError, match=r"logits has 1 row\(s\) out of 6 with NaN or inf \(1 value\(s\)\)"):
        ENTRY_POINTS[name](x)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_empty_batch(name):
    with pytest.raises(ValueError, match=r"logits is an empty batch \(0 tokens"):
        ENTRY_POINTS[name](torch.empty(0, 4))


@pytest.mark.parametrize("name", WITH_TOP_K)
@pytest.mark.parametrize("top_k", [5, 0])
def test_top_k_out_of_range(name, top_k):
    with pytest.raises(ValueError, match=f"top_k={top_k} is out of range"):
        ENTRY_POINTS[name](torch.randn(3, 4), top_k)


@pytest.mark.parametrize("name", WITH_GROUPS)
def test_experts_not_divisible_by_groups(name):
    with pytest.raises(ValueError, match="num_groups=4 does not divide the 6 experts"):
        ENTRY_POINTS[name](torch.randn(3, 6), 2, num_groups=4, group_topk=2)


@pytest.mark.parametrize("name", WITH_GROUPS)
@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"num_groups": 2}, "needs both or neither"),
        ({"num_groups": 2, "group_topk": 3}, "group_topk=3 exceeds num_groups=2"),
        ({"num_groups": 4, "group_topk": 3}, "top_k=2 is smaller than group_topk=3"),
        ({"num_groups": 0, "group_topk": 1}, "num_groups must be a positive int"),
    ],
)
def test_inconsistent_group_arguments(name, groups, message):
    with pytest.raises(ValueError, match=message):
        ENTRY_POINTS[name](torch.randn(3, 8), 2, **groups)


def test_groups_too_small_for_the_per_group_top_k():
    with pytest.raises(ValueError, match="top_k // group_topk = 4 exceeds the group size 2"):
        route(torch.randn(3, 8), 4, num_groups=4, group_topk=1)


@pytest.mark.parametrize("name", WITH_GROUPS)
def test_bias_of_the_wrong_shape(name):
    with pytest.raises(ValueError, match=r"bias must be a tensor of shape \(4,\)"):
        ENTRY_POINTS[name](torch.randn(3, 4), 2, bias=torch.zeros(5))


def test_non_finite_bias():
    with pytest.raises(ValueError, match="bias contains NaN or inf"):
        route(torch.randn(3, 4), 2, bias=torch.tensor([0.0, float("nan"), 0.0, 0.0]))


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_logits_must_be_two_dimensional(name):
    with pytest.raises(ValueError, match=r"logits must be 2-D \(tokens, experts\); got shape \(2, 3, 4\)"):
        ENTRY_POINTS[name](torch.randn(2, 3, 4))


def test_integer_logits_are_refused():
    with pytest.raises(ValueError, match="logits must be a floating-point tensor"):
        route(torch.ones(3, 4, dtype=torch.int64), 2)


def test_unknown_score_and_convention():
    with pytest.raises(ValueError, match="score='relu' is not supported"):
        route(torch.randn(3, 4), 2, score="relu")
    with pytest.raises(ValueError, match="convention='switch' is not supported"):
        aux_loss(torch.randn(3, 4), 2, convention="switch")


def test_sequence_length_that_does_not_divide_the_tokens():
    with pytest.raises(ValueError, match="seq_len=4 must be a positive int dividing the 6 tokens"):
        aux_loss(torch.randn(6, 4), 2, seq_len=4)


def test_empty_list_of_layers():
    with pytest.raises(ValueError, match="logits is an empty list of layers"):
        aux_loss([], 2)


@pytest.mark.parametrize(("args", "message"), [((0,), "num_experts=0"), ((4, 0.0), "rate=0.0 must be positive")])
def test_bias_balancer_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        BiasBalancer(*args)


def test_finite_check_can_be_skipped_explicitly():
    """The caller took responsibility: no host sync, no error; the finite rows route as they would alone."""
    x = torch.randn(3, 4)
    x[0, 0] = float("nan")
    routing = route(x, 2, check_finite=False)
    assert routing.topk_idx.shape == (3, 2)
    assert torch.equal(routing.topk_idx[1:], route(x[1:], 2).topk_idx)
