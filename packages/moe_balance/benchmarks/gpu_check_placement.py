"""gpu_check's placement steps: the Sinkhorn and matching kernels against their torch versions, and the matching
kernel at the largest shape one program holds (``placement/_matching_triton.py``: MAX_CELLS ranks x experts).

Each step takes the mode (``"gpu"`` or ``"dry-run"``) and returns a JSON-ready dict with ``ok``.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from gpu_check_measure import best_s, device_for

from moe_balance.placement import ReplicaPlan, plan_replicas
from moe_balance.placement._matching_triton import MAX_CELLS, fits_matching_kernel, match_slots_triton
from moe_balance.placement._sinkhorn_triton import sinkhorn_flow_triton
from moe_balance.placement.replica import rank_cost_matrix
from moe_balance.placement.replica_torch import sinkhorn_flow

CPU = torch.device("cpu")


def skewed_load(num_ranks: int, num_experts: int, seed: int = 1) -> torch.Tensor:
    """(ranks, experts) routed counts with lognormal popularity: a few hot experts, so replicas are worth planning."""
    generator = torch.Generator().manual_seed(seed)
    popularity = torch.exp(0.8 * torch.randn(num_experts, generator=generator, dtype=torch.float64))
    share = popularity / popularity.sum()
    per_rank = (share * 4096).unsqueeze(0).expand(num_ranks, -1)
    noise = torch.rand((num_ranks, num_experts), generator=generator, dtype=torch.float64) * 0.2 + 0.9
    return (per_rank * noise).round().long()


def compare_plans(
    load: torch.Tensor, device: torch.device, repeats: int, *, spare_slots_per_rank: int, ranks_per_node: int
) -> dict[str, Any]:
    """plan_replicas with the torch backend (CPU) and the Triton backend (``device``): same plan? and their times."""
    warm_up = device.type == "cuda"
    plans = {}
    backends: tuple[tuple[Literal["torch", "triton"], torch.device], ...] = (("torch", CPU), ("triton", device))
    for backend, where in backends:
        moved = load.to(where)

        def plan(moved: torch.Tensor = moved, backend: Literal["torch", "triton"] = backend) -> ReplicaPlan:
            return plan_replicas(
                moved, spare_slots_per_rank=spare_slots_per_rank, ranks_per_node=ranks_per_node, backend=backend
            )

        plans[backend] = best_s(plan, where, repeats, warm_up=warm_up)
    (torch_s, want), (triton_s, got) = plans["torch"], plans["triton"]
    same = torch.equal(want.slot_expert, got.slot_expert) and torch.equal(want.tokens, got.tokens)
    return {
        "ranks": load.shape[0],
        "experts": load.shape[1],
        "spare_slots_per_rank": spare_slots_per_rank,
        "torch_ms": round(torch_s * 1e3, 3),
        "triton_ms": round(triton_s * 1e3, 3),
        "same_plan": same,
        "imbalance_before": want.imbalance_before,
        "imbalance_after": want.imbalance_after,
        "ok": same,
    }


def placement(mode: str) -> dict[str, Any]:
    """The Sinkhorn kernel against its torch version, and the whole replica plan with each backend."""
    device = device_for(mode)
    repeats = 20 if mode == "gpu" else 1
    num_ranks = 32 if mode == "gpu" else 8
    generator = torch.Generator().manual_seed(0)
    supply = torch.rand(num_ranks, generator=generator) * (torch.arange(num_ranks) % 2 == 0)
    demand = torch.rand(num_ranks, generator=generator) * (torch.arange(num_ranks) % 2 == 1)
    supply, demand = supply / supply.sum(), demand / demand.sum()
    cost = rank_cost_matrix(num_ranks, 8 if mode == "gpu" else 4, 3.0)
    warm_up = mode == "gpu"
    torch_s, want = best_s(lambda: sinkhorn_flow(supply, demand, cost, 0.25, 64), CPU, repeats, warm_up=warm_up)
    triton_s, got = best_s(
        lambda: sinkhorn_flow_triton(supply, demand, cost, 0.25, 64), device, repeats, warm_up=warm_up
    )
    sinkhorn = {
        "ranks": num_ranks,
        "torch_ms": round(torch_s * 1e3, 3),
        "triton_ms": round(triton_s * 1e3, 3),
        "max_abs_diff": float((got.cpu() - want).abs().max()),
    }
    sinkhorn["ok"] = sinkhorn["max_abs_diff"] < 1e-5
    replica_plan = compare_plans(
        skewed_load(num_ranks, 256 if mode == "gpu" else 32),
        device,
        repeats,
        spare_slots_per_rank=2,
        ranks_per_node=8 if mode == "gpu" else 4,
    )
    return {"ok": sinkhorn["ok"] and replica_plan["ok"], "sinkhorn": sinkhorn, "replica_plan": replica_plan}


def _refuses_past_the_limit(num_ranks: int, num_experts: int) -> dict[str, Any]:
    """The matching kernel refuses a shape one program cannot hold, before any launch, naming the fix."""
    surplus, supply = torch.zeros(num_experts, dtype=torch.int64), torch.zeros(num_ranks, dtype=torch.int64)
    slots = torch.full((num_ranks * 2,), -1, dtype=torch.int64)
    try:
        match_slots_triton(surplus, supply, supply, torch.zeros(1, 1), 8, slots, slots.clone(), 1, 1)
    except ValueError as error:
        return {"shape": [num_ranks, num_experts], "refused": True, "message": str(error)}
    return {"shape": [num_ranks, num_experts], "refused": False}


def matching_largest(mode: str) -> dict[str, Any]:
    """Replica plans whose matching state fills MAX_CELLS (64 ranks x 512 experts, 128 x 256), Triton against torch,
    and twice the ranks refused. The dry run plans 16 ranks x 64 experts (the interpreter takes ~6 s at 64 x 512)."""
    device = device_for(mode)
    shapes = tuple((ranks, MAX_CELLS // ranks) for ranks in (64, 128)) if mode == "gpu" else ((16, 64),)
    plans = []
    for num_ranks, num_experts in shapes:
        plan = compare_plans(
            skewed_load(num_ranks, num_experts),
            device,
            5 if mode == "gpu" else 1,
            spare_slots_per_rank=2,
            ranks_per_node=8,
        )
        plan["cells"] = num_ranks * num_experts
        plan["fits_kernel"] = fits_matching_kernel(num_ranks, num_experts)
        plan["ok"] = plan["ok"] and plan["fits_kernel"]
        plans.append(plan)
    past = _refuses_past_the_limit(128, MAX_CELLS // 64)
    past["ok"] = past["refused"] and str(MAX_CELLS) in past.get("message", "")
    return {
        "ok": all(p["ok"] for p in plans) and past["ok"],
        "max_cells": MAX_CELLS,
        "plans": plans,
        "past_limit": past,
    }
