"""EPLB-compatible expert placement: which logical expert each physical slot hosts, for every MoE layer.

Contract (the published EPLB one, deepseek-ai/EPLB ``eplb.py``): ``rebalance_experts(weight (layers, experts),
num_replicas, num_groups, num_nodes, num_gpus) -> (phy2log (layers, replicas), log2phy (layers, experts, X) padded
with -1, logcnt (layers, experts))``, int64 on the CPU. Slots are GPU-major: GPU g owns a contiguous block of slots.
``log2phy_layout`` picks X: ``"eplb"`` (default) is DeepSeek's ``logcnt.max()``; ``"vllm"`` is ``replicas -
experts + 1``, the fixed padding of vLLM's ``rebalance_algo.py`` (a shape that does not change with the loads).

- ``mode="exact"`` gives the published algorithm's answer, tie for tie (see ``tests/eplb_reference.py``, the
  per-layer loop it is tested against), but runs every layer at once: hierarchical policy when num_groups divides by
  num_nodes (groups -> nodes, replicas inside each node, replicas -> GPUs), the global policy otherwise. Like the
  published code, the global policy ignores the groups, so they need not divide the experts there.
- ``mode="improved"`` (``rebalance_plan.py``) never puts two replicas of one expert on one GPU, sizes each node's
  share of replicas by its load, accepts a replica count that is not a multiple of the GPU count, and, given the
  previous layout, moves as few experts as it can. ``plan_rebalance`` returns the same plan with its report.

Exact or improved? Exact reproduces the reference and may host two replicas of one expert on one GPU: the second
copy costs memory and adds no parallelism, but it can give that GPU a lower peak load on small or skewed inputs.
Improved keeps replicas on distinct GPUs (and so moves fewer bytes, and balances across nodes), which can cost peak
load on such inputs. ``plan_rebalance`` reports both peaks (``max_over_mean`` and ``exact_max_over_mean``) so a
caller can choose per run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch

from moe_balance._checks import check_load_matrix, check_positive_int

from ._packing import build_log2phy, greedy_pack, invert_permutation, replicate_greedy
from .rebalance_plan import RebalancePlan, gpu_loads, max_over_mean, plan_improved

MODES = ("exact", "improved")
LOG2PHY_LAYOUTS = ("eplb", "vllm")


def check_rebalance_arguments(
    weight: object, num_replicas: object, num_groups: object, num_nodes: object, num_gpus: object, mode: str
) -> torch.Tensor:
    """Validate the planner's arguments; returns weight as float32 on the CPU."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not supported: use one of {', '.join(MODES)}")
    matrix = check_load_matrix(weight, "weight", "(layers, experts)")
    num_experts = matrix.shape[1]
    num_replicas = check_positive_int(num_replicas, "num_replicas")
    num_groups = check_positive_int(num_groups, "num_groups")
    num_nodes = check_positive_int(num_nodes, "num_nodes")
    num_gpus = check_positive_int(num_gpus, "num_gpus")
    if num_replicas < num_experts:
        raise ValueError(
            f"num_replicas={num_replicas} is smaller than the {num_experts} experts in weight: every expert needs a "
            f"slot, so use num_replicas >= {num_experts}"
        )
    if num_groups % num_nodes == 0 and num_experts % num_groups != 0:
        raise ValueError(
            f"num_groups={num_groups} does not divide the {num_experts} experts: the hierarchical policy (num_groups "
            f"a multiple of num_nodes={num_nodes}) needs equal-sized groups; use a divisor of the expert count "
            "(1 for no groups)"
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
    return matrix.float()


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


def check_log2phy_layout(log2phy_layout: str) -> None:
    if log2phy_layout not in LOG2PHY_LAYOUTS:
        raise ValueError(
            f"log2phy_layout={log2phy_layout!r} is not supported: use 'eplb' (X = logcnt.max(), DeepSeek EPLB) or "
            "'vllm' (X = replicas - experts + 1)"
        )


def log2phy_width(logcnt: torch.Tensor, num_replicas: int, log2phy_layout: str) -> int:
    """The last dimension of log2phy: DeepSeek's ``logcnt.max()`` or vLLM's ``replicas - experts + 1``."""
    return int(logcnt.max()) if log2phy_layout == "eplb" else num_replicas - logcnt.shape[1] + 1


def rebalance_exact(
    weight: torch.Tensor,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    log2phy_layout: str = "eplb",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The published algorithm, vectorised over layers; arguments assumed valid. See ``rebalance_experts``."""
    num_experts = weight.shape[1]
    if num_groups % num_nodes != 0:
        num_groups, num_nodes = 1, 1  # global policy
    phy2log, phy_rank, logcnt = _rebalance_hierarchical(weight, num_replicas, num_groups, num_nodes, num_gpus)
    width = log2phy_width(logcnt, num_replicas, log2phy_layout)
    log2phy = build_log2phy(phy2log, phy_rank, num_experts, width)
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
    log2phy_layout: Literal["eplb", "vllm"] = "eplb",
    compare_exact: bool = True,
) -> RebalancePlan:
    """Improved-mode plan with its report: movement against ``previous``, layers kept, balance before and after.

    previous: (layers, num_replicas) phy2log of the layout in service, or None. A layer keeps its previous layout
    when re-planning would lower its max/mean GPU load by less than ``min_gain``. ``expert_size_bytes`` (the bytes of
    one expert's weights) turns moved slots into bytes. ``locality_slack``: the target GPU load is the mean x
    (1 + locality_slack); below it a replica stays on its expert's previous GPU or home node, and GPUs above it are
    relieved by swaps. Smaller values balance tighter at the cost of more cross-node traffic and moves.
    ``compare_exact`` also plans the exact (published) layout of the same loads and reports its peak in
    ``exact_max_over_mean`` (None when num_replicas is not a multiple of num_gpus, which exact mode refuses).
    """
    weight = check_rebalance_arguments(weight, num_replicas, num_groups, num_nodes, num_gpus, "improved")
    check_log2phy_layout(log2phy_layout)
    # NaN fails every comparison: `not x >= 0` refuses it where `x < 0` would let it through.
    # pylint: disable-next=unnecessary-negation
    if not isinstance(min_gain, (int, float)) or not min_gain >= 0:
        raise ValueError(f"min_gain={min_gain!r} must be a number >= 0 (a max/mean difference, e.g. 0.02)")
    # NaN fails every comparison: `not x >= 0` refuses it where `x < 0` would let it through.
    # pylint: disable-next=unnecessary-negation
    if not isinstance(locality_slack, (int, float)) or not locality_slack >= 0:
        raise ValueError(f"locality_slack={locality_slack!r} must be a number >= 0 (a share of the mean GPU load)")
    if expert_size_bytes is not None:
        check_positive_int(expert_size_bytes, "expert_size_bytes")
    if previous is not None:
        previous = _check_previous(previous, weight.shape, num_replicas)
    plan = plan_improved(
        weight,
        num_replicas,
        num_groups,
        num_nodes,
        num_gpus,
        previous=previous,
        min_gain=float(min_gain),
        expert_size_bytes=expert_size_bytes,
        locality_slack=float(locality_slack),
        log2phy_layout=log2phy_layout,
    )
    exact_ratio = None
    if compare_exact and num_replicas % num_gpus == 0:
        exact_phy2log = rebalance_exact(weight, num_replicas, num_groups, num_nodes, num_gpus)[0]
        slot_gpu = torch.repeat_interleave(torch.arange(num_gpus), plan.gpu_slot_counts)
        exact_ratio = max_over_mean(gpu_loads(exact_phy2log, weight.double(), slot_gpu, num_gpus))
    return replace(plan, exact_max_over_mean=exact_ratio)


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
    ids = previous.detach().cpu().long()
    if int(ids.min()) < 0 or int(ids.max()) >= num_experts:
        raise ValueError(
            f"previous holds expert ids from {int(ids.min())} to {int(ids.max())}; "
            f"ids must lie in [0, {num_experts})"
        )
    present = torch.zeros((num_layers, num_experts), dtype=torch.bool).scatter_(1, ids, True)
    if not bool(present.all()):
        layer = int((~present).any(dim=1).nonzero()[0])
        raise ValueError(f"previous misses some experts in layer {layer}: every expert needs at least one slot")
    return ids


def rebalance_experts(
    weight: torch.Tensor,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    *,
    mode: Literal["exact", "improved"] = "exact",
    previous: torch.Tensor | None = None,
    log2phy_layout: Literal["eplb", "vllm"] = "eplb",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Plan expert replicas and their GPUs for every layer.

    weight: (layers, experts) load statistics of each logical expert (token counts). num_replicas: physical slots
    per layer (in all GPUs together). num_groups: expert groups (group-limited routing); num_nodes, num_gpus: the
    cluster. Returns phy2log (layers, replicas), log2phy (layers, experts, X) padded with -1, logcnt (layers,
    experts); int64 on the CPU. X is ``logcnt.max()`` for ``log2phy_layout="eplb"`` (DeepSeek's contract) and
    ``replicas - experts + 1`` for ``"vllm"``. ``previous`` (improved mode only): the phy2log in service, to move
    few experts; use ``plan_rebalance`` for the movement report. When num_groups is not a multiple of num_nodes the
    global policy runs and the groups are ignored, as in the published code.
    """
    check_log2phy_layout(log2phy_layout)
    if mode == "exact":
        weight = check_rebalance_arguments(weight, num_replicas, num_groups, num_nodes, num_gpus, mode)
        if previous is not None:
            raise ValueError(
                "previous is only used by mode='improved': exact mode reproduces the published algorithm, which "
                "ignores the layout in service; drop previous or use mode='improved'"
            )
        return rebalance_exact(weight, num_replicas, num_groups, num_nodes, num_gpus, log2phy_layout)
    if mode != "improved":
        raise ValueError(f"mode={mode!r} is not supported: use one of {', '.join(MODES)}")
    plan = plan_rebalance(
        weight,
        num_replicas,
        num_groups,
        num_nodes,
        num_gpus,
        previous=previous,
        log2phy_layout=log2phy_layout,
        compare_exact=False,
    )
    return plan.phy2log, plan.log2phy, plan.logcnt
