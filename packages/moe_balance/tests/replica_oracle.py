"""Test oracle of the replica planner's phase 3: the token auction of ``replica.assign_tokens``, one expert and one
destination at a time. It lives beside the tests that use it; the package ships only what runs."""

from __future__ import annotations

import torch


def assign_tokens_reference(
    load: torch.Tensor, slot_expert: torch.Tensor, slot_tokens: torch.Tensor, slots_per_rank: int, cost: torch.Tensor
) -> torch.Tensor:
    """Phase 3 one expert and one destination at a time: the obvious version of ``replica.assign_tokens``.

    For each replicated expert, destinations are its home rank (taking what the slots do not) and its slots (taking
    their quota). Each round, every source with tokens left picks its cheapest open destination (first on ties) and
    bids its regret (second-cheapest minus cheapest, 1e9 when it has no second choice); each destination accepts
    bids by regret, highest first (lowest source rank on ties), up to what it had left at the start of the round.
    Returns tokens (sources, slots) int64.
    """
    num_sources, num_experts = load.shape
    experts_per_rank = num_experts // cost.shape[0]
    tokens = torch.zeros((num_sources, slot_expert.shape[0]), dtype=torch.int64)
    for expert in sorted(set(slot_expert[slot_expert >= 0].tolist())):
        slots = [slot for slot in range(slot_expert.shape[0]) if int(slot_expert[slot]) == expert]
        ranks = [expert // experts_per_rank] + [slot // slots_per_rank for slot in slots]
        left = [int(load[:, expert].sum()) - sum(int(slot_tokens[slot]) for slot in slots)]
        left += [int(slot_tokens[slot]) for slot in slots]
        remaining = [int(load[source, expert]) for source in range(num_sources)]
        while any(remaining):
            bids: dict[int, list[tuple[float, int]]] = {}  # destination -> list of (-regret, source)
            for source in range(num_sources):
                if remaining[source] == 0:
                    continue
                prices = [
                    (float(cost[source, ranks[column]]), column) for column in range(len(ranks)) if left[column] > 0
                ]
                best_price, best_column = min(prices)
                others = [price for price, column in prices if column != best_column]
                regret = min(others) - best_price if others else 1e9
                bids.setdefault(best_column, []).append((-regret, source))
            for column, column_bids in bids.items():
                room = left[column]
                for _regret, source in sorted(column_bids):
                    take = min(room, remaining[source])
                    room -= take
                    remaining[source] -= take
                    left[column] -= take
                    if column > 0:
                        tokens[source, slots[column - 1]] += take
    return tokens
