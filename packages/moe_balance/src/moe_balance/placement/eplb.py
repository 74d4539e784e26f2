"""EPLB-compatible expert placement: which logical expert each physical slot hosts, for every MoE layer.

Contract (the published EPLB one): ``rebalance_experts(weight (layers, experts), num_replicas, num_groups, num_nodes,
num_gpus) -> (phy2log (layers, replicas), log2phy (layers, experts, replicas - experts + 1) padded with -1,
logcnt (layers, experts))``, int64 on the CPU. Slots are GPU-major: GPU g owns a contiguous block of slots.

- ``mode="exact"`` gives the same answer as the published algorithm, tie for tie (see ``eplb_reference.py``, the
  per-layer loop it is tested against), but runs every layer at once: hierarchical policy when num_groups divides by
  num_nodes (groups -> nodes, replicas inside each node, replicas -> GPUs), the global policy otherwise.
- ``mode="improved"`` (``rebalance_plan.py``) never puts two replicas of one expert on one GPU, sizes each node's share
  of replicas by its load, accepts a replica count that is not a multiple of the GPU count, and, given the previous
  layout, moves as few experts as it can. ``plan_rebalance`` returns the same plan with its movement report.
"""

from __future__ import annotations

from typing import Literal

import torch

from moe_balance._checks import check_load_matrix, check_positive_int

from ._packing import build_log2phy, greedy_pack, invert_permutation, replicate_greedy
from .rebalance_plan import RebalancePlan, plan_improved

MODES = ("exact", "improved")


