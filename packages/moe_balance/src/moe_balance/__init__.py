"""Mixture-of-Experts load balancing: routing, balancing losses, aux-loss-free bias, capacity and metrics.

``moe_balance.pipeline`` (pipeline-parallel stage partition, bubble rate) is a pure-Python module exported here as
``moe_balance.pipeline``. ``moe_balance.placement`` is imported on demand, never from here; Triton is imported only
when its kernel runs.
"""

from moe_balance import pipeline
from moe_balance.bias import BiasBalancer
from moe_balance.capacity import CapacityResult, apply_capacity, expert_capacity
from moe_balance.losses import (
    GlobalBatchAuxLoss,
    aux_loss,
    aux_loss_masked_probs,
    convert_aux_loss,
    load_balancing_loss,
    sequence_load_balancing_loss,
    z_loss,
)
from moe_balance.metrics import SCHEMA, balance_stats, balance_stats_by_layer, grade_cv, make_record
from moe_balance.monitor import TokensPerExpertMonitor
from moe_balance.router_stats import RouterStats, router_stats
from moe_balance.routing import RouterConfig, Routing, route
from moe_balance.schedule import FineTuneDecay, LinearWarmup, ThreePhase

__version__ = "0.1.0"

__all__ = [
    "SCHEMA",
    "BiasBalancer",
    "CapacityResult",
    "FineTuneDecay",
    "GlobalBatchAuxLoss",
    "LinearWarmup",
    "RouterConfig",
    "RouterStats",
    "Routing",
    "ThreePhase",
    "TokensPerExpertMonitor",
    "__version__",
    "apply_capacity",
    "aux_loss",
    "aux_loss_masked_probs",
    "balance_stats",
    "balance_stats_by_layer",
    "convert_aux_loss",
    "expert_capacity",
    "grade_cv",
    "load_balancing_loss",
    "make_record",
    "pipeline",
    "route",
    "router_stats",
    "sequence_load_balancing_loss",
    "z_loss",
]
