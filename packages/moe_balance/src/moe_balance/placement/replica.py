"""Per-micro-batch replica plan: copy hot experts' overflow into spare slots on cold ranks, preferring the same node.

Every expert-parallel rank hosts E / R experts (expert e on rank e // (E / R)) and K spare slots. For one micro-batch
with known routing counts, ``plan_replicas`` decides which expert each spare slot hosts and how many tokens every
source rank sends to it, so every rank ends near the mean load. Moving tokens inside a node costs 1, across nodes
``inter_node_cost``: a soft preference, never a ban.

1. Rank level (``sinkhorn_flow``): entropic optimal transport (log-domain Sinkhorn-Knopp) from hot ranks (tokens
   above the target ceil(total / R)) to cold ranks (room below it) under that cost, summed into node-to-node flows.
2. Expert level (``match_slots``): column-first matching in rounds. Each cold rank with a free slot proposes the hot
   expert it would take most of, t = min(expert surplus, its rank's remaining excess, the cold rank's remaining room,
   slot capacity), preferring proposals the node-to-node flow still backs for at least half of t; each hot rank
   grants its best proposal per round. Rounds run until nobody can propose. Where cold ranks run out of slots before
   a hot rank is done, spill passes give its rest to ranks with a free slot at or below the target, each allowed
   h tokens above it, h as small as the free slots allow; same-node takers first.
3. Token level (``assign_tokens``): each slot's quota is filled from source ranks by a price-based auction: sources
   bid for their cheapest open destination (the expert's home or one of its slots), bidding their regret (how much
   more the next-best destination costs); a destination sells its remaining quota to the highest bids first and
   closes when full; rejected tokens bid again. Tokens already on the slot's rank or node win it first.

Phases 1 and 2 run as Triton kernels on GPU tensors (``_sinkhorn_triton.py``, ``_matching_triton.py``) and as the torch
code in ``replica_torch.py`` elsewhere; both give the same plan. Token counts must stay below 2**31.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch

from moe_balance._checks import check_load_matrix, check_positive_int

from ._packing import occurrence_ranks
from .replica_torch import match_slots, sinkhorn_flow

MAX_TOKENS = 2**31 - 1
BACKENDS = ("auto", "torch", "triton")


@dataclass(frozen=True)
class ReplicaPlan:
    """Where each spare slot's expert comes from and who sends it tokens, for one micro-batch."""

    slot_expert: torch.Tensor  # (ranks * K,) int64: expert hosted by slot s (on rank s // K); -1 = unused
    tokens: torch.Tensor  # (source ranks, ranks * K) int64: tokens each source rank sends to each slot
    rank_load_before: torch.Tensor  # (ranks,) int64: tokens routed to each rank's own experts
    rank_load_after: torch.Tensor  # (ranks,) int64: tokens each rank computes after re-routing
    spare_slots_per_rank: int
    ranks_per_node: int
    num_experts: int

    @property
    def imbalance_before(self) -> float:
        """Heaviest rank / mean rank - 1, before re-routing."""
        return _imbalance(self.rank_load_before)

    @property
    def imbalance_after(self) -> float:
        """Heaviest rank / mean rank - 1, after re-routing (the residual imbalance)."""
        return _imbalance(self.rank_load_after)

    @property
    def cross_node_copy_share(self) -> float:
        """Share of used spare slots whose expert comes from a rank on another node (weights copied across nodes)."""
        used = self.slot_expert >= 0
        if not bool(used.any()):
            return 0.0
        num_ranks = self.rank_load_after.shape[0]
        home_node = (self.slot_expert[used] // (self.num_experts // num_ranks)) // self.ranks_per_node
        slot_node = (torch.arange(num_ranks * self.spare_slots_per_rank)[used] // self.spare_slots_per_rank) // (
            self.ranks_per_node
        )
        return float((home_node != slot_node).float().mean())

    @property
    def cross_node_token_share(self) -> float:
        """Share of re-routed tokens whose source rank is on another node than the slot's rank."""
        total = int(self.tokens.sum())
        if total == 0:
            return 0.0
        source_node = torch.arange(self.tokens.shape[0]) // self.ranks_per_node
        slot_node = (torch.arange(self.tokens.shape[1]) // self.spare_slots_per_rank) // self.ranks_per_node
        cross = source_node.unsqueeze(1) != slot_node.unsqueeze(0)
        return float(self.tokens[cross].sum()) / total

    def route(self, source_rank: int, expert_ids: torch.Tensor) -> torch.Tensor:
        """Token re-route map for one source rank: the slot each of its tokens goes to, -1 for the expert's home.

        expert_ids: (tokens,) int64 routed experts of that rank's tokens (one entry per token-expert pair), with the
        per-expert counts the plan was made from. Of the tokens of expert e, the first ones go to e's slots in slot
        order, as many as ``tokens[source_rank, slot]`` says, the rest stay home. Returns (tokens,) int64.
        """
        num_experts = self.num_experts
        if isinstance(source_rank, bool) or not isinstance(source_rank, int):
            raise ValueError(f"source_rank must be an int; got {source_rank!r}")
        if not 0 <= source_rank < self.tokens.shape[0]:
            raise ValueError(f"source_rank={source_rank} is out of range: the plan has {self.tokens.shape[0]} ranks")
        expert_ids = expert_ids.to("cpu", torch.int64).flatten()
        if expert_ids.numel() and (int(expert_ids.min()) < 0 or int(expert_ids.max()) >= num_experts):
            raise ValueError(f"expert_ids must lie in [0, {num_experts}); got {expert_ids.min()}..{expert_ids.max()}")
        order = torch.sort(expert_ids, stable=True).indices
        sorted_ids = expert_ids[order]
        counts = torch.bincount(sorted_ids, minlength=num_experts)
        occurrence = torch.arange(sorted_ids.shape[0]) - (counts.cumsum(0) - counts)[sorted_ids]
        sent = self.tokens[source_rank]  # (slots,)
        destination = torch.full_like(sorted_ids, -1)
        used = (self.slot_expert >= 0).nonzero().flatten()
        offset = torch.zeros(num_experts, dtype=torch.int64)
        for slot in used.tolist():
            expert = int(self.slot_expert[slot])
            count = int(sent[slot])
            if count == 0:
                continue
            hit = (sorted_ids == expert) & (occurrence >= offset[expert]) & (occurrence < offset[expert] + count)
            destination[hit] = slot
            offset[expert] += count
        result = torch.empty_like(destination)
        result[order] = destination
        return result


def _imbalance(rank_load: torch.Tensor) -> float:
    mean = float(rank_load.double().mean())
    return float(rank_load.max()) / mean - 1.0 if mean > 0 else 0.0


def rank_cost_matrix(num_ranks: int, ranks_per_node: int, inter_node_cost: float) -> torch.Tensor:
    """Cost of moving a token between ranks: 0 to itself, 1 inside a node, inter_node_cost across. (ranks, ranks)."""
    node = torch.arange(num_ranks) // ranks_per_node
    cost = torch.where(node.unsqueeze(1) == node.unsqueeze(0), 1.0, float(inter_node_cost))
    return cost.fill_diagonal_(0.0)


def assign_tokens(
    load: torch.Tensor, slot_expert: torch.Tensor, slot_tokens: torch.Tensor, slots_per_rank: int, cost: torch.Tensor
) -> torch.Tensor:
    """Phase 3: fill every slot's quota from source ranks by auction. Returns tokens (sources, slots) int64.

    load: (sources, experts) int64. slot_expert, slot_tokens: (slots,) from phase 2. cost: (ranks, ranks).
    """
    num_sources, num_experts = load.shape
    num_slots = slot_expert.shape[0]
    experts_per_rank = num_experts // cost.shape[0]
    tokens = torch.zeros((num_sources, num_slots), dtype=torch.int64)
    used = (slot_expert >= 0).nonzero().flatten()
    if used.numel() == 0:
        return tokens
    replicated, slot_group = torch.unique(slot_expert[used], return_inverse=True)  # (u,), (used,)
    num_replicated = replicated.shape[0]
    # Destinations of each replicated expert: column 0 = home, then its slots in slot order; padded with capacity 0.
    column = 1 + occurrence_ranks(slot_group.unsqueeze(0)).squeeze(0)  # (used,) 1, 2, ... per expert, slot order
    width = 1 + int(column.max())
    destination_slot = torch.full((num_replicated, width), -1, dtype=torch.int64)
    destination_slot[slot_group, column] = used
    destination_rank = torch.where(destination_slot >= 0, destination_slot // slots_per_rank, 0)
    destination_rank[:, 0] = replicated // experts_per_rank
    supply = load[:, replicated]  # (sources, u)
    capacity = torch.zeros((num_replicated, width), dtype=torch.int64)
    capacity[slot_group, column] = slot_tokens[used]
    capacity[:, 0] = supply.sum(dim=0) - capacity[:, 1:].sum(dim=1)
    price = cost[:, destination_rank]  # (sources, u, width): cost(source rank, destination rank)
    remaining = supply.clone()
    assigned = torch.zeros((num_sources, num_replicated, width), dtype=torch.int64)
    for _round in range(width + 1):
        if not bool((remaining > 0).any()):
            break
        open_price = torch.where((capacity > 0).unsqueeze(0), price, torch.inf)
        best_price, choice = open_price.min(dim=2)  # (sources, u)
        second_price = open_price.scatter(2, choice.unsqueeze(2), torch.inf).amin(dim=2)
        regret = torch.where(torch.isfinite(second_price), second_price - best_price, 1e9)
        bid = torch.where(remaining > 0, remaining, 0)
        # Each destination takes the highest regrets first (lowest source rank on ties) up to its capacity.
        order = torch.sort(-regret, dim=0, stable=True).indices  # (sources, u)
        wanted = torch.zeros_like(assigned).scatter_(2, choice.unsqueeze(2), bid.unsqueeze(2))
        wanted_sorted = wanted.gather(0, order.unsqueeze(2).expand_as(wanted))
        before = wanted_sorted.cumsum(dim=0) - wanted_sorted
        accepted_sorted = (capacity.unsqueeze(0) - before).clamp(min=0).minimum(wanted_sorted)
        accepted = torch.zeros_like(assigned).scatter_(0, order.unsqueeze(2).expand_as(wanted), accepted_sorted)
        assigned += accepted
        remaining -= accepted.sum(dim=2)
        capacity -= accepted.sum(dim=0)
    if bool((remaining > 0).any()):
        raise RuntimeError("token auction did not place every token; this is a bug, please report the load matrix")
    slot_columns = destination_slot[:, 1:]  # (u, width - 1)
    live = slot_columns >= 0
    sources = torch.arange(num_sources).view(-1, 1, 1).expand(-1, num_replicated, width - 1)
    tokens.index_put_(
        (sources[:, live], slot_columns[live].unsqueeze(0).expand(num_sources, -1)), assigned[:, :, 1:][:, live]
    )
    return tokens


def _check_replica_arguments(
    load: object, spare_slots_per_rank: object, ranks_per_node: object, inter_node_cost: object
) -> torch.Tensor:
    matrix = check_load_matrix(load, "load", "(source ranks, experts)")
    if matrix.is_floating_point() and not bool((matrix == matrix.round()).all()):
        raise ValueError("load must hold whole token counts; got fractional values: round or pass an integer tensor")
    check_positive_int(spare_slots_per_rank, "spare_slots_per_rank")
    check_positive_int(ranks_per_node, "ranks_per_node")
    num_ranks, num_experts = matrix.shape
    if num_experts % num_ranks != 0:
        raise ValueError(
            f"load has {num_experts} experts for {num_ranks} source ranks: experts live contiguously on the ranks, so "
            "the expert count must be a multiple of the rank count (load is (ranks, experts))"
        )
    if num_ranks % ranks_per_node != 0:
        raise ValueError(f"ranks_per_node={ranks_per_node} does not divide the {num_ranks} ranks")
    if isinstance(inter_node_cost, bool) or not isinstance(inter_node_cost, (int, float)):
        raise ValueError(f"inter_node_cost must be a number; got {inter_node_cost!r}")
    if not math.isfinite(inter_node_cost) or inter_node_cost < 1.0:
        raise ValueError(
            f"inter_node_cost={inter_node_cost} must be finite and >= 1 (the intra-node cost): it is the relative "
            "price of a token crossing nodes"
        )
    counts = matrix.long()
    if int(counts.sum()) > MAX_TOKENS:
        raise ValueError(f"load totals {int(counts.sum())} tokens; the planner supports at most {MAX_TOKENS}")
    return counts


def _use_triton(load: torch.Tensor, backend: str) -> bool:
    """ "triton" forces the kernels; "auto" uses them for CUDA tensors when Triton is installed and the shape fits."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not supported: use one of {', '.join(BACKENDS)}")
    if backend != "auto":
        return backend == "triton"
    if not load.is_cuda or load.dim() != 2:
        return False
    try:
        from ._matching_triton import fits_matching_kernel
        from ._sinkhorn_triton import MAX_RANKS
    except ImportError:
        return False
    num_ranks, num_experts = load.shape
    return num_ranks <= MAX_RANKS and fits_matching_kernel(num_ranks, num_experts)


def _run_matching(use_triton: bool, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if not use_triton:
        return match_slots(*args)
    from ._matching_triton import match_slots_triton

    return match_slots_triton(*args)


def _sent_and_hosted(
    slot_expert: torch.Tensor, slot_tokens: torch.Tensor, num_experts: int, num_ranks: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens each expert sends to spare slots (experts,) and tokens each rank hosts in its slots (ranks,)."""
    live_tokens = torch.where(slot_expert >= 0, slot_tokens, 0)
    sent = torch.zeros(num_experts, dtype=torch.int64).index_add_(0, slot_expert.clamp_min(0), live_tokens)
    return sent, live_tokens.view(num_ranks, -1).sum(dim=1)


def _spill_level(now: torch.Tensor, target: int, free: torch.Tensor, headroom: int) -> int:
    """Smallest h >= headroom such that loads above target + h fit, in pieces of at most h tokens, into the free
    slots of ranks at or below target + h. now, free: (ranks,) int64."""

    def fits(level: int) -> bool:
        excess = (now - target - level).clamp_min(0)
        taker = (free > 0) & (now <= target + level)
        room = int((target + level - now)[taker].sum())
        pieces = int((-(-excess // level)).sum())
        return int(excess.sum()) <= room and pieces <= int(free[taker].sum())

    low, high = max(headroom, 1), max(headroom, 1, int((now - target).max()))
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _plan_slots(
    expert_load: torch.Tensor,
    rank_load: torch.Tensor,
    slots_per_rank: int,
    ranks_per_node: int,
    cost: torch.Tensor,
    slot_capacity: int,
    epsilon: float,
    iterations: int,
    use_triton: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Phases 1 and 2: which expert each spare slot hosts and how many tokens it takes. Returns (slots,) x 2.

    Main pass: hot ranks shed down to the target ceil(mean), cold ranks fill up to it, guided by the Sinkhorn flow.
    Spill passes: whatever a hot rank could not shed (cold ranks ran out of slots) goes to ranks with a free slot
    at or below the target, each allowed h tokens above it, h as small as the free slots allow (doubled if needed).
    """
    num_ranks = rank_load.shape[0]
    num_experts = expert_load.shape[0]
    num_nodes = num_ranks // ranks_per_node
    home = torch.arange(num_experts) // (num_experts // num_ranks)
    rank_node = torch.arange(num_ranks) // ranks_per_node
    target = -(-int(rank_load.sum()) // num_ranks)  # ceil(mean)
    supply = (rank_load - target).clamp_min(0)  # (ranks,) tokens above the target
    demand = (target - rank_load).clamp_min(0)  # (ranks,) room below it
    slot_expert = torch.full((num_ranks * slots_per_rank,), -1, dtype=torch.int64)
    slot_tokens = torch.zeros(num_ranks * slots_per_rank, dtype=torch.int64)
    total_supply = int(supply.sum())
    if total_supply == 0:
        return slot_expert, slot_tokens
    supply_share = (supply.double() / total_supply).float()
    demand_share = (demand.double() / int(demand.sum())).float()
    if use_triton:
        from ._sinkhorn_triton import sinkhorn_flow_triton

        plan = sinkhorn_flow_triton(supply_share, demand_share, cost, epsilon, iterations)
    else:
        plan = sinkhorn_flow(supply_share, demand_share, cost, epsilon, iterations)
    rank_flow = (plan.double() * total_supply).floor().long()  # (ranks, ranks) tokens
    node_flow = torch.zeros((num_nodes, num_nodes), dtype=torch.int64)
    node_flow.index_put_((rank_node.unsqueeze(1).expand_as(rank_flow), rank_node.expand_as(rank_flow)), rank_flow, True)
    max_rounds = num_ranks * slots_per_rank
    surplus = torch.where(supply[home] > 0, expert_load, 0)
    slot_expert, slot_tokens = _run_matching(
        use_triton,
        surplus,
        supply,
        demand,
        node_flow,
        ranks_per_node,
        slot_expert,
        slot_tokens,
        slot_capacity,
        max_rounds,
    )
    # Spill passes. Locality now only breaks ties: the "flow" is unlimited inside a node and zero across.
    local_flow = torch.where(torch.eye(num_nodes, dtype=torch.bool), MAX_TOKENS, 0).long()
    headroom = 0
    for _round in range(4):
        sent, hosted = _sent_and_hosted(slot_expert, slot_tokens, num_experts, num_ranks)
        now = rank_load - sent.view(num_ranks, -1).sum(dim=1) + hosted  # (ranks,)
        if int(now.max()) <= target + headroom:
            break
        free = slots_per_rank - (slot_expert.view(num_ranks, -1) >= 0).sum(dim=1)
        headroom = _spill_level(now, target, free, 2 * headroom)
        level = target + headroom
        excess = (now - level).clamp_min(0)
        taker = (free > 0) & (now <= level)
        if not bool(taker.any()):
            break
        spill_demand = torch.where(taker, level - now, 0)
        spill_surplus = torch.where(excess[home] > 0, expert_load - sent, 0)
        slot_expert, slot_tokens = _run_matching(
            use_triton,
            spill_surplus,
            excess,
            spill_demand,
            local_flow,
            ranks_per_node,
            slot_expert,
            slot_tokens,
            slot_capacity,
            max_rounds,
        )
    return slot_expert, slot_tokens


def plan_replicas(
    load: torch.Tensor,
    *,
    spare_slots_per_rank: int,
    ranks_per_node: int,
    inter_node_cost: float = 3.0,
    slot_capacity: int | None = None,
    sinkhorn_epsilon: float = 0.25,
    sinkhorn_iterations: int = 64,
    backend: Literal["auto", "torch", "triton"] = "auto",
) -> ReplicaPlan:
    """Plan one micro-batch's replicas. See the module docstring for the three phases.

    load: (source ranks, experts) tokens each source rank routes to each expert; rank r hosts experts
    r * E/R ... (r + 1) * E/R - 1. spare_slots_per_rank: K, spare slots on every rank. ranks_per_node: ranks sharing
    a node (cost 1 between them, ``inter_node_cost`` across nodes). slot_capacity: most tokens one slot may take
    (None: only the target load limits it). backend: "auto" runs the Triton kernels for CUDA tensors, torch otherwise.
    Returns a ``ReplicaPlan`` (CPU tensors).
    """
    use_triton = _use_triton(load, backend) if isinstance(load, torch.Tensor) else False
    load = _check_replica_arguments(load, spare_slots_per_rank, ranks_per_node, inter_node_cost)
    if slot_capacity is not None:
        check_positive_int(slot_capacity, "slot_capacity")
    check_positive_int(sinkhorn_iterations, "sinkhorn_iterations")
    # NaN fails every comparison: `not x > 0` refuses it where `x <= 0` would let it through.
    # pylint: disable-next=unnecessary-negation
    if not isinstance(sinkhorn_epsilon, (int, float)) or not sinkhorn_epsilon > 0:
        raise ValueError(f"sinkhorn_epsilon={sinkhorn_epsilon!r} must be a number > 0 (entropic regularisation)")
    num_ranks, num_experts = load.shape
    experts_per_rank = num_experts // num_ranks

    expert_load = load.sum(dim=0)  # (experts,)
    rank_load = expert_load.view(num_ranks, experts_per_rank).sum(dim=1)  # (ranks,)
    capacity = MAX_TOKENS if slot_capacity is None else min(int(slot_capacity), MAX_TOKENS)
    cost = rank_cost_matrix(num_ranks, ranks_per_node, float(inter_node_cost))
    slot_expert, slot_tokens = _plan_slots(
        expert_load,
        rank_load,
        spare_slots_per_rank,
        ranks_per_node,
        cost,
        capacity,
        float(sinkhorn_epsilon),
        sinkhorn_iterations,
        use_triton,
    )
    tokens = assign_tokens(load, slot_expert, slot_tokens, spare_slots_per_rank, cost)
    sent_per_expert = torch.zeros(num_experts, dtype=torch.int64).index_add_(
        0, slot_expert.clamp_min(0), torch.where(slot_expert >= 0, slot_tokens, 0)
    )
    kept = rank_load - sent_per_expert.view(num_ranks, experts_per_rank).sum(dim=1)
    hosted = tokens.sum(dim=0).view(num_ranks, spare_slots_per_rank).sum(dim=1)
    return ReplicaPlan(
        slot_expert=slot_expert,
        tokens=tokens,
        rank_load_before=rank_load,
        rank_load_after=kept + hosted,
        spare_slots_per_rank=spare_slots_per_rank,
        ranks_per_node=ranks_per_node,
        num_experts=num_experts,
    )
