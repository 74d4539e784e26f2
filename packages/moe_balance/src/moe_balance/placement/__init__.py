"""Expert placement: EPLB-compatible planner (exact and improved modes) and the per-micro-batch replica plan."""

from .eplb import MODES, plan_rebalance, rebalance_experts
from .rebalance_plan import RebalancePlan, gpu_slot_counts
from .replica import ReplicaPlan, plan_replicas

__all__ = [
    "MODES",
    "RebalancePlan",
    "ReplicaPlan",
    "gpu_slot_counts",
    "plan_rebalance",
    "plan_replicas",
    "rebalance_experts",
]
