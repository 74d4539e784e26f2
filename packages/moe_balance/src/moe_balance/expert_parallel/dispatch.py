"""Where every token-expert pair of a micro-batch is computed, and in which order rows travel (no communication).

Layout (deepseek-ai/EPLB ``eplb.py``'s ``phy2log`` / ``log2phy``, as ``moe_balance.placement`` writes them): the
layer has R = ranks x S physical slots, GPU-major, so rank r hosts slots r*S ... r*S + S - 1; ``phy2log[p]`` is the
logical expert slot p holds, and an expert with several slots (``logcnt > 1``) splits its pairs over them. On top of
that, the replica plan of the micro-batch (``moe_balance.placement.plan_replicas``, whose "experts" are these
physical slots) gives each rank K spare slots (guests) and ``plan.tokens[source, spare slot]``, the pairs each source
sends there instead of home.

Each rank computes S + K local compute slots: 0 ... S-1 its home slots, S ... S+K-1 its guests. Rows are sent
grouped by destination rank, then compute slot, then pair order, so a receiver knows the compute slot of every row
it gets from the gathered counts alone: no index travels with the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_balance.placement import ReplicaPlan


def log2phy_of(phy2log: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots of each logical expert in slot order, -1 padded, and their count. phy2log: (R,) int64.

    Returns log2phy (experts, max count) and logcnt (experts,), the EPLB contract for one layer.
    """
    logcnt = torch.bincount(phy2log, minlength=num_experts)  # (experts,)
    order = torch.sort(phy2log, stable=True).indices  # (R,) slots grouped by expert, slot order inside
    position = torch.arange(phy2log.shape[0]) - (logcnt.cumsum(0) - logcnt)[phy2log[order]]
    log2phy = torch.full((num_experts, int(logcnt.max())), -1, dtype=torch.int64)
    log2phy[phy2log[order], position] = order
    return log2phy, logcnt


def occurrence(ids: torch.Tensor, size: int) -> torch.Tensor:
    """How many earlier entries of ``ids`` (pairs,) hold the same value: 0 for the first of each id. (pairs,)."""
    order = torch.sort(ids, stable=True).indices
    counts = torch.bincount(ids, minlength=size)
    rank_in_group = torch.arange(ids.shape[0]) - (counts.cumsum(0) - counts)[ids[order]]
    return torch.empty_like(ids).index_copy_(0, order, rank_in_group)


def physical_slots(
    expert_ids: torch.Tensor, log2phy: torch.Tensor, logcnt: torch.Tensor, source_rank: int
) -> torch.Tensor:
    """Physical slot of each pair: an expert's pairs go round-robin over its slots, from an offset per source rank.

    expert_ids: (pairs,) int64 logical experts. Returns (pairs,) int64 physical slots.
    """
    turn = (occurrence(expert_ids, log2phy.shape[0]) + source_rank) % logcnt[expert_ids]
    return log2phy[expert_ids, turn]


def shipped_per_slot(plan: ReplicaPlan, num_slots: int) -> torch.Tensor:
    """Pairs each source rank sends to spare slots instead of each physical slot's home. (sources, R) int64."""
    used = (plan.slot_expert >= 0).nonzero().flatten()
    shipped = torch.zeros((plan.tokens.shape[0], num_slots), dtype=torch.int64)
    return shipped.index_add_(1, plan.slot_expert[used], plan.tokens[:, used])


def receive_counts(
    load: torch.Tensor, plan: ReplicaPlan | None, rank: int, slots_per_rank: int, spare_slots_per_rank: int
) -> torch.Tensor:
    """Rows ``rank`` receives from each source rank for each of its compute slots. (sources, S + K) int64.

    load: (sources, R) pairs each source routes to each physical slot (the gathered counts).
    """
    first = rank * slots_per_rank
    home = load[:, first : first + slots_per_rank]  # (sources, S)
    if plan is None:
        return home.clone()
    home = home - shipped_per_slot(plan, load.shape[1])[:, first : first + slots_per_rank]
    first_spare = rank * spare_slots_per_rank
    guest = plan.tokens[:, first_spare : first_spare + spare_slots_per_rank]  # (sources, K)
    return torch.cat([home, guest], dim=1)


@dataclass(frozen=True)
class DispatchLayout:
    """One rank's side of a micro-batch's exchange."""

    send_order: torch.Tensor  # (pairs,) int64: pair index of each row sent, by destination rank, compute slot, pair
    send_counts: list[int]  # (ranks,) rows sent to each rank
    send_slot: torch.Tensor  # (pairs,) int64: global compute slot dest_rank * (S + K) + local, in send order
    recv_counts: list[int]  # (ranks,) rows received from each rank
    recv_slot: torch.Tensor  # (received,) int64: local compute slot of each received row, in receive order
    slot_rows: torch.Tensor  # (S + K,) int64: rows this rank computes in each compute slot


