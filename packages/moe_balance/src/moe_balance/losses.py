"""Load-balancing losses for top-k routers, with every normalisation spelled out and convertible.

Notation: T tokens, E experts, k experts per token; ``count_i`` = assignments to expert i (sums to T*k);
``f_i = count_i / (T*k)`` the share of assignments (sums to 1); ``P_i`` = mean over ALL T tokens of the FULL score
distribution (softmax, or sigmoid scores normalised per token), also summing to 1.

- ``"megatron"`` convention (Switch Transformer, Megatron-LM ``switch_load_balancing_loss_func``):
  ``E * sum_i f_i * P_i`` = ``E/k * sum_i (count_i/T) * P_i``. Equals 1.0 when perfectly balanced, at any k.
- ``"hf"`` convention (transformers ``load_balancing_loss_func``): counts each of the k slots as its own
  distribution, so the value is k times the megatron one (perfect balance gives k). HF pools the layers: it
  concatenates every layer's logits along the tokens before computing one loss; pass a list of per-layer logits with
  ``convention="hf"`` to do the same. ``convert_aux_loss`` converts a single-layer value between the two.
- sequence-wise (DeepSeek-V3 complementary loss, Megatron ``sequence_load_balancing_loss_func``): the same formula
  per sequence, then the mean over sequences. Rows are ordered ``s*batch + b`` (sequence-major, as Megatron's
  (seq, batch, hidden) layout flattens).
- global-batch (``GlobalBatchAuxLoss``): f from the counts accumulated over all micro-batches (and ranks) of the
  global batch, P from the current micro-batch.
- router z-loss (ST-MoE): ``mean_t logsumexp(logits_t)**2``.

Masks: ``aux_loss`` and ``z_loss`` take ``attention_mask``, True (or 1) for real tokens and False (0) for padding,
shape (tokens,) or (batch, seq) with rows ordered ``b*seq + s`` (HF's layout). The loss is then that of the real
tokens alone: f and P are counted and averaged over them, as transformers' ``load_balancing_loss_func`` with its
``attention_mask`` and Megatron-LM's ``padding_mask`` do. (Megatron's mask is True for *padding*: pass
``~padding_mask``.) With ``seq_len`` (the sequence-wise loss) the mask follows the rows, ``s*batch + b``: shape
(tokens,) or (seq, batch), Megatron's layout. Padding is left out of each sequence's counts and probability sums,
and every sequence is divided by the batch's mean real length (real tokens / batch) rather than its own, as
Megatron-LM's ``seq_aux_loss`` with a padding mask does; without padding that is ``seq_len``.

The classic bug this module guards against: with top-k, counting f as ``count_i / T`` makes ``sum f = k`` and
silently multiplies the loss by k. Here ``f`` is always divided by ``T*k`` and ``sum f = 1`` is asserted.

``aux_loss_masked_probs`` is a popular variant that keeps only the selected experts' probabilities in P. It is not
what the references compute (sum P < 1, perfect balance gives less than 1) and lives under its own name only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from moe_balance._checks import check_logits, check_score, check_top_k, compute_dtype
from moe_balance.routing import count_tokens, select_experts

CONVENTIONS = ("megatron", "hf")


def check_convention(convention: str) -> None:
    if convention not in CONVENTIONS:
        raise ValueError(f"convention={convention!r} is not supported: use one of {', '.join(CONVENTIONS)}")


def convention_factor(convention: str, top_k: int) -> int:
    """Multiplier from the megatron convention to ``convention`` for one layer (hf = k x megatron)."""
    check_convention(convention)
    return top_k if convention == "hf" else 1


def convert_aux_loss(value: float, *, top_k: int, from_convention: str, to_convention: str) -> float:
    """Convert a single-layer aux-loss value between conventions: ``hf = top_k * megatron``.

    For HF's pooled multi-layer value the same factor holds against the megatron loss of the pooled tokens
    (``aux_loss(torch.cat(layers), k)``), not against the mean of per-layer losses.
    """
    return value * convention_factor(to_convention, top_k) / convention_factor(from_convention, top_k)


def aux_scores(logits: torch.Tensor, score: str = "softmax") -> torch.Tensor:
    """(tokens, experts) -> (tokens, experts) probability rows used for P: softmax, or per-token normalised sigmoid."""
    check_score(score)
    x = logits.to(compute_dtype(logits))
    if score == "softmax":
        return torch.softmax(x, dim=-1)
    s = torch.sigmoid(x)
    return s / s.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)


def assignment_fractions(tokens_per_expert: torch.Tensor, num_tokens: int, top_k: int) -> torch.Tensor:
    """f_i = count_i / (T*k), asserting that the counts add up to T*k (so that sum f = 1).

    Fails loudly when the counts were taken after capacity dropping, over other tokens, or divided by T alone.
    """
    counts = tokens_per_expert.detach()
    f = counts.to(torch.float64) / (num_tokens * top_k)  # float64: exact for any realistic count
    total = f.sum()
    if f.device.type == "cpu":
        if abs(float(total) - 1.0) > 1e-5:
            raise ValueError(
                f"tokens_per_expert sums to {float(counts.sum())}, but tokens * top_k = {num_tokens} * {top_k} = "
                f"{num_tokens * top_k}: pass the counts of these tokens before capacity dropping, so that the "
                "assignment fractions f sum to 1"
            )
    else:  # NOTE: no host sync on accelerators; a device-side assert stops the step instead.
        torch._assert_async(torch.abs(total - 1.0) <= 1e-5, "tokens_per_expert must sum to tokens * top_k")
    return f


def load_balancing_loss(
    probs: torch.Tensor, tokens_per_expert: torch.Tensor, top_k: int, *, convention: str = "megatron"
) -> torch.Tensor:
    """Aux loss from (tokens, experts) probability rows and the (experts,) counts of the same tokens.

    ``probs`` carries the gradient; the counts are constants. Returns a 0-dim tensor (megatron: 1.0 when balanced).
    """
    factor = convention_factor(convention, top_k)
    num_tokens, num_experts = probs.shape
    f = assignment_fractions(tokens_per_expert, num_tokens, top_k).to(probs.dtype)  # (experts,)
    p = probs.mean(dim=0)  # (experts,)
    return num_experts * factor * torch.dot(f, p)


def sequence_load_balancing_loss(
    probs: torch.Tensor,
    topk_idx: torch.Tensor,
    top_k: int,
    seq_len: int,
    *,
    convention: str = "megatron",
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-sequence aux loss averaged over sequences; rows ordered ``s*batch + b`` (see the module docstring).

    probs: (tokens, experts); topk_idx: (tokens, top_k). attention_mask: True (1) for real tokens, (tokens,) in row
    order or (seq, batch), or None. Padding rows add nothing to the counts or the probability sums (and get no
    gradient), and each sequence is normalised by the batch's mean real length: the normaliser Megatron-LM derives
    from the masked routing map, so that the value matches its ``seq_aux_loss`` with a padding mask.
    """
    factor = convention_factor(convention, top_k)
    num_tokens, num_experts = probs.shape
    batch = _sequences(seq_len, num_tokens)
    _sequence_mask_layout(attention_mask, seq_len, batch)
    mask = _token_mask(attention_mask, num_tokens)  # (tokens,) bool or None
    # Token t = s*batch + b belongs to sequence b = t % batch.
    seq_of_row = torch.arange(num_tokens, device=probs.device) % batch  # (tokens,)
    flat = (seq_of_row.unsqueeze(1) * num_experts + topk_idx).reshape(-1)  # (tokens * top_k,)
    if mask is None:
        counts = torch.bincount(flat, minlength=batch * num_experts).view(batch, num_experts)  # (batch, experts)
        f = counts.to(probs.dtype) / (seq_len * top_k)  # (batch, experts), each row sums to 1
        p = probs.view(seq_len, batch, num_experts).mean(dim=0)  # (batch, experts)
        return num_experts * factor * (f * p).sum(dim=1).mean()
    # NOTE: padding goes to one extra bin that is dropped, rather than being indexed out: no host sync on GPUs.
    flat = torch.where(mask.repeat_interleave(top_k), flat, batch * num_experts)  # (tokens * top_k,)
    counts = torch.bincount(flat, minlength=batch * num_experts + 1)[:-1].view(batch, num_experts)  # (batch, experts)
    mean_real_len = mask.sum().to(probs.dtype) / batch  # 0-dim: real tokens per sequence, on average
    f = counts.to(probs.dtype) / (mean_real_len * top_k)  # (batch, experts); the rows sum to 1 on average
    real_probs = torch.where(mask.unsqueeze(1), probs, 0.0)  # (tokens, experts)
    p = real_probs.view(seq_len, batch, num_experts).sum(dim=0) / mean_real_len  # (batch, experts)
    return num_experts * factor * (f * p).sum(dim=1).mean()


