"""Argument checks for the placement planners: each failure names the argument, the value and the fix."""

from __future__ import annotations

import torch


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
    value = value.detach().cpu()
    if value.is_floating_point():
        bad = int((~torch.isfinite(value)).sum())
        if bad:
            raise ValueError(
                f"{name} contains {bad} NaN or inf value(s): loads must be finite token counts; "
                "replace missing statistics with 0"
            )
    negative = int((value < 0).sum())
    if negative:
        raise ValueError(
            f"{name} contains {negative} negative value(s) (smallest {value.min().item()}): loads are token counts "
            "and must be >= 0"
        )
    return value
