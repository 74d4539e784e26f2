"""The one guard every Triton launch in the package runs under: the launch's tensors' device made current.

Triton launches a kernel on the *current* CUDA device (``torch.cuda.current_device()``), not on the device of its
pointer arguments; a tensor on ``cuda:1`` launched while ``cuda:0`` is current fails with "Pointer argument cannot be
accessed from Triton (cpu tensor?)" (triton-lang/triton issues 2441 and 2925, where Triton's maintainer answers: set
the current device). Mamba's Triton kernels guard their launches with ``torch.cuda.device(x.device.index)`` for the
same reason. CPU tensors (Triton's interpreter) need no guard.
"""

from __future__ import annotations

import contextlib

import torch


def device_guard(where: torch.Tensor | torch.device) -> contextlib.AbstractContextManager:
    """``torch.cuda.device(d)`` for a CUDA (or ROCm) tensor or device ``d``, a no-op context for anything else.

    Use it around every ``kernel[grid](...)`` with one of the kernel's input tensors, and around any code that
    launches kernels for a device it is given (the smoke test's loop over ``cuda:0..N-1``).
    """
    device = where.device if isinstance(where, torch.Tensor) else torch.device(where)
    if device.type == "cuda":
        return torch.cuda.device(device)
    return contextlib.nullcontext()
