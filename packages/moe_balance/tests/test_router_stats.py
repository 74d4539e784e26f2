"""The fused router pass (torch forward + closed-form backward) against the plain autograd path."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_balance import aux_loss, route, router_stats, z_loss

FAST = settings(max_examples=20, deadline=None)


def plain_objective(x, upstream, top_k, options, aux_coeff, z_coeff):
    routing = route(x, top_k, **options)
    aux = aux_loss(x, top_k, score=options.get("score", "softmax"))  # plain top-k counts, as Megatron since 2025
    return (routing.gates * upstream).sum() + aux_coeff * aux + z_coeff * z_loss(x), routing


@st.composite
def cases(draw):
    num_groups = draw(st.sampled_from([None, 2]))
    num_experts = draw(st.integers(2, 5)) * 2
    top_k = 2 * draw(st.integers(1, num_experts // 2)) if num_groups else draw(st.integers(1, num_experts))
    if num_groups:
        top_k = min(top_k, num_experts)
    num_tokens = draw(st.integers(1, 12))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    x = torch.randn(num_tokens, num_experts, generator=gen, dtype=torch.float64) * 2
    options = {
        "score": draw(st.sampled_from(["softmax", "sigmoid"])),
        "normalize": draw(st.booleans()),
        "scale": draw(st.sampled_from([1.0, 1.7])),
        "bias": torch.randn(num_experts, generator=gen, dtype=torch.float64) * 0.1 if draw(st.booleans()) else None,
        "num_groups": num_groups,
        "group_topk": 2 if num_groups else None,
    }
    upstream = torch.randn(num_tokens, top_k, generator=gen, dtype=torch.float64)
    coeffs = (draw(st.sampled_from([0.0, 0.3])), draw(st.sampled_from([0.0, 0.05])))
    return x, top_k, options, upstream, coeffs


@FAST
@given(cases())
def test_fused_values_and_gradients_equal_the_plain_path(case):
    x, top_k, options, upstream, (aux_coeff, z_coeff) = case
    a = x.clone().requires_grad_(True)
    stats = router_stats(a, top_k, backend="torch", **options)
    fused = (stats.gates * upstream).sum() + aux_coeff * stats.aux_loss + z_coeff * stats.z_loss
    fused.backward()
    b = x.clone().requires_grad_(True)
    plain, routing = plain_objective(b, upstream, top_k, options, aux_coeff, z_coeff)
    plain.backward()
    assert torch.equal(stats.topk_idx, routing.topk_idx)
    assert torch.equal(stats.tokens_per_expert, routing.tokens_per_expert)
    assert fused.item() == pytest.approx(plain.item(), abs=1e-12)
    torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-12)


@pytest.mark.parametrize("score", ["softmax", "sigmoid"])
@pytest.mark.parametrize("normalize", [True, False])
def test_closed_form_backward_passes_gradcheck(score, normalize):
    x = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)

    def outputs(t):
        stats = router_stats(t, 3, score=score, normalize=normalize, scale=1.3, backend="torch")
        return stats.gates, stats.aux_loss, stats.z_loss

    assert torch.autograd.gradcheck(outputs, (x,))


def test_float32_input_keeps_float32_gradients():
    x = torch.randn(9, 8, requires_grad=True)
    stats = router_stats(x, 2)
    (stats.gates.sum() + stats.aux_loss).backward()
    assert stats.gates.dtype == torch.float32 and x.grad.dtype == torch.float32


def test_bfloat16_logits_are_routed_in_float32():
    x = torch.randn(9, 8).to(torch.bfloat16).requires_grad_(True)
    stats = router_stats(x, 2)
    stats.aux_loss.backward()
    assert stats.gates.dtype == torch.float32 and x.grad.dtype == torch.bfloat16


def test_statistics_sum_to_one():
    stats = router_stats(torch.randn(300, 16), 4)
    assert stats.assignment_fractions.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert stats.prob_mean.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_unused_outputs_cost_no_gradient_terms():
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    router_stats(x, 2).z_loss.backward()
    expected = torch.autograd.grad(z_loss(x), x)[0]
    torch.testing.assert_close(x.grad, expected)


def test_auto_backend_uses_torch_for_cpu_tensors():
    assert router_stats(torch.randn(4, 4), 2).backend == "torch"


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend='cuda' is not supported"):
        router_stats(torch.randn(4, 4), 2, backend="cuda")


def test_module_and_function_names_do_not_clash():
    """``moe_balance.router_stats`` the function; the module of that name and the kernels' files stay reachable."""
    import importlib

    import moe_balance

    module = importlib.import_module("moe_balance.router_stats")
    assert module.router_stats is moe_balance.router_stats is router_stats
    assert callable(importlib.import_module("moe_balance.kernels.router_stats_torch").router_stats_torch)