def _sequences(seq_len: object, num_tokens: int) -> int:
    """The batch size (sequences) of ``num_tokens`` rows of ``seq_len`` tokens each, after checking seq_len."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1 or num_tokens % seq_len != 0:
        raise ValueError(
            f"seq_len={seq_len!r} must be a positive int dividing the {num_tokens} tokens "
            "(rows are seq_len * batch, ordered s*batch + b)"
        )
    return num_tokens // seq_len


def _sequence_mask_layout(attention_mask: torch.Tensor | None, seq_len: int, batch: int) -> None:
    """With seq_len, a 2-D mask must be (seq, batch) like the rows: HF's (batch, seq) would flatten out of order."""
    if attention_mask is None or not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
        return
    expected = (seq_len, batch)
    if tuple(attention_mask.shape) != expected:
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, but with seq_len={seq_len} a 2-D mask must be "
            f"(seq, batch) = {expected}, the rows' order s*batch + b (Megatron's layout): transpose a (batch, seq) "
            "mask with attention_mask.T, or pass it flattened in row order"
        )


def _token_mask(attention_mask: torch.Tensor | None, num_tokens: int) -> torch.Tensor | None:
    """(tokens,) or (batch, seq) mask of real tokens -> (tokens,) bool, or None; checked against the row count."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() not in (1, 2):
        got = tuple(attention_mask.shape) if isinstance(attention_mask, torch.Tensor) else type(attention_mask).__name__
        raise ValueError(f"attention_mask must be a (tokens,) or (batch, seq) tensor, True for real tokens; got {got}")
    mask = attention_mask.reshape(-1)
    if mask.numel() != num_tokens:
        raise ValueError(
            f"attention_mask has {mask.numel()} entries (shape {tuple(attention_mask.shape)}) but the logits have "
            f"{num_tokens} rows: pass one entry per token, in the order of the rows"
        )
    mask = mask.to(torch.bool) if mask.dtype != torch.bool else mask
    if not bool(mask.any()):
        raise ValueError("attention_mask keeps no token: at least one real token is needed for a loss")
    return mask


def _aux_loss_one_layer(
    logits: torch.Tensor,
    top_k: int,
    convention: str,
    seq_len: int | None,
    score: str,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    check_logits(logits)
    mask = None if seq_len is not None else _token_mask(attention_mask, logits.shape[0])
    if mask is not None:
        logits = logits[mask]  # (real tokens, experts): the loss of the real tokens alone; padding gets no gradient
    check_top_k(top_k, logits.shape[1])
    probs = aux_scores(logits, score)  # (tokens, experts)
    with torch.no_grad():
        topk_idx = select_experts(probs, top_k)  # (tokens, top_k); same order as on the raw scores
    if seq_len is not None:  # whole sequences: padding rows stay, masked inside
        return sequence_load_balancing_loss(
            probs, topk_idx, top_k, seq_len, convention=convention, attention_mask=attention_mask
        )
    return load_balancing_loss(probs, count_tokens(topk_idx, logits.shape[1]), top_k, convention=convention)


def aux_loss(
    logits: torch.Tensor | Sequence[torch.Tensor],
    top_k: int,
    *,
    convention: str = "megatron",
    seq_len: int | None = None,
    score: str = "softmax",
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Load-balancing loss of (tokens, experts) router logits with plain top-k selection; grad flows to ``logits``.

    A list of per-layer logits is pooled along the tokens for ``convention="hf"`` (what HF does) and averaged over
    layers for ``"megatron"`` (Megatron adds each layer's loss to the objective, i.e. ``num_layers`` times this mean).
    With ``seq_len`` the sequence-wise loss is computed (per layer for a list, then averaged). ``attention_mask``
    (see the module docstring; with ``seq_len`` in the rows' ``s*batch + b`` order) keeps the real tokens of every
    layer.
    """
    check_convention(convention)
    check_score(score)
    if isinstance(logits, torch.Tensor):
        return _aux_loss_one_layer(logits, top_k, convention, seq_len, score, attention_mask)
    layers = list(logits)
    if not layers:
        raise ValueError("logits is an empty list of layers: pass one (tokens, experts) tensor per MoE layer")
    if convention == "hf" and seq_len is None:
        pooled_mask = None if attention_mask is None else attention_mask.reshape(-1).repeat(len(layers))
        return _aux_loss_one_layer(torch.cat(layers, dim=0), top_k, convention, None, score, pooled_mask)
    losses = [_aux_loss_one_layer(x, top_k, convention, seq_len, score, attention_mask) for x in layers]
    return torch.stack(losses).mean()


