"""The vectorised packing and replication blocks against the one-row-at-a-time loops of ``eplb_reference``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from eplb_reference import greedy_pack_reference, replicate_reference

from moe_balance.placement._packing import greedy_pack, pack_of_items, replicate_greedy


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
        pack, _rank_in_pack = greedy_pack_reference(weight[row], packs)
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
    _slot_expert, _slot_rank, count = replicate_greedy(weight, 10, max_count=3)
    assert count.tolist() == [[3, 3, 2, 2]]


def test_replicate_handles_negative_zero_like_zero():
    weight = torch.tensor([[-0.0, 5.0, 0.0]])
    assert replicate_greedy(weight, 6)[2].tolist() == [[1, 4, 1]]


def sequential_pack(item_loads: torch.Tensor, num_packs: int) -> torch.Tensor:
    """One item per step, every row at once: the greedy as published (heaviest item first to the lightest pack with
    room, first pack on equal weight), float32 sums. Returns item_at_slot like greedy_pack."""
    num_rows, num_items = item_loads.shape
    items_per_pack = num_items // num_packs
    order = item_loads.sort(dim=-1, descending=True).indices  # the same call, so equal loads come in the same order
    loads = item_loads.gather(-1, order).numpy()
    weight = np.zeros((num_rows, num_packs), dtype=np.float32)
    count = np.zeros((num_rows, num_packs), dtype=np.int64)
    item_at_slot = np.empty((num_rows, num_items), dtype=np.int64)
    rows = np.arange(num_rows)
    for position in range(num_items):
        pack = np.where(count < items_per_pack, weight, np.inf).argmin(axis=1)
        item_at_slot[rows, pack * items_per_pack + count[rows, pack]] = order[:, position].numpy()
        weight[rows, pack] += loads[:, position]
        count[rows, pack] += 1
    return torch.from_numpy(item_at_slot)


def random_rows(generator: torch.Generator, num_rows: int, num_items: int, kind: str) -> torch.Tensor:
    if kind == "lognormal":
        return (torch.exp(torch.randn((num_rows, num_items), generator=generator)) * 1000).float()
    if kind == "small integers":  # ties everywhere, zeros included
        return torch.randint(0, 4, (num_rows, num_items), generator=generator).float()
    if kind == "replicas":  # equal loads in runs, as replicas of one expert carry
        runs = torch.exp(torch.randn((num_rows, (num_items + 1) // 2), generator=generator)).float()
        return runs.repeat_interleave(2, dim=1)[:, torch.randperm(num_items, generator=generator)]
    if kind == "zero tail":  # idle experts: a run of zeros (and -0.0) at the end of the order
        loads = torch.rand((num_rows, num_items), generator=generator)
        loads[torch.rand((num_rows, num_items), generator=generator) < 0.4] = 0.0
        loads[:, 0] = -0.0
        return loads
    if kind == "absorbed":  # items too small to change a heavy pack's float32 sum
        loads = torch.rand((num_rows, num_items), generator=generator) * 1e-6
        loads[:, : num_items // 4] = 1e4
        return loads
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["lognormal", "small integers", "replicas", "zero tail", "absorbed"])
def test_greedy_pack_equals_the_sequential_greedy_on_random_rows(kind):
    generator = torch.Generator().manual_seed(len(kind))
    for trial in range(40):
        num_packs = int(torch.randint(2, 17, (), generator=generator))
        items_per_pack = int(torch.randint(2, 8, (), generator=generator))
        weight = random_rows(generator, 24, num_packs * items_per_pack, kind)
        weight[trial % 24] = 0.0  # an all-zero row
        assert torch.equal(greedy_pack(weight, num_packs), sequential_pack(weight, num_packs)), (kind, trial)


def test_sequential_pack_is_the_published_loop():
    weight = loads(7, (3, 24), tied=True)
    item_at_slot = sequential_pack(weight, 4)
    for row in range(weight.shape[0]):
        pack, rank = greedy_pack_reference(weight[row], 4)
        assert torch.equal(item_at_slot[row, pack * 6 + rank], torch.arange(24))


def test_greedy_pack_equals_the_sequential_greedy_at_production_width():
    weight = random_rows(torch.Generator().manual_seed(3), 58, 320, "replicas")
    assert torch.equal(greedy_pack(weight, 64), sequential_pack(weight, 64))