def check_rebalance_arguments(
    weight: object, num_replicas: object, num_groups: object, num_nodes: object, num_gpus: object, mode: str
) -> torch.Tensor:
    """Validate the planner's arguments; returns weight as float32 on the CPU."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not supported: use one of {', '.join(MODES)}")
    weight = check_load_matrix(weight, "weight", "(layers, experts)")
    num_experts = weight.shape[1]
    check_positive_int(num_replicas, "num_replicas")
    check_positive_int(num_groups, "num_groups")
    check_positive_int(num_nodes, "num_nodes")
    check_positive_int(num_gpus, "num_gpus")
    if num_replicas < num_experts:
        raise ValueError(
            f"num_replicas={num_replicas} is smaller than the {num_experts} experts in weight: every expert needs a "
            f"slot, so use num_replicas >= {num_experts}"
        )
    if num_experts % num_groups != 0:
        raise ValueError(
            f"num_groups={num_groups} does not divide the {num_experts} experts: groups must be equal-sized, "
            "use a divisor of the expert count (1 for no groups)"
        )
    if num_gpus % num_nodes != 0:
        raise ValueError(
            f"num_gpus={num_gpus} does not divide over num_nodes={num_nodes}: every node must have the same GPU count"
        )
    if mode == "exact" and num_replicas % num_gpus != 0:
        raise ValueError(
            f"num_replicas={num_replicas} is not a multiple of num_gpus={num_gpus}: exact mode gives every GPU the "
            "same slot count; pick a multiple or use mode='improved', which allows uneven slot counts"
        )
    if mode == "improved" and num_replicas > num_experts * num_gpus:
        raise ValueError(
            f"num_replicas={num_replicas} exceeds num_experts * num_gpus = {num_experts * num_gpus}: improved mode "
            "keeps the replicas of an expert on distinct GPUs; lower num_replicas"
        )
    return weight.float()


def _rebalance_hierarchical(
    weight: torch.Tensor, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All layers at once. weight: (layers, experts) float32. Returns (phy2log, phy_rank, logcnt), int64."""
    num_layers, num_experts = weight.shape
    group_size = num_experts // num_groups
    experts_per_node = num_experts // num_nodes
    slots_per_node = num_replicas // num_nodes

    # Step 1: groups -> nodes. Expert order inside the cluster ("local" order): node by node, the node's groups in
    # arrival order, members in id order.
    group_loads = weight.unflatten(-1, (num_groups, group_size)).sum(dim=-1)  # (layers, groups)
    group_at_slot = greedy_pack(group_loads, num_nodes)  # (layers, groups)
    local_to_expert = (group_at_slot.unsqueeze(-1) * group_size + torch.arange(group_size)).flatten(-2)
    expert_to_local = invert_permutation(local_to_expert)  # (layers, experts)

    # Step 2: replicas inside each node; rows are (layer, node) pairs.
    local_loads = weight.gather(-1, local_to_expert).view(-1, experts_per_node)  # (layers * nodes, experts/node)
    slot_local, slot_rank, local_count = replicate_greedy(local_loads, slots_per_node)

    # Step 3: each node's replicas -> its GPUs; a replica carries its expert's load / replica count. GPU g of a node
    # owns the node's slots g * slots_per_gpu ... in arrival order.
    replica_loads = (local_loads / local_count).gather(-1, slot_local)  # (layers * nodes, slots/node)
    slot_of_physical = greedy_pack(replica_loads, num_gpus // num_nodes)  # (layers * nodes, slots/node)

    physical_local = slot_local.gather(-1, slot_of_physical).view(num_layers, num_nodes, -1)
    physical_local = (physical_local + torch.arange(num_nodes).view(1, -1, 1) * experts_per_node).flatten(-2)
    phy2log = local_to_expert.gather(-1, physical_local)  # (layers, replicas)
    phy_rank = slot_rank.gather(-1, slot_of_physical).view(num_layers, -1)  # (layers, replicas)
    logcnt = local_count.view(num_layers, -1).gather(-1, expert_to_local)  # (layers, experts)
    return phy2log, phy_rank, logcnt


def rebalance_exact(
    weight: torch.Tensor, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The published algorithm, vectorised over layers; arguments assumed valid. See ``rebalance_experts``."""
    num_experts = weight.shape[1]
    if num_groups % num_nodes != 0:
        num_groups, num_nodes = 1, 1  # global policy
    phy2log, phy_rank, logcnt = _rebalance_hierarchical(weight, num_replicas, num_groups, num_nodes, num_gpus)
    log2phy = build_log2phy(phy2log, phy_rank, num_experts, num_replicas - num_experts + 1)
    return phy2log, log2phy, logcnt


def plan_rebalance(
    weight: torch.Tensor,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    *,
    previous: torch.Tensor | None = None,
    min_gain: float = 0.02,
    expert_size_bytes: int | None = None,
    locality_slack: float = 0.02,
) -> RebalancePlan:
    """Improved-mode plan with its report: movement against ``previous``, layers kept, balance before and after.

    previous: (layers, num_replicas) phy2log of the layout in service, or None. A layer keeps its previous layout
    when re-planning would lower its max/mean GPU load by less than ``min_gain``. ``expert_size_bytes`` (the bytes of
    one expert's weights) turns moved slots into bytes. ``locality_slack``: the target GPU load is the mean x
    (1 + locality_slack); below it a replica stays on its expert's previous GPU or home node, and GPUs above it are
    relieved by swaps. Smaller values balance tighter at the cost of more cross-node traffic and moves.
    """
    weight = check_rebalance_arguments(weight, num_replicas, num_groups, num_nodes, num_gpus, "improved")
    if not isinstance(min_gain, (int, float)) or not min_gain >= 0:
        raise ValueError(f"min_gain={min_gain!r} must be a number >= 0 (a max/mean difference, e.g. 0.02)")
    if not isinstance(locality_slack, (int, float)) or not locality_slack >= 0:
        raise ValueError(f"locality_slack={locality_slack!r} must be a number >= 0 (a share of the mean GPU load)")
    if expert_size_bytes is not None:
        check_positive_int(expert_size_bytes, "expert_size_bytes")
    if previous is not None:
        previous = _check_previous(previous, weight.shape, num_replicas)
    return plan_improved(
        weight,
        num_replicas,
        num_groups,
        num_nodes,
        num_gpus,
        previous=previous,
        min_gain=float(min_gain),
        expert_size_bytes=expert_size_bytes,
        locality_slack=float(locality_slack),
    )


def _check_previous(previous: object, weight_shape: torch.Size, num_replicas: int) -> torch.Tensor:
    num_layers, num_experts = weight_shape
    if not isinstance(previous, torch.Tensor):
        raise ValueError(f"previous must be a torch.Tensor phy2log of shape (layers, replicas); got {type(previous)}")
    if tuple(previous.shape) != (num_layers, num_replicas):
        raise ValueError(
            f"previous has shape {tuple(previous.shape)}, expected (layers, num_replicas) = "
            f"({num_layers}, {num_replicas}): pass the phy2log of the layout in service for the same model"
        )
    if previous.is_floating_point() or previous.is_complex() or previous.dtype == torch.bool:
        raise ValueError(f"previous must hold integer expert ids; got dtype {previous.dtype}")
    previous = previous.detach().cpu().long()
    if int(previous.min()) < 0 or int(previous.max()) >= num_experts:
        raise ValueError(
            f"previous holds expert ids from {int(previous.min())} to {int(previous.max())}; "
            f"ids must lie in [0, {num_experts})"
        )
    present = torch.zeros((num_layers, num_experts), dtype=torch.bool).scatter_(1, previous, True)
    if not bool(present.all()):
        layer = int((~present).any(dim=1).nonzero()[0])
        raise ValueError(f"previous misses some experts in layer {layer}: every expert needs at least one slot")
    return previous


def rebalance_experts(
    weight: torch.Tensor,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    *,
    mode: Literal["exact", "improved"] = "exact",
    previous: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Plan expert replicas and their GPUs for every layer.

    weight: (layers, experts) load statistics of each logical expert (token counts). num_replicas: physical slots
    per layer (in all GPUs together). num_groups: expert groups (group-limited routing); num_nodes, num_gpus: the
    cluster. Returns phy2log (layers, replicas), log2phy (layers, experts, replicas - experts + 1) padded with -1,
    logcnt (layers, experts); int64 on the CPU. ``previous`` (improved mode only): the phy2log in service, to move
    few experts; use ``plan_rebalance`` for the movement report.
    """
    if mode == "exact":
        weight = check_rebalance_arguments(weight, num_replicas, num_groups, num_nodes, num_gpus, mode)
        if previous is not None:
            raise ValueError(
                "previous is only used by mode='improved': exact mode reproduces the published algorithm, which "
                "ignores the layout in service; drop previous or use mode='improved'"
            )
        return rebalance_exact(weight, num_replicas, num_groups, num_nodes, num_gpus)
    if mode != "improved":
        raise ValueError(f"mode={mode!r} is not supported: use one of {', '.join(MODES)}")
    plan = plan_rebalance(weight, num_replicas, num_groups, num_nodes, num_gpus, previous=previous)
    return plan.phy2log, plan.log2phy, plan.logcnt
