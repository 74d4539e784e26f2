"""What the expert-parallel layer did in a micro-batch: one rank's measurements, and the record of the whole group.

The record sits beside the tokens-per-expert one (``moe_balance.metrics``): a JSON object, one per (step, layer),
schema ``moe_balance.expert_parallel/1``::

    "schema":                      "moe_balance.expert_parallel/1"
    "step", "layer":               int >= 0
    "world_size", "ranks_per_node", "spare_slots_per_rank": int
    "replicas":                    int   spare slots the replica plan filled (0 without a plan)
    "tokens_routed_per_rank":      [int] token-expert pairs whose physical slot is on each rank (before replicas)
    "tokens_computed_per_rank":    [int] pairs each rank ran through an expert (measured)
    "tokens_predicted_per_rank":   [int] the replica plan's rank_load_after (= routed without a plan)
    "routed_max_over_mean", "computed_max_over_mean", "predicted_max_over_mean": float (1.0 = balanced)
    "token_bytes_within_node", "token_bytes_across_nodes":   int  activations sent between ranks, forward
                                   (dispatch + combine; backward sends as many gradient bytes again)
    "weight_bytes_within_node", "weight_bytes_across_nodes": int  guest weights sent, forward (their gradients
                                   travel the same way back in backward)

Bytes count what ranks sent to other ranks (a rank's rows for itself never touch the wire); a node is
rank // ranks_per_node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from moe_balance.metrics import balance_stats
from moe_balance.placement import ReplicaPlan

from .agreement import collective_device

SCHEMA = "moe_balance.expert_parallel/1"
PER_RANK_KEYS = ("tokens_routed_per_rank", "tokens_computed_per_rank", "tokens_predicted_per_rank")
BYTE_KEYS = (
    "token_bytes_within_node",
    "token_bytes_across_nodes",
    "weight_bytes_within_node",
    "weight_bytes_across_nodes",
)


@dataclass
class MicroBatchStats:
    """One rank's view of one micro-batch: measured on this rank, except the plan's prediction."""

    tokens_routed: int  # pairs whose physical slot is on this rank (all sources)
    tokens_computed: int  # pairs this rank ran through an expert, home and guest slots
    tokens_computed_as_guest: int
    tokens_predicted: int  # the plan's rank_load_after for this rank
    token_bytes_within_node: int = 0  # sent by this rank
    token_bytes_across_nodes: int = 0
    weight_bytes_within_node: int = 0
    weight_bytes_across_nodes: int = 0
    guest_p2p_ops: int = 0  # sends + receives this rank issued for guest weights
    replicas: int = 0
    events: list[str] = field(default_factory=list)  # the order this rank did things in
    plan: ReplicaPlan | None = None


def _max_over_mean(values: list[int]) -> float:
    return float(balance_stats(values)["max_over_mean"]) if sum(values) > 0 else 1.0


def validate_execution_record(record: Any) -> dict:
    """Return ``record`` if it follows the schema, else raise ValueError naming the offending key."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise ValueError(f"an expert-parallel record is a dict with 'schema': {SCHEMA!r}; got {record!r:.120}")
    world_size = record.get("world_size")
    for key in ("step", "layer", "world_size", "ranks_per_node", "spare_slots_per_rank", "replicas", *BYTE_KEYS):
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"record key {key!r} must be an int >= 0; got {value!r}")
    for key in PER_RANK_KEYS:
        values = record.get(key)
        if (
            not isinstance(values, list)
            or len(values) != world_size
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values)
        ):
            raise ValueError(f"record key {key!r} must list {world_size} ints >= 0, one per rank; got {values!r}")
    return record


def make_execution_record(
    per_rank: list[MicroBatchStats], *, step: int, layer: int, ranks_per_node: int, spare_slots_per_rank: int
) -> dict:
    """The group's record from every rank's stats (rank order). Bytes are summed over the ranks that sent them."""
    routed = [s.tokens_routed for s in per_rank]
    computed = [s.tokens_computed for s in per_rank]
    predicted = [s.tokens_predicted for s in per_rank]
    record = {
        "schema": SCHEMA,
        "step": int(step),
        "layer": int(layer),
        "world_size": len(per_rank),
        "ranks_per_node": int(ranks_per_node),
        "spare_slots_per_rank": int(spare_slots_per_rank),
        "replicas": int(per_rank[0].replicas),
        "tokens_routed_per_rank": routed,
        "tokens_computed_per_rank": computed,
        "tokens_predicted_per_rank": predicted,
        "routed_max_over_mean": _max_over_mean(routed),
        "computed_max_over_mean": _max_over_mean(computed),
        "predicted_max_over_mean": _max_over_mean(predicted),
    }
    for key in BYTE_KEYS:
        record[key] = sum(int(getattr(s, key)) for s in per_rank)
    return validate_execution_record(record)


def gather_execution_record(
    stats: MicroBatchStats,
    *,
    step: int,
    layer: int,
    ranks_per_node: int,
    spare_slots_per_rank: int,
    group: dist.ProcessGroup | None = None,
) -> dict:
    """All-gather every rank's stats (one small int64 vector each) and return the same record on every rank.

    A collective: call it on every rank, e.g. every N steps, as the tokens-per-expert monitor does.
    """
    fields = ("tokens_routed", "tokens_computed", "tokens_computed_as_guest", "tokens_predicted", *BYTE_KEYS)
    mine = torch.tensor(
        [int(getattr(stats, name)) for name in fields] + [stats.replicas],
        dtype=torch.int64,
        device=collective_device(group),
    )
    gathered = [torch.empty_like(mine) for _rank in range(dist.get_world_size(group))]
    dist.all_gather(gathered, mine, group=group)
    per_rank = []
    for row in gathered:
        values = row.tolist()
        per_rank.append(MicroBatchStats(**dict(zip(fields, values[:-1], strict=True)), replicas=values[-1]))
    return make_execution_record(
        per_rank, step=step, layer=layer, ranks_per_node=ranks_per_node, spare_slots_per_rank=spare_slots_per_rank
    )
