"""Vectorised building blocks of the EPLB planner: greedy packing and greedy replication, batched over rows.

Packing does every row (layer, or layer x node) at once with numpy operations, and each step places as many items
of a row as provably go, one per pack, to the lightest packs in order (a whole round of packs on real loads), so the
Python loop runs about ``items / packs`` times instead of ``rows x items x packs`` times. Replication needs no loop: its
greedy picks are a merge of sorted lists, so one top-k over the candidates gives them all, in order (taken again,
deeper, in the rare case where the candidates built were too few). The decisions are the same as the one-row-at-a-time
reference in the tests' ``eplb_reference.py``, tie for tie:

- items are visited in the order of ``torch.sort(descending=True)`` applied to the very same (rows, items) float32
  tensor the reference sorts;
- the lightest pack with room wins, the first one on equal weight (packs compare as one int64 key: weight bits,
  then pack index);
- pack weights are float32 sums accumulated in the same order;
- a replica goes to the expert with the largest float32 load per replica, the first one on ties. Candidates are
  compared as one int64 key: a non-negative float32's bits order like the float, so the value's bits sit above the
  expert id (and the replica number) in the key.
"""

from __future__ import annotations

import numpy as np
import torch

INDEX_BITS = 20  # indices below 2**20 ride in the low bits of a comparison key
MAX_INDEX = 2**INDEX_BITS - 1


def greedy_pack(item_loads: torch.Tensor, num_packs: int) -> torch.Tensor:
    """Equal-count greedy packing of every row.

    item_loads: (rows, items) float32, items divisible by num_packs. Returns item_at_slot (rows, items) int64: pack p
    receives the items at slots p * (items / num_packs) ... (p + 1) * (items / num_packs) - 1, in arrival order.
    """
    num_rows, num_items = item_loads.shape
    items_per_pack = num_items // num_packs
    if items_per_pack == 1:
        # One item per pack: items keep their order (the published algorithm's shortcut).
        return torch.arange(num_items, dtype=torch.int64).expand(num_rows, num_items).clone()
    order = item_loads.sort(dim=-1, descending=True).indices  # (rows, items), heaviest first
    sorted_loads = item_loads.gather(-1, order).numpy()  # (rows, items) float32
    slot_of_position = _greedy_slots(sorted_loads, num_packs)  # (rows, items)
    item_at_slot = np.empty_like(slot_of_position)
    np.put_along_axis(item_at_slot, slot_of_position, order.numpy(), axis=1)
    return torch.from_numpy(item_at_slot)


def _ordered_bits(values: np.ndarray, signed: bool) -> np.ndarray:
    """float32 -> int32 ordered like the floats (an involution: it also maps the ints back to the float bits).

    signed=False: the values are +0.0 or above, whose bits already order like them.
    """
    bits = values.view(np.int32)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF) if signed else bits


PACK_SHIFT = 12  # a pack state key: (ordered weight bits << 32) | (pack << 12) | items in the pack
LOW_MASK = 2**32 - 1
COUNT_MASK = 2**PACK_SHIFT - 1
FULL_BITS = 2**31 - 1  # above the bits of every float32, +inf included: a full pack sorts last


