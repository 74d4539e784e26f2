"""The vectorised packing and replication blocks against the one-row-at-a-time loops of ``eplb_reference``."""

from __future__ import annotations

import pytest
import torch

from moe_balance.placement._packing import greedy_pack, pack_of_items, replicate_greedy
from moe_balance.placement.eplb_reference import greedy_pack_reference, replicate_reference


def loads(seed: int, shape: tuple[int, int], tied: bool) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if tied:  # few distinct values, zeros included: ties everywhere
        return torch.randint(0, 4, shape, generator=generator).float()
    return (torch.exp(torch.randn(shape, generator=generator)) * 1000).float()


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize(("items", "packs"), [(12, 4), (40, 8), (320, 64)])
def test_greedy_pack_decides_like_the_loop(items, packs, tied):
    weight = loads(items + packs, (5, items), tied)
    fast = pack_of_items(greedy_pack(weight, packs), packs)
    for row in range(weight.shape[0]):
        pack, _ = greedy_pack_reference(weight[row], packs)
        assert torch.equal(fast[row], pack)


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize(("experts", "slots"), [(4, 9), (32, 40), (256, 320), (8, 40)])
def test_replicate_picks_like_the_loop(experts, slots, tied):
    weight = loads(experts * slots, (4, experts), tied)
    slot_expert, slot_rank, count = replicate_greedy(weight, slots)
    for row in range(weight.shape[0]):
        want_expert, want_rank, want_count = replicate_reference(weight[row], slots)
        assert slot_expert[row].tolist() == want_expert
        assert slot_rank[row].tolist() == want_rank
        assert count[row].tolist() == want_count


def test_replicate_respects_max_count():
    weight = torch.tensor([[1000.0, 1.0, 1.0, 1.0]])
    _, _, count = replicate_greedy(weight, 10, max_count=3)
    assert count.tolist() == [[3, 3, 2, 2]]


def test_replicate_handles_negative_zero_like_zero():
    weight = torch.tensor([[-0.0, 5.0, 0.0]])
    assert replicate_greedy(weight, 6)[2].tolist() == [[1, 4, 1]]
