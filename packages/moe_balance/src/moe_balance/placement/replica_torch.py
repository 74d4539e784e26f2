"""The replica planner's phases 1 and 2 in torch: the production CPU path, and the references of the Triton kernels.

Phase 1, ``sinkhorn_flow``: entropic optimal transport between hot ranks (supply = load above the target) and cold
ranks (demand = room below it), in the log domain so a large cost / epsilon cannot underflow.

Phase 2, ``match_slots``: expert-level, column-first matching in rounds. Each round every cold rank with a free spare
slot and room left proposes one hot expert, ranked by (at least half of the tokens backed by node-to-node flow still
unused, tokens it could take, tokens backed, lowest expert id); each hot rank grants its best proposal (ties: lowest
cold rank). Rounds repeat until nobody can propose. All quantities are integers, so the kernel agrees exactly.
"""

from __future__ import annotations

import torch

# Proposal key, one int64: [at least half of it backed by flow] * 2**62 + tokens * 2**31 + backed tokens.
KEY_BACKED = 2**62
KEY_SHIFT = 2**31


def sinkhorn_flow(
    supply: torch.Tensor, demand: torch.Tensor, cost: torch.Tensor, epsilon: float, iterations: int
) -> torch.Tensor:
    """Entropic transport plan between supply and demand.

    supply, demand: (ranks,) float32, each summing to 1 (zeros allowed: those rows/columns get no flow).
    cost: (ranks, ranks) float32. Returns plan (ranks, ranks) float32 whose columns sum to demand and rows ~ supply.
    Log-domain iterations on the rows and columns that carry mass: alpha = log a - LSE_j(beta_j - C_ij / eps),
    beta = log b - LSE_i(alpha_i - C_ij / eps), starting from beta = 0.
    """
    rows = (supply > 0).nonzero().flatten()
    cols = (demand > 0).nonzero().flatten()
    neg_cost = -cost[rows][:, cols] / epsilon  # (live rows, live cols)
    log_supply = supply[rows].log()
    log_demand = demand[cols].log()
    alpha = torch.zeros_like(log_supply)
    beta = torch.zeros_like(log_demand)
    for _iteration in range(iterations):
        alpha = log_supply - torch.logsumexp(neg_cost + beta.unsqueeze(0), dim=1)
        beta = log_demand - torch.logsumexp(neg_cost + alpha.unsqueeze(1), dim=0)
    plan = torch.zeros_like(cost)
    plan[rows.unsqueeze(1), cols.unsqueeze(0)] = (alpha.unsqueeze(1) + beta.unsqueeze(0) + neg_cost).exp()
    return plan


