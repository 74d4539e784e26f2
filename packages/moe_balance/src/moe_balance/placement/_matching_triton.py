"""Triton kernel for phase 2 of the replica plan: all matching rounds in one program.

State (remaining expert surplus, hot-rank supply, cold-rank demand, slots used, which (rank, expert) pairs are
blocked) lives in registers across rounds; the node-to-node flow lives in a small global scratch vector because each
round reads it at (expert's node, rank's node), a gather registers cannot do; a barrier orders its update before the
next round's read. Rounds after the last grant change nothing, so the kernel simply runs ``max_rounds`` of them.
Reference: ``replica_torch.match_slots`` (same proposals, keys, arbitration and updates; integer arithmetic, so
the two agree exactly); tests compare them under TRITON_INTERPRET=1. One program, no program id: every offset is
below ``MAX_CELLS`` times the slots per rank, far from 2**31, so int32 offsets are safe here.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_balance.kernels._device import device_guard

from .replica_torch import KEY_BACKED, KEY_SHIFT

MAX_CELLS = 32 * 1024  # ranks x experts held in one program (e.g. 64 ranks x 512 experts)


@triton.jit
def _match_kernel(  # type: ignore[no-untyped-def]  # Triton reads parameter annotations: see _sinkhorn_triton
    surplus_ptr,
    supply_ptr,
    demand_ptr,
    flow_ptr,
    slot_expert_ptr,
    slot_tokens_ptr,
    num_experts,
    num_ranks,
    num_nodes,
    experts_per_rank,
    ranks_per_node,
    slot_capacity,
    max_rounds,
    SLOTS: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_NN: tl.constexpr,
    KEY_BACKED_C: tl.constexpr,
    KEY_SHIFT_C: tl.constexpr,
):
    expert = tl.arange(0, BLOCK_E)  # (E,)
    rank = tl.arange(0, BLOCK_R)  # (R,) cold ranks / slot owners
    hot = tl.arange(0, BLOCK_R)  # (R,) hot ranks in the arbitration matrix
    pair = tl.arange(0, BLOCK_NN)  # (N*N,) node pairs
    expert_ok = expert < num_experts
    rank_ok = rank < num_ranks
    home = expert // experts_per_rank  # (E,)
    rank_node = rank // ranks_per_node  # (R,)
    flow_index = (home // ranks_per_node)[None, :] * num_nodes + rank_node[:, None]  # (R, E)

    surplus = tl.load(surplus_ptr + expert, mask=expert_ok, other=0)  # (E,) int64
    supply_left = tl.load(supply_ptr + home, mask=expert_ok, other=0)  # (E,) supply of each expert's rank
    demand_left = tl.load(demand_ptr + rank, mask=rank_ok, other=0)  # (R,)
    blocked = (home[None, :] == rank[:, None]) | ~expert_ok[None, :] | ~rank_ok[:, None]  # (R, E)
    slots_used = tl.zeros([BLOCK_R], dtype=tl.int64)
    for k in tl.static_range(SLOTS):
        held = tl.load(slot_expert_ptr + rank * SLOTS + k, mask=rank_ok, other=-1)  # (R,)
        blocked = blocked | (held[:, None] == expert[None, :])
        slots_used += (held >= 0).to(tl.int64)
    blocked = blocked | (slots_used >= SLOTS)[:, None]

    for _round in range(max_rounds):
        offer = tl.minimum(tl.minimum(surplus, supply_left), slot_capacity)  # (E,)
        tokens = tl.minimum(offer[None, :], demand_left[:, None])  # (R, E)
        tokens = tl.where(blocked, 0, tokens)
        flow = tl.load(flow_ptr + flow_index, mask=~blocked, other=0)
        backed = tl.minimum(tokens, flow)
        key = (2 * backed >= tokens).to(tl.int64) * KEY_BACKED_C + tokens * KEY_SHIFT_C + backed
        key = tl.where(tokens == 0, -1, key)
        proposal_key = tl.max(key, axis=1)  # (R,)
        proposal = tl.argmax(key, axis=1, tie_break_left=True)  # (R,) first best expert
        proposal_home = proposal // experts_per_rank
        # Arbitration: hot rank i grants its best proposal, the first cold rank on ties.
        offers = tl.where(proposal_home[None, :] == hot[:, None], proposal_key[None, :], -1)  # (hot, cold)
        best_offer = tl.max(offers, axis=1)
        winner = tl.argmax(offers, axis=1, tie_break_left=True)  # (hot,)
        chosen = (winner[:, None] == rank[None, :]) & (best_offer >= 0)[:, None]  # (hot, cold)
        granted = tl.max(chosen.to(tl.int32), axis=0) > 0  # (R,)
        took = (expert[None, :] == proposal[:, None]) & granted[:, None]  # (R, E)
        amount = tl.sum(tl.where(took, tokens, 0), axis=1)  # (R,)
        position = rank * SLOTS + slots_used
        tl.store(slot_expert_ptr + position, proposal.to(tl.int64), mask=granted)
        tl.store(slot_tokens_ptr + position, amount, mask=granted)
        slots_used += granted.to(tl.int64)
        blocked = blocked | took | (slots_used >= SLOTS)[:, None]
        surplus -= tl.sum(tl.where(took, amount[:, None], 0), axis=0)
        same_home = (proposal_home[:, None] == home[None, :]) & granted[:, None]  # (R, E)
        supply_left -= tl.sum(tl.where(same_home, amount[:, None], 0), axis=0)
        demand_left -= amount
        # Node-pair flow: subtract what was granted between the two nodes, never below zero.
        granted_pair = (proposal_home // ranks_per_node) * num_nodes + rank_node  # (R,)
        used_flow = tl.sum(tl.where(granted_pair[None, :] == pair[:, None], amount[None, :], 0), axis=1)
        pair_ok = pair < num_nodes * num_nodes
        old_flow = tl.load(flow_ptr + pair, mask=pair_ok, other=0)
        tl.debug_barrier()  # every thread has read this round's flow before it changes
        tl.store(flow_ptr + pair, tl.maximum(old_flow - used_flow, 0), mask=pair_ok)
        tl.debug_barrier()  # and the update is visible to the next round's read


def fits_matching_kernel(num_ranks: int, num_experts: int) -> bool:
    """Whether one program can hold the (ranks, experts) state."""
    return max(16, triton.next_power_of_2(num_experts)) * max(16, triton.next_power_of_2(num_ranks)) <= MAX_CELLS


def match_slots_triton(
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
    """Same contract as ``replica_torch.match_slots``; runs on the GPU when there is one. Returns CPU tensors."""
    num_experts = expert_surplus.shape[0]
    num_ranks = rank_supply.shape[0]
    num_nodes = node_flow.shape[0]
    block_e = max(16, triton.next_power_of_2(num_experts))
    block_r = max(16, triton.next_power_of_2(num_ranks))
    if not fits_matching_kernel(num_ranks, num_experts):
        raise ValueError(
            f"the Triton matching kernel holds at most {MAX_CELLS} rank x expert cells in one program; got "
            f"{num_ranks} ranks x {num_experts} experts: use backend='torch'"
        )
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

    def to_device(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(device, torch.int64).contiguous().clone()

    out_expert = to_device(slot_expert)
    out_tokens = to_device(slot_tokens)
    with device_guard(out_expert):
        _match_kernel[(1,)](
            to_device(expert_surplus),
            to_device(rank_supply),
            to_device(rank_demand),
            to_device(node_flow.flatten()),
            out_expert,
            out_tokens,
            num_experts,
            num_ranks,
            num_nodes,
            num_experts // num_ranks,
            ranks_per_node,
            int(slot_capacity),
            int(max_rounds),
            SLOTS=slot_expert.shape[0] // num_ranks,
            BLOCK_E=block_e,
            BLOCK_R=block_r,
            BLOCK_NN=max(16, triton.next_power_of_2(num_nodes * num_nodes)),
            KEY_BACKED_C=KEY_BACKED,
            KEY_SHIFT_C=KEY_SHIFT,
            num_warps=16 if block_e * block_r > 8192 else 8,
        )
    return out_expert.cpu(), out_tokens.cpu()
