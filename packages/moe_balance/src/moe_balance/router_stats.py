"""Fused router pass: routing, counts, aux loss and z-loss from one read of the logits, with an analytic backward.

``router_stats`` returns what ``route`` + ``aux_loss`` + ``z_loss`` return (same conventions, see ``routing`` and
``losses``), but computes the forward without an autograd graph (the Triton kernel on GPU, one torch pass elsewhere)
and the gradient of gates, aux loss and z-loss to the logits in closed form. With p the softmax, s the sigmoid,
c = E / (k * T**2), n_e the counts and G the gradient arriving at the gates:

- aux (softmax):  d/dx_te = c * p_te * (n_e - sum_j p_tj n_j)
- aux (sigmoid, P from q = s / sum s):  d/dx_te = c * s_te (1 - s_te) / sum_j s_tj * (n_e - sum_j q_tj n_j)
- z-loss:  d/dx_te = 2 / T * lse_t * p_te
- normalised gates g = scale * w / sum w of the selected scores w: dL/dw_j = scale * (G_j - sum_i G_i g_i/scale) /
  sum w, then through the softmax (whose cross term vanishes for normalised gates) or the sigmoid derivative.

The selection, counts and bias carry no gradient (as in every reference).

The aux loss counts a plain top-k of the unbiased scores, without the expert bias and without the group limit, like
``moe_balance.aux_loss``, Megatron-LM since its 2025 aux-loss fix (``compute_routing_scores_for_aux_loss`` in
megatron/core/transformer/moe/moe_utils.py) and the DeepSeek-V3 paper. ``aux_counts="routed"`` counts the biased,
group-limited routing instead (this package's behaviour before 0.2, and Megatron's before that fix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from moe_balance._checks import compute_dtype
from moe_balance.kernels import MAX_KERNEL_EXPERTS, kernel_can_run
from moe_balance.kernels.router_stats_torch import router_stats_torch
from moe_balance.routing import RouterConfig, check_config_for_logits

BACKENDS = ("auto", "triton", "torch")
AUX_COUNTS = ("top_k", "routed")


@dataclass(frozen=True)
class RouterStats:
    """Routing plus the balancing statistics of one router call."""

    topk_idx: torch.Tensor  # (tokens, top_k) int64, best selection score first
    gates: torch.Tensor  # (tokens, top_k) combine weights, grad to logits
    tokens_per_expert: torch.Tensor  # (experts,) int64 of this routing, sums to tokens * top_k
    aux_tokens_per_expert: torch.Tensor  # (experts,) int64 the aux loss counted (see the module docstring)
    aux_loss: torch.Tensor  # () megatron convention (1.0 balanced), grad to logits
    z_loss: torch.Tensor  # () mean logsumexp**2, grad to logits
    prob_mean: torch.Tensor  # (experts,) P: mean probability row (sums to 1), no grad
    backend: str  # "triton" or "torch": which forward ran

    @property
    def assignment_fractions(self) -> torch.Tensor:
        """(experts,) f = counts / (tokens * top_k), sums to 1."""
        num_tokens, top_k = self.topk_idx.shape
        return self.tokens_per_expert.to(self.prob_mean.dtype) / (num_tokens * top_k)


def _backward_logits(
    x: torch.Tensor,
    lse: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_scores: torch.Tensor,
    counts: torch.Tensor,
    *,
    score: str,
    normalize: bool,
    scale: float,
    grad_gates: torch.Tensor | None,
    grad_aux: torch.Tensor | None,
    grad_z: torch.Tensor | None,
) -> torch.Tensor:
    """Closed-form gradient to the (tokens, experts) logits ``x``; see the module docstring."""
    num_tokens, num_experts = x.shape
    top_k = topk_idx.shape[1]
    n = counts.to(x.dtype)  # (experts,)
    softmax_gates_cross = grad_gates is not None and score == "softmax" and not normalize
    needs_p = grad_z is not None or softmax_gates_cross or (grad_aux is not None and score == "softmax")
    p = torch.exp(x - lse.unsqueeze(1)) if needs_p else None  # (tokens, experts) softmax
    # Every softmax-shaped term has the form p_te * (row_t + col_e): collect both, multiply once at the end.
    row = torch.zeros(num_tokens, dtype=x.dtype, device=x.device)  # (tokens,)
    col = torch.zeros(num_experts, dtype=x.dtype, device=x.device)  # (experts,)
    grad = None  # (tokens, experts)
    if grad_aux is not None:
        c = grad_aux.to(x.dtype) * num_experts / (top_k * num_tokens * num_tokens)
        if score == "softmax":
            row = row - c * (p @ n)
            col = col + c * n
        else:
            s = torch.sigmoid(x)
            s_sum = s.sum(dim=1, keepdim=True)  # (tokens, 1)
            q_n = (s @ n).unsqueeze(1) / s_sum  # (tokens, 1): sum_j q_tj n_j
            grad = (c * s * (1 - s) / s_sum) * (n - q_n)
    if grad_z is not None:
        row = row + (2.0 / num_tokens) * grad_z.to(x.dtype) * lse
    selected = None  # (tokens, top_k) gradient at the selected experts
    if grad_gates is not None:
        g = grad_gates.to(x.dtype)  # (tokens, top_k)
        w = topk_scores
        if normalize:
            w_sum = w.sum(dim=1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
            dw = scale * (g - (g * w / w_sum).sum(dim=1, keepdim=True)) / w_sum
        else:
            dw = scale * g
        if score == "softmax":
            selected = dw * w
            if softmax_gates_cross:  # -p_te * sum_j dw_j w_j; it vanishes for normalised gates
                row = row - selected.sum(dim=1)
        else:
            selected = dw * w * (1 - w)
    if p is not None:
        softmax_terms = (row.unsqueeze(1) + col).mul_(p)  # one (tokens, experts) buffer, filled in place
        grad = softmax_terms if grad is None else grad.add_(softmax_terms)
    if grad is None:
        grad = torch.zeros_like(x)
    if selected is not None:
        grad.scatter_add_(1, topk_idx, selected)
    return grad


class _RouterStatsFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        logits: torch.Tensor,
        bias: torch.Tensor | None,
        config: RouterConfig,
        separate_aux_counts: bool,
        use_triton: bool,
    ) -> tuple[torch.Tensor, ...]:
        if use_triton:
            from moe_balance.kernels.router_stats_triton import router_stats_triton

            forward = router_stats_triton
        else:
            forward = router_stats_torch
        topk_idx, topk_scores, counts, aux_counts, prob_sum, lse = forward(
            logits, config, bias, separate_aux_counts=separate_aux_counts
        )
        num_tokens, num_experts = logits.shape
        top_k = config.top_k
        if config.normalizes_gates:
            gates = topk_scores / topk_scores.sum(dim=1, keepdim=True).clamp_min(torch.finfo(topk_scores.dtype).tiny)
        else:
            gates = topk_scores
        if config.scale != 1.0:
            gates = gates * config.scale
        aux = torch.dot(aux_counts.to(prob_sum.dtype), prob_sum) * (num_experts / (top_k * num_tokens * num_tokens))
        z = lse.square().sum() / num_tokens
        ctx.save_for_backward(logits, lse, topk_idx, topk_scores, aux_counts)
        ctx.config = config
        prob_mean = prob_sum / num_tokens
        ctx.mark_non_differentiable(topk_idx, counts, aux_counts, prob_mean)
        ctx.set_materialize_grads(False)  # unused outputs arrive as None and cost nothing in backward
        return topk_idx, gates, counts, aux_counts, aux, z, prob_mean

    @staticmethod
    def backward(
        ctx: Any,
        _grad_idx: torch.Tensor | None,
        grad_gates: torch.Tensor | None,
        _grad_counts: torch.Tensor | None,
        _grad_aux_counts: torch.Tensor | None,
        grad_aux: torch.Tensor | None,
        grad_z: torch.Tensor | None,
        _grad_prob: torch.Tensor | None,
    ) -> tuple[torch.Tensor | None, ...]:
        logits, lse, topk_idx, topk_scores, aux_counts = ctx.saved_tensors
        config = ctx.config
        if grad_gates is None and grad_aux is None and grad_z is None:
            return (None,) * 5
        grad = _backward_logits(
            logits.to(compute_dtype(logits)),
            lse,
            topk_idx,
            topk_scores,
            aux_counts,
            score=config.score,
            normalize=config.normalizes_gates,
            scale=float(config.scale),
            grad_gates=grad_gates,
            grad_aux=grad_aux,
            grad_z=grad_z,
        )
        return grad.to(logits.dtype), None, None, None, None


def router_stats(
    logits: torch.Tensor,
    top_k: int | RouterConfig,
    *,
    bias: torch.Tensor | None = None,
    backend: str = "auto",
    aux_counts: Literal["top_k", "routed"] = "top_k",
    check_finite: bool = True,
    **options: Any,
) -> RouterStats:
    """Route (tokens, experts) logits and compute counts, aux loss (megatron convention) and z-loss in one pass.

    ``top_k`` and ``options`` as for ``moe_balance.route`` (a ``RouterConfig``, or its fields as keywords).
    ``backend="auto"`` runs the Triton kernel where it can (CUDA tensors; CPU under ``TRITON_INTERPRET=1``) and the
    torch pass elsewhere; ``"triton"`` insists on the kernel, ``"torch"`` on the torch pass. ``aux_loss`` counts a
    plain top-k of the unbiased scores (``aux_counts="top_k"``, equal to ``moe_balance.aux_loss``), or this routing
    after the bias and the group limit (``"routed"``); multiply it by ``top_k`` for the HF convention.
    ``check_finite`` as for ``moe_balance.route`` (on by default, on every device). Both backends pick the same
    experts, the lower expert id first on exact ties.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not supported: use one of {', '.join(BACKENDS)}")
    if aux_counts not in AUX_COUNTS:
        raise ValueError(f"aux_counts={aux_counts!r} is not supported: use one of {', '.join(AUX_COUNTS)}")
    config = RouterConfig.of(top_k, **options)
    num_experts = check_config_for_logits(logits, config, bias, check_finite=check_finite)
    can_run = kernel_can_run(logits)
    if backend == "triton" and not can_run:
        raise ValueError(
            f"backend='triton' cannot run on {logits.device} tensors here: it needs Triton and a GPU tensor (or "
            "TRITON_INTERPRET=1 for CPU tensors); use backend='auto' to fall back to torch"
        )
    if num_experts > MAX_KERNEL_EXPERTS:
        if backend == "triton":
            raise ValueError(
                f"backend='triton' handles at most {MAX_KERNEL_EXPERTS} experts per row; got {num_experts}: "
                "use backend='auto' or 'torch'"
            )
        can_run = False
    use_triton = backend == "triton" or (backend == "auto" and can_run and logits.device.type != "cpu")
    # The routed counts are the plain top-k counts unless a bias or a group limit changes the selection.
    separate = aux_counts == "top_k" and (bias is not None or config.group_limited)
    topk_idx, gates, counts, counted, aux, z, prob_mean = _RouterStatsFunction.apply(
        logits, bias, config, separate, use_triton
    )
    return RouterStats(
        topk_idx=topk_idx,
        gates=gates,
        tokens_per_expert=counts,
        aux_tokens_per_expert=counted,
        aux_loss=aux,
        z_loss=z,
        prob_mean=prob_mean,
        backend="triton" if use_triton else "torch",
    )
