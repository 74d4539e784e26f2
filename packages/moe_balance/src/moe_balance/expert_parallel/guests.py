"""Guest weights of a micro-batch: home slots copied into the spare slots the replica plan fills, gradients sent home.

Forward: each home rank sends the rows of its replicated slots to the ranks whose spare slots host them, as soon as
the plan is known (``start_guest_weights``, asynchronous), and a guest rank waits for them only just before its
guests compute (``guest_weights``), so the transfer overlaps the token dispatch and the home experts' compute.
Backward: each guest's weight gradient goes back to its home rank, which adds it to the home slot's gradient, so the
optimizer sees the gradient it would see had every pair been computed at home.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from moe_balance.placement import ReplicaPlan

from .p2p import PendingSlots, pack_slots, row_bytes, start_slot_exchange, unpack_slots


@dataclass(frozen=True)
class GuestMoves:
    """This rank's side of the guest-weight transfer; lists follow the global spare-slot order on both sides."""

    outgoing: dict[int, list[int]]  # guest rank -> home slots (local index) this rank sends it
    incoming: dict[int, list[int]]  # home rank -> spare slots (local index) of this rank it fills


def guest_moves(plan: ReplicaPlan, rank: int, slots_per_rank: int, spare_slots_per_rank: int) -> GuestMoves:
    """Which of ``rank``'s home slots go where, and which of its spare slots come from where."""
    outgoing: dict[int, list[int]] = {}
    incoming: dict[int, list[int]] = {}
    for spare in (plan.slot_expert >= 0).nonzero().flatten().tolist():
        slot = int(plan.slot_expert[spare])
        home, guest = slot // slots_per_rank, spare // spare_slots_per_rank
        if home == rank:
            outgoing.setdefault(guest, []).append(slot % slots_per_rank)
        if guest == rank:
            incoming.setdefault(home, []).append(spare % spare_slots_per_rank)
    return GuestMoves(outgoing, incoming)


def start_guest_weights(
    moves: GuestMoves, weights: Sequence[torch.Tensor], group: dist.ProcessGroup | None
) -> PendingSlots:
    """Issue the guest-weight sends and receives without waiting. weights: this rank's (S, ...) home tensors."""
    outgoing = {
        peer: pack_slots([[w[slot] for w in weights] for slot in slots]) for peer, slots in moves.outgoing.items()
    }
    size = row_bytes([w[0] for w in weights])
    incoming = {peer: len(slots) * size for peer, slots in moves.incoming.items()}
    return start_slot_exchange(outgoing, incoming, group, weights[0].device)


class _GuestWeights(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        pending: PendingSlots,
        moves: GuestMoves,
        group: dist.ProcessGroup | None,
        spare_slots: int,
        order_token: torch.Tensor,
        *weights: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        ctx.moves, ctx.group = moves, group
        ctx.like = [w[0].detach() for w in weights]  # one row of each tensor: shapes and dtypes of a slot
        ctx.home_shapes = [w.shape for w in weights]
        guests = [w.new_zeros((spare_slots, *w.shape[1:])) for w in weights]  # (K, ...) each
        for peer, buffer in pending.wait().items():
            spares = torch.tensor(moves.incoming[peer], device=buffer.device)
            for guest, rows in zip(guests, unpack_slots(buffer, ctx.like, spares.numel()), strict=True):
                guest.index_copy_(0, spares, rows)
        return tuple(guests)

    @staticmethod
    def backward(ctx: Any, *grad_guests: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        # NOTE: synchronous: the home rank needs these gradients before its backward finishes. Ordering: this node
        # takes the dispatched tokens as an input (order_token), so on every rank it runs after the combine's reverse
        # exchange and before the dispatch's, whatever order autograd picks among nodes that are ready together.
        moves = ctx.moves
        outgoing = {
            peer: pack_slots([[grad[spare] for grad in grad_guests] for spare in spares])
            for peer, spares in moves.incoming.items()
        }
        size = row_bytes(ctx.like)
        incoming = {peer: len(slots) * size for peer, slots in moves.outgoing.items()}
        pending = start_slot_exchange(outgoing, incoming, ctx.group, grad_guests[0].device)
        grads = [
            grad_guests[0].new_zeros(shape, dtype=like.dtype)
            for shape, like in zip(ctx.home_shapes, ctx.like, strict=True)
        ]
        for peer, buffer in pending.wait().items():
            slots = torch.tensor(moves.outgoing[peer], device=buffer.device)
            for grad, rows in zip(grads, unpack_slots(buffer, ctx.like, slots.numel()), strict=True):
                grad.index_add_(0, slots, rows)  # a slot hosted by several guests gets the sum
        return (None, None, None, None, None, *grads)


def guest_weights(
    pending: PendingSlots,
    moves: GuestMoves,
    weights: Sequence[torch.Tensor],
    spare_slots_per_rank: int,
    order_token: torch.Tensor,
    group: dist.ProcessGroup | None,
) -> tuple[torch.Tensor, ...]:
    """Wait for the guest weights and return them as (K, ...) tensors, one per home tensor; unused spares are 0.

    Differentiable: the gradient of a guest row is sent to its home rank and added to the home slot's gradient
    there. order_token: the dispatched tokens (see the NOTE in backward); it gets no gradient from here.
    """
    return _GuestWeights.apply(pending, moves, group, spare_slots_per_rank, order_token, *weights)