def aux_loss_masked_probs(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """NON-REFERENCE variant: P_i averages p_ti only where expert i was selected for token t.

    Some write-ups compute the Switch loss this way. Because unselected probability mass is dropped, sum P < 1 and a
    perfectly balanced router scores below 1; the gradient also ignores the experts a token did not pick, so it
    cannot pull probability towards idle experts. Use ``aux_loss`` to match Megatron, HF or the papers.
    """
    check_logits(logits)
    num_experts = logits.shape[1]
    check_top_k(top_k, num_experts)
    probs = aux_scores(logits)  # (tokens, experts)
    with torch.no_grad():
        topk_idx = select_experts(probs, top_k)
        selected = torch.zeros_like(probs, dtype=torch.bool).scatter_(1, topk_idx, True)  # (tokens, experts)
    f = assignment_fractions(count_tokens(topk_idx, num_experts), logits.shape[0], top_k).to(probs.dtype)
    p_masked = (probs * selected).mean(dim=0)  # (experts,)
    return num_experts * torch.dot(f, p_masked)


def z_loss(logits: torch.Tensor, *, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Router z-loss (ST-MoE): mean over tokens of logsumexp(logits)**2; a 0-dim tensor with grad to ``logits``.

    With ``attention_mask`` the mean runs over the real tokens only (Megatron-LM's ``z_loss_func`` padding mask).
    """
    check_logits(logits)
    mask = _token_mask(attention_mask, logits.shape[0])
    if mask is not None:
        logits = logits[mask]
    lse = torch.logsumexp(logits.to(compute_dtype(logits)), dim=-1)  # (tokens,)
    return lse.square().mean()


class GlobalBatchAuxLoss:
    """Aux loss whose f is counted over the whole global batch (Megatron's global aux loss).

    Call once per micro-batch with that micro-batch's probability rows and counts: f comes from the counts accumulated
    since the last ``reset()`` (all-reduced over ``group`` when given), P from the current micro-batch (it carries the
    gradient). Call ``reset()`` after the optimizer step. Balanced routing still gives 1.0 (megatron convention).
    """

    def __init__(self, num_experts: int, top_k: int, *, convention: str = "megatron",
                 group: torch.distributed.ProcessGroup | None = None) -> None:
        check_top_k(top_k, num_experts)
        check_convention(convention)
        self.num_experts = num_experts
        self.top_k = top_k
        self.convention = convention
        self.group = group
        self.reset()

    def reset(self) -> None:
        self.accumulated_counts: torch.Tensor | None = None  # (experts,) float64
        self.accumulated_tokens = 0

    def __call__(self, probs: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
        num_tokens, num_experts = probs.shape
        if num_experts != self.num_experts:
            raise ValueError(f"probs has {num_experts} experts, but this loss was built for {self.num_experts}")
        counts = tokens_per_expert.detach().to(torch.float64).clone()  # (experts,)
        tokens = torch.tensor([float(num_tokens)], dtype=torch.float64, device=counts.device)
        if self.group is not None:
            import torch.distributed as dist

            dist.all_reduce(counts, group=self.group)
            dist.all_reduce(tokens, group=self.group)
        self.accumulated_counts = counts if self.accumulated_counts is None else self.accumulated_counts + counts
        self.accumulated_tokens += int(tokens.item())
        f = assignment_fractions(self.accumulated_counts, self.accumulated_tokens, self.top_k).to(probs.dtype)
        return num_experts * convention_factor(self.convention, self.top_k) * torch.dot(f, probs.mean(dim=0))
