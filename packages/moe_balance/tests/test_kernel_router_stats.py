"""The Triton router-statistics kernel against its torch reference (CPU: Triton's interpreter; GPU: the real one)."""

from __future__ import annotations

from typing import Literal

import pytest
import torch

from moe_balance import router_stats
from moe_balance.kernels import kernel_can_run
from moe_balance.kernels.router_stats_torch import router_stats_torch
from moe_balance.routing import RouterConfig

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
pytestmark = pytest.mark.skipif(
    not kernel_can_run(torch.empty(0, device=DEVICE)), reason="needs Triton with a GPU or TRITON_INTERPRET=1"
)

CASES = [
    # (tokens, experts, top_k, score, bias, num_groups, group_topk, dtype)
    (37, 12, 3, "softmax", False, None, None, torch.float32),  # E not a power of two, partial last tile
    (50, 16, 4, "sigmoid", True, 4, 2, torch.float32),  # DeepSeek-style: biased sigmoid, group limit
    (33, 24, 6, "sigmoid", True, 8, 3, torch.float64),  # groups of 3 experts, float64 end to end
    (20, 64, 8, "softmax", True, 8, 4, torch.bfloat16),  # bf16 logits, biased softmax, groups
    (300, 8, 1, "softmax", False, None, None, torch.float16),  # several tiles, top-1
    (5, 3, 3, "sigmoid", False, None, None, torch.float32),  # k = E
    (29, 32, 4, "sigmoid", True, 8, 3, torch.float32),  # Megatron's router test shape: 4 // 3 = 1 expert per group
    (31, 32, 4, "softmax", False, 8, 3, torch.float32),  # groups ranked on the logits (Megatron's softmax default)
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"T{c[0]}-E{c[1]}-k{c[2]}-{c[3]}-{c[7]}".replace("torch.", ""))
def test_kernel_matches_the_torch_reference(case):
    from moe_balance.kernels.router_stats_triton import router_stats_triton

    tokens, experts, top_k, score, biased, num_groups, group_topk, dtype = case
    gen = torch.Generator().manual_seed(tokens * experts)
    logits = torch.randn(tokens, experts, generator=gen).to(dtype).to(DEVICE)
    bias = (torch.randn(experts, generator=gen) * 0.1).to(DEVICE) if biased else None
    grouped_on_logits = score == "softmax" and num_groups and not biased
    group_score: Literal["scores", "logits"] = "logits" if grouped_on_logits else "scores"
    config = RouterConfig(top_k, score=score, num_groups=num_groups, group_topk=group_topk, group_score=group_score)
    separate = biased or num_groups is not None
    got = router_stats_triton(logits, config, bias, separate_aux_counts=separate)
    want = router_stats_torch(logits, config, bias, separate_aux_counts=separate)
    names = ("topk_idx", "topk_scores", "counts", "aux_counts", "prob_sum", "lse")
    tolerance = 1e-12 if dtype == torch.float64 else 2e-6
    for name, g, w in zip(names, got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        if g.is_floating_point():
            torch.testing.assert_close(g, w, rtol=tolerance, atol=tolerance, msg=name)
        else:
            assert torch.equal(g, w), name


def test_kernel_reads_a_strided_view():
    from moe_balance.kernels.router_stats_triton import router_stats_triton

    wide = torch.randn(40, 32, device=DEVICE)
    view = wide[:, :16]  # row stride 32
    got = router_stats_triton(view, RouterConfig(4))
    want = router_stats_torch(view.contiguous(), RouterConfig(4))
    assert torch.equal(got[0], want[0]) and torch.equal(got[2], want[2])


def test_kernel_breaks_exact_ties_towards_the_lower_expert():
    from moe_balance.kernels.router_stats_triton import router_stats_triton

    logits = torch.zeros(3, 8, device=DEVICE)
    idx = router_stats_triton(logits, RouterConfig(3))[0]
    assert idx.tolist() == [[0, 1, 2]] * 3


def test_triton_backend_gives_the_same_losses_and_gradients_as_torch():
    x = torch.randn(24, 16, device=DEVICE)
    upstream = torch.randn(24, 4, device=DEVICE)
    grads = {}
    for backend in ("triton", "torch"):
        a = x.clone().requires_grad_(True)
        stats = router_stats(a, 4, score="sigmoid", num_groups=4, group_topk=2, backend=backend)
        assert stats.backend == backend
        ((stats.gates * upstream).sum() + stats.aux_loss + stats.z_loss).backward()
        grads[backend] = (a.grad, stats.aux_loss.item(), stats.z_loss.item())
    torch.testing.assert_close(grads["triton"][0], grads["torch"][0], rtol=1e-5, atol=1e-6)
    assert grads["triton"][1] == pytest.approx(grads["torch"][1], rel=1e-5)
    assert grads["triton"][2] == pytest.approx(grads["torch"][2], rel=1e-5)
