"""Aux-loss-free load balancing: a per-expert bias added to the selection scores (DeepSeek-V3).

Once per global batch, outside autograd: ``b_i += rate * sign(mean(count) - count_i)``, where the counts are summed
over every micro-batch of the global batch and all-reduced over the data-parallel ranks, so every rank applies the
same update and keeps the same bias. Under-loaded experts gain bias and attract tokens; over-loaded ones lose it.
The bias only steers the *selection*; gates come from the unbiased scores (see ``moe_balance.routing``). It works for
sigmoid and softmax scores alike. In ``eval()`` mode the bias is frozen: counts are ignored and nothing changes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from moe_balance._dist import default_group


class BiasBalancer(nn.Module):
    """Holds the (experts,) selection bias and updates it from token counts.

    Use ``update(counts)`` once per global batch, or ``accumulate(counts)`` per micro-batch and ``step()`` once after
    the optimizer step. Every rank of ``group`` must call ``step``/``update`` (they all-reduce). ``recenter`` shifts
    the bias to zero mean after each update (only differences between experts matter to the selection).
    """

    bias: torch.Tensor
    pending_counts: torch.Tensor

    def __init__(
        self,
        num_experts: int,
        rate: float = 1e-3,
        group: dist.ProcessGroup | None = None,
        *,
        recenter: bool = False,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if isinstance(num_experts, bool) or not isinstance(num_experts, int) or num_experts < 1:
            raise ValueError(f"num_experts={num_experts!r} must be a positive int")
        # NaN fails every comparison: `not x > 0` refuses it where `x <= 0` would let it through.
        # pylint: disable-next=unnecessary-negation
        if not rate > 0:
            raise ValueError(f"rate={rate!r} must be positive (DeepSeek-V3 uses 1e-3)")
        self.num_experts = num_experts
        self.rate = float(rate)
        self.group = group
        self.recenter = recenter
        self.register_buffer("bias", torch.zeros(num_experts, dtype=dtype, device=device))
        self.register_buffer(
            "pending_counts", torch.zeros(num_experts, dtype=torch.int64, device=device), persistent=False
        )

    def _check_counts(self, tokens_per_expert: torch.Tensor) -> torch.Tensor:
        """Counts as int64 on the bias's device; NaN, inf, negative and fractional counts are refused.

        Such counts come from a broken statistic (a NaN loss, an overflow, a mean taken instead of a sum), and the
        update rule would turn them into a confident bias step (``sign(mean - inf)`` moves every expert). On CPU the
        check raises ``ValueError``; on accelerators it is a device-side assert, so it never stalls the stream.
        """
        counts = torch.as_tensor(tokens_per_expert).detach()
        if counts.shape != (self.num_experts,):
            raise ValueError(
                f"tokens_per_expert has shape {tuple(counts.shape)}, expected ({self.num_experts},): "
                "one count per expert of this layer"
            )
        if counts.dtype == torch.bool or counts.is_complex():
            raise ValueError(f"tokens_per_expert must hold token counts; got dtype {counts.dtype}")
        valid = counts >= 0  # NaN compares False
        if counts.is_floating_point():
            valid &= torch.isfinite(counts) & (counts == counts.round())
        if counts.device.type == "cpu":
            if not bool(valid.all()):
                bad = counts[~valid][:4].tolist()
                raise ValueError(
                    f"tokens_per_expert holds {int((~valid).sum())} value(s) that are not token counts "
                    f"(e.g. {bad}): counts must be finite, whole and >= 0; pass the summed routing counts "
                    "(Routing.tokens_per_expert), not a mean or a loss-derived value"
                )
        else:  # NOTE: no host sync on accelerators.
            torch._assert_async(valid.all(), "tokens_per_expert must be finite, whole, non-negative counts")
        return counts.to(device=self.pending_counts.device, dtype=torch.int64)

    @torch.no_grad()
    def accumulate(self, tokens_per_expert: torch.Tensor) -> None:
        """Add one micro-batch's (experts,) counts; ignored in eval mode."""
        if self.training:
            self.pending_counts += self._check_counts(tokens_per_expert)

    @torch.no_grad()
    def step(self) -> torch.Tensor | None:
        """All-reduce the accumulated counts, update the bias, clear the counts. Returns the global counts.

        Returns None (and changes nothing) in eval mode.
        """
        if not self.training:
            return None
        counts = self.pending_counts.clone()
        group = default_group(self.group)
        if group is not None:
            dist.all_reduce(counts, op=dist.ReduceOp.SUM, group=group)
        self.pending_counts.zero_()
        load = counts.to(torch.float64)
        direction = torch.sign(load.mean() - load)  # (experts,) +1 under-loaded, -1 over-loaded, 0 exactly average
        self.bias += (self.rate * direction).to(self.bias.dtype)
        if self.recenter:
            self.bias -= self.bias.mean()
        return counts

    def update(self, tokens_per_expert: torch.Tensor) -> torch.Tensor | None:
        """``accumulate`` + ``step`` for one global batch's (experts,) counts."""
        if not self.training:
            return None
        self.accumulate(tokens_per_expert)
        return self.step()

    @torch.no_grad()
    def sync_bias(self, src: int = 0) -> None:
        """Broadcast the bias from group rank ``src`` (e.g. after loading a checkpoint on one rank only)."""
        group = default_group(self.group)
        if group is not None:
            dist.broadcast(self.bias, src=dist.get_global_rank(group, src), group=group)

    @torch.no_grad()
    def reset(self) -> None:
        self.bias.zero_()
        self.pending_counts.zero_()

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, rate={self.rate}, recenter={self.recenter}"
