"""Expert capacity: how many assignments each expert accepts, which ones are dropped, and the dropped share.

``capacity = ceil(T * k / E * capacity_factor)``, computed exactly (no float round-up of 10.000000000000002 to 11).

Drop policies, both deterministic:

- ``"probability"``: an expert keeps its ``capacity`` assignments with the highest gate; equal gates go to the
  earlier token (then the earlier slot).
- ``"position"``: an expert keeps the ``capacity`` earliest tokens (true first come, first served by token index).
  It does not depend on the order top-k lists a token's experts in, nor on how a sort breaks ties.

``pad_to_capacity`` also returns an (experts, capacity) table of token ids with ``-1`` in the unused slots, for
kernels that want a fixed-size buffer per expert.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import torch

DROP_POLICIES = ("probability", "position")


def expert_capacity(num_tokens: int, num_experts: int, top_k: int, capacity_factor: float) -> int:
    """ceil(T * k / E * capacity_factor) in exact arithmetic."""
    if num_experts < 1 or top_k < 1 or num_tokens < 0:
        raise ValueError(
            f"num_tokens={num_tokens}, num_experts={num_experts}, top_k={top_k}: need tokens >= 0, experts >= 1, "
            "top_k >= 1"
        )
    if not (capacity_factor > 0 and math.isfinite(capacity_factor)):
        raise ValueError(f"capacity_factor={capacity_factor!r} must be a positive finite number, e.g. 1.25")
    exact = Fraction(num_tokens * top_k, num_experts) * Fraction(str(capacity_factor))
    return math.ceil(exact)


@dataclass(frozen=True)
class CapacityResult:
    """What survived the capacity limit. Conservation: ``kept + dropped == routed`` per expert and in total."""

    capacity: int
    keep: torch.Tensor  # (tokens, top_k) bool
    slot: torch.Tensor  # (tokens, top_k) int64 position in the expert's buffer, -1 when dropped
    gates: torch.Tensor  # (tokens, top_k) input gates with dropped assignments set to 0
    routed_per_expert: torch.Tensor  # (experts,) int64 before dropping
    kept_per_expert: torch.Tensor  # (experts,) int64
    dispatch_index: torch.Tensor | None  # (experts, capacity) int64 token ids, -1 = padding; with pad_to_capacity

    @property
    def dropped_per_expert(self) -> torch.Tensor:
        return self.routed_per_expert - self.kept_per_expert

    @property
    def dropped(self) -> int:
        return int(self.dropped_per_expert.sum())

    @property
    def dropped_share(self) -> float:
        """Dropped assignments / routed assignments (0.0 when nothing was routed)."""
        routed = int(self.routed_per_expert.sum())
        return self.dropped / routed if routed else 0.0


def apply_capacity(
    topk_idx: torch.Tensor,
    gates: torch.Tensor,
    num_experts: int,
    *,
    capacity: int | None = None,
    capacity_factor: float | None = None,
    policy: str = "probability",
    pad_to_capacity: bool = False,
) -> CapacityResult:
    """Apply a per-expert capacity to (tokens, top_k) assignments; give ``capacity`` or ``capacity_factor``."""
    if policy not in DROP_POLICIES:
        raise ValueError(f"policy={policy!r} is not supported: use one of {', '.join(DROP_POLICIES)}")
    if topk_idx.dim() != 2 or gates.shape != topk_idx.shape:
        raise ValueError(
            f"topk_idx {tuple(topk_idx.shape)} and gates {tuple(gates.shape)} must both be (tokens, top_k)"
        )
    num_tokens, top_k = topk_idx.shape
    if (capacity is None) == (capacity_factor is None):
        raise ValueError("give exactly one of capacity (assignments per expert) or capacity_factor (e.g. 1.25)")
    if capacity_factor is not None:  # and capacity is None (exactly one is given)
        capacity = expert_capacity(num_tokens, num_experts, top_k, capacity_factor)
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ValueError(f"capacity={capacity!r} must be a non-negative int")

    expert_flat = topk_idx.reshape(-1)  # (tokens * top_k,), token-major: a = t * top_k + j
    if policy == "probability":
        # Stable sorts: by gate descending (equal gates keep token order), then by expert (keeps that order).
        by_gate = torch.sort(gates.detach().reshape(-1), descending=True, stable=True).indices
        order = by_gate[torch.sort(expert_flat[by_gate], stable=True).indices]
    else:
        order = torch.sort(expert_flat, stable=True).indices  # token order within each expert
    routed = torch.bincount(expert_flat, minlength=num_experts)  # (experts,)
    starts = torch.cumsum(routed, 0) - routed  # (experts,) first sorted position of each expert
    rank_sorted = torch.arange(order.numel(), device=order.device) - starts[expert_flat[order]]
    keep_sorted = rank_sorted < capacity

    keep_flat = torch.empty_like(keep_sorted)
    keep_flat[order] = keep_sorted
    slot_flat = torch.empty_like(rank_sorted)
    slot_flat[order] = torch.where(keep_sorted, rank_sorted, torch.full_like(rank_sorted, -1))
    keep = keep_flat.view(num_tokens, top_k)
    kept = torch.bincount(expert_flat[keep_flat], minlength=num_experts)

    dispatch_index = None
    if pad_to_capacity:
        dispatch_index = torch.full((num_experts, capacity), -1, dtype=torch.int64, device=topk_idx.device)
        kept_order = order[keep_sorted]
        token_of = torch.div(kept_order, top_k, rounding_mode="floor")
        dispatch_index[expert_flat[kept_order], rank_sorted[keep_sorted]] = token_of
    return CapacityResult(
        capacity=capacity,
        keep=keep,
        slot=slot_flat.view(num_tokens, top_k),
        gates=gates * keep.to(gates.dtype),
        routed_per_expert=routed,
        kept_per_expert=kept,
        dispatch_index=dispatch_index,
    )
