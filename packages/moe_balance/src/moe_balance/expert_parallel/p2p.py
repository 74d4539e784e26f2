"""Batched point-to-point moves of whole expert slots: the rows of several tensors packed into one message per peer.

A slot's content is one row of every tensor that lives per slot (the expert's weights, and for placement moves the
optimizer state that belongs to them), possibly of different dtypes; its rows are packed as raw bytes, so one
``isend`` / ``irecv`` pair per peer carries every slot that peer exchanges, whatever the dtypes. All sends and
receives go out in one ``torch.distributed.batch_isend_irecv`` call (PyTorch docs: the order of ops in the list
does not matter, except between the same pair of ranks in the same direction, where it must match on both sides;
with NCCL the ops are coalesced into one group call). Both sides list slots in the same global order, so the n-th
slot packed for a peer is the n-th slot that peer unpacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


def row_bytes(rows: Sequence[torch.Tensor]) -> int:
    """Bytes of one packed slot: every tensor's row."""
    return sum(row.numel() * row.element_size() for row in rows)


def pack_slots(slots: Sequence[Sequence[torch.Tensor]]) -> torch.Tensor:
    """Pack slots (each a list of row tensors) into one uint8 tensor: slot after slot, row after row. A copy."""
    pieces = [row.detach().contiguous().reshape(-1).view(torch.uint8) for rows in slots for row in rows]
    if not pieces:
        return torch.empty(0, dtype=torch.uint8)
    return torch.cat(pieces)


def unpack_slots(buffer: torch.Tensor, like: Sequence[torch.Tensor], count: int) -> list[torch.Tensor]:
    """Inverse of ``pack_slots`` for ``count`` slots shaped like ``like`` (one row per tensor).

    buffer: (count * row_bytes(like),) uint8. Returns one (count, *row.shape) tensor per row of ``like``.
    """
    table = buffer.view(count, -1)  # (count, bytes of one slot)
    out, start = [], 0
    for row in like:
        size = row.numel() * row.element_size()
        piece = table[:, start : start + size].contiguous().view(row.dtype)
        out.append(piece.view(count, *row.shape))
        start += size
    return out


@dataclass
class PendingSlots:
    """Slots in flight: ``wait`` returns the received buffers, one uint8 tensor per source rank."""

    requests: list = field(default_factory=list)
    received: dict[int, torch.Tensor] = field(default_factory=dict)  # source group rank -> (bytes,) uint8
    sent_bytes: dict[int, int] = field(default_factory=dict)  # destination group rank -> bytes
    ops: int = 0  # P2P operations issued (sends + receives)
    payloads: list = field(default_factory=list)  # send buffers, alive until the sends complete

    def wait(self) -> dict[int, torch.Tensor]:
        for request in self.requests:
            request.wait()
        self.requests, self.payloads = [], []
        return self.received


def start_slot_exchange(
    outgoing: dict[int, torch.Tensor],
    incoming_bytes: dict[int, int],
    group: dist.ProcessGroup | None,
    device: torch.device,
) -> PendingSlots:
    """Issue every send and receive of one exchange at once and return without waiting.

    outgoing: destination group rank -> packed bytes (``pack_slots``); incoming_bytes: source group rank -> bytes
    expected. Peers are group ranks (``P2POp(group_peer=...)``), so a subgroup works as the default group does.
    """
    pending = PendingSlots()
    ops = []
    for peer in sorted(incoming_bytes):
        buffer = torch.empty(incoming_bytes[peer], dtype=torch.uint8, device=device)
        pending.received[peer] = buffer
        ops.append(dist.P2POp(dist.irecv, buffer, group=group, group_peer=peer))
    for peer in sorted(outgoing):
        payload = outgoing[peer].to(device)
        pending.sent_bytes[peer] = payload.numel()
        pending.payloads.append(payload)
        ops.append(dist.P2POp(dist.isend, payload, group=group, group_peer=peer))
    if ops:  # batch_isend_irecv refuses an empty list
        pending.requests = dist.batch_isend_irecv(ops)
    pending.ops = len(ops)
    return pending
