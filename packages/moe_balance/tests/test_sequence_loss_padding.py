"""The sequence-wise aux loss with a padding mask, against a transcription of Megatron-LM's formula.

Source: NVIDIA/Megatron-LM at commit 00611e6eeb0b09b5ee074750956855215ddbd67f:
- megatron/core/transformer/moe/router.py, ``TopKRouter.routing`` (``padding_mask`` (seq, bsz) flattened to the
  rows, True for padding as ``~padding_mask`` is used) and ``TopKRouter._apply_seq_aux_loss`` (scores and routing map
  reshaped to (seq, bsz * experts), ``topk * bsz`` passed as the top-k, the loss divided by ``bsz``);
- megatron/core/transformer/moe/moe_utils.py, ``compute_routing_scores_for_aux_loss`` (padding rows zeroed in both
  the scores and the routing map), ``get_tokens_per_expert_and_token_count`` (with a padding mask the token count is
  the routing map's sum over ``topk * bsz``: the batch's real tokens / bsz) and ``switch_load_balancing_loss_func``
  (``sum(probs.sum(0) * tokens_per_expert) * E / (topk * T * T)``).
``megatron_seq_aux_loss`` below is our own transcription of those lines, on one rank, coefficient 1, unfused.
"""

from __future__ import annotations

import math

import pytest
import torch

from moe_balance import aux_loss


def megatron_seq_aux_loss(logits, topk, seq_length, bsz, padding_mask, score_function="softmax"):
    """logits: (seq * bsz, E), rows s * bsz + b; padding_mask: (seq, bsz), True for padding."""
    num_experts = logits.shape[1]
    if score_function == "softmax":
        scores = torch.softmax(logits, dim=-1)
    else:
        scores = torch.sigmoid(logits)
        scores = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)
    routing_map = torch.zeros_like(logits).scatter(1, torch.topk(scores, k=topk, dim=1).indices, 1)
    valid = (~padding_mask.reshape(-1)).unsqueeze(-1)
    scores, routing_map = scores * valid, routing_map * valid
    scores = scores.reshape(seq_length, -1)  # (seq, bsz * E)
    tokens_per_expert = routing_map.reshape(seq_length, -1).sum(dim=0)  # (bsz * E,)
    total_num_tokens = tokens_per_expert.sum() / (topk * bsz)
    loss = (scores.sum(dim=0) * tokens_per_expert).sum() * num_experts / (topk * total_num_tokens * total_num_tokens)
    return loss / bsz


SEQ, BATCH, EXPERTS, TOP_K = 6, 4, 8, 2


@pytest.fixture
def padded_sequences():
    """(seq * batch, experts) float64 logits and a (seq, batch) padding mask: real lengths 6, 4, 1 and 0."""
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(SEQ * BATCH, EXPERTS, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([6, 4, 1, 0])
    padding_mask = torch.arange(SEQ).unsqueeze(1) >= lengths.unsqueeze(0)  # (seq, batch), True for padding
    return logits, padding_mask


@pytest.mark.parametrize("score", ["softmax", "sigmoid"])
def test_sequence_wise_loss_with_padding_matches_megatron(padded_sequences, score):
    logits, padding_mask = padded_sequences
    ours = aux_loss(logits, TOP_K, seq_len=SEQ, score=score, attention_mask=~padding_mask)
    expected = megatron_seq_aux_loss(logits, TOP_K, SEQ, BATCH, padding_mask, score)
    assert float(ours) == pytest.approx(float(expected), rel=1e-12)


def test_the_normaliser_is_the_mean_real_length_of_the_batch():
    """Two experts, top-1, two sequences of 2: the second has one real token. Softmax gives 0.75 / 0.25.

    Sequence 0 routes both tokens to expert 0 (probability sums 1.5, 0.5); sequence 1 its one token to expert 1
    (0.25, 0.75). Megatron divides by the mean real length 1.5: 2 / 1.5**2 * (2 * 1.5 + 1 * 0.75) / 2 = 5/3. Each
    sequence divided by its own length would give 1.5.
    """
    high = math.log(3.0)
    logits = torch.tensor([[high, 0.0], [0.0, high], [high, 0.0], [0.0, 0.0]], dtype=torch.float64)  # rows s*2 + b
    real = torch.tensor([[True, True], [True, False]])  # (seq, batch)
    assert float(aux_loss(logits, 1, seq_len=2, attention_mask=real)) == pytest.approx(5 / 3, rel=1e-12)


def test_padding_rows_get_no_gradient_in_the_sequence_wise_loss(padded_sequences):
    logits, padding_mask = padded_sequences
    x = logits.clone().requires_grad_(True)
    aux_loss(x, TOP_K, seq_len=SEQ, attention_mask=~padding_mask).backward()
    padding = padding_mask.reshape(-1)
    assert torch.equal(x.grad[padding], torch.zeros_like(x.grad[padding]))
    y = logits.clone().requires_grad_(True)
    megatron_seq_aux_loss(y, TOP_K, SEQ, BATCH, padding_mask).backward()
    torch.testing.assert_close(x.grad, y.grad, rtol=0, atol=1e-12)


def test_a_mask_without_padding_gives_the_unmasked_sequence_wise_loss(padded_sequences):
    logits, _padding_mask = padded_sequences
    everything = torch.ones(SEQ * BATCH, dtype=torch.bool)
    masked = aux_loss(logits, TOP_K, seq_len=SEQ, attention_mask=everything)
    assert float(masked) == pytest.approx(float(aux_loss(logits, TOP_K, seq_len=SEQ)), rel=1e-12)


@pytest.mark.parametrize("convention", ["megatron", "hf"])
def test_every_layer_takes_the_mask_in_the_sequence_wise_loss(padded_sequences, convention):
    """Per-layer losses, then their mean; the hf convention is k times the megatron one."""
    logits, padding_mask = padded_sequences
    layers = [logits, logits.flip(0)]
    ours = aux_loss(layers, TOP_K, seq_len=SEQ, convention=convention, attention_mask=(~padding_mask).long())
    per_layer = [float(megatron_seq_aux_loss(x, TOP_K, SEQ, BATCH, padding_mask)) for x in layers]
    factor = TOP_K if convention == "hf" else 1
    assert float(ours) == pytest.approx(factor * sum(per_layer) / 2, rel=1e-12)


def test_a_batch_major_mask_is_refused_with_the_sequence_wise_loss(padded_sequences):
    """With seq_len the rows run s*batch + b: an HF-style (batch, seq) mask would flatten out of order."""
    logits, padding_mask = padded_sequences
    with pytest.raises(ValueError, match=r"a 2-D mask must be \(seq, batch\) = \(6, 4\).*attention_mask\.T"):
        aux_loss(logits, TOP_K, seq_len=SEQ, attention_mask=(~padding_mask).T)
