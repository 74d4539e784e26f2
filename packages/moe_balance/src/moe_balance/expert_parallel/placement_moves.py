"""Apply a new placement between steps: move only the slots whose expert changes, optimizer state with them.

Every rank holds its S physical slots as rows of stacked tensors (``SlotExperts`` weights, and the optimizer state
of the same shape, e.g. Adam's ``exp_avg`` / ``exp_avg_sq``); slot s lives on rank s // S (DeepSeek EPLB's GPU-major
``phy2log`` layout). Going from the placement in service to a new one, each slot whose expert changes copies it from
a slot that holds it now: one on its own rank first (a local copy), then one on its node, then any, spreading the
copies over the holders. Every rank derives the same moves from the two placements, then sends and receives its
share in one ``batch_isend_irecv`` (``p2p.py``). Slots that keep their expert are neither written nor sent to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from .agreement import agree_on_every_rank, tensor_digest
from .p2p import pack_slots, row_bytes, start_slot_exchange, unpack_slots


@dataclass(frozen=True)
class SlotMove:
    """One slot that changes: it gets ``expert`` from ``source``, a slot holding it in the placement in service."""

    slot: int  # global slot id
    expert: int
    source: int  # global slot id


@dataclass(frozen=True)
class PlacementMove:
    """What applying a placement did: the whole group's moves, and this rank's measured P2P traffic."""

    moves: tuple[SlotMove, ...]
    changed_slots: tuple[int, ...]  # global slots whose expert changed
    local_copies: int  # moves whose source is on the slot's own rank (no transfer)
    bytes_within_node: int  # the whole group's bytes over P2P, source and slot on one node
    bytes_across_nodes: int
    sent_bytes: int  # this rank, counted from the sends it issued
    received_bytes: int
    p2p_ops: int  # sends + receives this rank issued

    def as_record(self) -> dict:
        """A JSON-serialisable summary (no tensors)."""
        return {
            "changed_slots": list(self.changed_slots),
            "moves": [[move.slot, move.expert, move.source] for move in self.moves],
            "local_copies": self.local_copies,
            "bytes_within_node": self.bytes_within_node,
            "bytes_across_nodes": self.bytes_across_nodes,
            "sent_bytes": self.sent_bytes,
            "received_bytes": self.received_bytes,
            "p2p_ops": self.p2p_ops,
        }


def plan_slot_moves(
    current: torch.Tensor, new: torch.Tensor, slots_per_rank: int, ranks_per_node: int
) -> list[SlotMove]:
    """The moves from ``current`` to ``new`` (both (R,) int64 phy2log rows), the same on every rank.

    A changed slot's source: a current holder of its new expert on the same rank, else on the same node, else any;
    among equals the holder used least so far, then the lowest slot.
    """
    holders: dict[int, list[int]] = {}
    for slot, expert in enumerate(current.tolist()):
        holders.setdefault(expert, []).append(slot)
    uses = [0] * current.shape[0]
    moves = []
    for slot in (current != new).nonzero().flatten().tolist():
        expert = int(new[slot])
        rank, node = slot // slots_per_rank, slot // (slots_per_rank * ranks_per_node)

        def distance(source: int, rank: int = rank, node: int = node) -> tuple[int, int, int]:
            same_rank = source // slots_per_rank == rank
            same_node = source // (slots_per_rank * ranks_per_node) == node
            return (0 if same_rank else 1 if same_node else 2, uses[source], source)

        source = min(holders[expert], key=distance)
        uses[source] += 1
        moves.append(SlotMove(slot, expert, source))
    return moves


def slot_tensors(weights: Sequence[torch.Tensor], optimizer: torch.optim.Optimizer | None = None) -> list[torch.Tensor]:
    """The tensors that live per slot: the (S, ...) weights and every optimizer state tensor of the same shape.

    For Adam that is ``exp_avg`` and ``exp_avg_sq`` (and ``max_exp_avg_sq`` with amsgrad); the scalar ``step`` is
    shared by all slots and stays. State the optimizer has not created yet (before the first step) is skipped.
    """
    tensors = list(weights)
    if optimizer is not None:
        for weight in weights:
            state = optimizer.state.get(weight, {})
            tensors += [
                value for _key, value in sorted(state.items()) if torch.is_tensor(value) and value.shape == weight.shape
            ]
    return tensors


def module_slot_rows(
    modules: nn.ModuleList, optimizer: torch.optim.Optimizer | None = None
) -> list[list[torch.Tensor]]:
    """Slot rows of experts kept as one module per slot: each module's parameters and their optimizer state."""
    return [slot_tensors(list(module.parameters()), optimizer) for module in modules]


def _as_row(value: object, name: str) -> torch.Tensor:
    if isinstance(value, (list, tuple)):
        value = torch.tensor(value)
    if not isinstance(value, torch.Tensor) or value.dim() != 1 or value.is_floating_point() or value.is_complex():
        raise ValueError(f"{name} must be a 1-D integer phy2log row (slots,); got {value!r:.80}")
    return value.detach().to("cpu", torch.int64)


def _local_problem(current: torch.Tensor, new: torch.Tensor, num_slots: int, slot_rows: list) -> str | None:
    if current.shape[0] != num_slots or new.shape[0] != num_slots:
        return (
            f"the placements have {current.shape[0]} (in service) and {new.shape[0]} (new) slots; this rank holds "
            f"{len(slot_rows)} slots x {num_slots // max(len(slot_rows), 1)} ranks = {num_slots}"
        )
    lost = sorted(set(current.tolist()) - set(new.tolist()))
    gained = sorted(set(new.tolist()) - set(current.tolist()))
    if lost:
        return (
            f"the new placement drops experts {lost[:8]}, which the placement in service holds: plan it for this model"
        )
    if gained:
        return (
            f"the new placement holds experts {gained[:8]}, which the placement in service lacks: plan it for "
            "this model"
        )
    shapes = {tuple((tuple(row.shape), row.dtype) for row in rows) for rows in slot_rows}
    if len(shapes) != 1:
        return "the slots hold tensors of different shapes or dtypes; every slot must hold the same tensors"
    return None


