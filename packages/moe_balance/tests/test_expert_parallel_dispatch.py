"""The dispatch layout without processes: what each rank sends is what its peers expect, row for row, so the
all-to-all needs no index beside the tokens; an expert with several slots splits its pairs evenly over them."""

from __future__ import annotations

import pytest
import torch

from moe_balance.expert_parallel.dispatch import dispatch_layout, log2phy_of, physical_slots
from moe_balance.placement import plan_replicas

RANKS, SLOTS_PER_RANK, SPARES = 4, 2, 2


def test_log2phy_lists_each_experts_slots_in_slot_order():
    log2phy, logcnt = log2phy_of(torch.tensor([0, 1, 0, 2, 1, 0]), 3)
    assert log2phy.tolist() == [[0, 2, 5], [1, 4, -1], [3, -1, -1]]
    assert logcnt.tolist() == [3, 2, 1]


def test_an_experts_pairs_go_round_robin_over_its_slots_from_an_offset_per_rank():
    log2phy, logcnt = log2phy_of(torch.tensor([0, 1, 0, 2]), 3)
    expert_ids = torch.tensor([0, 0, 1, 0, 2, 0, 0])
    assert physical_slots(expert_ids, log2phy, logcnt, 0).tolist() == [0, 2, 1, 0, 3, 2, 0]
    assert physical_slots(expert_ids, log2phy, logcnt, 1).tolist() == [2, 0, 1, 2, 3, 0, 2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_rank_receives_exactly_the_rows_its_peers_send_in_the_slots_they_meant(seed):
    generator = torch.Generator().manual_seed(seed)
    num_slots = RANKS * SLOTS_PER_RANK
    weight = torch.ones(num_slots)
    weight[:2] = 8.0  # rank 0's slots are hot
    physical = [torch.multinomial(weight, 40, replacement=True, generator=generator) for _rank in range(RANKS)]
    load = torch.stack([torch.bincount(p, minlength=num_slots) for p in physical])  # (ranks, R)
    plan = plan_replicas(load, spare_slots_per_rank=SPARES, ranks_per_node=2)
    layouts = [dispatch_layout(r, physical[r], load, plan, SLOTS_PER_RANK, SPARES) for r in range(RANKS)]
    compute_slots = SLOTS_PER_RANK + SPARES
    for source, sender in enumerate(layouts):
        starts = torch.tensor([0, *sender.send_counts]).cumsum(0)
        for target, receiver in enumerate(layouts):
            assert sender.send_counts[target] == receiver.recv_counts[source]
            sent = sender.send_slot[starts[target] : starts[target + 1]] - target * compute_slots
            begin = sum(receiver.recv_counts[:source])
            assert torch.equal(sent, receiver.recv_slot[begin : begin + receiver.recv_counts[source]])
    computed = torch.stack([layout.slot_rows.sum() for layout in layouts])
    assert torch.equal(computed, plan.rank_load_after)
