"""Triton kernels of the replica plan against their torch references (CPU: run with TRITON_INTERPRET=1)."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

triton = pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    pytest.skip("Triton kernels need a GPU or TRITON_INTERPRET=1", allow_module_level=True)

from moe_balance.placement import plan_replicas  # noqa: E402
from moe_balance.placement._matching_triton import match_slots_triton  # noqa: E402
from moe_balance.placement._sinkhorn_triton import sinkhorn_flow_triton  # noqa: E402
from moe_balance.placement.replica import rank_cost_matrix  # noqa: E402
from moe_balance.placement.replica_torch import match_slots, sinkhorn_flow  # noqa: E402

MAX_TOKENS = 2**31 - 1


def split_masses(num_ranks: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Disjoint supply (hot ranks) and demand (cold ranks), each summing to 1, some ranks idle."""
    generator = torch.Generator().manual_seed(seed)
    side = torch.randint(0, 3, (num_ranks,), generator=generator)  # 0 hot, 1 cold, 2 balanced
    side[0], side[1] = 0, 1
    supply = torch.rand(num_ranks, generator=generator) * (side == 0)
    demand = torch.rand(num_ranks, generator=generator) * (side == 1)
    return supply / supply.sum(), demand / demand.sum()


@pytest.mark.parametrize("num_ranks,ranks_per_node,inter_node_cost", [(8, 4, 3.0), (12, 4, 10.0), (5, 5, 1.0)])
def test_sinkhorn_kernel_matches_the_torch_reference(num_ranks, ranks_per_node, inter_node_cost):
    supply, demand = split_masses(num_ranks, seed=num_ranks)
    cost = rank_cost_matrix(num_ranks, ranks_per_node, inter_node_cost)
    want = sinkhorn_flow(supply, demand, cost, 0.25, 40)
    got = sinkhorn_flow_triton(supply, demand, cost, 0.25, 40)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)
    assert torch.allclose(got.sum(dim=0), demand, atol=1e-5)  # columns are exact after the last update
    assert torch.allclose(got.sum(dim=1), supply, atol=1e-3)
    assert bool((got[supply == 0] == 0).all()) and bool((got[:, demand == 0] == 0).all())


def matching_case(
    num_ranks: int, num_experts: int, slots: int, prefilled: bool, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    expert_load = torch.randint(0, 60, (num_experts,), generator=generator)
    rank_load = expert_load.view(num_ranks, -1).sum(dim=1)
    target = -(-int(rank_load.sum()) // num_ranks)
    supply = (rank_load - target).clamp_min(0)
    demand = (target - rank_load).clamp_min(0)
    home = torch.arange(num_experts) // (num_experts // num_ranks)
    surplus = torch.where(supply[home] > 0, expert_load, 0)
    nodes = num_ranks // 2
    flow = torch.randint(0, 80, (nodes, nodes), generator=generator)
    slot_expert = torch.full((num_ranks * slots,), -1, dtype=torch.int64)
    slot_tokens = torch.zeros(num_ranks * slots, dtype=torch.int64)
    if prefilled:  # a spill pass starts from slots given earlier
        slot_expert[0] = (home != 0).nonzero()[0, 0]
        slot_tokens[0] = 3
    return surplus, supply, demand, flow, 2, slot_expert, slot_tokens


@settings(max_examples=6, deadline=None)
@given(
    shape=st.sampled_from([(4, 8, 1), (4, 16, 2), (8, 16, 2), (6, 12, 3)]),
    prefilled=st.booleans(),
    capacity=st.sampled_from([MAX_TOKENS, 20]),
    seed=st.integers(0, 2**31 - 1),
)
def test_matching_kernel_equals_the_torch_reference_exactly(shape, prefilled, capacity, seed):
    num_ranks, num_experts, slots = shape
    case = matching_case(num_ranks, num_experts, slots, prefilled, seed)
    max_rounds = num_ranks * slots
    want = match_slots(*case, capacity, max_rounds)
    got = match_slots_triton(*case, capacity, max_rounds)
    assert torch.equal(got[0], want[0])
    assert torch.equal(got[1], want[1])


def test_whole_plan_is_the_same_with_kernels_and_with_torch():
    generator = torch.Generator().manual_seed(0)
    popularity = torch.rand(32, generator=generator) ** 4 * 80
    load = torch.poisson(popularity.expand(8, -1), generator=generator).long()
    with_torch = plan_replicas(load, spare_slots_per_rank=2, ranks_per_node=4, backend="torch")
    with_kernels = plan_replicas(load, spare_slots_per_rank=2, ranks_per_node=4, backend="triton")
    assert torch.equal(with_kernels.slot_expert, with_torch.slot_expert)
    assert torch.equal(with_kernels.tokens, with_torch.tokens)
    assert with_kernels.imbalance_after < with_kernels.imbalance_before
