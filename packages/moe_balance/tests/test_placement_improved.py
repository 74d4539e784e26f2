"""Improved placement: no duplicate per GPU, load-proportional node budgets, ragged slots, movement-aware replans."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_placement_eplb import check_invariants

from moe_balance.placement import gpu_slot_counts, plan_rebalance, rebalance_experts


def gpu_of_slot(num_replicas: int, num_gpus: int, num_nodes: int) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(num_gpus), gpu_slot_counts(num_replicas, num_gpus, num_nodes))


def duplicates_per_layer(phy2log: torch.Tensor, slot_gpu: torch.Tensor) -> torch.Tensor:
    """(layers,) number of (GPU, expert) pairs holding more than one replica."""
    pairs = slot_gpu.unsqueeze(0) * (int(phy2log.max()) + 1) + phy2log
    return torch.tensor([int((row.bincount() > 1).sum()) for row in pairs])


def max_over_mean(phy2log: torch.Tensor, weight: torch.Tensor, slot_gpu: torch.Tensor) -> torch.Tensor:
    count = torch.zeros_like(weight).scatter_add_(1, phy2log, torch.ones_like(phy2log, dtype=weight.dtype))
    gpu_load = torch.zeros((weight.shape[0], int(slot_gpu.max()) + 1), dtype=weight.dtype)
    gpu_load.index_add_(1, slot_gpu, (weight / count).gather(1, phy2log))
    return gpu_load.max(dim=1).values / gpu_load.mean(dim=1)


def lognormal(num_layers: int, num_experts: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.exp(torch.randn((num_layers, num_experts), generator=generator, dtype=torch.float64)).float() * 1000


# (experts, groups, nodes, gpus, replicas), including replica counts that are not a multiple of the GPU count.
LAYOUTS = [
    (12, 4, 2, 8, 16),
    (16, 4, 4, 8, 24),
    (16, 8, 8, 8, 20),
    (16, 4, 3, 6, 23),
    (24, 6, 2, 4, 24),
    (8, 2, 2, 8, 12),
    (32, 8, 4, 16, 50),
    (6, 3, 1, 4, 17),
]


@settings(max_examples=30, deadline=None)
@given(layout=st.sampled_from(LAYOUTS), num_layers=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_improved_mode_invariants_hold_and_no_gpu_holds_an_expert_twice(layout, num_layers, seed):
    num_experts, num_groups, num_nodes, num_gpus, num_replicas = layout
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randint(0, 100, (num_layers, num_experts), generator=generator).float()
    plan = plan_rebalance(weight, num_replicas, num_groups, num_nodes, num_gpus)
    check_invariants(plan.phy2log, plan.log2phy, plan.logcnt, num_experts, num_replicas)
    assert int(duplicates_per_layer(plan.phy2log, gpu_of_slot(num_replicas, num_gpus, num_nodes)).sum()) == 0
    assert int(plan.gpu_slot_counts.sum()) == num_replicas
    assert int(plan.gpu_slot_counts.max() - plan.gpu_slot_counts.min()) <= 1


def test_exact_mode_duplicates_replicas_on_a_gpu_in_most_random_trials_and_improved_never_does():
    weight = lognormal(32, 64, seed=7)  # 32 independent trials of one layer each
    slot_gpu = gpu_of_slot(96, 16, 4)
    exact, _log2phy, _logcnt = rebalance_experts(weight, 96, 8, 4, 16)
    improved, _log2phy, _logcnt = rebalance_experts(weight, 96, 8, 4, 16, mode="improved")
    assert float((duplicates_per_layer(exact, slot_gpu) > 0).float().mean()) > 0.5
    assert int(duplicates_per_layer(improved, slot_gpu).sum()) == 0


def test_improved_mode_balances_the_groups_equal_nodes_layout():
    # DeepSeek-V3 layout: 256 experts in 8 groups on 8 nodes x 8 GPUs, 320 slots. Equal node budgets leave the
    # node holding the heaviest group overloaded; load-proportional budgets do not.
    weight = lognormal(8, 256, seed=3)
    slot_gpu = gpu_of_slot(320, 64, 8)
    exact, _log2phy, _logcnt = rebalance_experts(weight, 320, 8, 8, 64)
    plan = plan_rebalance(weight, 320, 8, 8, 64)
    assert float(max_over_mean(exact, weight, slot_gpu).mean()) > 1.2
    assert float(max_over_mean(plan.phy2log, weight, slot_gpu).max()) <= 1.05
    assert torch.allclose(plan.max_over_mean, max_over_mean(plan.phy2log, weight.double(), slot_gpu))
    assert plan.cross_node_load_share is not None and 0.0 < plan.cross_node_load_share < 0.5


def test_ragged_slot_counts_spread_the_extra_slots_across_nodes():
    counts = gpu_slot_counts(num_replicas=20, num_gpus=8, num_nodes=2)
    assert counts.tolist() == [3, 3, 2, 2, 3, 3, 2, 2]
    plan = plan_rebalance(lognormal(2, 16, seed=1), 20, 4, 2, 8)
    assert torch.equal(plan.gpu_slot_counts, counts)


def test_replanning_with_the_same_loads_moves_nothing():
    weight = lognormal(4, 64, seed=5)
    first = plan_rebalance(weight, 96, 8, 4, 16)
    again = plan_rebalance(weight, 96, 8, 4, 16, previous=first.phy2log, expert_size_bytes=1000)
    assert torch.equal(again.phy2log, first.phy2log)
    assert bool(again.layers_kept.all())
    assert int(again.moved_slots.sum()) == 0
    assert again.bytes_moved == 0


def test_replanning_after_a_load_shift_moves_fewer_experts_than_planning_from_scratch():
    weight = lognormal(6, 64, seed=11)
    first = plan_rebalance(weight, 96, 8, 4, 16)
    shifted = weight * torch.exp(0.3 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(12)))
    scratch = plan_rebalance(shifted, 96, 8, 4, 16)
    aware = plan_rebalance(shifted, 96, 8, 4, 16, previous=first.phy2log, min_gain=0.0, expert_size_bytes=4096)
    assert int(aware.moved_slots.sum()) < int((scratch.phy2log != first.phy2log).sum())
    assert aware.bytes_moved == int(aware.moved_slots.sum()) * 4096
    assert aware.previous_max_over_mean is not None
    assert float(aware.max_over_mean.max()) <= float(aware.previous_max_over_mean.max())
    check_invariants(aware.phy2log, aware.log2phy, aware.logcnt, 64, 96)


def test_layers_whose_gain_is_under_the_threshold_keep_their_layout():
    weight = lognormal(4, 64, seed=2)
    first = plan_rebalance(weight, 96, 8, 4, 16)
    nudged = weight * 1.001
    nudged[0] = lognormal(1, 64, seed=99)[0]  # only layer 0 changes a lot
    plan = plan_rebalance(nudged, 96, 8, 4, 16, previous=first.phy2log, min_gain=0.05)
    assert plan.layers_kept.tolist() == [False, True, True, True]
    assert torch.equal(plan.phy2log[1:], first.phy2log[1:])
    assert int(plan.moved_slots[1:].sum()) == 0


def test_a_previous_layout_with_duplicates_is_always_replaced():
    weight = lognormal(4, 64, seed=8)
    exact, _log2phy, _logcnt = rebalance_experts(weight, 96, 8, 4, 16)
    plan = plan_rebalance(weight, 96, 8, 4, 16, previous=exact, min_gain=10.0)
    layers_with_duplicates = duplicates_per_layer(exact, gpu_of_slot(96, 16, 4)) > 0
    assert not bool((plan.layers_kept & layers_with_duplicates).any())
    assert int(duplicates_per_layer(plan.phy2log, gpu_of_slot(96, 16, 4))[layers_with_duplicates].sum()) == 0


@pytest.mark.parametrize(
    "previous,message",
    [
        (torch.zeros((2, 24), dtype=torch.int64), "misses some experts"),
        (torch.arange(24).view(1, 24) % 16, "shape"),
        (torch.full((2, 24), 16), "ids must lie"),
        (torch.zeros((2, 24)), "integer"),
    ],
)
def test_bad_previous_layout_raises_value_error(previous, message):
    with pytest.raises(ValueError, match=message):
        plan_rebalance(torch.ones((2, 16)), 24, 4, 2, 8, previous=previous)


def test_more_replicas_than_distinct_gpus_allow_raises_value_error():
    with pytest.raises(ValueError, match="num_replicas"):
        rebalance_experts(torch.ones((1, 4)), 20, 1, 1, 4, mode="improved")


def test_a_replica_whose_only_free_gpus_hold_its_expert_is_placed_by_a_swap(monkeypatch):
    # 4 experts, 9 slots on 4 GPUs (3, 2, 2, 2): the last round fills GPU 0 alone, which already holds that
    # round's replica (expert 0), and no neighbour in the round can trade.
    import moe_balance.placement.rebalance_plan as improved

    calls = []
    original = improved._GpuState.repair

    def counted_repair(self: improved._GpuState, *args: Any) -> Any:
        calls.append(args)
        return original(self, *args)

    monkeypatch.setattr(improved._GpuState, "repair", counted_repair)
    weight = torch.tensor([[5.0, 11.0, 11.0, 4.0]])
    plan = plan_rebalance(weight, 9, 1, 1, 4)
    assert calls, "the swap path was not exercised"
    check_invariants(plan.phy2log, plan.log2phy, plan.logcnt, 4, 9)
    assert int(duplicates_per_layer(plan.phy2log, gpu_of_slot(9, 4, 1)).sum()) == 0
