"""Triton kernels, each beside its torch reference, and the test of whether a kernel can run here.

A kernel runs on CUDA/ROCm tensors when Triton is installed, and on CPU tensors under ``TRITON_INTERPRET=1``
(Triton's interpreter, used by the CPU test suite; it must be set before Triton kernels are first imported).
Everywhere else the callers use the torch path, which computes the same values and picks the same experts (the
lower expert id on exact ties). Every launch runs under ``_device.device_guard`` of its tensors: Triton launches on
the current device.
"""

from __future__ import annotations

import importlib.util
import os

import torch

MAX_KERNEL_EXPERTS = 4096  # the router-statistics kernel holds one row of experts per tile; wider rows use torch


def triton_available() -> bool:
    """True when the ``triton`` package can be imported."""
    return importlib.util.find_spec("triton") is not None


def interpreter_enabled() -> bool:
    """True when Triton's CPU interpreter is switched on (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def kernel_can_run(tensor: torch.Tensor) -> bool:
    """Whether a Triton kernel can process ``tensor`` where it lives."""
    if not triton_available():
        return False
    if tensor.is_cuda:
        return True
    return tensor.device.type == "cpu" and interpreter_enabled()
