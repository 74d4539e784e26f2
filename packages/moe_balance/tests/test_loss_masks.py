"""Padding masks for the aux loss and the z-loss, against transcriptions of the references' masked formulas.

Sources:
- huggingface/transformers ``src/transformers/models/mixtral/modeling_mixtral.py`` at commit
  af3efdd71ee5b568dfdb71bb41d316df830147af, ``load_balancing_loss_func`` with ``attention_mask`` (batch, seq),
  1 for real tokens, layers concatenated along the tokens, rows ordered (layer, batch, seq);
- NVIDIA/Megatron-LM ``megatron/core/transformer/moe/moe_utils.py`` at commit
  00611e6eeb0b09b5ee074750956855215ddbd67f, ``compute_routing_scores_for_aux_loss`` / ``z_loss_func`` with a
  ``padding_mask`` that is True for padding, the total token count taken from the unmasked tokens.
The helpers are our own transcriptions in plain torch.
"""

from __future__ import annotations

import pytest
import torch

from moe_balance import aux_loss, z_loss


def hf_load_balancing_loss(gate_logits, num_experts, top_k, attention_mask):
    """HF's loss with an attention mask: per-slot masked fractions times masked mean probabilities, times E."""
    logits = torch.cat(gate_logits, dim=0)
    routing_weights = torch.softmax(logits, dim=-1)
    selected = torch.topk(routing_weights, top_k, dim=-1).indices
    expert_mask = torch.nn.functional.one_hot(selected, num_experts).double()  # (rows, k, E)
    batch, seq = attention_mask.shape
    layers = logits.shape[0] // (batch * seq)
    slot_mask = attention_mask[None, :, :, None, None].expand(layers, batch, seq, top_k, num_experts)
    slot_mask = slot_mask.reshape(-1, top_k, num_experts).double()
    tokens_per_expert = (expert_mask * slot_mask).sum(dim=0) / slot_mask.sum(dim=0)  # (k, E)
    row_mask = attention_mask[None, :, :, None].expand(layers, batch, seq, num_experts).reshape(-1, num_experts)
    router_prob = (routing_weights * row_mask).sum(dim=0) / row_mask.sum(dim=0)  # (E,)
    return (tokens_per_expert * router_prob.unsqueeze(0)).sum() * num_experts


def megatron_masked_aux_loss(logits, topk, padding_mask):
    """Megatron's switch loss on masked scores and routing map; T = real tokens (padding_mask True = padding)."""
    scores = torch.softmax(logits, dim=-1)
    routing_map = torch.zeros_like(logits).scatter(1, torch.topk(scores, k=topk, dim=1).indices, 1)
    valid = (~padding_mask).unsqueeze(-1)
    scores, routing_map = scores * valid, routing_map * valid
    tokens_per_expert = routing_map.sum(dim=0)
    total = tokens_per_expert.sum() / topk
    return (scores.sum(dim=0) * tokens_per_expert).sum() * logits.shape[1] / (topk * total * total)


def megatron_masked_z_loss(logits, padding_mask):
    values = torch.square(torch.logsumexp(logits, dim=-1)) * (~padding_mask)
    return values.sum() / torch.clamp((~padding_mask).sum(), min=1.0)


@pytest.fixture
def padded_batch():
    gen = torch.Generator().manual_seed(0)
    batch, seq, experts = 3, 5, 8
    layers = [torch.randn(batch * seq, experts, generator=gen, dtype=torch.float64) for _layer in range(2)]
    attention_mask = torch.ones(batch, seq, dtype=torch.long)
    attention_mask[0, 3:] = 0
    attention_mask[2, 1:] = 0
    return layers, attention_mask


def test_hf_convention_with_attention_mask_matches_transformers(padded_batch):
    """Item 7: HF pools the layers and counts only the real tokens."""
    layers, attention_mask = padded_batch
    ours = aux_loss(layers, 2, convention="hf", attention_mask=attention_mask)
    expected = hf_load_balancing_loss(layers, 8, 2, attention_mask)
    assert float(ours) == pytest.approx(float(expected), rel=1e-12)


def test_megatron_convention_with_padding_mask_matches_megatron(padded_batch):
    layers, attention_mask = padded_batch
    padding_mask = attention_mask.reshape(-1) == 0
    ours = aux_loss(layers[0], 2, attention_mask=~padding_mask)
    assert float(ours) == pytest.approx(float(megatron_masked_aux_loss(layers[0], 2, padding_mask)), rel=1e-12)
    ours_z = z_loss(layers[0], attention_mask=~padding_mask)
    assert float(ours_z) == pytest.approx(float(megatron_masked_z_loss(layers[0], padding_mask)), rel=1e-12)


def test_padding_rows_get_no_gradient(padded_batch):
    layers, attention_mask = padded_batch
    x = layers[0].clone().requires_grad_(True)
    (aux_loss(x, 2, attention_mask=attention_mask) + z_loss(x, attention_mask=attention_mask)).backward()
    padding = attention_mask.reshape(-1) == 0
    assert torch.equal(x.grad[padding], torch.zeros_like(x.grad[padding]))
    assert bool((x.grad[~padding] != 0).any())


def test_a_full_mask_changes_nothing(padded_batch):
    layers, _attention_mask = padded_batch
    everything = torch.ones(15, dtype=torch.bool)
    assert torch.equal(aux_loss(layers[0], 2, attention_mask=everything), aux_loss(layers[0], 2))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (torch.ones(14), "attention_mask has 14 entries"),
        (torch.zeros(15), "keeps no token"),
    ],
)
def test_bad_masks_are_refused(padded_batch, mask, message):
    with pytest.raises(ValueError, match=message):
        aux_loss(padded_batch[0][0], 2, attention_mask=mask)
