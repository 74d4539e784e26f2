"""Where no kernel can run, the fused pass falls back to torch and an explicit Triton request says why it cannot."""

from __future__ import annotations

import pytest
import torch

from moe_balance import kernels, router_stats


def test_no_interpreter_and_no_gpu_means_no_kernel(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not kernels.kernel_can_run(torch.empty(0))


def test_auto_backend_falls_back_to_torch_without_a_gpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert router_stats(torch.randn(8, 4), 2, backend="auto").backend == "torch"


def test_explicit_triton_backend_without_a_gpu_is_refused_clearly(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="backend='triton' cannot run on cpu tensors.*backend='auto'"):
        router_stats(torch.randn(8, 4), 2, backend="triton")


def test_missing_triton_package_means_no_kernel(monkeypatch):
    monkeypatch.setattr(kernels, "triton_available", lambda: False)
    assert not kernels.kernel_can_run(torch.empty(0))


def test_rows_wider_than_the_kernel_tile_use_torch():
    wide = torch.randn(2, kernels.MAX_KERNEL_EXPERTS + 1)
    assert router_stats(wide, 2, backend="auto").backend == "torch"
    with pytest.raises(ValueError, match="handles at most 4096 experts per row; got 4097"):
        router_stats(wide, 2, backend="triton")
