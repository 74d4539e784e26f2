"""Triton kernel for phase 1 of the replica plan: log-domain Sinkhorn-Knopp, one program, all iterations fused.

The whole (ranks, ranks) problem fits in one block (ranks <= MAX_RANKS), so the kernel loads supply, demand and cost
once, iterates in registers and writes the plan once. Reference: ``replica_torch.sinkhorn_flow`` (same updates, same
start, on the rows and columns that carry mass); tests compare the two under TRITON_INTERPRET=1. One program, no
program id: offsets stay below ``MAX_RANKS**2``, so int32 offsets are safe here.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_balance.kernels._device import device_guard

MAX_RANKS = 128  # a (128, 128) float32 block still lives in registers of one program


# Triton reads a kernel's parameter annotations (tl.constexpr marks compile-time ones): the others stay bare.
@triton.jit
def _sinkhorn_kernel(  # type: ignore[no-untyped-def]
    supply_ptr, demand_ptr, cost_ptr, plan_ptr, n, inv_epsilon, iterations, BLOCK: tl.constexpr
):
    index = tl.arange(0, BLOCK)
    rows = index[:, None]
    cols = index[None, :]
    inside = (rows < n) & (cols < n)
    supply = tl.load(supply_ptr + index, mask=index < n, other=0.0)  # (BLOCK,)
    demand = tl.load(demand_ptr + index, mask=index < n, other=0.0)
    row_live = supply > 0
    col_live = demand > 0
    live = row_live[:, None] & col_live[None, :]  # (BLOCK, BLOCK)
    neg_cost = -tl.load(cost_ptr + rows * n + cols, mask=inside, other=0.0) * inv_epsilon
    log_supply = tl.log(tl.where(row_live, supply, 1.0))
    log_demand = tl.log(tl.where(col_live, demand, 1.0))
    alpha = tl.zeros([BLOCK], dtype=tl.float32)
    beta = tl.zeros([BLOCK], dtype=tl.float32)
    for _iteration in range(iterations):
        # alpha_i = log a_i - logsumexp_j(beta_j - C_ij / eps) over live columns
        x = tl.where(live, neg_cost + beta[None, :], float("-inf"))
        peak = tl.where(row_live, tl.max(x, axis=1), 0.0)
        lse = peak + tl.log(tl.where(row_live, tl.sum(tl.exp(x - peak[:, None]), axis=1), 1.0))
        alpha = tl.where(row_live, log_supply - lse, 0.0)
        # beta_j = log b_j - logsumexp_i(alpha_i - C_ij / eps) over live rows
        y = tl.where(live, neg_cost + alpha[:, None], float("-inf"))
        peak = tl.where(col_live, tl.max(y, axis=0), 0.0)
        lse = peak + tl.log(tl.where(col_live, tl.sum(tl.exp(y - peak[None, :]), axis=0), 1.0))
        beta = tl.where(col_live, log_demand - lse, 0.0)
    plan = tl.where(live, tl.exp(alpha[:, None] + beta[None, :] + neg_cost), 0.0)
    tl.store(plan_ptr + rows * n + cols, plan, mask=inside)


def _device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def sinkhorn_flow_triton(
    supply: torch.Tensor, demand: torch.Tensor, cost: torch.Tensor, epsilon: float, iterations: int
) -> torch.Tensor:
    """Same contract as ``replica_torch.sinkhorn_flow``; runs on the GPU when there is one. Returns CPU float32."""
    num_ranks = supply.shape[0]
    if num_ranks > MAX_RANKS:
        raise ValueError(
            f"the Triton Sinkhorn kernel handles at most {MAX_RANKS} ranks; got {num_ranks}: use backend='torch'"
        )
    device = _device()
    supply = supply.to(device, torch.float32).contiguous()
    demand = demand.to(device, torch.float32).contiguous()
    cost = cost.to(device, torch.float32).contiguous()
    plan = torch.zeros((num_ranks, num_ranks), dtype=torch.float32, device=device)
    block = max(16, triton.next_power_of_2(num_ranks))
    with device_guard(plan):
        _sinkhorn_kernel[(1,)](
            supply,
            demand,
            cost,
            plan,
            num_ranks,
            1.0 / float(epsilon),
            int(iterations),
            BLOCK=block,
            num_warps=4 if block <= 64 else 8,
        )
    return plan.cpu()
