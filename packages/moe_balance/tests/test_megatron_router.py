"""Routing and the fused aux loss against transcriptions of Megatron-LM's router formulas.

Source: NVIDIA/Megatron-LM, megatron/core/transformer/moe/moe_utils.py at commit
00611e6eeb0b09b5ee074750956855215ddbd67f (``group_limited_topk``, ``topk_routing_with_score_function``,
``compute_routing_scores_for_aux_loss``, ``switch_load_balancing_loss_func``) and
megatron/core/transformer/moe/router.py at commit 005742ff1f002035922b88a648fa615aec22eeff
(``aux_loss_load_balancing`` counts the routing map of ``compute_routing_scores_for_aux_loss``, a plain top-k
without the expert bias, since the 2025 aux-loss fix). The helpers below are our own transcriptions of those
formulas in plain torch, written for these tests.
"""

from __future__ import annotations

import pytest
import torch

from moe_balance import RouterConfig, aux_loss, route, router_stats


def megatron_group_limited_topk(scores, topk, num_groups, group_topk):
    """Groups ranked by the sum of their top ``topk // group_topk`` scores; top-k inside the kept groups."""
    num_tokens, num_experts = scores.shape
    group_scores = scores.view(num_tokens, num_groups, -1).topk(topk // group_topk, dim=-1).values.sum(dim=-1)
    kept = torch.zeros_like(group_scores).scatter(1, group_scores.topk(group_topk, dim=-1).indices, 1)
    mask = kept.unsqueeze(-1).expand(num_tokens, num_groups, num_experts // num_groups).reshape(num_tokens, -1)
    return scores.masked_fill(mask == 0, float("-inf")).topk(topk, dim=-1)


def megatron_topk_routing(logits, topk, *, score_function, expert_bias=None, num_groups=None, group_topk=None):
    """(probs (T, k), top_indices (T, k)) of ``topk_routing_with_score_function`` with use_pre_softmax=False."""

    def compute_topk(scores):
        if group_topk:
            return megatron_group_limited_topk(scores, topk, num_groups, group_topk)
        return torch.topk(scores, k=topk, dim=1)

    if score_function == "softmax":
        picked, top_indices = compute_topk(logits)  # top-k on the raw logits
        return torch.softmax(picked, dim=-1), top_indices
    scores = torch.sigmoid(logits)
    if expert_bias is not None:
        top_indices = compute_topk(scores + expert_bias)[1]
        picked = scores.gather(1, top_indices)
    else:
        picked, top_indices = compute_topk(scores)
    probs = picked / (picked.sum(dim=-1, keepdim=True) + 1e-20) if topk > 1 else picked
    return probs, top_indices


def megatron_aux_loss(logits, topk, score_function):
    """``switch_load_balancing_loss_func`` on ``compute_routing_scores_for_aux_loss`` (coefficient 1)."""
    if score_function == "softmax":
        scores = torch.softmax(logits, dim=-1)
    else:
        scores = torch.sigmoid(logits)
        scores = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)
    routing_map = torch.zeros_like(logits).scatter(1, torch.topk(scores, k=topk, dim=1).indices, 1)
    num_tokens, num_experts = logits.shape
    return (scores.sum(dim=0) * routing_map.sum(dim=0)).sum() * num_experts / (topk * num_tokens * num_tokens)


def logits_and_bias(seed, num_tokens=64, num_experts=32):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(num_tokens, num_experts, generator=gen, dtype=torch.float64)
    return logits, torch.randn(num_experts, generator=gen, dtype=torch.float64) * 0.5


@pytest.mark.parametrize("backend", ["torch", "auto"])
@pytest.mark.parametrize("seed", range(3))
def test_router_stats_aux_loss_counts_a_plain_top_k_like_megatron(seed, backend):
    """Item 1: a bias and a group limit change the routing, not the counts the aux loss uses."""
    logits, bias = logits_and_bias(seed)
    stats = router_stats(logits, 4, score="sigmoid", bias=bias, num_groups=8, group_topk=3, backend=backend)
    expected = megatron_aux_loss(logits, 4, "sigmoid")
    assert float(stats.aux_loss) == pytest.approx(float(expected), rel=1e-12)
    assert float(stats.aux_loss) == pytest.approx(float(aux_loss(logits, 4, score="sigmoid")), rel=1e-12)
    assert not torch.equal(stats.aux_tokens_per_expert, stats.tokens_per_expert)


def test_router_stats_can_still_count_the_routed_selection():
    logits, bias = logits_and_bias(7)
    stats = router_stats(logits, 4, score="sigmoid", bias=bias, aux_counts="routed", backend="torch")
    assert torch.equal(stats.aux_tokens_per_expert, stats.tokens_per_expert)
    assert float(stats.aux_loss) != pytest.approx(float(megatron_aux_loss(logits, 4, "sigmoid")), rel=1e-6)


def test_aux_gradient_uses_the_plain_top_k_counts():
    logits, bias = logits_and_bias(3, num_tokens=12, num_experts=8)
    a = logits.clone().requires_grad_(True)
    router_stats(a, 2, score="sigmoid", bias=bias, num_groups=4, group_topk=2, backend="torch").aux_loss.backward()
    b = logits.clone().requires_grad_(True)
    megatron_aux_loss(b, 2, "sigmoid").backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-12)


