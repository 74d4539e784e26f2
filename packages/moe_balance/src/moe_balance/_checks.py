"""Argument checks shared by the routing, loss, kernel and placement entry points (the one place for them).

Every check raises ``ValueError`` naming the argument, the value it got and what to do, so a bad router input fails
at the call that received it instead of as a NaN loss thousands of steps later.
"""

from __future__ import annotations

import torch

SCORE_FUNCTIONS = ("softmax", "sigmoid")


def check_logits(logits: torch.Tensor, *, name: str = "logits", check_finite: bool | None = None) -> None:
    """Require a non-empty, floating-point (tokens, experts) tensor, finite unless told not to look.

    ``check_finite=True`` checks on every device: the routing entry points (``route``, ``router_stats``) pass it by
    default, because a NaN or inf row has no top-k (the Triton kernel used to send it ``top_k`` times to the last
    expert) and nothing downstream would show it. The check reads one value back to the host, a sync per call;
    ``False`` skips it for callers that check their logits themselves. ``None``, the losses' default, checks on CPU
    only: there a non-finite row makes the loss itself NaN, which the training loop sees without a sync.
    """
    if not isinstance(logits, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape (tokens, experts); got {type(logits).__name__}")
    if logits.dim() != 2:
        raise ValueError(
            f"{name} must be 2-D (tokens, experts); got shape {tuple(logits.shape)}: "
            f"flatten batch and sequence first, e.g. {name}.reshape(-1, {name}.shape[-1])"
        )
    if not logits.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor; got dtype {logits.dtype}")
    num_tokens, num_experts = logits.shape
    if num_tokens == 0:
        raise ValueError(f"{name} is an empty batch (0 tokens, shape {tuple(logits.shape)}): route at least one token")
    if num_experts == 0:
        raise ValueError(f"{name} has 0 experts (shape {tuple(logits.shape)}): the last dimension counts experts")
    if check_finite is None:
        check_finite = logits.device.type == "cpu"
    if check_finite:
        # aminmax is one cheap pass; NaN propagates into both results and any inf shows up in one of them.
        low, high = torch.aminmax(logits.detach())
        if not (torch.isfinite(low) and torch.isfinite(high)):
            bad = ~torch.isfinite(logits.detach())  # (tokens, experts)
            bad_rows = int(bad.any(dim=1).sum())
            raise ValueError(
                f"{name} has {bad_rows} row(s) out of {num_tokens} with NaN or inf ({int(bad.sum())} value(s)): "
                "such a row has no top-k; the router input overflowed or was masked with inf; keep router logits "
                "finite (compute them in float32, clip, or check the layer before the router), or pass "
                "check_finite=False if you check them yourself"
            )


def check_top_k(top_k: int, num_experts: int | None, *, name: str = "top_k") -> None:
    """Require 1 <= top_k (<= num_experts when the expert count is known)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise ValueError(f"{name} must be an int; got {top_k!r}")
    if top_k < 1:
        raise ValueError(f"{name}={top_k} is out of range: choose at least 1 expert per token")
    if num_experts is not None and top_k > num_experts:
        raise ValueError(
            f"{name}={top_k} is out of range for {num_experts} experts: choose {name} between 1 and {num_experts}"
        )


def check_score(score: str) -> None:
    if score not in SCORE_FUNCTIONS:
        raise ValueError(f"score={score!r} is not supported: use one of {', '.join(SCORE_FUNCTIONS)}")


def check_groups(num_experts: int | None, top_k: int, num_groups: int | None, group_topk: int | None) -> None:
    """Validate the group-limited (node-limited) routing arguments of DeepSeek-V3 / Megatron-LM.

    The experts are split into ``num_groups`` equal groups; a token may only choose experts from its best
    ``group_topk`` groups, each group scored by the sum of its top ``top_k // group_topk`` scores (integer division,
    as Megatron-LM's ``group_limited_topk``, so ``top_k`` need not be a multiple of ``group_topk``). The checks that
    need the expert count run only when ``num_experts`` is given.
    """
    if num_groups is None and group_topk is None:
        return
    if num_groups is None or group_topk is None:
        raise ValueError(
            f"num_groups={num_groups!r} and group_topk={group_topk!r}: group-limited routing needs both or neither"
        )
    for arg, value in (("num_groups", num_groups), ("group_topk", group_topk)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{arg} must be a positive int; got {value!r}")
    if group_topk > num_groups:
        raise ValueError(f"group_topk={group_topk} exceeds num_groups={num_groups}: keep at most every group")
    if top_k < group_topk:
        raise ValueError(
            f"top_k={top_k} is smaller than group_topk={group_topk}: each kept group is scored by its top "
            "top_k // group_topk experts, which would be none; keep at most top_k groups"
        )
    if num_experts is None:
        return
    if num_experts % num_groups != 0:
        raise ValueError(
            f"num_groups={num_groups} does not divide the {num_experts} experts: choose num_groups among the "
            f"divisors of {num_experts}"
        )
    group_size = num_experts // num_groups
    if top_k // group_topk > group_size:
        raise ValueError(
            f"top_k // group_topk = {top_k // group_topk} exceeds the group size {group_size} "
            f"({num_experts} experts / num_groups={num_groups}): raise group_topk or lower num_groups"
        )
    if top_k > group_topk * group_size:
        raise ValueError(
            f"top_k={top_k} exceeds the {group_topk * group_size} experts of the {group_topk} kept groups of "
            f"{group_size}: raise group_topk or lower top_k"
        )


def check_bias(bias: torch.Tensor | None, num_experts: int) -> None:
    if bias is None:
        return
    if not isinstance(bias, torch.Tensor) or bias.shape != (num_experts,):
        shape = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
        raise ValueError(f"bias must be a tensor of shape ({num_experts},), one value per expert; got {shape}")
    if not bool(torch.isfinite(bias).all()):
        raise ValueError("bias contains NaN or inf: reset the expert bias (BiasBalancer.reset()) and lower its rate")


def check_routing(
    logits: torch.Tensor,
    top_k: int,
    score: str,
    bias: torch.Tensor | None,
    num_groups: int | None,
    group_topk: int | None,
    *,
    check_finite: bool | None = None,
) -> int:
    """Every check a routing entry point makes on its arguments, in order; returns the number of experts."""
    check_logits(logits, check_finite=check_finite)
    num_experts = logits.shape[1]
    check_top_k(top_k, num_experts)
    check_score(score)
    check_groups(num_experts, top_k, num_groups, group_topk)
    check_bias(bias, num_experts)
    return num_experts


def compute_dtype(logits: torch.Tensor) -> torch.dtype:
    """Router math runs in float32 at least (half-precision softmax loses the tail); float64 stays float64."""
    return torch.float64 if logits.dtype == torch.float64 else torch.float32


# Placement planners (moe_balance.placement).


def check_positive_int(value: object, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int; got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name}={value} is too small: it must be at least {minimum}")
    return value


def check_load_matrix(value: object, name: str, shape_doc: str) -> torch.Tensor:
    """Require a non-empty 2-D real tensor of finite, non-negative loads; returns it detached on the CPU."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {shape_doc}; got {type(value).__name__}")
    if value.dim() != 2:
        raise ValueError(f"{name} must be 2-D {shape_doc}; got shape {tuple(value.shape)}")
    if value.shape[0] == 0 or value.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(value.shape)}): it needs at least one row and one column")
    if value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"{name} must hold real numbers (token counts or loads); got dtype {value.dtype}")
    loads = value.detach().cpu()
    if loads.is_floating_point():
        bad = int((~torch.isfinite(loads)).sum())
        if bad:
            raise ValueError(
                f"{name} contains {bad} NaN or inf value(s): loads must be finite token counts; "
                "replace missing statistics with 0"
            )
    negative = int((loads < 0).sum())
    if negative:
        raise ValueError(
            f"{name} contains {negative} negative value(s) (smallest {loads.min().item()}): loads are token counts "
            "and must be >= 0"
        )
    return loads
