"""Timing, peak memory and routing agreement for the gpu_check steps (``gpu_check.py`` runs them).

Times are wall-clock seconds around a synchronised call (``torch.cuda.synchronize`` before and after on a GPU).
Peak memory is ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, less what was allocated before
the call (the inputs): the memory the call itself needed. On the CPU the peak is ``None``: torch's CPU allocator keeps
no peak, and ``tracemalloc`` does not see tensor storage.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

MIB = 1024 * 1024


def device_for(mode: str) -> torch.device:
    """cuda (the current GPU) for the GPU run, cpu (Triton's interpreter) for the dry run."""
    return torch.device("cuda" if mode == "gpu" else "cpu")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call_s(function: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """One synchronised call: (seconds, its result)."""
    sync(device)
    start = time.perf_counter()
    result = function()
    sync(device)
    return time.perf_counter() - start, result


def median_s(function: Callable[[], Any], device: torch.device, repeats: int, *, warm_up: bool) -> float:
    """Median of ``repeats`` synchronised calls, after one unmeasured call when ``warm_up`` (it compiles on a GPU;
    under the interpreter it would only double the time)."""
    if warm_up:
        time_call_s(function, device)
    return statistics.median(time_call_s(function, device)[0] for _ in range(repeats))


def best_s(function: Callable[[], Any], device: torch.device, repeats: int, *, warm_up: bool) -> tuple[float, Any]:
    """Fastest of ``repeats`` synchronised calls and the last result (warm-up as in ``median_s``)."""
    if warm_up:
        time_call_s(function, device)
    times, result = [], None
    for _ in range(repeats):
        seconds, result = time_call_s(function, device)
        times.append(seconds)
    return min(times), result


def peak_mib(function: Callable[[], Any], device: torch.device) -> float | None:
    """MiB one call needed above what was allocated before it; None on the CPU (see the module docstring)."""
    if device.type != "cuda":
        return None
    sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    function()
    sync(device)
    return round((torch.cuda.max_memory_allocated(device) - before) / MIB, 1)


def boundary_ties(selection: torch.Tensor, top_k: int, tolerance: float = 0.0) -> torch.Tensor:
    """(tokens, experts) -> (tokens,) bool: the k-th and (k+1)-th best values are equal (or within ``tolerance``), so
    two top-k sets are valid and two correct implementations may pick different experts."""
    if selection.shape[1] <= top_k:
        return torch.zeros(selection.shape[0], dtype=torch.bool, device=selection.device)
    best = selection.topk(top_k + 1, dim=1).values  # (tokens, k + 1), sorted
    return (best[:, top_k - 1] - best[:, top_k]) <= tolerance


def routing_agreement(
    idx: torch.Tensor, gates: torch.Tensor, want_idx: torch.Tensor, want_gates: torch.Tensor, tied: torch.Tensor
) -> dict[str, Any]:
    """Two routings of the same logits, each (tokens, k) expert ids and gates: rows whose chosen experts differ (all of
    them, and those without a tie that allows it, ``tied`` (tokens,)), and the largest gate difference on the rows
    that agree, expert by expert."""
    differ = (idx.sort(dim=1).values != want_idx.sort(dim=1).values).any(dim=1)  # (tokens,)
    by_expert = gates.gather(1, idx.argsort(dim=1)).float()  # gates in ascending expert order
    want_by_expert = want_gates.gather(1, want_idx.argsort(dim=1)).float()
    gates_diff = (by_expert - want_by_expert).abs()[~differ]
    return {
        "rows": int(differ.numel()),
        "rows_with_boundary_ties": int(tied.sum()),
        "rows_differing": int(differ.sum()),
        "rows_differing_untied": int((differ & ~tied).sum()),
        "gates_max_abs_diff": float(gates_diff.max()) if gates_diff.numel() else 0.0,
    }
