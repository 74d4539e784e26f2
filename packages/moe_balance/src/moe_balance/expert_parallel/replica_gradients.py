"""Gradients of an expert's physical slots summed across them, so the slots of an EPLB placement stay identical.

With redundant slots (``logcnt > 1``) each slot of an expert computes a share of its pairs and gets the gradient of
that share only. Summing the shares and giving every slot the sum (a reduce to the expert's first slot, then a copy
back, each one batch of point-to-point sends) gives each slot the gradient the expert would get from one slot: with
the same weights and optimizer state (``apply_placement`` copies both), the slots take the same step. Call it after
backward and before the optimizer step, on every rank.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from .p2p import pack_slots, row_bytes, start_slot_exchange, unpack_slots


def _exchange(
    pairs: list[tuple[int, int]],
    rows: list[list[torch.Tensor]],
    slots_per_rank: int,
    group: dist.ProcessGroup | None,
    add: bool,
) -> int:
    """For each (source slot, target slot) pair: target row += source row (add) or = source row. Returns bytes sent.

    Pairs on one rank are handled locally; the others travel in one batched exchange, in pair order on both sides.
    """
    rank = dist.get_rank(group)
    outgoing: dict[int, list[int]] = {}
    incoming: dict[int, list[int]] = {}
    local = []
    for source, target in pairs:
        source_rank, target_rank = source // slots_per_rank, target // slots_per_rank
        if source_rank == rank and target_rank == rank:
            local.append((source % slots_per_rank, target % slots_per_rank))
        elif source_rank == rank:
            outgoing.setdefault(target_rank, []).append(source % slots_per_rank)
        elif target_rank == rank:
            incoming.setdefault(source_rank, []).append(target % slots_per_rank)
    like = rows[0]
    packed = {peer: pack_slots([rows[slot] for slot in slots]) for peer, slots in outgoing.items()}
    size = row_bytes(like)
    pending = start_slot_exchange(packed, {p: len(s) * size for p, s in incoming.items()}, group, like[0].device)
    updates = [(target, [row.clone() for row in rows[source]]) for source, target in local]
    for peer, buffer in pending.wait().items():
        columns = unpack_slots(buffer, like, len(incoming[peer]))
        updates += [(target, [column[index] for column in columns]) for index, target in enumerate(incoming[peer])]
    for target, values in updates:
        for row, value in zip(rows[target], values, strict=True):
            if add:
                row.add_(value)
            else:
                row.copy_(value)
    return sum(pending.sent_bytes.values())


def sum_replica_gradients(
    weights: Sequence[torch.Tensor], phy2log: torch.Tensor, *, group: dist.ProcessGroup | None = None
) -> int:
    """Give every slot of an expert the sum of its slots' gradients (a collective; every rank, same phy2log).

    weights: this rank's (S, ...) slot parameters; their ``.grad`` is summed in place (a missing grad counts as 0).
    phy2log: (R,) the placement in service. Returns the bytes this rank sent.
    """
    slots_per_rank = weights[0].shape[0]
    for weight in weights:
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
    rows = [[weight.grad[i] for weight in weights] for i in range(slots_per_rank)]
    first: dict[int, int] = {}
    others = []  # (slot, first slot of its expert), slot order
    for slot, expert in enumerate(phy2log.tolist()):
        if expert in first:
            others.append((slot, first[expert]))
        else:
            first[expert] = slot
    with torch.no_grad():
        sent = _exchange(others, rows, slots_per_rank, group, add=True)
        sent += _exchange([(main, slot) for slot, main in others], rows, slots_per_rank, group, add=False)
    return sent
