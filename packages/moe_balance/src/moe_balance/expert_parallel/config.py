"""The expert-parallel layer's one config object: experts, slots, topology, replica-plan settings."""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass

import torch

from moe_balance._checks import check_positive_int

from .agreement import tensor_digest


@dataclass(frozen=True)
class ExpertParallelConfig:
    """Shapes and topology of one expert-parallel MoE layer; the same on every rank (checked at construction).

    num_experts: logical experts E. slots_per_rank: physical slots S each rank hosts (R = S x ranks >= E; R > E
    leaves room for an EPLB placement's redundant replicas). spare_slots_per_rank: K guest slots per rank for the
    per-micro-batch replica plan (0: no replica plan, every pair is computed in its physical slot).
    ranks_per_node: ranks sharing a node; node = rank // ranks_per_node (torchrun's contiguous layout).
    inter_node_cost, slot_capacity: passed to ``plan_replicas``.
    """

    num_experts: int
    slots_per_rank: int
    d_model: int
    d_ff: int
    ranks_per_node: int
    spare_slots_per_rank: int = 0
    inter_node_cost: float = 3.0
    slot_capacity: int | None = None

    def __post_init__(self) -> None:
        for name in ("num_experts", "slots_per_rank", "d_model", "d_ff", "ranks_per_node"):
            check_positive_int(getattr(self, name), name)
        spare = self.spare_slots_per_rank
        if isinstance(spare, bool) or not isinstance(spare, int) or spare < 0:
            raise ValueError(f"spare_slots_per_rank must be an int >= 0 (0: no replica plan); got {spare!r}")
        if self.slot_capacity is not None:
            check_positive_int(self.slot_capacity, "slot_capacity")
        cost = self.inter_node_cost
        if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost) or cost < 1:
            raise ValueError(f"inter_node_cost must be a finite number >= 1 (the intra-node cost); got {cost!r}")

    def world_problem(self, world_size: int) -> str | None:
        """Why this config cannot run on ``world_size`` ranks, or None."""
        if world_size % self.ranks_per_node != 0:
            return f"ranks_per_node={self.ranks_per_node} does not divide the {world_size} ranks of the group"
        if self.slots_per_rank * world_size < self.num_experts:
            return (
                f"{world_size} ranks x slots_per_rank={self.slots_per_rank} give {self.slots_per_rank * world_size} "
                f"slots for {self.num_experts} experts: every expert needs a slot; raise slots_per_rank to "
                f"{-(-self.num_experts // world_size)}"
            )
        return None

    def digest(self) -> int:
        """A checksum of every field, to confirm all ranks built the layer alike."""
        values = [-1.0 if value is None else float(value) for value in astuple(self)]
        return tensor_digest(torch.tensor(values, dtype=torch.float64))
