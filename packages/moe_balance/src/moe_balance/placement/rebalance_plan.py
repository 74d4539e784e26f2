"""Improved expert placement: balanced replicas on distinct GPUs, load-proportional node budgets, few moves.

Where the published algorithm falls short, and what this planner does instead:

- it can put two replicas of one expert on one GPU (the second copy adds memory and no parallelism): here an expert
  gets at most one replica per GPU;
- it gives every node num_replicas / num_nodes slots for the experts of the groups it was given, so when groups ==
  nodes (the DeepSeek-V3 layout) a node holding a heavy group stays heavy: here replica counts are chosen for the
  whole layer (largest load per replica first), so each node's budget of replicas follows its load, and replicas
  a node cannot host spill to other nodes' GPUs, only as far as balance needs;
- it requires num_replicas to be a multiple of num_gpus: here GPUs get floor or ceil slots (``gpu_slot_counts``);
- it plans from scratch: given the layout in service, a replica prefers the GPU that already holds its expert, GPUs
  of a node are relabelled to match their previous contents, kept experts keep their slot, and a layer whose balance
  would improve by less than ``min_gain`` keeps its layout.

GPU placement is longest-processing-time first, all layers at once: replicas by load, heaviest first, each to a GPU
with a free slot and without that expert. While the replica keeps a GPU under the layer's target load (mean GPU load
x (1 + ``locality_slack``)), a GPU that held the expert before wins, then a GPU of the expert's home node (the node
its group was packed onto); otherwise the least-loaded GPU. A last pass swaps replicas off each layer's heaviest GPU
until it is within the target, preferring swaps that keep load on home nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ._packing import build_log2phy, greedy_pack, occurrence_ranks, pack_of_items, replicate_greedy


@dataclass(frozen=True)
class RebalancePlan:
    """An improved-mode placement and its report."""

    phy2log: torch.Tensor  # (layers, replicas) int64: logical expert of each physical slot
    log2phy: torch.Tensor  # (layers, experts, X) int64: slots of each expert, -1 padded (X: see log2phy_layout)
    logcnt: torch.Tensor  # (layers, experts) int64: replica count of each expert
    gpu_slot_counts: torch.Tensor  # (gpus,) int64: slots per GPU; GPU g owns the next gpu_slot_counts[g] slots
    max_over_mean: torch.Tensor  # (layers,) float64: heaviest GPU load / mean GPU load of the plan
    previous_max_over_mean: torch.Tensor | None  # (layers,) float64: the same for ``previous`` under this weight
    layers_kept: torch.Tensor  # (layers,) bool: layers that kept the previous layout (gain under min_gain)
    moved_slots: torch.Tensor  # (layers,) int64: slots whose expert changed against previous (0 without previous)
    bytes_moved: int | None  # moved slots x expert_size_bytes, when the size was given
    cross_node_load_share: float | None  # share of load served outside the expert's home node (None: no homes)
    exact_max_over_mean: torch.Tensor | None = None  # (layers,) float64: the exact (published) plan's peak, if asked


def gpu_slot_counts(num_replicas: int, num_gpus: int, num_nodes: int) -> torch.Tensor:
    """Slots per GPU when num_replicas is not a multiple of num_gpus: floor or ceil, extras spread across nodes.

    The extra slots go to the first GPU of every node, then the second, and so on, so nodes differ by at most one.
    Returns (gpus,) int64.
    """
    gpus_per_node = num_gpus // num_nodes
    gpu = torch.arange(num_gpus)
    spread_rank = (gpu % gpus_per_node) * num_nodes + gpu // gpus_per_node
    return num_replicas // num_gpus + (spread_rank < num_replicas % num_gpus).long()


def gpu_loads(phy2log: torch.Tensor, weight: torch.Tensor, slot_gpu: torch.Tensor, num_gpus: int) -> torch.Tensor:
    """GPU loads of a layout: each replica carries its expert's load / replica count. Returns (layers, gpus)."""
    num_layers, num_experts = weight.shape
    count = torch.zeros((num_layers, num_experts), dtype=torch.float64).scatter_add_(
        1, phy2log, torch.ones_like(phy2log, dtype=torch.float64)
    )
    replica_load = (weight / count).gather(1, phy2log)  # (layers, replicas)
    gpu_load = torch.zeros((num_layers, num_gpus), dtype=torch.float64)
    return gpu_load.index_add_(1, slot_gpu, replica_load)