@pytest.mark.parametrize("biased", [False, True])
def test_group_topk_need_not_divide_top_k(biased):
    """Item 4: Megatron's router test shape, num_groups=8, group_topk=3, topk=4 (one expert scores a group)."""
    logits, bias = logits_and_bias(11)
    bias = bias if biased else None
    routing = route(logits, 4, score="sigmoid", bias=bias, num_groups=8, group_topk=3)
    probs, idx = megatron_topk_routing(
        logits, 4, score_function="sigmoid", expert_bias=bias, num_groups=8, group_topk=3
    )
    assert torch.equal(routing.topk_idx.sort(dim=1).values, idx.sort(dim=1).values)
    assert all(len(set((row // 4).tolist())) <= 3 for row in routing.topk_idx)
    order = idx.argsort(dim=1)
    torch.testing.assert_close(routing.gates.gather(1, routing.topk_idx.argsort(dim=1)), probs.gather(1, order))


def test_softmax_groups_on_logits_match_megatron_default():
    """Item 5: Megatron's softmax default ranks groups on the logits (use_pre_softmax=False)."""
    logits, _bias = logits_and_bias(5)
    config = RouterConfig.megatron(4, score="softmax", num_groups=8, group_topk=3)
    routing = route(logits, config)
    probs, idx = megatron_topk_routing(logits, 4, score_function="softmax", num_groups=8, group_topk=3)
    assert torch.equal(routing.topk_idx, idx)
    torch.testing.assert_close(routing.gates, probs, rtol=0, atol=1e-12)
    stats = router_stats(logits, config, backend="auto")
    assert torch.equal(stats.topk_idx, idx)


def test_groups_on_probabilities_differ_from_megatron_softmax_default_somewhere():
    """The package default (groups on probabilities, DeepSeek) is another rule once a group sums two scores."""
    logits, _bias = logits_and_bias(5, num_tokens=512)
    ours = route(logits, 4, num_groups=8, group_topk=2).topk_idx
    megatron = megatron_topk_routing(logits, 4, score_function="softmax", num_groups=8, group_topk=2)[1]
    assert not torch.equal(ours, megatron)
    assert torch.equal(route(logits, RouterConfig.megatron(4, num_groups=8, group_topk=2)).topk_idx, megatron)


def test_sigmoid_top1_gate_is_the_raw_score_in_megatron():
    """Item 5: Megatron normalises sigmoid gates only when topk > 1; DeepSeek-V3 always normalises (gate 1.0)."""
    logits, _bias = logits_and_bias(2)
    megatron = route(logits, RouterConfig.megatron(1, score="sigmoid"))
    probs, idx = megatron_topk_routing(logits, 1, score_function="sigmoid")
    assert torch.equal(megatron.topk_idx, idx)
    torch.testing.assert_close(megatron.gates, probs, rtol=0, atol=1e-15)
    deepseek = route(logits, 1, score="sigmoid")
    assert torch.equal(deepseek.gates, torch.ones_like(deepseek.gates))


def test_deepseek_v3_recipe():
    config = RouterConfig.deepseek_v3()
    assert (config.score, config.top_k, config.num_groups, config.group_topk, config.scale) == ("sigmoid", 8, 8, 4, 2.5)
    assert config.normalizes_gates


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"top_k": 2, "num_groups": 4, "group_topk": 3}, "top_k=2 is smaller than group_topk=3"),
        ({"top_k": 2, "score": "sigmoid", "group_score": "logits"}, "group_score='logits' is Megatron's softmax"),
        ({"top_k": 2, "group_score": "raw"}, "group_score='raw' is not supported"),
    ],
)
def test_config_refuses_meaningless_combinations(options, message):
    with pytest.raises(ValueError, match=message):
        RouterConfig(**options)


def test_bias_with_groups_on_logits_is_refused():
    logits, bias = logits_and_bias(1)
    with pytest.raises(ValueError, match="expert bias with group_score='logits'"):
        route(logits, 4, bias=bias, num_groups=8, group_topk=3, group_score="logits")


def test_config_is_frozen_and_shared_by_every_entry_point():
    config = RouterConfig(4, score="sigmoid", num_groups=8, group_topk=2)
    with pytest.raises(AttributeError):
        config.top_k = 3  # type: ignore[misc]  # the point: a frozen config refuses the write
    logits, bias = logits_and_bias(4)
    assert torch.equal(route(logits, config, bias=bias).topk_idx, router_stats(logits, config, bias=bias).topk_idx)


@pytest.mark.parametrize("score", ["softmax", "sigmoid"])
def test_gates_from_bf16_logits_stay_float32_one_cast_from_megatrons_bf16(score):
    """README, router conventions: gates keep the float32 compute dtype. Megatron's
    ``topk_routing_with_score_function`` computes in float32 too and returns ``probs.type_as(logits)``, so bf16
    logits give it bf16 gates: ours cast to bf16 are those, within one bf16 rounding."""
    gen = torch.Generator().manual_seed(17)
    # Distinct multiples of 1/8, exact in bf16: no ties, so both pick the same experts in the same order.
    logits = (torch.stack([torch.randperm(32, generator=gen) for _row in range(64)]) / 8 - 2).to(torch.bfloat16)
    config = RouterConfig.megatron(4, score=score)
    routing = route(logits, config)
    stats = router_stats(logits, config, backend="torch")
    assert routing.gates.dtype == stats.gates.dtype == routing.scores.dtype == torch.float32
    probs, idx = megatron_topk_routing(logits.float(), 4, score_function=score)  # float32 inside, as Megatron
    megatron_gates = probs.type_as(logits)
    assert megatron_gates.dtype == torch.bfloat16
    assert torch.equal(routing.topk_idx, idx)
    torch.testing.assert_close(routing.gates.to(logits.dtype), megatron_gates, rtol=2**-8, atol=0)
