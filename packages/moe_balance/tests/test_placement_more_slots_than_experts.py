"""Replica counts when a node has more slots than experts: several added replicas per expert.

Oracle: ``tests/eplb_reference.py``, a loop port of deepseek-ai/EPLB ``eplb.py`` at commit
57919718be1fbe2baca80a42a7df4de7119aaa95 (``balanced_packing``, ``replicate_experts``,
``rebalance_experts_hierarchical``, and ``rebalance_experts``, whose global policy is the hierarchical one with one
group and one node). Its ``replicate_reference`` is DeepSeek's ``replicate_experts`` one row at a time: each added
replica goes to ``(weight / logcnt).max(dim=-1).indices``, the largest float32 load per replica, the lowest expert id
on ties. (``replicate_experts`` reads the same at commit ff2cba52e9950e7913ce5dad856ca61ebb7558ba.)

The loads here have no zeros: the tests that loaded idle experts let a capped fast path through.
"""

from __future__ import annotations

import pytest
import torch
from eplb_reference import rebalance_experts_reference, replicate_reference
from test_placement_eplb import check_invariants

from moe_balance.placement import rebalance_experts
from moe_balance.placement._packing import replicate_greedy


@pytest.mark.parametrize(
    ("weight", "num_replicas", "deepseek_logcnt"),
    [
        # DeepSeek's greedy on 2, 1 with 8 slots: per-replica loads 2 1 | 1 1 | .67 1 | .67 .5 | .5 .5 | .4 .5 -> 5, 3.
        ([[2.0, 1.0]], 8, [[5, 3]]),
        # Equal loads alternate, the lower id first: 4, 3 (the capped fast path raised here).
        ([[1.0, 1.0]], 7, [[4, 3]]),
    ],
)
def test_exact_mode_gives_deepseeks_counts_when_slots_outnumber_experts(weight, num_replicas, deepseek_logcnt):
    phy2log, log2phy, logcnt = rebalance_experts(torch.tensor(weight), num_replicas, 1, 1, 1)
    assert logcnt.tolist() == deepseek_logcnt
    reference = rebalance_experts_reference(torch.tensor(weight), num_replicas, 1, 1, 1)
    for got, want in zip((phy2log, log2phy, logcnt), reference, strict=True):
        assert torch.equal(got, want)


# (experts, groups, nodes, gpus, replicas), every one with more slots than experts per node.
SHAPES = [
    (8, 1, 1, 16, 32),  # 8 experts on 16 GPUs x 2 slots
    (2, 1, 1, 1, 8),
    (5, 1, 1, 5, 25),
    (4, 2, 2, 4, 16),  # hierarchical: 2 experts and 8 slots per node
    (8, 4, 2, 8, 24),
    (12, 4, 2, 8, 32),
    (16, 4, 4, 8, 48),
    (16, 8, 8, 16, 64),  # one group of 2 experts and 8 slots per node
    (32, 8, 4, 16, 96),
    (6, 3, 2, 4, 16),  # groups do not divide over the nodes: global policy
]
CASES_PER_SHAPE = 30  # 300 cases in all


def loads_without_zeros(seed: int, num_layers: int, num_experts: int) -> torch.Tensor:
    """Even seeds: integer loads in 500..1500 (equal loads and ties happen); odd seeds: lognormal x 1000."""
    generator = torch.Generator().manual_seed(seed)
    if seed % 2 == 0:
        return torch.randint(500, 1501, (num_layers, num_experts), generator=generator).float()
    return torch.exp(torch.randn((num_layers, num_experts), generator=generator)) * 1000


def test_exact_mode_equals_the_loop_reference_on_300_cases_with_more_slots_than_experts():
    differing = []  # (shape, case) pairs whose phy2log, log2phy or logcnt differ from the reference's
    for num_experts, num_groups, num_nodes, num_gpus, num_replicas in SHAPES:
        for case in range(CASES_PER_SHAPE):
            weight = loads_without_zeros(1000 * num_experts + case, 1 + case % 3, num_experts)
            fast = rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus)
            slow = rebalance_experts_reference(weight, num_replicas, num_groups, num_nodes, num_gpus)
            if not all(torch.equal(got, want) for got, want in zip(fast, slow, strict=True)):
                differing.append(((num_experts, num_groups, num_nodes, num_gpus, num_replicas), case))
            check_invariants(*fast, num_experts, num_replicas)
    total = len(SHAPES) * CASES_PER_SHAPE
    assert differing == [], f"{len(differing)} of {total} cases differ from the loop reference, first {differing[:3]}"


@pytest.mark.parametrize(("experts", "slots"), [(2, 8), (3, 30), (8, 32), (16, 100)])
def test_replication_picks_like_the_loop_when_slots_outnumber_experts(experts, slots):
    """Every pick in order (expert and replica number), not only the counts."""
    weight = loads_without_zeros(experts * slots, 6, experts)
    slot_expert, slot_rank, count = replicate_greedy(weight, slots)
    for row in range(weight.shape[0]):
        want_expert, want_rank, want_count = replicate_reference(weight[row], slots)
        assert (slot_expert[row].tolist(), slot_rank[row].tolist(), count[row].tolist()) == (
            want_expert,
            want_rank,
            want_count,
        )


@pytest.mark.parametrize(("ulps", "slots"), [([8, 5, 2, 3], 20), ([7, 4], 29)])
def test_replication_stays_exact_where_loads_per_replica_underflow(ulps, slots):
    """Loads a few subnormal steps above zero: w / r rounds far off, past the depth bound, so candidates are rebuilt."""
    smallest_subnormal = torch.tensor(1, dtype=torch.int32).view(torch.float32)
    weight = torch.tensor([ulps], dtype=torch.float32) * smallest_subnormal
    slot_expert, slot_rank, count = replicate_greedy(weight, slots)
    want_expert, want_rank, want_count = replicate_reference(weight[0], slots)
    assert (slot_expert[0].tolist(), slot_rank[0].tolist(), count[0].tolist()) == (want_expert, want_rank, want_count)


def capped_replication_counts(expert_loads: torch.Tensor, num_slots: int, max_count: int) -> list[int]:
    """DeepSeek's greedy where an expert that holds max_count replicas takes no more (improved mode's rule)."""
    count = torch.ones(expert_loads.shape[0], dtype=torch.int64)
    for _slot in range(expert_loads.shape[0], num_slots):
        per_replica = torch.where(count < max_count, expert_loads / count, -1.0)
        count[int(per_replica.max(dim=-1).indices)] += 1
    return count.tolist()


def test_improved_mode_counts_replicas_like_the_capped_greedy():
    """Improved mode caps an expert at one replica per GPU; below the cap it counts as DeepSeek does."""
    _phy2log, _log2phy, logcnt = rebalance_experts(torch.tensor([[2.0, 1.0]]), 8, 1, 1, 8, mode="improved")
    assert logcnt.tolist() == [[5, 3]]
    weight = loads_without_zeros(7, 4, 8)
    # at most 8 replicas of an expert
    _phy2log, _log2phy, logcnt = rebalance_experts(weight, 32, 1, 1, 8, mode="improved")
    assert logcnt.tolist() == [capped_replication_counts(row, 32, 8) for row in weight]