def max_over_mean(gpu_load: torch.Tensor) -> torch.Tensor:
    mean = gpu_load.mean(dim=1)
    ratio = gpu_load.max(dim=1).values / mean.clamp_min(1e-300)
    return torch.where(mean > 0, ratio, torch.ones_like(ratio))


SWAP_PARTNERS = 12  # GPUs (among the lightest) a heavy GPU may swap with in one round
SWAP_PEAKS = 4  # heaviest GPUs of a layer relieved in one round


class _GpuState:
    """Per-layer GPU contents during placement. All tensors are batched over layers."""

    def __init__(self, num_layers: int, capacity: torch.Tensor, num_experts: int):
        num_gpus = capacity.shape[0]
        self.capacity = capacity  # (gpus,)
        self.load = torch.zeros((num_layers, num_gpus), dtype=torch.float64)
        self.free = capacity.expand(num_layers, num_gpus).clone()  # (layers, gpus)
        self.hosts = torch.zeros((num_layers, num_gpus, num_experts), dtype=torch.bool)
        self.content = torch.full((num_layers, num_gpus, int(capacity.max())), -1, dtype=torch.int64)

    def place(self, rows: torch.Tensor, gpu: torch.Tensor, expert: torch.Tensor, load: torch.Tensor) -> None:
        position = self.capacity[gpu] - self.free[rows, gpu]
        self.content[rows, gpu, position] = expert
        self.load[rows, gpu] += load
        self.free[rows, gpu] -= 1
        self.hosts[rows, gpu, expert] = True

    def repair(self, layer: int, expert: int, load: float, replica_load: torch.Tensor) -> None:
        """Place ``expert`` in ``layer`` when every GPU with a free slot already hosts it.

        Moves one replica (of an expert the free GPU lacks) from a GPU without ``expert`` onto the free GPU and puts
        ``expert`` in its place, choosing the move with the lowest resulting peak. replica_load: (experts,).
        """
        best = None
        for free_gpu in (self.free[layer] > 0).nonzero().flatten().tolist():
            for other in (~self.hosts[layer, :, expert]).nonzero().flatten().tolist():
                for position in range(int(self.capacity[other]) - int(self.free[layer, other])):
                    moved = int(self.content[layer, other, position])
                    if self.hosts[layer, free_gpu, moved]:
                        continue
                    peak = max(
                        float(self.load[layer, free_gpu] + replica_load[moved]),
                        float(self.load[layer, other] - replica_load[moved] + load),
                    )
                    if best is None or peak < best[0]:
                        best = (peak, free_gpu, other, position, moved)
        if best is None:
            raise RuntimeError(
                f"cannot place a replica of expert {expert} in layer {layer} on a GPU that lacks it; lower "
                "num_replicas so that fewer replicas per expert are needed"
            )
        _, free_gpu, other, position, moved = best
        self.content[layer, other, position] = expert
        self.hosts[layer, other, moved] = False
        self.hosts[layer, other, expert] = True
        self.load[layer, other] += load - float(replica_load[moved])
        slot = int(self.capacity[free_gpu]) - int(self.free[layer, free_gpu])
        self.content[layer, free_gpu, slot] = moved
        self.hosts[layer, free_gpu, moved] = True
        self.load[layer, free_gpu] += float(replica_load[moved])
        self.free[layer, free_gpu] -= 1


