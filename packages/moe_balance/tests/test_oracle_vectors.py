"""Differential tests against tests/data/router_vectors.json (values computed outside this package)."""

from __future__ import annotations

import pytest
import torch

from moe_balance import BiasBalancer, aux_loss, convert_aux_loss, route, router_stats, z_loss
from moe_balance.reference import aux_loss_reference, bias_update_reference, z_loss_reference


def test_oracle_rule_matches_the_fixture(oracle, logits_8x4):
    assert oracle["logits_rule"].startswith("logits[t][e] = ((7*t + 3*e) % 11) / 5 - 1")
    assert logits_8x4.shape == (8, 4) and logits_8x4[1, 2].item() == pytest.approx(((7 + 6) % 11) / 5 - 1)


def test_softmax_top2_counts(oracle, logits_8x4):
    counts = route(logits_8x4, 2).tokens_per_expert
    assert counts.tolist() == [int(c) for c in oracle["softmax_top2_tokens_per_expert"]]


def test_aux_loss_megatron_convention(oracle, logits_8x4):
    assert aux_loss(logits_8x4, 2).item() == pytest.approx(oracle["aux_loss_megatron_convention"], abs=1e-12)


def test_aux_loss_hf_convention(oracle, logits_8x4):
    assert aux_loss(logits_8x4, 2, convention="hf").item() == pytest.approx(oracle["aux_loss_hf_convention"], abs=1e-12)


def test_conventions_convert_into_each_other(oracle):
    megatron = oracle["aux_loss_megatron_convention"]
    hf = convert_aux_loss(megatron, top_k=2, from_convention="megatron", to_convention="hf")
    assert hf == pytest.approx(oracle["aux_loss_hf_convention"], abs=1e-12)
    assert convert_aux_loss(hf, top_k=2, from_convention="hf", to_convention="megatron") == pytest.approx(megatron)


def test_sequence_aux_loss(oracle, logits_8x4):
    seq = oracle["seq_aux_loss"]
    assert seq["token_index"] == "s*batch + b" and seq["seq_len"] * seq["batch"] == 8
    assert aux_loss(logits_8x4, 2, seq_len=seq["seq_len"]).item() == pytest.approx(seq["value"], abs=1e-12)


def test_z_loss(oracle, logits_8x4):
    assert z_loss(logits_8x4).item() == pytest.approx(oracle["z_loss_coeff_1"], abs=1e-12)


def test_fused_pass_reproduces_the_oracle(oracle, logits_8x4):
    stats = router_stats(logits_8x4, 2, backend="torch")
    assert stats.aux_loss.item() == pytest.approx(oracle["aux_loss_megatron_convention"], abs=1e-12)
    assert stats.z_loss.item() == pytest.approx(oracle["z_loss_coeff_1"], abs=1e-12)


def test_slow_references_reproduce_the_oracle(oracle, logits_8x4):
    assert aux_loss_reference(logits_8x4, 2) == pytest.approx(oracle["aux_loss_megatron_convention"], abs=1e-12)
    assert aux_loss_reference(logits_8x4, 2, convention="hf") == pytest.approx(oracle["aux_loss_hf_convention"])
    assert aux_loss_reference(logits_8x4, 2, seq_len=4) == pytest.approx(oracle["seq_aux_loss"]["value"], abs=1e-12)
    assert z_loss_reference(logits_8x4) == pytest.approx(oracle["z_loss_coeff_1"], abs=1e-12)


def test_sigmoid_selection_uses_the_biased_scores(oracle, logits_8x4):
    case = oracle["sigmoid_bias_selection"]
    routing = route(logits_8x4, 2, score="sigmoid", bias=torch.tensor(case["bias"], dtype=torch.float64))
    assert routing.topk_idx.tolist() == case["selected_top2_sorted_by_biased_score"]
    assert routing.tokens_per_expert.tolist() == [int(c) for c in case["tokens_per_expert"]]


def test_sigmoid_gates_come_from_the_unbiased_scores(oracle, logits_8x4):
    case = oracle["sigmoid_bias_selection"]
    routing = route(logits_8x4, 2, score="sigmoid", bias=torch.tensor(case["bias"], dtype=torch.float64))
    assert routing.gates[0].tolist() == pytest.approx(case["gates_row0_normalised_unbiased"], abs=1e-12)


def test_bias_update_signs(oracle):
    case = oracle["sigmoid_bias_selection"]
    balancer = BiasBalancer(4, rate=1e-3, dtype=torch.float64)
    balancer.update(torch.tensor([int(c) for c in case["tokens_per_expert"]]))
    assert balancer.bias.tolist() == pytest.approx(case["bias_update_rate_1e-3"], abs=1e-15)
    assert bias_update_reference([0.0] * 4, case["tokens_per_expert"], 1e-3) == pytest.approx(
        case["bias_update_rate_1e-3"]
    )
