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

GPU placement is longest-processing-time first, in rounds, all layers at once: round k fills slot k of every GPU
that has one with the next heaviest replicas, one per GPU, so the Python loop runs max-slots times (5 for 320 slots
on 64 GPUs), not once per replica. In a round a replica takes a GPU that held its expert before, then a GPU of its
home node (the node its group was packed onto; the heaviest such replica with the lightest such GPU), while that GPU
keeps room under the layer's target load (mean GPU load x (1 + ``locality_slack``)) for the lightest replicas of the
rounds still to come; the others pair heaviest with lightest GPU. The last round's replicas, the lightest, ignore
home nodes: they even out what the heavier rounds left. A replica paired with a GPU that already hosts its expert
trades GPUs with a neighbour of the round, or is swapped into place. A last pass swaps replicas off each layer's
heaviest GPUs until they are within the target, preferring swaps that keep load on home nodes.
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

    def __init__(self, num_layers: int, capacity: torch.Tensor, num_experts: int) -> None:
        num_gpus = capacity.shape[0]
        self.capacity = capacity  # (gpus,)
        self.load = torch.zeros((num_layers, num_gpus), dtype=torch.float64)
        self.free = capacity.expand(num_layers, num_gpus).clone()  # (layers, gpus)
        self.hosts = torch.zeros((num_layers, num_gpus, num_experts), dtype=torch.bool)
        self.content = torch.full((num_layers, num_gpus, int(capacity.max())), -1, dtype=torch.int64)
        # numpy views of the same memory, for the placement rounds and repairs
        self.load_np, self.free_np = self.load.numpy(), self.free.numpy()
        self.hosts_np, self.content_np = self.hosts.numpy(), self.content.numpy()

    def place(self, rows: torch.Tensor, gpu: torch.Tensor, expert: torch.Tensor, load: torch.Tensor) -> None:
        position = self.capacity[gpu] - self.free[rows, gpu]
        self.content[rows, gpu, position] = expert
        self.load[rows, gpu] += load
        self.free[rows, gpu] -= 1
        self.hosts[rows, gpu, expert] = True

    def repair(self, layer: int, gpu: int, expert: int, load: float, replica_load: np.ndarray) -> None:
        """Fill ``gpu``'s next slot in ``layer`` when ``gpu`` already hosts ``expert``.

        Moves one placed replica (of an expert ``gpu`` lacks) from a GPU without ``expert`` onto ``gpu`` and puts
        ``expert`` in its place, choosing the move with the lowest resulting peak (the first on ties).
        replica_load: (experts,) load of one replica of each expert.
        """
        content, hosts, gpu_load = self.content_np[layer], self.hosts_np[layer], self.load_np[layer]  # views
        moved = content.clip(min=0)
        allowed = (content >= 0) & ~hosts[:, expert][:, None] & ~hosts[gpu][moved]
        moved_load = replica_load[moved]
        peak = np.maximum(gpu_load[gpu] + moved_load, gpu_load[:, None] - moved_load + load)
        peak = np.where(allowed, peak, np.inf)
        best = int(peak.argmin())
        if not np.isfinite(peak.flat[best]):
            raise RuntimeError(
                f"cannot place a replica of expert {expert} in layer {layer} on a GPU that lacks it; lower "
                "num_replicas so that fewer replicas per expert are needed"
            )
        other, position = divmod(best, content.shape[1])
        swapped = int(content[other, position])
        content[other, position] = expert
        hosts[other, swapped] = False
        hosts[other, expert] = True
        gpu_load[other] += load - replica_load[swapped]
        slot = int((content[gpu] >= 0).sum())  # slots fill from the first, -1 padded after
        content[gpu, slot] = swapped
        hosts[gpu, swapped] = True
        gpu_load[gpu] += replica_load[swapped]
        self.free_np[layer, gpu] -= 1


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
    content, hosts, gpu_load = state.content_np, state.hosts_np, state.load_np  # views of the state
    num_layers, num_gpus, max_slots = content.shape
    partners = min(num_gpus - 1, SWAP_PARTNERS)
    heavies = max(1, min(SWAP_PEAKS, num_gpus // (partners + 1)))  # GPUs relieved per layer and round
    weights = replica_load_of_expert.numpy()
    goal = target.numpy()[:, 0]
    node_of_gpu = gpu_node.numpy()
    homes = None if home_node is None else home_node.numpy()
    active = np.arange(num_layers)  # layers still above target with an improving swap
    for _round in range(max_rounds):
        load = gpu_load[active]  # (A, gpus)
        still = load.max(axis=1) > goal[active]
        active, load = active[still], load[still]
        if active.size == 0:
            return
        # NOTE: each round relieves the `heavies` heaviest GPUs of every active layer at once, each with its own
        # `partners` of the lightest GPUs (dealt round-robin), so no two swaps touch the same GPU; the search stays
        # (rows, slots, partners * slots) small. Stable sorts: equal loads rank by GPU number.
        heavy_gpu = np.argsort(-load, axis=1, kind="stable")[:, :heavies]  # (A, heavies)
        others = load.copy()
        np.put_along_axis(others, heavy_gpu, np.inf, axis=1)  # a heavy GPU is never a partner, even on ties
        light_gpu = np.argsort(others, axis=1, kind="stable")[:, : heavies * partners]
        partner_gpu = light_gpu.reshape(-1, partners, heavies).transpose(0, 2, 1).reshape(-1, partners)
        rows = np.repeat(active, heavies)  # (A * heavies,) one row per (layer, heavy GPU)
        peak_gpu = heavy_gpu.reshape(-1)
        load = np.repeat(load, heavies, axis=0)
        peak = load[np.arange(rows.size), peak_gpu]
        above = peak > goal[rows]
        rows, peak_gpu, partner_gpu, load, peak = (a[above] for a in (rows, peak_gpu, partner_gpu, load, peak))
        other_gpu_of = np.repeat(partner_gpu, max_slots, axis=1)  # (R, partner slots)
        other_content = content[rows[:, None], partner_gpu].reshape(rows.size, -1)  # (R, partner slots)
        my_content = content[rows, peak_gpu]  # (R, slots)
        mine, every = my_content.clip(min=0), other_content.clip(min=0)
        mine_load = weights[rows[:, None], mine][:, :, None]  # (R, slots, 1)
        every_load = weights[rows[:, None], every][:, None, :]  # (R, 1, partner slots)
        other_load = np.take_along_axis(load, other_gpu_of, axis=1)[:, None, :]
        peak3 = peak[:, None, None]
        new_peak = np.maximum(peak3 - mine_load + every_load, other_load - every_load + mine_load)
        allowed = (my_content >= 0)[:, :, None] & (other_content >= 0)[:, None, :]
        # Never two copies of an expert on a GPU: the peak must lack the partner's expert, the partner must lack mine.
        allowed &= ~hosts[rows[:, None], peak_gpu[:, None], every][:, None, :]
        allowed &= ~hosts[rows[:, None, None], other_gpu_of[:, None, :], mine[:, :, None]]
        allowed &= new_peak < peak3 * (1 - 1e-9)
        key = np.where(allowed, new_peak, np.inf)
        if homes is not None:
            # Load served away from home after the swap minus before (mine -> other GPU's node, other -> peak's).
            home = homes[rows]
            peak_node = node_of_gpu[peak_gpu][:, None, None]
            other_node = node_of_gpu[other_gpu_of][:, None, :]
            mine_home = np.take_along_axis(home, mine, axis=1)[:, :, None]
            every_home = np.take_along_axis(home, every, axis=1)[:, None, :]
            mine_moves = (other_node != mine_home).astype(np.float64) - (peak_node != mine_home)
            every_moves = (peak_node != every_home).astype(np.float64) - (other_node != every_home)
            away_change = mine_moves * mine_load + every_moves * every_load
            under_target = allowed & (new_peak <= goal[rows][:, None, None])
            # Swaps reaching the target rank first, by away-from-home change; the rest by new peak, after them.
            key = np.where(under_target, away_change - 2 * np.abs(peak3) - 1, key)
        flat = key.reshape(rows.size, -1)
        best = flat.argmin(axis=1)  # first minimum: lowest slot, then lowest partner slot
        found = np.isfinite(flat[np.arange(rows.size), best])
        if not found.any():
            return
        layer, best = rows[found], best[found]
        my_slot, other = np.divmod(best, other_content.shape[1])
        other_gpu = other_gpu_of[found, other]
        other_slot = other % max_slots
        from_gpu = peak_gpu[found]
        a = content[layer, from_gpu, my_slot]
        b = content[layer, other_gpu, other_slot]
        content[layer, from_gpu, my_slot] = b
        content[layer, other_gpu, other_slot] = a
        hosts[layer, from_gpu, a] = False
        hosts[layer, other_gpu, b] = False
        hosts[layer, from_gpu, b] = True
        hosts[layer, other_gpu, a] = True
        shift = weights[layer, a] - weights[layer, b]
        gpu_load[layer, from_gpu] -= shift
        gpu_load[layer, other_gpu] += shift
        active = np.unique(layer)


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
    """Longest-processing-time placement in rounds, all layers at once. weight (layers, experts) float64.

    Round k fills slot k of every GPU that has one: the next heaviest replicas, one per GPU (see the module
    docstring for the preferences, ``_pair_round`` for one round). A replica that still meets its own expert there
    is swapped into place (``_GpuState.repair``).
    """
    num_layers, num_experts = weight.shape
    num_replicas = int(capacity.sum())
    replica_load_of_expert = weight / count  # (layers, experts)
    # Replicas in expert order, then a stable sort by load: the replicas of one expert stay together.
    ends = count.cumsum(dim=1)  # (layers, experts)
    slots = torch.arange(num_replicas).expand(num_layers, num_replicas).contiguous()
    replica_expert = torch.searchsorted(ends, slots, right=True)  # (layers, replicas)
    replica_load = replica_load_of_expert.gather(1, replica_expert)
    order = torch.from_numpy(np.argsort(-replica_load.numpy(), axis=1, kind="stable"))  # heaviest first
    replica_expert = replica_expert.gather(1, order)
    replica_load = replica_load.gather(1, order)

    state = _GpuState(num_layers, capacity, num_experts)
    target = ((1.0 + locality_slack) * weight.sum(dim=1) / capacity.shape[0]).unsqueeze(1)  # (layers, 1)
    # NOTE: rounds run in numpy on views of the state's tensors (shared memory): a round is a few sorts and
    # gathers over (layers, GPUs), so the Python loop runs max-slots times, not replicas times.
    load_now, hosts = state.load_np, state.hosts_np  # (layers, gpus), (layers, gpus, experts)
    content, free = state.content_np, state.free_np
    limit = target.numpy()
    slot_count, node_of_gpu = capacity.numpy(), gpu_node.numpy()
    experts_sorted, loads_sorted = replica_expert.numpy(), replica_load.numpy()
    homes_sorted = None if home_node is None else home_node.gather(1, replica_expert).numpy()
    before = None if previous_hosts is None else previous_hosts.numpy()
    per_expert = replica_load_of_expert.numpy()
    layer = np.arange(num_layers)[:, None]
    round_size = (slot_count[None, :] > np.arange(int(slot_count.max()))[:, None]).sum(axis=1)  # (rounds,)
    # A GPU receives one replica in each later round, at least that round's lightest: a preferred GPU must keep
    # room for them under the target.
    round_lightest = loads_sorted[:, np.cumsum(round_size) - 1]  # (layers, rounds)
    later = round_lightest[:, ::-1].cumsum(axis=1)[:, ::-1] - round_lightest  # (layers, rounds)
    last_round = round_size.size - 1
    start = 0
    for position in range(int(slot_count.max())):
        gpus = np.flatnonzero(slot_count > position)  # (m,) GPUs with a slot in this round
        stop = start + gpus.size
        expert, load = experts_sorted[:, start:stop], loads_sorted[:, start:stop]  # (layers, m), heaviest first
        # The last round's replicas, the lightest, ignore home nodes: they even out what the heavier rounds left.
        home = None if homes_sorted is None or position == last_round else homes_sorted[:, start:stop]
        start = stop
        room = limit - later[:, position : position + 1]
        column = _pair_round(gpus, expert, load, home, load_now, hosts, before, room, node_of_gpu)
        gpu = gpus[column]  # (layers, m)
        clash = hosts[layer, gpu, expert]  # rare: the paired GPU already hosts this expert
        # One replica per GPU and round, so no (layer, GPU) repeats in these writes. A clash leaves its slot empty.
        content[layer, gpu, position] = np.where(clash, -1, expert)
        hosts[layer, gpu, expert] = True
        load_now[layer, gpu] += np.where(clash, 0.0, load)
        free[layer, gpu] -= ~clash
        for row, col in zip(*np.nonzero(clash), strict=True):
            state.repair(int(row), int(gpu[row, col]), int(expert[row, col]), float(load[row, col]), per_expert[row])
    _swap_down_peaks(state, replica_load_of_expert, target, gpu_node, home_node, max_rounds=4 * capacity.shape[0])
    return state


def _pair_round(
    gpus: np.ndarray,
    expert: np.ndarray,
    load: np.ndarray,
    home: np.ndarray | None,
    load_now: np.ndarray,
    hosts: np.ndarray,
    before: np.ndarray | None,
    limit: np.ndarray,
    node_of_gpu: np.ndarray,
) -> np.ndarray:
    """One round's pairing of replicas with GPUs. Returns (layers, m) columns into ``gpus``, a permutation per row.

    expert, load, home: (layers, m) the round's replicas, heaviest first; load_now (layers, gpus); hosts (layers,
    gpus, experts); before: previous hosts, same shape, or None; limit: (layers, 1) target loads.
    """
    num_layers, m = expert.shape
    layer = np.arange(num_layers)[:, None]
    round_load = load_now[:, gpus]  # (layers, m)
    column = np.full((num_layers, m), -1, dtype=np.int64)
    taken = np.zeros((num_layers, m), dtype=bool)
    if before is not None:
        # A GPU that held the expert before, lightest first; a GPU claimed twice goes to the heavier replica.
        held = before[layer[:, :, None], gpus, expert[:, :, None]] & ~hosts[layer[:, :, None], gpus, expert[:, :, None]]
        held &= round_load[:, None, :] + load[:, :, None] <= limit[:, :, None]  # (layers, replica, column)
        for _round in range(2):
            wanted = held & ~taken[:, None, :] & (column < 0)[:, :, None]
            pick = np.where(wanted, round_load[:, None, :], np.inf).argmin(axis=2)  # (layers, m)
            claim = np.where(wanted.any(axis=2), pick, m)
            first = np.full((num_layers, m + 1), m)
            np.minimum.at(first, (np.broadcast_to(layer, claim.shape), claim), np.arange(m)[None, :])
            won = (claim < m) & (first[layer, claim] == np.arange(m)[None, :])
            column[won] = claim[won]
            taken[np.broadcast_to(layer, claim.shape)[won], claim[won]] = True
    if home is not None:
        # Inside each home node, the r-th heaviest open replica meets the node's r-th lightest free GPU.
        num_nodes = int(node_of_gpu.max()) + 1
        round_node = node_of_gpu[gpus]  # (m,)
        node_start = np.searchsorted(round_node, np.arange(num_nodes))  # GPUs are numbered node by node
        by_load = np.argsort(np.where(taken, np.inf, round_load), axis=1, kind="stable")
        sorted_column = np.take_along_axis(by_load, np.argsort(round_node[by_load], axis=1, kind="stable"), axis=1)
        open_home = np.where(column < 0, home, num_nodes)  # placed replicas rank in no node
        rank = (open_home[:, :, None] == np.arange(num_nodes)).cumsum(axis=1)  # (layers, m, nodes)
        rank = np.take_along_axis(rank, np.minimum(open_home, num_nodes - 1)[:, :, None], axis=2)[:, :, 0] - 1
        free_in_node = np.zeros((num_layers, num_nodes + 1), dtype=np.int64)
        np.add.at(free_in_node, (np.broadcast_to(layer, taken.shape), np.where(taken, num_nodes, round_node)), 1)
        node = np.minimum(open_home, num_nodes - 1)
        pick = np.take_along_axis(sorted_column, np.minimum(node_start[node] + rank, m - 1), axis=1)
        fits = (open_home < num_nodes) & (rank < free_in_node[layer, node])
        fits &= np.take_along_axis(round_load, pick, axis=1) + load <= limit
        fits &= ~hosts[layer, gpus[pick], expert]
        column[fits] = pick[fits]
        taken[np.broadcast_to(layer, fits.shape)[fits], pick[fits]] = True
    # The rest: heaviest open replica with the lightest free GPU.
    open_order = np.argsort(column >= 0, axis=1, kind="stable")
    free_order = np.argsort(np.where(taken, np.inf, round_load), axis=1, kind="stable")
    pair = np.arange(m)[None, :] < (column < 0).sum(axis=1, keepdims=True)
    rows = np.broadcast_to(layer, pair.shape)[pair]
    column[rows, open_order[pair]] = free_order[pair]
    # A replica paired with a GPU that already hosts its expert trades GPUs with a neighbour (next lighter, then
    # next heavier replica of the round) when neither then meets its own expert.
    # A partner never clashes itself, so no replica trades twice in one pass.
    for step in (1, -1):
        clash = hosts[layer, gpus[column], expert]
        if not clash.any():
            break
        mine = np.arange(m - 1) if step == 1 else np.arange(1, m)
        other = mine + step
        gpu_mine, gpu_other = gpus[column[:, mine]], gpus[column[:, other]]
        trade = clash[:, mine] & ~clash[:, other]
        trade &= ~hosts[layer, gpu_other, expert[:, mine]] & ~hosts[layer, gpu_mine, expert[:, other]]
        rows, at = np.nonzero(trade)
        a, b = mine[at], other[at]
        column[rows, a], column[rows, b] = column[rows, b], column[rows, a]
    return column


def _match_previous_gpus(
    content: torch.Tensor, previous_content: torch.Tensor, swappable: torch.Tensor, num_experts: int
) -> torch.Tensor:
    """Relabel GPUs (only among swappable pairs) so each new GPU lands where its contents overlap most.

    content, previous_content: (layers, gpus, slots) expert ids, -1 padded. swappable: (gpus, gpus) bool.
    Returns the relabelled content. Greedy maximum-overlap matching; equal overlaps keep the GPU where it is.
    """
    num_layers, num_gpus, _num_slots = content.shape

    def hosts(c: torch.Tensor) -> torch.Tensor:
        one_hot = torch.zeros((num_layers, num_gpus, num_experts + 1), dtype=torch.float32)
        return one_hot.scatter_(2, c.clamp_min(-1) + 1, 1.0)[:, :, 1:]

    overlap = hosts(content) @ hosts(previous_content).transpose(1, 2)  # (layers, new gpus, old gpus)
    overlap = overlap + 0.5 * torch.eye(num_gpus)  # ties keep the identity
    overlap = overlap.masked_fill(~swappable, -1.0)
    target = torch.empty((num_layers, num_gpus), dtype=torch.int64)
    rows = torch.arange(num_layers)
    for _gpu in range(num_gpus):
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
    log2phy_layout: str = "eplb",
) -> RebalancePlan:
    """Improved placement; arguments already validated (see ``plan_rebalance``). weight32: (layers, experts)."""
    num_layers, num_experts = weight32.shape
    weight = weight32.double()
    capacity = gpu_slot_counts(num_replicas, num_gpus, num_nodes)  # (gpus,)
    gpu_node = torch.arange(num_gpus) // (num_gpus // num_nodes)
    slot_gpu = torch.repeat_interleave(torch.arange(num_gpus), capacity)  # (replicas,)
    slot_valid = torch.arange(int(capacity.max())).unsqueeze(0) < capacity.unsqueeze(1)  # (gpus, max slots)

    home_node = _home_nodes(weight32, num_groups, num_nodes)
    _slot_expert, _slot_rank, count = replicate_greedy(weight32, num_replicas, max_count=num_gpus)
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
    if previous is not None and previous_hosts is not None:  # set together
        previous_ratio = max_over_mean(gpu_loads(previous, weight, slot_gpu, num_gpus))
        previous_duplicates = previous_hosts.sum(dim=(1, 2)) < num_replicas
        layers_kept = (previous_ratio - ratio < min_gain) & ~previous_duplicates
        phy2log = torch.where(layers_kept.unsqueeze(1), previous, phy2log)
        ratio = torch.where(layers_kept, previous_ratio, ratio)
        moved_slots = (phy2log != previous).sum(dim=1)

    logcnt = torch.zeros((num_layers, num_experts), dtype=torch.int64).scatter_add_(
        1, phy2log, torch.ones_like(phy2log)
    )
    width = int(logcnt.max()) if log2phy_layout == "eplb" else num_replicas - num_experts + 1  # see log2phy_width
    log2phy = build_log2phy(phy2log, occurrence_ranks(phy2log), num_experts, width)
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