def _greedy_slots(sorted_loads: np.ndarray, num_packs: int) -> np.ndarray:
    """The slot (pack * items_per_pack + arrival rank) of every item of every row, items heaviest first.

    sorted_loads: (rows, items) float32, each row in descending order. The greedy gives each item, in turn, to the
    lightest pack with room (the lowest index on equal weight). Rather than one item per step, a step hands the next m
    items to the m lightest open packs, lightest first, as far as that is provably what the one-at-a-time greedy does:
    item k (k < m) goes to the k-th lightest pack when every pack updated before it is still heavier (or as heavy with
    a higher index) than that pack. m is found per row, so a step is exact for every row; on real loads a step covers
    the whole round of packs (5 steps for 320 items on 64 packs). Items of weight 0 at the end of a row add nothing:
    the lightest open pack takes them until it is full, then the next one, which is placed in one go.
    """
    num_rows, num_items = sorted_loads.shape
    if num_packs >= 2**20 or num_items >= 2**PACK_SHIFT * num_packs:
        raise ValueError(f"{num_items} items on {num_packs} packs exceed the packing keys: pack fewer items per call")
    items_per_pack = num_items // num_packs
    signed = bool((sorted_loads[:, -1] < 0).any())  # else pack weights are sums from +0.0 of loads >= -0.0: >= +0.0
    zero = sorted_loads == 0
    row_end = num_items - np.where(zero[:, -1], zero.sum(axis=1), 0)  # (rows,) where the zero tail starts
    width = num_items + num_packs  # a step reads and writes up to num_packs positions past its start
    padded_loads = np.zeros((num_rows, width), dtype=np.float32)
    padded_loads[:, :num_items] = sorted_loads
    slot = np.empty((num_rows, width), dtype=np.int64)
    load_flat, slot_flat = padded_loads.reshape(-1), slot.reshape(-1)
    packs = np.arange(num_packs)
    # State of every pack, as one int64 key per pack that orders packs like the greedy compares them (weight, then
    # index) and carries the pack's item count in its lowest bits. The keys of a row are kept in any order.
    state = np.broadcast_to(packs << PACK_SHIFT, (num_rows, num_packs)).copy()  # weight 0.0, no items
    rows = np.flatnonzero(row_end > 0)
    keys, position, end = state[rows], np.zeros(rows.size, dtype=np.int64), row_end[rows]
    open_packs = np.full(rows.size, num_packs)
    while rows.size:
        keys.sort(axis=1)  # (rows, packs) lightest first, lowest index on ties; full packs last
        pack = (keys >> PACK_SHIFT) & (2**20 - 1)
        count = keys & COUNT_MASK
        pack_weight = _ordered_bits((keys >> 32).astype(np.int32), signed).view(np.float32)
        at = (rows * width + position)[:, None] + packs  # (rows, packs) flat positions of the next items
        updated = pack_weight + load_flat[at]  # float32, as the one-at-a-time sum
        full = count == items_per_pack - 1
        updated_bits = _ordered_bits(updated, signed).astype(np.int64)
        np.putmask(updated_bits, full, FULL_BITS)
        updated_keys = (updated_bits << 32) | ((keys & LOW_MASK) + 1)
        # Item k follows when every pack updated before it stays above pack k (and pack k is open, item k exists).
        follows = np.zeros(keys.shape, dtype=bool)  # the last column stays False: a step ends there at the latest
        np.greater(np.minimum.accumulate(updated_keys[:, :-1], axis=1), keys[:, 1:], out=follows[:, :-1])
        follows[:, :-1] &= packs[1:] < np.minimum(open_packs, end - position)[:, None]
        step = follows.argmin(axis=1) + 1  # (rows,) items placed this step: up to the first that does not follow
        taken = packs < step[:, None]
        slot_flat[at] = pack * items_per_pack + count  # positions past the step are rewritten by later steps
        keys = np.where(taken, updated_keys, keys)
        open_packs -= (taken & full).sum(axis=1)
        position += step
        going = position < end
        if not going.all():
            state[rows[~going]] = keys[~going]
            rows, keys, position, end, open_packs = (a[going] for a in (rows, keys, position, end, open_packs))
    tail = row_end < num_items
    if tail.any():  # the zero tail: each open pack, lightest first, fills up in turn
        keys = np.sort(state[tail], axis=1)
        room = (items_per_pack - (keys & COUNT_MASK)).reshape(-1)
        first_slot = ((keys >> PACK_SHIFT) & (2**20 - 1)) * items_per_pack + (keys & COUNT_MASK)
        run_start = np.cumsum(room) - room
        tail_slots = np.repeat(first_slot.reshape(-1) - run_start, room) + np.arange(int(room.sum()))
        slot[:, :num_items][np.arange(num_items) >= row_end[:, None]] = tail_slots
    return slot[:, :num_items]


def pack_of_items(item_at_slot: torch.Tensor, num_packs: int) -> torch.Tensor:
    """Invert greedy_pack's result into the pack of each item. item_at_slot: (rows, items) -> (rows, items) int64."""
    items_per_pack = item_at_slot.shape[-1] // num_packs
    return invert_permutation(item_at_slot) // items_per_pack


RANK_BITS = 12  # replica numbers below 2**12 ride in the lowest bits of a replication key


