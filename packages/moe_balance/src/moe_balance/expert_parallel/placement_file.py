"""The placement file ``playbooks/rebalance.yml`` writes (``hpc.balance.expert_placement/1``), loaded by a job.

Format: docs/expert-placement.md. ``phy2log`` is DeepSeek EPLB's (layers, replicas) tensor as nested lists, slots
GPU-major (GPU g owns slots g*S ... g*S + S - 1 with S = num_replicas / num_gpus). A file planned for another model
or another job shape is refused, with the same error on every rank: each node has its own copy, so the ranks also
compare what they loaded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TypeGuard

import torch
import torch.distributed as dist

from .agreement import agree_on_every_rank, tensor_digest

SCHEMA = "hpc.balance.expert_placement/1"
RERUN = "run playbooks/rebalance.yml for this job (its records, num_gpus = ranks) or point the job at its own file"


@dataclass(frozen=True)
class ExpertPlacement:
    """A loaded placement: which logical expert each physical slot of each MoE layer holds."""

    layers: tuple[int, ...]  # MoE layer numbers, one per row of phy2log
    phy2log: torch.Tensor  # (layers, R) int64
    num_experts: int
    slots_per_rank: int

    def row(self, layer: int) -> torch.Tensor:
        """phy2log of MoE layer ``layer`` (a layer number of the file, not a row index). (R,) int64."""
        if layer not in self.layers:
            raise ValueError(f"layer {layer} is not in the placement, which has layers {list(self.layers)}")
        return self.phy2log[self.layers.index(layer)]


def default_phy2log(num_experts: int, num_slots: int) -> torch.Tensor:
    """The layout before any placement: slot s holds expert s mod E (the planner's default). (num_slots,) int64."""
    return torch.arange(num_slots) % num_experts


def _int_matrix(value: object, rows: int, columns: int) -> TypeGuard[list[list[int]]]:
    return (
        isinstance(value, list)
        and len(value) == rows
        and all(isinstance(row, list) and len(row) == columns for row in value)
        and all(isinstance(v, int) and not isinstance(v, bool) for row in value for v in row)
    )


def placement_problem(
    document: object, *, num_experts: int, world_size: int, slots_per_rank: int, layers: list[int] | None
) -> str | None:
    """Why ``document`` (a parsed placement file) does not fit this job, or None. Pure: no file, no collective."""
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else type(document).__name__
        return f"it is not a {SCHEMA} file (schema {found!r}); {RERUN}"
    num_slots = slots_per_rank * world_size
    facts = (
        ("num_experts", num_experts, "experts per MoE layer"),
        ("num_gpus", world_size, "ranks"),
        ("num_replicas", num_slots, f"slots ({world_size} ranks x {slots_per_rank})"),
    )
    for key, expected, meaning in facts:
        if document.get(key) != expected:
            return f"it was planned for {key}={document.get(key)!r}; this job has {expected} {meaning}: {RERUN}"
    if document.get("gpu_slot_counts", [slots_per_rank] * world_size) != [slots_per_rank] * world_size:
        return (
            f"its gpu_slot_counts {document.get('gpu_slot_counts')} are not {slots_per_rank} on each of the "
            f"{world_size} ranks; the executor needs the same slot count on every rank: {RERUN}"
        )
    found_layers = document.get("layers")
    if not isinstance(found_layers, list) or not all(isinstance(v, int) for v in found_layers) or not found_layers:
        return f"its 'layers' must be a non-empty list of layer numbers; got {found_layers!r}"
    if layers is not None and list(layers) != found_layers:
        return f"it holds layers {found_layers}; this job's MoE layers are {list(layers)}: {RERUN}"
    phy2log = document.get("phy2log")
    if not _int_matrix(phy2log, len(found_layers), num_slots):
        return f"its phy2log is not a ({len(found_layers)} layers, {num_slots} slots) table of ints; {RERUN}"
    for index, row in enumerate(phy2log):
        if min(row) < 0 or max(row) >= num_experts:
            return (
                f"layer {found_layers[index]}: phy2log holds expert ids {min(row)}..{max(row)}, outside "
                f"[0, {num_experts}): {RERUN}"
            )
        missing = sorted(set(range(num_experts)) - set(row))
        if missing:
            return f"layer {found_layers[index]}: experts {missing[:8]} have no slot; every expert needs one: {RERUN}"
    logcnt = document.get("logcnt")
    if logcnt is not None:
        counted = [[row.count(expert) for expert in range(num_experts)] for row in phy2log]
        if logcnt != counted:
            return f"its logcnt does not match its phy2log (the file was edited or torn); {RERUN}"
    return None


def read_placement_file(
    path: str | os.PathLike, *, num_experts: int, world_size: int, slots_per_rank: int, layers: list[int] | None
) -> tuple[ExpertPlacement | None, str | None]:
    """(placement, None) when the file fits the job, else (None, why). Never raises for a bad file."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, f"placement file {os.fspath(path)} cannot be read ({exc}); {RERUN}"
    problem = placement_problem(
        document, num_experts=num_experts, world_size=world_size, slots_per_rank=slots_per_rank, layers=layers
    )
    if problem is not None:
        return None, f"placement file {os.fspath(path)}: {problem}"
    placement = ExpertPlacement(
        layers=tuple(document["layers"]),
        phy2log=torch.tensor(document["phy2log"], dtype=torch.int64),
        num_experts=num_experts,
        slots_per_rank=slots_per_rank,
    )
    return placement, None


def load_placement(
    path: str | os.PathLike,
    *,
    num_experts: int,
    slots_per_rank: int,
    layers: list[int] | None = None,
    group: dist.ProcessGroup | None = None,
) -> ExpertPlacement:
    """Load the placement on every rank of ``group`` (a collective); the same ``ExpertParallelError`` everywhere
    when any rank's file is missing, malformed, planned for another job, or differs from the other ranks' files.

    num_experts, slots_per_rank: the job's layer shape (R = slots_per_rank x ranks). layers: the job's MoE layer
    numbers, when the file must hold exactly those.
    """
    world_size = dist.get_world_size(group)
    placement, problem = read_placement_file(
        path, num_experts=num_experts, world_size=world_size, slots_per_rank=slots_per_rank, layers=layers
    )
    digest = 0 if placement is None else tensor_digest(torch.tensor(placement.layers), placement.phy2log)
    agree_on_every_rank(
        problem,
        "expert placement",
        group,
        digest=digest,
        digest_of="placements",
        fix="every node must hold the same placement file: copy it from one node, or load it on one rank and "
        "broadcast it",
    )
    assert placement is not None  # every rank passed
    return placement
