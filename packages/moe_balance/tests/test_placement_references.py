"""Placement against the published EPLB rules that users compare it with.

Sources:
- deepseek-ai/EPLB ``eplb.py`` at commit 57919718be1fbe2baca80a42a7df4de7119aaa95: ``rebalance_experts`` uses the
  hierarchical policy when ``num_groups % num_nodes == 0`` and otherwise calls it with one group and one node (the
  global policy), and sizes ``log2phy`` as ``(layers, experts, logcnt.max())``;
- vllm-project/vllm ``vllm/distributed/eplb/rebalance_algo.py`` at commit 07fb932a49cb8ee0762ce29009a11726051a22ab:
  ``log2phy`` padded to ``num_replicas - num_experts + 1``;
- vllm-project/vllm ``tests/distributed/test_eplb_algo.py`` at commit 030ea52effcb05071543c8c42b8f0145e94cee43:
  ``test_parameter_validation`` and ``test_global_load_balance_fallback`` expect groups that do not divide over the
  nodes to fall back to the global policy, without an error.
"""

from __future__ import annotations

import pytest
import torch
from eplb_reference import rebalance_experts_reference
from test_placement_eplb import check_invariants

from moe_balance.placement import plan_rebalance, rebalance_experts


def test_groups_that_do_not_divide_the_experts_fall_back_to_the_global_policy():
    """Item 3, vLLM's test_parameter_validation: 4 experts, num_groups=3, 2 nodes, 4 GPUs, 8 slots."""
    weight = torch.tensor([[10, 20, 30, 40]])
    phy2log, log2phy, logcnt = rebalance_experts(weight, 8, 3, 2, 4)
    assert phy2log.shape == (1, 8) and logcnt.shape == (1, 4)
    global_policy = rebalance_experts(weight, 8, 1, 1, 4)
    assert all(torch.equal(a, b) for a, b in zip((phy2log, log2phy, logcnt), global_policy, strict=True))


def test_global_fallback_of_vllm_test_suite():
    """vLLM's test_global_load_balance_fallback: 6 experts, 3 groups on 2 nodes."""
    phy2log, _log2phy, logcnt = rebalance_experts(torch.tensor([[10, 20, 30, 40, 50, 60]]), 8, 3, 2, 4)
    assert phy2log.shape == (1, 8) and int(logcnt.sum()) == 8


def test_slots_not_a_multiple_of_the_gpus_still_fail_in_exact_mode():
    """vLLM's test_parameter_validation also expects 7 slots on 4 GPUs to fail."""
    with pytest.raises(ValueError, match="num_replicas=7 is not a multiple of num_gpus=4"):
        rebalance_experts(torch.tensor([[10, 20, 30, 40]]), 7, 2, 2, 4)


def test_hierarchical_groups_that_do_not_divide_the_experts_are_refused():
    """The published code asserts here too (``num_logical_experts % num_groups == 0``)."""
    with pytest.raises(ValueError, match="num_groups=4 does not divide the 6 experts"):
        rebalance_experts(torch.ones((1, 6)), 8, 4, 2, 4)


def deepseek_log2phy(phy2log, phy_rank, logcnt, width):
    """log2phy as deepseek-ai/EPLB builds it (scatter of slot ids at expert * width + rank), our transcription."""
    num_layers, num_experts = logcnt.shape
    log2phy = torch.full((num_layers, num_experts * width), -1, dtype=torch.int64)
    slots = torch.arange(phy2log.shape[1]).expand(num_layers, -1)
    return log2phy.scatter_(-1, phy2log * width + phy_rank, slots).view(num_layers, num_experts, width)


def replica_ranks(phy2log):
    """Rank of each slot among the slots of its expert, in slot order (how both references number replicas)."""
    ranks = torch.zeros_like(phy2log)
    for layer, row in enumerate(phy2log.tolist()):
        seen: dict[int, int] = {}
        for slot, expert in enumerate(row):
            ranks[layer, slot] = seen.get(expert, 0)
            seen[expert] = ranks[layer, slot] + 1
    return ranks


@pytest.mark.parametrize(("layout", "deepseek_width"), [("eplb", True), ("vllm", False)])
def test_log2phy_layouts(layout, deepseek_width):
    """Item 6: DeepSeek's width logcnt.max() by default; vLLM's fixed replicas - experts + 1 on request."""
    weight = torch.tensor([[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86]] * 2)
    phy2log, log2phy, logcnt = rebalance_experts(weight, 16, 4, 2, 8, log2phy_layout=layout)
    width = int(logcnt.max()) if deepseek_width else 16 - 12 + 1
    assert log2phy.shape == (2, 12, width)
    ranks = rebalance_experts_reference(weight, 16, 4, 2, 8, log2phy_layout=layout)[1]
    assert torch.equal(log2phy, ranks)
    check_invariants(phy2log, log2phy, logcnt, 12, 16, layout)


def test_eplb_layout_is_what_deepseek_returns_on_the_readme_example():
    weight = torch.tensor(
        [
            [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
            [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
        ]
    )
    phy2log, log2phy, logcnt = rebalance_experts(weight, 16, 4, 2, 8)
    expected = deepseek_log2phy(phy2log, replica_ranks(phy2log), logcnt, int(logcnt.max()))
    # Replica ranks follow replication order, not slot order; both list the same slots per expert.
    assert torch.equal(log2phy.sort(dim=-1).values, expected.sort(dim=-1).values)


def test_improved_plan_honours_the_layout_too():
    weight = torch.rand((3, 16)) * 100
    plan = plan_rebalance(weight, 24, 4, 2, 8, log2phy_layout="vllm")
    assert plan.log2phy.shape == (3, 16, 9)
    assert plan_rebalance(weight, 24, 4, 2, 8).log2phy.shape == (3, 16, int(plan.logcnt.max()))


def test_plan_reports_both_peaks_and_exact_can_be_lower_by_doubling_up():
    """Item 8: improved never puts two replicas of one expert on a GPU; exact may, and here gets the lower peak.

    Loads 77, 76, 3 on 2 GPUs with 4 slots: exact replicates expert 0 and packs both halves (38.5 + 38.5) on one
    GPU, beside 76 + 3 on the other (peak 79); distinct GPUs force 38.5 + 76 together (peak 114.5).
    """
    weight = torch.tensor([[77.0, 76.0, 3.0]])
    plan = plan_rebalance(weight, 4, 1, 2, 2, min_gain=0.0)
    assert plan.exact_max_over_mean is not None
    assert float(plan.exact_max_over_mean[0]) == pytest.approx(79 / 78)
    assert float(plan.max_over_mean[0]) == pytest.approx(114.5 / 78)
    exact_per_gpu = rebalance_experts(weight, 4, 1, 2, 2)[0].view(2, 2)
    assert sorted(exact_per_gpu.tolist()) == [[0, 0], [1, 2]]
    assert all(len(set(row)) == 2 for row in plan.phy2log.view(2, 2).tolist())


def test_peak_comparison_can_be_switched_off():
    plan = plan_rebalance(torch.rand((2, 16)), 24, 4, 2, 8, compare_exact=False)
    assert plan.exact_max_over_mean is None
    assert plan_rebalance(torch.rand((2, 16)), 20, 4, 2, 8).exact_max_over_mean is None  # 20 slots on 8 GPUs
