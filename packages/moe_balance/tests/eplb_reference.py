"""Slow, obvious reference of the EPLB expert-placement algorithm: one layer at a time, one item at a time.

This is the oracle the vectorised planner in ``eplb.py`` is tested against, and the "loop version" the benchmark
(``benchmarks/placement.py``) compares with. It is test code: it lives beside the tests, not in the installed
package. It follows the published description step by step:

1. hierarchical policy (``num_groups % num_nodes == 0``): pack expert groups onto nodes with equal-count greedy
   packing; otherwise the global policy, which is the same procedure with one group and one node;
2. inside each node, add replicas one at a time to the expert with the largest load per replica;
3. pack each node's replicas onto its GPUs with the same equal-count greedy packing.

Greedy packing visits items by load, heaviest first, ordered with ``torch.sort(descending=True)`` (not a stable sort:
the order of equal loads is whatever that sort gives, and the fast planner uses the very same call so ties come out
identical), and puts each item on the lightest pack that still has room (the lowest pack index on equal weight).
Pack weights are accumulated in float32, item by item, like the published code's tensor arithmetic.
"""

from __future__ import annotations

import torch


def greedy_pack_reference(item_loads: torch.Tensor, num_packs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Equal-count greedy packing of one row of items.

    item_loads: (items,) float32. Returns (pack_of_item, rank_in_pack), both (items,) int64: each pack receives
    exactly items / num_packs items; rank_in_pack is the order in which the item arrived in its pack.
    """
    num_items = item_loads.shape[0]
    items_per_pack = num_items // num_packs
    pack_of_item = torch.full((num_items,), -1, dtype=torch.int64)
    rank_in_pack = torch.full((num_items,), -1, dtype=torch.int64)
    if items_per_pack == 1:
        return torch.arange(num_items, dtype=torch.int64), torch.zeros(num_items, dtype=torch.int64)
    order = item_loads.sort(dim=-1, descending=True).indices
    pack_weight = [torch.zeros((), dtype=torch.float32) for _pack in range(num_packs)]
    pack_count = [0] * num_packs
    for item in order.tolist():
        best = -1
        for pack in range(num_packs):
            if pack_count[pack] == items_per_pack:
                continue
            if best < 0 or pack_weight[pack] < pack_weight[best]:
                best = pack
        pack_of_item[item] = best
        rank_in_pack[item] = pack_count[best]
        pack_weight[best] = pack_weight[best] + item_loads[item]
        pack_count[best] += 1
    return pack_of_item, rank_in_pack


def replicate_reference(expert_loads: torch.Tensor, num_slots: int) -> tuple[list[int], list[int], list[int]]:
    """Add replicas one at a time to the expert with the largest load per replica (first such expert on ties).

    expert_loads: (experts,) float32. Returns (slot_expert, slot_rank, count): slot s hosts expert slot_expert[s] as
    its slot_rank[s]-th replica; slots 0..experts-1 hold every expert once, in id order; count[e] replicas in all.
    """
    num_experts = expert_loads.shape[0]
    slot_expert = list(range(num_experts))
    slot_rank = [0] * num_experts
    count = torch.ones(num_experts, dtype=torch.int64)
    for _slot in range(num_experts, num_slots):
        expert = int((expert_loads / count).max(dim=-1).indices)
        slot_expert.append(expert)
        slot_rank.append(int(count[expert]))
        count[expert] += 1
    return slot_expert, slot_rank, count.tolist()


def _place_one_layer(
    weight: torch.Tensor, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> tuple[list[int], list[int], list[int]]:
    """Hierarchical placement of one layer. weight: (experts,) float32. Returns (phy2log, phy_rank, logcnt) lists."""
    num_experts = weight.shape[0]
    group_size = num_experts // num_groups
    groups_per_node = num_groups // num_nodes
    experts_per_node = num_experts // num_nodes
    slots_per_node = num_replicas // num_nodes
    gpus_per_node = num_gpus // num_nodes
    slots_per_gpu = num_replicas // num_gpus

    # Step 1: groups -> nodes. Node n lists its experts in "local" order: its groups by arrival, members by id.
    group_loads = weight.view(num_groups, group_size).sum(dim=-1)
    node_of_group, rank_of_group = greedy_pack_reference(group_loads, num_nodes)
    local_to_expert = [0] * num_experts  # node-major position -> logical expert id
    for group in range(num_groups):
        first = (int(node_of_group[group]) * groups_per_node + int(rank_of_group[group])) * group_size
        for member in range(group_size):
            local_to_expert[first + member] = group * group_size + member

    phy2log = [0] * num_replicas
    phy_rank = [0] * num_replicas
    logcnt = [0] * num_experts
    for node in range(num_nodes):
        node_experts = local_to_expert[node * experts_per_node : (node + 1) * experts_per_node]
        node_loads = weight[torch.tensor(node_experts, dtype=torch.int64)]
        # Step 2: replicas inside the node.
        slot_local, slot_rank, count = replicate_reference(node_loads, slots_per_node)
        for local, cnt in enumerate(count):
            logcnt[node_experts[local]] = cnt
        # Step 3: the node's replicas -> its GPUs; every replica of an expert carries load / count.
        replica_loads = (node_loads / torch.tensor(count, dtype=torch.int64))[torch.tensor(slot_local)]
        gpu_of_slot, rank_on_gpu = greedy_pack_reference(replica_loads, gpus_per_node)
        for slot in range(slots_per_node):
            physical = node * slots_per_node + int(gpu_of_slot[slot]) * slots_per_gpu + int(rank_on_gpu[slot])
            phy2log[physical] = node_experts[slot_local[slot]]
            phy_rank[physical] = slot_rank[slot]
    return phy2log, phy_rank, logcnt


def rebalance_experts_reference(
    weight: torch.Tensor,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    log2phy_layout: str = "eplb",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-layer loop implementation of EPLB; same contract as ``moe_balance.placement.rebalance_experts``.

    weight: (layers, experts) load per logical expert. Returns phy2log (layers, replicas), log2phy (layers, experts,
    X) padded with -1 (X = logcnt.max() for "eplb", replicas - experts + 1 for "vllm"), logcnt (layers, experts);
    all int64 on the CPU. Inputs are assumed valid.
    """
    weight = weight.detach().float().cpu()
    num_layers, num_experts = weight.shape
    if num_groups % num_nodes != 0:
        num_groups, num_nodes = 1, 1
    max_count = num_replicas - num_experts + 1
    phy2log = torch.empty((num_layers, num_replicas), dtype=torch.int64)
    log2phy = torch.full((num_layers, num_experts, max_count), -1, dtype=torch.int64)
    logcnt = torch.empty((num_layers, num_experts), dtype=torch.int64)
    for layer in range(num_layers):
        layer_phy2log, layer_rank, layer_cnt = _place_one_layer(
            weight[layer], num_replicas, num_groups, num_nodes, num_gpus
        )
        phy2log[layer] = torch.tensor(layer_phy2log, dtype=torch.int64)
        logcnt[layer] = torch.tensor(layer_cnt, dtype=torch.int64)
        for physical, (expert, rank) in enumerate(zip(layer_phy2log, layer_rank, strict=True)):
            log2phy[layer, expert, rank] = physical
    if log2phy_layout == "eplb":
        log2phy = log2phy[:, :, : int(logcnt.max())].contiguous()
    return phy2log, log2phy, logcnt
