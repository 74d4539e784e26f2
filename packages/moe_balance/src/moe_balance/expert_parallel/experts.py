"""The experts one rank holds: stacked weights, one row per physical slot, and the expert's feed-forward function.

SwiGLU experts as in DeepSeek-V3 and torchtitan's ``GroupedExperts``: ``(silu(x @ w1) * (x @ w3)) @ w2``. Stacking the
slots' weights in one parameter per matrix (``w1: (slots, d_model, d_ff)``) lets a placement move a slot as one row
of each tensor, and lets an optimizer keep its state in the same layout (Adam's ``exp_avg`` has the parameter's shape).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

WEIGHT_NAMES = ("w1", "w2", "w3")


def expert_ffn(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> torch.Tensor:
    """One expert on its tokens. x: (tokens, d_model); w1, w3: (d_model, d_ff); w2: (d_ff, d_model)."""
    return (functional.silu(x @ w1) * (x @ w3)) @ w2  # (tokens, d_model)


class SlotExperts(nn.Module):
    """The expert weights of one rank's physical slots. w1, w3: (slots, d_model, d_ff); w2: (slots, d_ff, d_model)."""

    def __init__(
        self,
        num_slots: int,
        d_model: int,
        d_ff: int,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | None = None,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(num_slots, d_model, d_ff, dtype=dtype, device=device))
        self.w2 = nn.Parameter(torch.empty(num_slots, d_ff, d_model, dtype=dtype, device=device))
        self.w3 = nn.Parameter(torch.empty(num_slots, d_model, d_ff, dtype=dtype, device=device))
        for weight in self.weights():
            nn.init.trunc_normal_(weight, std=init_std)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(w1, w2, w3), the order ``expert_ffn`` takes them in."""
        return self.w1, self.w2, self.w3

    @property
    def num_slots(self) -> int:
        return self.w1.shape[0]
