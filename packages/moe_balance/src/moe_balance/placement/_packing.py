"""Vectorised building blocks of the EPLB planner: greedy packing and greedy replication, batched over rows.

Each function runs its greedy loop over items (or added replicas) and does every row (layer, or layer x node) at once
with tensor operations, so the Python loop runs ``items`` times instead of ``rows x items x packs`` times. The
decisions are the same as the one-row-at-a-time reference in ``eplb_reference.py``, tie for tie:

- items are visited in the order of ``torch.sort(descending=True)`` applied to the very same (rows, items) float32
  tensor the reference sorts;
- the lightest pack with room wins, the first one on equal weight (``argmin`` returns the first minimum);
- pack weights are float32 sums accumulated in the same order.
"""

from __future__ import annotations

import torch


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
    sorted_loads = item_loads.gather(-1, order)  # (rows, items)
    # NOTE: a full pack's key is set to +inf, so argmin only ever picks packs with room; the key of a pack with room
    # is exactly its float32 weight, summed in arrival order like the reference does.
    pack_key = torch.zeros((num_rows, num_packs), dtype=torch.float32)
    pack_count = torch.zeros((num_rows, num_packs), dtype=torch.int64)
    pack_of_position = torch.empty((num_rows, num_items), dtype=torch.int64)
    full = torch.empty((num_rows, num_packs), dtype=torch.bool)
    ones = torch.ones((num_rows, 1), dtype=torch.int64)
    first = 0
    if bool((sorted_loads[:, : num_packs - 1] > 0).all()):
        # NOTE: with positive loads the first num_packs items go to packs 0, 1, ... in turn (each goes to the first
        # still-empty pack), so they need no argmin; the keys start as exactly those loads (0 + w == w).
        first = num_packs
        pack_key.copy_(sorted_loads[:, :num_packs])
        pack_count.fill_(1)
        pack_of_position[:, :num_packs] = torch.arange(num_packs)
    # NOTE: column views are cut once; the loop body is four in-place tensor calls (per-call overhead dominates).
    pack_columns = pack_of_position.split(1, dim=1)  # items x (rows, 1)
    load_columns = sorted_loads.split(1, dim=1)
    infinity = float("inf")
    for position in range(first, num_items):
        pack = pack_columns[position]
        torch.argmin(pack_key, dim=-1, keepdim=True, out=pack)  # (rows, 1)
        pack_key.scatter_add_(1, pack, load_columns[position])
        pack_count.scatter_add_(1, pack, ones)
        pack_key.masked_fill_(torch.eq(pack_count, items_per_pack, out=full), infinity)
    # Every pack holds exactly items_per_pack items, so ordering positions by (pack, arrival) lists them slot by slot.
    position_at_slot = torch.sort(pack_of_position, dim=-1, stable=True).indices
    return order.gather(-1, position_at_slot)


def pack_of_items(item_at_slot: torch.Tensor, num_packs: int) -> torch.Tensor:
    """Invert greedy_pack's result into the pack of each item. item_at_slot: (rows, items) -> (rows, items) int64."""
    items_per_pack = item_at_slot.shape[-1] // num_packs
    return invert_permutation(item_at_slot) // items_per_pack


def replicate_greedy(
    expert_loads: torch.Tensor, num_slots: int, max_count: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Add replicas one at a time to the expert with the largest load per replica, for every row.

    expert_loads: (rows, experts) float32. Returns slot_expert (rows, slots), slot_rank (rows, slots) and count
    (rows, experts), all int64; slots 0..experts-1 hold each expert once in id order. With max_count, an expert that
    already has max_count replicas gets no more (used to keep replicas on distinct GPUs).
    """
    num_rows, num_experts = expert_loads.shape
    # Slot-major buffers, so each added slot writes a contiguous row in place.
    slot_expert = torch.empty((num_slots, num_rows), dtype=torch.int64)
    slot_rank = torch.zeros((num_slots, num_rows), dtype=torch.int64)
    slot_expert[:num_experts] = torch.arange(num_experts, dtype=torch.int64).unsqueeze(1)
    count = torch.ones((num_rows, num_experts), dtype=torch.int64)
    ones = torch.ones((num_rows, 1), dtype=torch.int64)
    per_replica = torch.empty((num_rows, num_experts), dtype=torch.float32)
    best = torch.empty(num_rows, dtype=torch.float32)
    for slot in range(num_experts, num_slots):
        torch.div(expert_loads, count, out=per_replica)  # (rows, experts)
        if max_count is not None:
            per_replica.masked_fill_(count >= max_count, -float("inf"))
        expert = slot_expert[slot]
        torch.max(per_replica, dim=-1, out=(best, expert))  # first maximum on ties
        column = expert.unsqueeze(1)
        torch.gather(count, 1, column, out=slot_rank[slot].unsqueeze(1))
        count.scatter_add_(1, column, ones)
    slot_expert, slot_rank = slot_expert.t().contiguous(), slot_rank.t().contiguous()
    return slot_expert, slot_rank, count


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
    order = torch.sort(values, dim=1, stable=True).indices  # equal values keep their order
    sorted_experts = values.gather(1, order)
    position = torch.arange(num_replicas).expand(num_layers, num_replicas)
    run_start = torch.ones_like(sorted_experts, dtype=torch.bool)
    run_start[:, 1:] = sorted_experts[:, 1:] != sorted_experts[:, :-1]
    first = torch.where(run_start, position, 0).cummax(dim=1).values
    return torch.empty_like(values).scatter_(1, order, position - first)