def replicate_greedy(
    expert_loads: torch.Tensor, num_slots: int, max_count: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Add replicas one at a time to the expert with the largest load per replica, for every row.

    expert_loads: (rows, experts) float32 >= 0. Returns slot_expert (rows, slots), slot_rank (rows, slots) and count
    (rows, experts), all int64; slots 0..experts-1 hold each expert once in id order. With max_count, an expert that
    already has max_count replicas gets no more (used to keep replicas on distinct GPUs).

    NOTE: the greedy loop is a merge of sorted lists: expert e's r-th added replica is picked at load per replica
    w_e / r (float32, non-increasing in r), so the picks are the M = ``num_slots - experts`` largest candidates
    (w_e / r, lowest e first, lowest r first), in that order. Only the first ``depth`` candidates of each expert are
    built (``_replica_depth``); when an expert gets all of them, its next one might have been picked too, so the
    candidates are rebuilt twice as deep. The answer is the loop's whatever the bound says: it only sets the cost.
    """
    num_rows, num_experts = expert_loads.shape
    if num_experts > MAX_INDEX:
        raise ValueError(f"{num_experts} experts exceed {MAX_INDEX}: replicate fewer experts per call")
    if expert_loads.dtype != torch.float32:
        raise ValueError(f"expert_loads has dtype {expert_loads.dtype}: pass float32 loads (the reference's dtype)")
    num_added = num_slots - num_experts
    slot_expert = np.empty((num_rows, num_slots), dtype=np.int64)
    slot_rank = np.zeros((num_rows, num_slots), dtype=np.int64)
    slot_expert[:, :num_experts] = np.arange(num_experts)
    count = np.ones((num_rows, num_experts), dtype=np.int64)
    if num_added == 0:
        return torch.from_numpy(slot_expert), torch.from_numpy(slot_rank), torch.from_numpy(count)
    # NOTE: numpy, not torch: on arrays this small a numpy call costs a fraction of a torch call. Keys are unique, so
    # a partition then a sort of the top keys gives exactly the order of a top-k.
    loads = expert_loads.detach().numpy() + np.float32(0.0)  # turns -0.0 (sign bit set) into +0.0, equal to it
    # Only the M experts with the largest loads can receive a replica: their M first replicas beat every other.
    width = min(num_added, num_experts)
    expert_key = (loads.view(np.int32).astype(np.int64) << INDEX_BITS) | (MAX_INDEX - np.arange(num_experts))
    top_keys = _largest_sorted(expert_key, width)  # (rows, width), largest load first, lowest id on ties
    candidates = MAX_INDEX - (top_keys & MAX_INDEX)  # (rows, width) expert ids
    top_loads = np.take_along_axis(loads, candidates, axis=1)  # (rows, width) float32
    most_added = num_added if max_count is None else min(num_added, max_count - 1)  # added replicas per expert
    if most_added * width < num_added:
        raise RuntimeError(f"every expert already has max_count={max_count} replicas: lower num_slots")
    enough = -(-num_added // width)  # candidates per expert for num_added of them in all
    depth = min(most_added, max(_replica_depth(loads, top_loads, num_slots), enough))
    while True:
        picked = _top_candidates(top_loads, candidates, depth, num_added)  # (rows, added), in pick order
        picked_expert = MAX_INDEX - ((picked >> RANK_BITS) & MAX_INDEX)
        flat_expert = (picked_expert + (np.arange(num_rows) * num_experts)[:, None]).reshape(-1)
        added = np.bincount(flat_expert, minlength=num_rows * num_experts).reshape(num_rows, num_experts)
        if depth == most_added or not (added == depth).any():
            break
        depth = min(most_added, 2 * depth)
    slot_expert[:, num_experts:] = picked_expert
    slot_rank[:, num_experts:] = 2**RANK_BITS - 1 - (picked & (2**RANK_BITS - 1))
    count += added
    return torch.from_numpy(slot_expert), torch.from_numpy(slot_rank), torch.from_numpy(count)


def _replica_depth(loads: np.ndarray, top_loads: np.ndarray, num_slots: int) -> int:
    """How many added replicas one expert can receive, at most, in any row (a bound; rounding is left to the caller).

    loads: (rows, experts) float32 >= 0; top_loads: (rows, width) the width largest, descending. Let t be the load
    per replica of the last of the M picks. When M <= experts (width == M) the first replicas of the top M experts
    are all picked, so t >= w_M and expert e receives at most w_e / w_M: the tight bound on real loads (slots a
    little above experts). Otherwise every candidate above t is picked, and expert e has about w_e / t - 1 of them,
    so the M picks give t >= W / slots (W: the row's total load) and expert e receives at most w_e * slots / W.
    """
    w_max = top_loads[:, 0].astype(np.float64)  # (rows,)
    w_last = top_loads[:, -1].astype(np.float64)  # (rows,) float32 loads: w_max / w_last is finite in float64
    if top_loads.shape[1] == num_slots - loads.shape[1] and bool((w_last > 0).all()):  # M <= experts, no zero w_M
        return int(np.ceil(w_max / w_last).max()) + 1
    total = loads.sum(axis=1, dtype=np.float64)  # (rows,)
    if not bool((total > 0).all()):
        return 2**RANK_BITS  # a row of zeros: the first expert takes every replica
    return int(np.ceil(w_max * num_slots / total).max()) + 1


def _top_candidates(top_loads: np.ndarray, candidates: np.ndarray, depth: int, num_added: int) -> np.ndarray:
    """Keys of the num_added largest candidates (w_e / r for r <= depth) of every row, in pick order.

    top_loads, candidates: (rows, width) float32 loads and int64 expert ids. A key orders candidates like the loop:
    larger load per replica first, then lower expert id, then lower replica number; it carries the id and the rank.
    Returns (rows, num_added) int64.
    """
    if depth >= 2**RANK_BITS:
        raise ValueError(f"{depth} added replicas of one expert exceed {2**RANK_BITS - 1}: replicate in smaller steps")
    num_rows = top_loads.shape[0]
    rank = np.arange(1, depth + 1, dtype=np.float32)  # (depth,) replica number of each candidate
    per_replica = top_loads[:, :, None] / rank  # (rows, width, depth) float32, as the reference divides
    key = per_replica.view(np.int32).astype(np.int64) << (INDEX_BITS + RANK_BITS)
    key |= ((MAX_INDEX - candidates) << RANK_BITS)[:, :, None]
    key |= 2**RANK_BITS - 1 - np.arange(1, depth + 1)  # larger load per replica first, then lower id, lower rank
    return _largest_sorted(key.reshape(num_rows, -1), num_added)


def _largest_sorted(keys: np.ndarray, k: int) -> np.ndarray:
    """The k largest keys of every row, largest first. keys: (rows, n) int64, unique within a row -> (rows, k)."""
    n = keys.shape[1]
    if k < n:
        keys = np.partition(keys, n - k, axis=1)[:, n - k :]
    return np.sort(keys, axis=1)[:, ::-1]


def invert_permutation(permutation: torch.Tensor) -> torch.Tensor:
    """Row-wise inverse of a permutation. permutation: (rows, n) int64 -> (rows, n) int64."""
    positions = torch.arange(permutation.shape[-1], dtype=torch.int64).expand_as(permutation)
    return torch.empty_like(permutation).scatter_(-1, permutation, positions)


def build_log2phy(phy2log: torch.Tensor, phy_rank: torch.Tensor, num_experts: int, max_count: int) -> torch.Tensor:
    """log2phy[l, e, k] = the physical slot holding replica k of expert e, -1 past its count.

    phy2log, phy_rank: (layers, replicas) int64. Returns (layers, experts, max_count) int64.
    """
    num_layers, num_replicas = phy2log.shape
    log2phy = torch.full((num_layers, num_experts * max_count), -1, dtype=torch.int64)
    slots = torch.arange(num_replicas, dtype=torch.int64).expand(num_layers, num_replicas)
    log2phy.scatter_(-1, phy2log * max_count + phy_rank, slots)
    return log2phy.view(num_layers, num_experts, max_count)


def occurrence_ranks(values: torch.Tensor) -> torch.Tensor:
    """rank[l, s] = how many earlier entries of row l hold the same value. values: (rows, n) int64 -> (rows, n)."""
    num_layers, num_replicas = values.shape
    order = torch.from_numpy(np.argsort(values.numpy(), axis=1, kind="stable"))  # equal values keep their order
    sorted_experts = values.gather(1, order)
    position = torch.arange(num_replicas).expand(num_layers, num_replicas)
    run_start = torch.ones_like(sorted_experts, dtype=torch.bool)
    run_start[:, 1:] = sorted_experts[:, 1:] != sorted_experts[:, :-1]
    first = torch.where(run_start, position, 0).cummax(dim=1).values
    return torch.empty_like(values).scatter_(1, order, position - first)
