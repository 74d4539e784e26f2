"""Shared fixtures. Without a GPU, Triton kernels run in Triton's CPU interpreter (set before Triton is imported)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def oracle() -> dict:
    """Reference values computed independently from the formulas (8 tokens x 4 experts, top-2)."""
    return json.loads((DATA / "router_vectors.json").read_text())


def oracle_logits() -> torch.Tensor:
    """logits[t][e] = ((7t + 3e) % 11) / 5 - 1, t < 8, e < 4, float64: the rule the oracle file states."""
    return torch.tensor([[((7 * t + 3 * e) % 11) / 5 - 1 for e in range(4)] for t in range(8)], dtype=torch.float64)


@pytest.fixture
def logits_8x4() -> torch.Tensor:
    return oracle_logits()


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