def dispatch_layout(
    rank: int,
    physical: torch.Tensor,
    load: torch.Tensor,
    plan: ReplicaPlan | None,
    slots_per_rank: int,
    spare_slots_per_rank: int,
) -> DispatchLayout:
    """The send order and both sides' counts for ``rank``. physical: (pairs,) its pairs' physical slots."""
    num_ranks = load.shape[0]
    compute_slots = slots_per_rank + spare_slots_per_rank
    guest = plan.route(rank, physical) if plan is not None else torch.full_like(physical, -1)  # (pairs,)
    spare = max(spare_slots_per_rank, 1)
    dest_rank = torch.where(guest >= 0, guest // spare, physical // slots_per_rank)
    dest_slot = torch.where(guest >= 0, slots_per_rank + guest % spare, physical % slots_per_rank)
    key = dest_rank * compute_slots + dest_slot  # (pairs,)
    send_order = torch.sort(key, stable=True).indices
    counts = receive_counts(load, plan, rank, slots_per_rank, spare_slots_per_rank)  # (sources, S + K)
    return DispatchLayout(
        send_order=send_order,
        send_counts=torch.bincount(dest_rank, minlength=num_ranks).tolist(),
        send_slot=key[send_order],
        recv_counts=counts.sum(dim=1).tolist(),
        recv_slot=torch.repeat_interleave(torch.arange(compute_slots).repeat(num_ranks), counts.flatten()),
        slot_rows=counts.sum(dim=0),
    )


def plan_problem(
    plan: ReplicaPlan, load: torch.Tensor, slots_per_rank: int, spare_slots_per_rank: int, ranks_per_node: int
) -> str | None:
    """Why ``plan`` cannot carry out the micro-batch with gathered counts ``load`` (sources, R), or None.

    The same answer on every rank: load and plan are the same everywhere (the plan's digest is compared first).
    """
    num_ranks, num_slots = load.shape
    spares = num_ranks * spare_slots_per_rank
    if (plan.num_experts, plan.spare_slots_per_rank, plan.ranks_per_node) != (
        num_slots,
        spare_slots_per_rank,
        ranks_per_node,
    ):
        return (
            f"the replica plan was made for {plan.num_experts} slots, {plan.spare_slots_per_rank} spare slots per "
            f"rank and {plan.ranks_per_node} ranks per node; this layer has {num_slots}, {spare_slots_per_rank} and "
            f"{ranks_per_node}: plan with plan_replicas(load, spare_slots_per_rank={spare_slots_per_rank}, "
            f"ranks_per_node={ranks_per_node}) on the (ranks, physical slots) counts"
        )
    if tuple(plan.tokens.shape) != (num_ranks, spares) or tuple(plan.slot_expert.shape) != (spares,):
        return (
            f"the replica plan's tokens have shape {tuple(plan.tokens.shape)} and slot_expert "
            f"{tuple(plan.slot_expert.shape)}; this layer needs ({num_ranks}, {spares}) and ({spares},)"
        )
    if int(plan.slot_expert.min()) < -1 or int(plan.slot_expert.max()) >= num_slots:
        return f"the replica plan's slot_expert must lie in [-1, {num_slots}); got {plan.slot_expert.tolist()}"
    if int(plan.tokens.min()) < 0 or int(plan.tokens[:, plan.slot_expert < 0].sum()) != 0:
        return "the replica plan sends a negative token count, or tokens to an unused spare slot (slot_expert -1)"
    shipped = shipped_per_slot(plan, num_slots)  # (sources, R)
    if bool((shipped > load).any()):
        source, slot = (int(i) for i in (shipped > load).nonzero()[0])
        return (
            f"the replica plan does not add up: it moves {int(shipped[source, slot])} pairs of physical slot {slot} "
            f"from rank {source}, which routed {int(load[source, slot])} there; plan each micro-batch from its own "
            "all-gathered counts"
        )
    rank_load = load.sum(dim=0).view(num_ranks, -1).sum(dim=1)  # (ranks,) pairs whose physical slot each rank hosts
    if not torch.equal(plan.rank_load_before, rank_load):
        return (
            f"the replica plan was made for rank loads {plan.rank_load_before.tolist()}; this micro-batch routes "
            f"{rank_load.tolist()} to the ranks: plan each micro-batch from its own all-gathered counts"
        )
    return None
