"""EPLB-compatible planner, exact mode: the published example, the loop reference, invariants, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from eplb_reference import rebalance_experts_reference
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_balance.placement import rebalance_experts

ORACLE = Path(__file__).resolve().parents[4] / "shared" / "oracles" / "eplb_readme.json"
README_EXAMPLE = {
    # The worked example of the published EPLB README: 4 groups on 2 nodes, 8 GPUs, 16 slots.
    "weight": [
        [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
        [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
    ],
    "num_replicas": 16,
    "num_groups": 4,
    "num_nodes": 2,
    "num_gpus": 8,
    "phy2log": [
        [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
        [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1],
    ],
    "logcnt": [[1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1], [1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1]],
}


@pytest.fixture(params=["readme", "oracle-file"])
def example(request: pytest.FixtureRequest) -> dict:
    """The README example as written here, and the shared oracle file when the checkout has it."""
    if request.param == "readme":
        return README_EXAMPLE
    if not ORACLE.exists():
        pytest.skip(f"oracle file {ORACLE} is not in this checkout")
    return json.loads(ORACLE.read_text())


def check_invariants(
    phy2log: torch.Tensor,
    log2phy: torch.Tensor,
    logcnt: torch.Tensor,
    num_experts: int,
    num_replicas: int,
    layout: str = "eplb",
) -> None:
    """Every expert has >= 1 replica, appears logcnt times, and log2phy lists exactly its slots in rank order."""
    num_layers = phy2log.shape[0]
    assert phy2log.dtype == log2phy.dtype == logcnt.dtype == torch.int64
    assert phy2log.shape == (num_layers, num_replicas)
    width = int(logcnt.max()) if layout == "eplb" else num_replicas - num_experts + 1
    assert log2phy.shape == (num_layers, num_experts, width)
    assert bool((logcnt >= 1).all())
    counted = torch.zeros_like(logcnt).scatter_add_(1, phy2log, torch.ones_like(phy2log))
    assert torch.equal(counted, logcnt)
    assert int(logcnt.sum(dim=1).min()) == int(logcnt.sum(dim=1).max()) == num_replicas
    rank = torch.arange(log2phy.shape[2])
    assert torch.equal(log2phy >= 0, rank.view(1, 1, -1) < logcnt.unsqueeze(-1))
    for layer in range(num_layers):
        slots = log2phy[layer][log2phy[layer] >= 0]
        assert sorted(slots.tolist()) == list(range(num_replicas))  # each slot listed once
        experts = torch.arange(num_experts).unsqueeze(1).expand_as(log2phy[layer])[log2phy[layer] >= 0]
        assert torch.equal(phy2log[layer, slots], experts)  # log2phy inverts phy2log


def test_exact_mode_reproduces_the_published_example(example):
    weight = torch.tensor(example["weight"])
    args = (example["num_replicas"], example["num_groups"], example["num_nodes"], example["num_gpus"])
    phy2log, log2phy, logcnt = rebalance_experts(weight, *args)
    assert phy2log.tolist() == example["phy2log"]
    assert logcnt.tolist() == example["logcnt"]
    check_invariants(phy2log, log2phy, logcnt, weight.shape[1], example["num_replicas"])


def test_loop_reference_reproduces_the_published_example(example):
    weight = torch.tensor(example["weight"])
    args = (example["num_replicas"], example["num_groups"], example["num_nodes"], example["num_gpus"])
    phy2log, _log2phy, logcnt = rebalance_experts_reference(weight, *args)
    assert phy2log.tolist() == example["phy2log"]
    assert logcnt.tolist() == example["logcnt"]


# (experts, groups, nodes, gpus, replicas) layouts covering hierarchical, global and one-slot-per-GPU cases.
LAYOUTS = [
    (12, 4, 2, 8, 16),
    (16, 4, 4, 8, 24),
    (16, 8, 8, 8, 24),
    (16, 4, 3, 6, 24),  # groups do not divide by nodes -> global policy
    (24, 6, 2, 4, 24),  # no redundant replicas
    (8, 2, 2, 8, 8),  # one slot per GPU
    (32, 8, 4, 16, 48),
    (20, 5, 1, 4, 28),
]


@settings(max_examples=40, deadline=None)
@given(
    layout=st.sampled_from(LAYOUTS),
    num_layers=st.integers(1, 3),
    tied=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_exact_mode_equals_the_loop_reference_tie_for_tie(layout, num_layers, tied, seed):
    num_experts, num_groups, num_nodes, num_gpus, num_replicas = layout
    generator = torch.Generator().manual_seed(seed)
    if tied:  # small integers: many equal loads, equal group sums and equal per-replica loads
        weight = torch.randint(0, 4, (num_layers, num_experts), generator=generator)
    else:
        weight = torch.rand((num_layers, num_experts), generator=generator) * 1000
    fast = rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus)
    slow = rebalance_experts_reference(weight, num_replicas, num_groups, num_nodes, num_gpus)
    for got, want in zip(fast, slow, strict=True):
        assert torch.equal(got, want)
    check_invariants(*fast, num_experts, num_replicas)


@pytest.mark.parametrize("num_groups,num_nodes", [(8, 8), (4, 8)])
def test_exact_mode_equals_the_loop_reference_at_production_width(num_groups, num_nodes):
    weight = torch.distributions.LogNormal(0.0, 1.0).sample((2, 256)) * 1000
    fast = rebalance_experts(weight, 320, num_groups, num_nodes, 64)
    slow = rebalance_experts_reference(weight, 320, num_groups, num_nodes, 64)
    for got, want in zip(fast, slow, strict=True):
        assert torch.equal(got, want)


def test_hierarchical_policy_keeps_each_group_on_one_node():
    weight = torch.distributions.LogNormal(0.0, 1.0).sample((4, 64))
    phy2log, _log2phy, _logcnt = rebalance_experts(weight, 96, 8, 4, 16)  # 8 groups of 8 experts, 24 slots per node
    node_of_slot = torch.arange(96) // 24
    group_of_slot = phy2log // 8
    for layer in range(4):
        for group in range(8):
            assert node_of_slot[group_of_slot[layer] == group].unique().numel() == 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), num_layers=st.integers(1, 4))
def test_exact_mode_invariants_hold_for_any_weights(seed, num_layers):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randint(0, 50, (num_layers, 32), generator=generator).float()
    weight[:, torch.randint(0, 32, (3,), generator=generator)] = 0  # idle experts
    check_invariants(*rebalance_experts(weight, 48, 4, 2, 8), 32, 48)


def test_exact_mode_accepts_an_all_zero_layer():
    phy2log, log2phy, logcnt = rebalance_experts(torch.zeros((2, 16)), 24, 4, 2, 8)
    check_invariants(phy2log, log2phy, logcnt, 16, 24)


@pytest.mark.parametrize(
    "kwargs,argument",
    [
        ({"num_replicas": 8}, "num_replicas"),  # fewer slots than experts
        ({"num_groups": 6, "num_nodes": 2}, "num_groups"),  # hierarchical policy, 6 does not divide 16 experts
        ({"num_gpus": 6}, "num_gpus"),  # 6 GPUs on 4 nodes
        ({"num_replicas": 20, "num_gpus": 8}, "num_replicas"),  # exact mode needs a multiple of the GPU count
        ({"num_nodes": 0}, "num_nodes"),
        ({"mode": "fast"}, "mode"),
        ({"log2phy_layout": "padded"}, "log2phy_layout"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_argument(kwargs, argument):
    args = {"num_replicas": 24, "num_groups": 4, "num_nodes": 4, "num_gpus": 8, **kwargs}
    with pytest.raises(ValueError, match=argument):
        rebalance_experts(torch.ones((2, 16)), **args)


@pytest.mark.parametrize("bad_value", [-1.0, float("nan"), float("inf")])
def test_negative_or_non_finite_weight_raises_value_error(bad_value):
    weight = torch.ones((2, 16))
    weight[1, 3] = bad_value
    with pytest.raises(ValueError, match="weight"):
        rebalance_experts(weight, 24, 4, 2, 8)


def test_weight_must_be_two_dimensional():
    with pytest.raises(ValueError, match="weight"):
        rebalance_experts(torch.ones(16), 24, 4, 2, 8)


def test_previous_layout_is_refused_in_exact_mode():
    with pytest.raises(ValueError, match="previous"):
        rebalance_experts(torch.ones((1, 16)), 16, 4, 2, 8, previous=torch.arange(16).view(1, 16))