def _swap_down_peaks(
    state: _GpuState,
    replica_load_of_expert: torch.Tensor,
    target: torch.Tensor,
    gpu_node: torch.Tensor,
    home_node: torch.Tensor | None,
    max_rounds: int,
) -> None:
    """Lower each layer's heaviest GPUs by swapping one of their replicas with one on a light GPU.

    Longest-processing-time placement with fixed slot counts can leave the last, small replicas no choice but a GPU
    that is already heavy. Each round, every layer whose heaviest GPU is above its target takes its ``SWAP_PEAKS``
    heaviest GPUs above target and gives each its own ``SWAP_PARTNERS`` of the lightest GPUs; for each heavy GPU it
    looks at all swaps with its partners (never two copies of an expert on a GPU) that lower the larger load of the
    two: among those that bring both under the target it takes the one that serves the least load away from home
    nodes, otherwise the one with the lowest new peak. The swaps of a round touch distinct GPUs. Layers with no
    improving swap stop. replica_load_of_expert: (layers, experts); target: (layers, 1); gpu_node: (gpus,);
    home_node: (layers, experts) or None.
    """
    num_layers, num_gpus, max_slots = state.content.shape
    partners = min(num_gpus - 1, SWAP_PARTNERS)
    heavies = max(1, min(SWAP_PEAKS, num_gpus // (partners + 1)))  # GPUs relieved per layer and round
    active = torch.arange(num_layers)  # layers still above target with an improving swap
    for _ in range(max_rounds):
        load = state.load[active]  # (A, gpus)
        still = load.max(dim=1).values > target[active, 0]
        active, load = active[still], load[still]
        if active.numel() == 0:
            return
        # NOTE: each round relieves the `heavies` heaviest GPUs of every active layer at once, each with its own
        # `partners` of the lightest GPUs (dealt round-robin), so no two swaps touch the same GPU; the search stays
        # (rows, slots, partners * slots) small.
        heavy_gpu = load.topk(heavies, dim=1).indices  # (A, heavies)
        others = load.scatter(1, heavy_gpu, float("inf"))  # a heavy GPU is never a partner, even on ties
        light_gpu = others.topk(heavies * partners, dim=1, largest=False).indices  # (A, heavies * partners)
        partner_gpu = light_gpu.view(-1, partners, heavies).transpose(1, 2).reshape(-1, partners)  # (A*h, partners)
        rows = active.repeat_interleave(heavies)  # (A * heavies,) one row per (layer, heavy GPU)
        peak_gpu = heavy_gpu.flatten()
        load = load.repeat_interleave(heavies, dim=0)
        peak = load.gather(1, peak_gpu.unsqueeze(1)).squeeze(1)
        above = peak > target[rows, 0]
        rows, peak_gpu, partner_gpu, load, peak = (t[above] for t in (rows, peak_gpu, partner_gpu, load, peak))
        other_gpu_of = partner_gpu.repeat_interleave(max_slots, dim=1)  # (R, partner slots)
        other_content = state.content[rows.unsqueeze(1), partner_gpu].flatten(1)  # (R, partner slots)
        my_content = state.content[rows, peak_gpu]  # (R, slots)
        mine = my_content.clamp_min(0)
        every = other_content.clamp_min(0)
        weights = replica_load_of_expert[rows]  # (R, experts)
        mine_load = weights.gather(1, mine)
        every_load = weights.gather(1, every)
        new_peak_side = peak.view(-1, 1, 1) - mine_load.unsqueeze(2) + every_load.unsqueeze(1)
        other_load = load.gather(1, other_gpu_of)
        new_other_side = (other_load - every_load).unsqueeze(1) + mine_load.unsqueeze(2)
        new_peak = torch.maximum(new_peak_side, new_other_side)  # (R, my slot, partner slot)
        allowed = (my_content >= 0).unsqueeze(2) & (other_content >= 0).unsqueeze(1)
        # Never two copies of an expert on a GPU: the peak must lack the partner's expert, the partner must lack mine.
        allowed &= ~state.hosts[rows, peak_gpu].gather(1, every).unsqueeze(1)
        allowed &= ~state.hosts[rows.view(-1, 1, 1), other_gpu_of.unsqueeze(1), mine.unsqueeze(2)]
        allowed &= new_peak < peak.view(-1, 1, 1) * (1 - 1e-9)
        key = torch.where(allowed, new_peak, torch.inf)
        if home_node is not None:
            # Load served away from home before and after the swap (mine -> other GPU's node, other -> peak's node).
            homes = home_node[rows]
            peak_node = gpu_node[peak_gpu].view(-1, 1, 1)
            other_node = gpu_node[other_gpu_of].unsqueeze(1)
            mine_home = homes.gather(1, mine).unsqueeze(2)
            every_home = homes.gather(1, every).unsqueeze(1)
            away_change = (
                (other_node != mine_home).double() * mine_load.unsqueeze(2)
                + (peak_node != every_home).double() * every_load.unsqueeze(1)
                - (peak_node != mine_home).double() * mine_load.unsqueeze(2)
                - (other_node != every_home).double() * every_load.unsqueeze(1)
            )
            under_target = allowed & (new_peak <= target[rows].view(-1, 1, 1))
            # Swaps reaching the target rank first, by away-from-home change; the rest by new peak, after them.
            key = torch.where(under_target, away_change - 2 * peak.view(-1, 1, 1).abs() - 1, key)
        best = key.flatten(1).min(dim=1)
        found = torch.isfinite(best.values)
        if not bool(found.any()):
            return
        layer = rows[found]
        my_slot = best.indices[found] // other_content.shape[1]
        other = best.indices[found] % other_content.shape[1]
        other_gpu = other_gpu_of[found].gather(1, other.unsqueeze(1)).squeeze(1)
        other_slot = other % max_slots
        from_gpu = peak_gpu[found]
        a = state.content[layer, from_gpu, my_slot]
        b = state.content[layer, other_gpu, other_slot]
        state.content[layer, from_gpu, my_slot] = b
        state.content[layer, other_gpu, other_slot] = a
        state.hosts[layer, from_gpu, a] = False
        state.hosts[layer, other_gpu, b] = False
        state.hosts[layer, from_gpu, b] = True
        state.hosts[layer, other_gpu, a] = True
        shift = replica_load_of_expert[layer, a] - replica_load_of_expert[layer, b]
        state.load[layer, from_gpu] -= shift
        state.load[layer, other_gpu] += shift
        active = layer.unique()


def _home_nodes(weight32: torch.Tensor, num_groups: int, num_nodes: int) -> torch.Tensor | None:
    """Home node of each expert from equal-count packing of groups onto nodes; None when groups do not divide."""
    if num_nodes == 1 or num_groups % num_nodes != 0:
        return None
    num_layers, num_experts = weight32.shape
    group_size = num_experts // num_groups
    group_loads = weight32.unflatten(-1, (num_groups, group_size)).sum(dim=-1)  # (layers, groups)
    node_of_group = pack_of_items(greedy_pack(group_loads, num_nodes), num_nodes)  # (layers, groups)
    return node_of_group.repeat_interleave(group_size, dim=1)  # (layers, experts)


def _place_replicas(
    weight: torch.Tensor,
    count: torch.Tensor,
    capacity: torch.Tensor,
    gpu_node: torch.Tensor,
    home_node: torch.Tensor | None,
    previous_hosts: torch.Tensor | None,
    locality_slack: float,
) -> _GpuState:
    """Longest-processing-time placement of all replicas of all layers. weight (layers, experts) float64."""
    num_layers, num_experts = weight.shape
    num_replicas = int(capacity.sum())
    replica_load_of_expert = weight / count  # (layers, experts)
    # Replicas in expert order, then a stable sort by load: the replicas of one expert stay together.
    ends = count.cumsum(dim=1)  # (layers, experts)
    slots = torch.arange(num_replicas).expand(num_layers, num_replicas).contiguous()
    replica_expert = torch.searchsorted(ends, slots, right=True)  # (layers, replicas)
    replica_load = replica_load_of_expert.gather(1, replica_expert)
    order = torch.sort(replica_load, dim=1, descending=True, stable=True).indices
    replica_expert = replica_expert.gather(1, order)
    replica_load = replica_load.gather(1, order)

    state = _GpuState(num_layers, capacity, num_experts)
    target = ((1.0 + locality_slack) * weight.sum(dim=1) / capacity.shape[0]).unsqueeze(1)  # (layers, 1)
    # NOTE: the step loop runs in numpy on flat views of the state's tensors (shared memory): on arrays this small a
    # numpy call costs a fraction of a torch call, and flat indices a fraction of (row, column) pairs. Same float64
    # sums, same first-minimum argmin.
    num_gpus = capacity.shape[0]
    max_slots = state.content.shape[2]
    free = state.free.numpy()  # (layers, gpus)
    load_now = state.load.numpy()
    flat_free, flat_load = free.reshape(-1), load_now.reshape(-1)
    flat_hosts, flat_content = state.hosts.numpy().reshape(-1), state.content.numpy().reshape(-1)
    slot_count = capacity.numpy()
    target_np = target.numpy()
    node_of_gpu = gpu_node.numpy()
    experts_by_step = np.ascontiguousarray(replica_expert.numpy().T)  # (replicas, layers)
    loads_by_step = np.ascontiguousarray(replica_load.numpy().T)
    home_by_step = None if home_node is None else np.ascontiguousarray(home_node.gather(1, replica_expert).numpy().T)
    flat_before = None if previous_hosts is None else previous_hosts.numpy().reshape(-1)
    row_gpu = np.arange(num_layers)[:, None] * num_gpus + np.arange(num_gpus)[None, :]  # (layers, gpus) flat index
    row_gpu_expert = row_gpu * num_experts  # + expert: flat index into (layers, gpus, experts)
    row_base = np.arange(num_layers) * num_gpus
    for step in range(num_replicas):
        expert = experts_by_step[step]  # (layers,)
        load = loads_by_step[step]
        held = row_gpu_expert + expert[:, None]  # (layers, gpus) flat index of (layer, gpu, expert)
        candidate = (free > 0) & ~flat_hosts[held]  # (layers, gpus)
        gpu_load, limit, home, base = load_now, target_np, None, row_base
        if home_by_step is not None:
            home = home_by_step[step]
        if not candidate.any(axis=1).all():  # rare: a layer's free GPUs all hold this expert
            stuck = ~candidate.any(axis=1)
            for layer in np.flatnonzero(stuck).tolist():
                state.repair(layer, int(expert[layer]), float(load[layer]), replica_load_of_expert[layer])
            rows = np.flatnonzero(~stuck)
            if rows.size == 0:
                continue
            expert, load, candidate, held = expert[rows], load[rows], candidate[rows], held[rows]
            gpu_load, limit, base = load_now[rows], target_np[rows], row_base[rows]
            home = None if home is None else home[rows]
        # Preference: a GPU that held this expert before, then a GPU of the expert's home node, then any GPU; the
        # first two only while the replica keeps that GPU under the layer's target load. Then the least-loaded GPU.
        usable = candidate
        if home is not None or flat_before is not None:
            fits = candidate & (gpu_load + load[:, None] <= limit)
            for preferred in (
                None if home is None else fits & (node_of_gpu[None, :] == home[:, None]),
                None if flat_before is None else fits & flat_before[held],
            ):  # later entries rank higher: each replaces the choice where it offers any GPU
                if preferred is not None:
                    usable = np.where(preferred.any(axis=1, keepdims=True), preferred, usable)
        gpu = np.where(usable, gpu_load, np.inf).argmin(axis=1)
        at = base + gpu  # flat (layer, gpu)
        flat_content[at * max_slots + slot_count[gpu] - flat_free[at]] = expert
        flat_load[at] += load
        flat_free[at] -= 1
        flat_hosts[at * num_experts + expert] = True
    _swap_down_peaks(state, replica_load_of_expert, target, gpu_node, home_node, max_rounds=4 * capacity.shape[0])
    return state


def _match_previous_gpus(
    content: torch.Tensor, previous_content: torch.Tensor, swappable: torch.Tensor, num_experts: int
) -> torch.Tensor:
    """Relabel GPUs (only among swappable pairs) so each new GPU lands where its contents overlap most.

    content, previous_content: (layers, gpus, slots) expert ids, -1 padded. swappable: (gpus, gpus) bool.
    Returns the relabelled content. Greedy maximum-overlap matching; equal overlaps keep the GPU where it is.
    """
    num_layers, num_gpus, _ = content.shape

    def hosts(c: torch.Tensor) -> torch.Tensor:
        one_hot = torch.zeros((num_layers, num_gpus, num_experts + 1), dtype=torch.float32)
        return one_hot.scatter_(2, c.clamp_min(-1) + 1, 1.0)[:, :, 1:]

    overlap = hosts(content) @ hosts(previous_content).transpose(1, 2)  # (layers, new gpus, old gpus)
    overlap = overlap + 0.5 * torch.eye(num_gpus)  # ties keep the identity
    overlap = overlap.masked_fill(~swappable, -1.0)
    target = torch.empty((num_layers, num_gpus), dtype=torch.int64)
    rows = torch.arange(num_layers)
    for _ in range(num_gpus):
        flat = overlap.view(num_layers, -1).argmax(dim=1)
        new_gpu, old_gpu = flat // num_gpus, flat % num_gpus
        target[rows, new_gpu] = old_gpu
        overlap[rows, new_gpu, :] = -2.0
        overlap[rows, :, old_gpu] = -2.0
    relabelled = torch.empty_like(content)
    relabelled[rows.unsqueeze(1), target] = content
    return relabelled


def _align_slots(content: torch.Tensor, previous_content: torch.Tensor) -> torch.Tensor:
    """Inside each GPU, keep every expert that stays in its previous slot; newcomers fill the vacated slots in order.

    content, previous_content: (layers, gpus, slots), -1 padded at the same positions. New content has no duplicate
    expert on a GPU; the previous one may (only its first copy counts as kept).
    """
    valid = content >= 0
    same = previous_content.unsqueeze(-1) == content.unsqueeze(-2)  # (..., old slot, new slot)
    same &= valid.unsqueeze(-1) & valid.unsqueeze(-2)
    earlier_copy = (previous_content.unsqueeze(-1) == previous_content.unsqueeze(-2)).tril(diagonal=-1).any(dim=-1)
    same &= ~earlier_copy.unsqueeze(-1)
    kept_old = same.any(dim=-1)  # (..., old slot)
    kept_new = same.any(dim=-2)  # (..., new slot)
    vacated = valid & ~kept_old
    newcomer = valid & ~kept_new
    vacated_rank = vacated.long().cumsum(dim=-1) - 1
    newcomer_rank = newcomer.long().cumsum(dim=-1) - 1
    pair = (vacated_rank.unsqueeze(-1) == newcomer_rank.unsqueeze(-2)) & vacated.unsqueeze(-1) & newcomer.unsqueeze(-2)
    filled = (pair.long() * content.unsqueeze(-2)).sum(dim=-1)
    return torch.where(kept_old, previous_content, torch.where(vacated, filled, content))


def plan_improved(
    weight32: torch.Tensor,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    *,
    previous: torch.Tensor | None,
    min_gain: float,
    expert_size_bytes: int | None,
    locality_slack: float,
) -> RebalancePlan:
    """Improved placement; arguments already validated (see ``plan_rebalance``). weight32: (layers, experts)."""
    num_layers, num_experts = weight32.shape
    weight = weight32.double()
    capacity = gpu_slot_counts(num_replicas, num_gpus, num_nodes)  # (gpus,)
    gpu_node = torch.arange(num_gpus) // (num_gpus // num_nodes)
    slot_gpu = torch.repeat_interleave(torch.arange(num_gpus), capacity)  # (replicas,)
    slot_valid = torch.arange(int(capacity.max())).unsqueeze(0) < capacity.unsqueeze(1)  # (gpus, max slots)

    home_node = _home_nodes(weight32, num_groups, num_nodes)
    _, _, count = replicate_greedy(weight32, num_replicas, max_count=num_gpus)
    previous_content = previous_hosts = None
    if previous is not None:
        previous_content = torch.full((num_layers, num_gpus, slot_valid.shape[1]), -1, dtype=torch.int64)
        previous_content[:, slot_valid] = previous
        previous_hosts = torch.zeros((num_layers, num_gpus, num_experts), dtype=torch.bool)
        previous_hosts[torch.arange(num_layers).unsqueeze(1), slot_gpu.unsqueeze(0), previous] = True

    state = _place_replicas(weight, count, capacity, gpu_node, home_node, previous_hosts, locality_slack)
    content = state.content
    previous_ratio = None
    layers_kept = torch.zeros(num_layers, dtype=torch.bool)
    moved_slots = torch.zeros(num_layers, dtype=torch.int64)
    if previous is not None:
        swappable = (gpu_node.unsqueeze(1) == gpu_node.unsqueeze(0)) & (capacity.unsqueeze(1) == capacity.unsqueeze(0))
        content = _match_previous_gpus(content, previous_content, swappable, num_experts)
        content = _align_slots(content, previous_content)
    phy2log = content[:, slot_valid]  # (layers, replicas), GPU-major
    ratio = max_over_mean(gpu_loads(phy2log, weight, slot_gpu, num_gpus))
    if previous is not None:
        previous_ratio = max_over_mean(gpu_loads(previous, weight, slot_gpu, num_gpus))
        previous_duplicates = previous_hosts.sum(dim=(1, 2)) < num_replicas
        layers_kept = (previous_ratio - ratio < min_gain) & ~previous_duplicates
        phy2log = torch.where(layers_kept.unsqueeze(1), previous, phy2log)
        ratio = torch.where(layers_kept, previous_ratio, ratio)
        moved_slots = (phy2log != previous).sum(dim=1)

    logcnt = torch.zeros((num_layers, num_experts), dtype=torch.int64).scatter_add_(
        1, phy2log, torch.ones_like(phy2log)
    )
    log2phy = build_log2phy(phy2log, occurrence_ranks(phy2log), num_experts, num_replicas - num_experts + 1)
    cross_share = None
    if home_node is not None:
        replica_load = (weight / logcnt).gather(1, phy2log)  # (layers, replicas)
        away = gpu_node[slot_gpu].unsqueeze(0) != home_node.gather(1, phy2log)
        total = float(replica_load.sum())
        cross_share = float(replica_load[away].sum()) / total if total > 0 else 0.0
    return RebalancePlan(
        phy2log=phy2log,
        log2phy=log2phy,
        logcnt=logcnt,
        gpu_slot_counts=capacity,
        max_over_mean=ratio,
        previous_max_over_mean=previous_ratio,
        layers_kept=layers_kept,
        moved_slots=moved_slots,
        bytes_moved=None if expert_size_bytes is None else int(moved_slots.sum()) * expert_size_bytes,
        cross_node_load_share=cross_share,
    )
