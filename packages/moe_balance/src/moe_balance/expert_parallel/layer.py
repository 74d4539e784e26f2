"""An expert-parallel MoE layer that carries out a placement and, per micro-batch, a replica plan.

Per micro-batch, on every rank (all steps are collectives over the layer's group):

1. counts: each token-expert pair gets its physical slot (``dispatch.physical_slots``); the (physical slots,)
   counts are all-gathered with a status column, so a rank with bad input stops every rank at this first step;
2. plan: ``plan_replicas`` on the gathered (ranks, physical slots) counts, the same on every rank (or the caller's
   plan, checked: same on every rank, adds up to the counts);
3. guest weights: issued asynchronously (``guests.start_guest_weights``) as soon as the plan is known;
4. dispatch: pairs sorted by destination rank and compute slot, one ``all_to_all_single`` (``exchange.py``);
5. home experts compute; then the guest weights are waited for and the guests compute;
6. combine: the reverse ``all_to_all_single`` brings every output back to its pair, in the pair's original order,
   and the gates weight them.

Backward runs the same exchanges in reverse; each guest's weight gradient is added to its home slot's gradient on
the home rank (``guests.py``). The rank's measurements go to ``last_stats`` (``record.MicroBatchStats``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from moe_balance.placement import ReplicaPlan, plan_replicas

from .agreement import (
    ExpertParallelError,
    agree_on_every_rank,
    collective_device,
    describe_ranks,
    raise_for_failed_ranks,
    tensor_digest,
)
from .config import ExpertParallelConfig
from .dispatch import DispatchLayout, dispatch_layout, log2phy_of, physical_slots, plan_problem
from .exchange import all_to_all_rows
from .experts import SlotExperts, expert_ffn
from .guests import guest_moves, guest_weights, start_guest_weights
from .p2p import PendingSlots
from .placement_file import default_phy2log
from .placement_moves import PlacementMove, apply_placement, slot_tensors
from .record import MicroBatchStats
from .replica_gradients import sum_replica_gradients


def _inverse(order: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(order).index_copy_(0, order, torch.arange(order.shape[0], device=order.device))


class ExpertParallelMoE(nn.Module):
    """The experts of one MoE layer spread over the ranks of ``group``; routing happens before (``moe_balance.route``).

    Holds this rank's S physical slots (``experts``: ``SlotExperts``) and ``phy2log`` (R,), the placement in service
    (default: slot s holds expert s mod E). Construction is a collective: every rank must pass the same config.
    """

    def __init__(
        self,
        config: ExpertParallelConfig,
        *,
        group: dist.ProcessGroup | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.group = group
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        problem = config.world_problem(self.world_size)
        agree_on_every_rank(
            problem,
            "expert-parallel layer",
            group,
            digest=config.digest(),
            digest_of="layer configs",
            fix="build the layer from the same ExpertParallelConfig on every rank",
        )
        self.num_slots = config.slots_per_rank * self.world_size
        self.experts = SlotExperts(config.slots_per_rank, config.d_model, config.d_ff, dtype=dtype, device=device)
        self.register_buffer("phy2log", default_phy2log(config.num_experts, self.num_slots))
        self.last_stats: MicroBatchStats | None = None

    def apply_placement(
        self, new_phy2log: torch.Tensor, optimizer: torch.optim.Optimizer | None = None
    ) -> PlacementMove:
        """Move to a new placement between steps (a collective); the optimizer's per-slot state moves along."""
        move = apply_placement(
            slot_tensors(self.experts.weights(), optimizer),
            self.phy2log.cpu(),
            new_phy2log,
            ranks_per_node=self.config.ranks_per_node,
            group=self.group,
        )
        self.phy2log.copy_(torch.as_tensor(new_phy2log, dtype=torch.int64))
        return move

    def sum_replica_gradients(self) -> int:
        """After backward, before the optimizer step: every slot of an expert gets the sum of its slots' gradients
        (placements with redundant slots; nothing travels without them). A collective. Returns bytes sent."""
        return sum_replica_gradients(self.experts.weights(), self.phy2log.cpu(), group=self.group)

    def _input_problem(self, x: object, topk_idx: object, gates: object, plan: object) -> str | None:
        config = self.config
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != config.d_model or not x.is_floating_point():
            return f"x must be a floating-point (tokens, d_model={config.d_model}) tensor; got {_describe(x)}"
        if not isinstance(topk_idx, torch.Tensor) or topk_idx.dim() != 2 or topk_idx.shape[0] != x.shape[0]:
            return f"topk_idx must be ({x.shape[0]} tokens, top_k) like x; got {_describe(topk_idx)}"
        if topk_idx.is_floating_point() or topk_idx.dtype == torch.bool:
            return f"topk_idx must hold integer expert ids; got dtype {topk_idx.dtype}"
        if topk_idx.numel() and (int(topk_idx.min()) < 0 or int(topk_idx.max()) >= config.num_experts):
            return (
                f"topk_idx holds expert ids {int(topk_idx.min())}..{int(topk_idx.max())}, outside "
                f"[0, {config.num_experts}): route with this layer's expert count"
            )
        if not isinstance(gates, torch.Tensor) or gates.shape != topk_idx.shape or not gates.is_floating_point():
            shape = tuple(topk_idx.shape)
            return f"gates must be a floating-point tensor shaped like topk_idx {shape}; got {_describe(gates)}"
        if plan is not None and (config.spare_slots_per_rank == 0 or not isinstance(plan, ReplicaPlan)):
            return "a replica plan needs a ReplicaPlan and a layer with spare_slots_per_rank > 0"
        return None

    def _gather_counts(self, physical: torch.Tensor, problem: str | None, plan: ReplicaPlan | None) -> torch.Tensor:
        """(ranks, R + 2) int64 on the CPU: every rank's counts per physical slot, its status, its plan digest."""
        counts = torch.bincount(physical, minlength=self.num_slots)
        digest = tensor_digest(plan.slot_expert, plan.tokens) if isinstance(plan, ReplicaPlan) else 0
        mine = torch.cat([counts, torch.tensor([int(problem is not None), digest])]).to(collective_device(self.group))
        gathered = [torch.empty_like(mine) for _rank in range(self.world_size)]
        dist.all_gather(gathered, mine, group=self.group)
        table = torch.stack(gathered).cpu()
        raise_for_failed_ranks(
            table[:, self.num_slots].bool().tolist(), problem, "expert-parallel MoE input", self.group
        )
        return table

    def _plan(self, table: torch.Tensor, plan: ReplicaPlan | None) -> ReplicaPlan | None:
        config = self.config
        load = table[:, : self.num_slots]  # (ranks, R)
        if config.spare_slots_per_rank == 0:
            return None
        if plan is None:
            return plan_replicas(
                load,
                spare_slots_per_rank=config.spare_slots_per_rank,
                ranks_per_node=config.ranks_per_node,
                inter_node_cost=float(config.inter_node_cost),
                slot_capacity=config.slot_capacity,
            )
        digests = table[:, self.num_slots + 1].tolist()
        if len(set(digests)) > 1:
            same = describe_ranks([rank for rank, digest in enumerate(digests) if digest == digests[0]])
            raise ExpertParallelError(
                f"expert-parallel MoE input refused on every rank: the ranks hold different replica plans ({same} "
                "hold rank 0's, the others another); plan from the all-gathered counts on every rank, or pass "
                "plan=None and let the layer plan"
            )
        problem = plan_problem(plan, load, config.slots_per_rank, config.spare_slots_per_rank, config.ranks_per_node)
        if problem is not None:
            raise ExpertParallelError(f"expert-parallel MoE input refused on every rank: {problem}")
        return plan

    def forward(
        self, x: torch.Tensor, topk_idx: torch.Tensor, gates: torch.Tensor, *, plan: ReplicaPlan | None = None
    ) -> torch.Tensor:
        """x: (tokens, d_model); topk_idx, gates: (tokens, k) from the router. Returns (tokens, d_model):
        sum over k of gate x expert(x). plan: a replica plan to use instead of planning here (checked)."""
        config = self.config
        slots, spares = config.slots_per_rank, config.spare_slots_per_rank
        problem = self._input_problem(x, topk_idx, gates, plan)
        physical = torch.zeros(0, dtype=torch.int64)
        if problem is None:
            log2phy, logcnt = log2phy_of(self.phy2log.cpu(), config.num_experts)
            physical = physical_slots(topk_idx.reshape(-1).cpu().long(), log2phy, logcnt, self.rank)  # (pairs,)
        table = self._gather_counts(physical, problem, plan)
        events = ["counts gathered"]
        plan = self._plan(table, plan)
        layout = dispatch_layout(self.rank, physical, table[:, : self.num_slots], plan, slots, spares)
        weights = self.experts.weights()
        pending = moves = None
        if plan is not None:
            moves = guest_moves(plan, self.rank, slots, spares)
            pending = start_guest_weights(moves, weights, self.group)
            events.append("guest weights issued")

        top_k = topk_idx.shape[1]
        send_order = layout.send_order.to(x.device)
        rows = x[send_order // top_k]  # (pairs, d_model), by destination rank, compute slot, pair
        received = all_to_all_rows(rows, layout.send_counts, layout.recv_counts, self.group)  # (received, d_model)
        events.append("tokens dispatched")
        compute_order = torch.sort(layout.recv_slot, stable=True).indices.to(x.device)
        chunks = received[compute_order].split(layout.slot_rows.tolist())  # S + K chunks, (rows, d_model) each
        outputs = [expert_ffn(chunks[c], *(w[c] for w in weights)) for c in range(slots)]
        events.append("home experts computed")
        if plan is not None and pending is not None and moves is not None:  # set together with plan
            guests = guest_weights(pending, moves, weights, spares, received, self.group)  # (K, ...) each
            events.append("guest weights received")
            outputs += [expert_ffn(chunks[slots + i], *(g[i] for g in guests)) for i in range(spares)]
            events.append("guest experts computed")
        computed = torch.cat(outputs)[_inverse(compute_order)]  # (received, d_model), receive order
        back = all_to_all_rows(computed, layout.recv_counts, layout.send_counts, self.group)  # (pairs, d_model)
        events.append("outputs combined")
        per_pair = back[_inverse(send_order)].view(x.shape[0], top_k, config.d_model)  # (tokens, k, d_model)
        self.last_stats = self._stats(table, plan, layout, x, pending, events)
        return (per_pair * gates.to(per_pair.dtype).unsqueeze(-1)).sum(dim=1)

    def _stats(
        self,
        table: torch.Tensor,
        plan: ReplicaPlan | None,
        layout: DispatchLayout,
        x: torch.Tensor,
        pending: PendingSlots | None,
        events: list[str],
    ) -> MicroBatchStats:
        """What this rank did: pairs computed (measured from the exchange), bytes it sent, the plan's prediction."""
        slots, rank = self.config.slots_per_rank, self.rank
        routed = int(table[:, rank * slots : (rank + 1) * slots].sum())
        stats = MicroBatchStats(
            tokens_routed=routed,
            tokens_computed=int(layout.slot_rows.sum()),
            tokens_computed_as_guest=int(layout.slot_rows[slots:].sum()),
            tokens_predicted=int(plan.rank_load_after[rank]) if plan is not None else routed,
            replicas=int((plan.slot_expert >= 0).sum()) if plan is not None else 0,
            events=events,
            plan=plan,
        )
        node = rank // self.config.ranks_per_node
        row_size = x.shape[1] * x.element_size()
        for peer in range(self.world_size):
            if peer == rank:
                continue
            kind = "within_node" if peer // self.config.ranks_per_node == node else "across_nodes"
            sent = (layout.send_counts[peer] + layout.recv_counts[peer]) * row_size  # dispatch + combine
            setattr(stats, f"token_bytes_{kind}", getattr(stats, f"token_bytes_{kind}") + sent)
            if pending is not None:
                sent = pending.sent_bytes.get(peer, 0)
                setattr(stats, f"weight_bytes_{kind}", getattr(stats, f"weight_bytes_{kind}") + sent)
        if pending is not None:
            stats.guest_p2p_ops = pending.ops
        return stats


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"shape {tuple(value.shape)}, dtype {value.dtype}"
    return type(value).__name__