def apply_slot_rows(
    slot_rows: list[list[torch.Tensor]],
    current: torch.Tensor,
    new: torch.Tensor,
    *,
    ranks_per_node: int,
    group: dist.ProcessGroup | None = None,
    problem: str | None = None,
) -> PlacementMove:
    """``apply_placement`` on slot rows: slot_rows[i] lists the tensors of this rank's slot i, written in place.

    problem: a reason the caller already found to refuse (raised on every rank like the others).
    """
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    slots_per_rank = len(slot_rows)
    try:
        current, new = _as_row(current, "current"), _as_row(new, "new")
    except ValueError as exc:  # refused on every rank below, not here alone
        problem = problem or str(exc)
        current = new = torch.zeros(0, dtype=torch.int64)
    if problem is None and not slots_per_rank:
        problem = "this rank holds no slots: pass its (S, ...) tensors"
    problem = problem or _local_problem(current, new, slots_per_rank * world_size, slot_rows)
    if problem is None and world_size % ranks_per_node != 0:
        problem = f"ranks_per_node={ranks_per_node} does not divide the {world_size} ranks"
    like = slot_rows[0] if slot_rows else []
    shape = repr([(tuple(row.shape), str(row.dtype)) for row in like]).encode()
    digest = tensor_digest(current, new, torch.frombuffer(bytearray(shape), dtype=torch.uint8))
    agree_on_every_rank(
        problem,
        "placement change",
        group,
        digest=digest,
        digest_of="placements or slot shapes",
        fix="pass the same placement in service and new placement on every rank, and the same per-slot tensors",
    )

    moves = plan_slot_moves(current, new, slots_per_rank, ranks_per_node)
    owner = [move.slot // slots_per_rank for move in moves]
    holder = [move.source // slots_per_rank for move in moves]
    outgoing: dict[int, list[int]] = {}  # destination rank -> my slots (local) to send, in move order
    incoming: dict[int, list[int]] = {}  # source rank -> my slots (local) to fill, in move order
    local = []
    for move, dst, src in zip(moves, owner, holder, strict=True):
        if src == rank and dst == rank:
            local.append(move)
        elif src == rank:
            outgoing.setdefault(dst, []).append(move.source % slots_per_rank)
        elif dst == rank:
            incoming.setdefault(src, []).append(move.slot % slots_per_rank)
    size = row_bytes(like)
    # Local copies and sends read the placement in service: snapshot them before any slot is written.
    local_values = [[row.detach().clone() for row in slot_rows[move.source % slots_per_rank]] for move in local]
    packed = {peer: pack_slots([slot_rows[slot] for slot in slots]) for peer, slots in outgoing.items()}
    pending = start_slot_exchange(packed, {peer: len(s) * size for peer, s in incoming.items()}, group, like[0].device)
    received = pending.wait()
    with torch.no_grad():
        for move, values in zip(local, local_values, strict=True):
            for row, value in zip(slot_rows[move.slot % slots_per_rank], values, strict=True):
                row.copy_(value)
        for peer, buffer in received.items():
            columns = unpack_slots(buffer, like, len(incoming[peer]))
            for index, slot in enumerate(incoming[peer]):
                for row, column in zip(slot_rows[slot], columns, strict=True):
                    row.copy_(column[index])
    node = [r // ranks_per_node for r in range(world_size)]
    remote = [(dst, src) for dst, src in zip(owner, holder, strict=True) if dst != src]
    return PlacementMove(
        moves=tuple(moves),
        changed_slots=tuple(move.slot for move in moves),
        local_copies=sum(1 for dst, src in zip(owner, holder, strict=True) if dst == src),
        bytes_within_node=size * sum(1 for dst, src in remote if node[dst] == node[src]),
        bytes_across_nodes=size * sum(1 for dst, src in remote if node[dst] != node[src]),
        sent_bytes=sum(pending.sent_bytes.values()),
        received_bytes=sum(buffer.numel() for buffer in received.values()),
        p2p_ops=pending.ops,
    )


def apply_placement(
    tensors: Sequence[torch.Tensor],
    current: torch.Tensor,
    new: torch.Tensor,
    *,
    ranks_per_node: int,
    group: dist.ProcessGroup | None = None,
) -> PlacementMove:
    """Move this rank's slots from placement ``current`` to ``new`` (both (R,) phy2log rows of one layer); a
    collective over ``group``. Call it between steps, on every rank, with the same placements.

    tensors: every (S, ...) tensor that lives per slot, written in place (``slot_tensors(weights, optimizer)``
    gives the weights and their optimizer state). Raises ``ExpertParallelError`` on every rank when any rank's
    arguments are wrong or the ranks pass different placements.
    """
    tensors = list(tensors)
    counts = sorted({t.shape[0] if t.dim() else 0 for t in tensors})
    problem = None
    if len(counts) != 1:
        problem = f"the tensors hold {counts} slots: every tensor is (S, ...) with the same S"
    slot_rows = [[t[i] for t in tensors] for i in range(counts[0])] if problem is None else []
    return apply_slot_rows(slot_rows, current, new, ranks_per_node=ranks_per_node, group=group, problem=problem)