def match_slots(
    expert_surplus: torch.Tensor,
    rank_supply: torch.Tensor,
    rank_demand: torch.Tensor,
    node_flow: torch.Tensor,
    ranks_per_node: int,
    slot_expert: torch.Tensor,
    slot_tokens: torch.Tensor,
    slot_capacity: int,
    max_rounds: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Give free spare slots to hot experts, round by round; returns updated (slot_expert, slot_tokens).

    expert_surplus: (experts,) int64 tokens each expert may still shed; experts live on ranks contiguously.
    rank_supply / rank_demand: (ranks,) int64 tokens each rank must still shed / may still take.
    node_flow: (nodes, nodes) int64 tokens the rank-level plan sends from each node to each node.
    slot_expert, slot_tokens: (ranks * K,) int64, slots already given (expert >= 0) are kept; rank r owns slots
    r * K ... r * K + K - 1. slot_capacity: most tokens one slot may take. The inputs are not modified.

    A proposal of cold rank j for expert e takes t = min(surplus e, supply of e's rank, demand j, slot capacity)
    tokens; its key is (min(t, flow left between their nodes), t), compared as one integer, lowest expert id on ties.
    """
    num_experts = expert_surplus.shape[0]
    num_ranks = rank_supply.shape[0]
    num_nodes = node_flow.shape[0]
    slots_per_rank = slot_expert.shape[0] // num_ranks
    experts = torch.arange(num_experts)
    ranks = torch.arange(num_ranks)
    home = experts // (num_experts // num_ranks)  # (experts,)
    rank_node = ranks // ranks_per_node
    pair_index = rank_node[home].unsqueeze(0) * num_nodes + rank_node.unsqueeze(1)  # (ranks, experts) node pair
    flat_pair = pair_index.flatten()
    slot_expert = slot_expert.clone()
    slot_tokens = slot_tokens.clone()
    slots_used = (slot_expert.view(num_ranks, slots_per_rank) >= 0).sum(dim=1)  # (ranks,)
    # blocked[j, e]: cold rank j cannot take expert e (hosts it already, or it is its own expert).
    blocked = (slot_expert.view(num_ranks, slots_per_rank, 1) == experts).any(dim=1)  # (ranks, experts)
    blocked |= home.unsqueeze(0) == ranks.unsqueeze(1)
    surplus = expert_surplus.clone()  # (experts,)
    supply_left = rank_supply.clone()  # (ranks,) as hot ranks
    demand_left = rank_demand.clone()  # (ranks,) as cold ranks
    flow_left = node_flow.flatten().clone()  # (nodes * nodes,)
    granted_expert = []  # per round: (ranks,) expert granted to each cold rank, -1 = none
    granted_tokens = []
    for _round in range(max_rounds):
        # Proposals: tokens cold rank j could take of expert e, and how many of them the node-level flow backs.
        offer = torch.minimum(surplus, supply_left[home]).clamp_(max=slot_capacity)  # (experts,)
        room = torch.where(slots_used < slots_per_rank, demand_left, 0)  # a rank with no free slot takes nothing
        tokens = torch.minimum(offer.unsqueeze(0), room.unsqueeze(1)).masked_fill_(blocked, 0)  # (ranks, experts)
        backed = torch.minimum(tokens, flow_left[flat_pair].view(num_ranks, num_experts))
        key = torch.add(backed, tokens, alpha=KEY_SHIFT).add_((2 * backed >= tokens).long(), alpha=KEY_BACKED)
        key.masked_fill_(tokens == 0, -1)
        proposal_key, proposal = key.max(dim=1)  # (ranks,) best expert of each cold rank, first on ties
        # Arbitration: each hot rank grants its best proposal (first cold rank on ties).
        proposal_home = home[proposal]
        offers = torch.where(proposal_home.unsqueeze(0) == ranks.unsqueeze(1), proposal_key.unsqueeze(0), -1)
        best_offer, winner = offers.max(dim=1)  # (hot ranks,)
        granted = torch.zeros(num_ranks, dtype=torch.bool).index_fill_(0, winner[best_offer >= 0], True)
        if not bool(granted.any()):
            break
        amount = tokens.gather(1, proposal.unsqueeze(1)).squeeze(1).masked_fill_(~granted, 0)  # (ranks,)
        granted_expert.append(proposal.masked_fill(~granted, -1))
        granted_tokens.append(amount)
        slots_used += granted
        blocked.scatter_(1, proposal.unsqueeze(1), granted.unsqueeze(1) | blocked.gather(1, proposal.unsqueeze(1)))
        taken = -amount
        surplus.index_add_(0, proposal, taken)
        supply_left.index_add_(0, proposal_home, taken)
        demand_left += taken
        flow_left.index_add_(0, pair_index.gather(1, proposal.unsqueeze(1)).squeeze(1), taken).clamp_(min=0)
    # Write the grants into the slots: a rank's new grants fill its free slots in round order.
    if granted_expert:
        expert_log = torch.stack(granted_expert, dim=1)  # (ranks, rounds)
        tokens_log = torch.stack(granted_tokens, dim=1)
        got = expert_log >= 0
        position = ranks.unsqueeze(1) * slots_per_rank + (slots_used - got.sum(dim=1)).unsqueeze(1)
        position = position + got.long().cumsum(dim=1) - 1
        slot_expert[position[got]] = expert_log[got]
        slot_tokens[position[got]] = tokens_log[got]
    return slot_expert, slot_tokens
