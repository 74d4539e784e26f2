"""Training hook: accumulate tokens-per-expert counts, all-reduce them every N steps, append JSONL records.

Counts stay on the device between flushes (no host sync per step); a flush does one all-reduce of every layer's
counts, token totals and drops together, then group rank 0 appends one ``moe_balance.tokens_per_expert/1`` record
per layer (schema in ``moe_balance.metrics``). Every rank of the group must call ``step``/``flush`` together.

    monitor = TokensPerExpertMonitor("stats/experts.jsonl", num_layers=L, num_experts=E, top_k=k, every_n_steps=100)
    for i, layer in enumerate(moe_layers):
        layer.router.register_forward_hook(monitor.hook(i))   # output: RouterStats, Routing, or a tuple holding one
    ...
    optimizer.step(); monitor.step(step)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from moe_balance._dist import default_group
from moe_balance.metrics import make_record, write_records


def _find_routing(output: Any) -> Any:
    """The first object with ``tokens_per_expert`` and ``topk_idx`` in a module output (itself, or in a tuple)."""
    candidates = output if isinstance(output, (tuple, list)) else (output,)
    for item in candidates:
        if hasattr(item, "tokens_per_expert") and hasattr(item, "topk_idx"):
            return item
    raise ValueError(
        f"monitor hook found no routing result in the module output ({type(output).__name__}): return a "
        "RouterStats/Routing (or a tuple holding one), or call monitor.observe(...) yourself"
    )


class TokensPerExpertMonitor:
    """Per-layer counts over a window of ``every_n_steps`` steps, written as JSONL records."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        num_layers: int,
        num_experts: int,
        top_k: int,
        every_n_steps: int = 100,
        group: dist.ProcessGroup | None = None,
        run: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, value in (
            ("num_layers", num_layers),
            ("num_experts", num_experts),
            ("top_k", top_k),
            ("every_n_steps", every_n_steps),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        self.path = path
        self.num_layers = num_layers
        self.num_experts = num_experts
        self.top_k = top_k
        self.every_n_steps = every_n_steps
        self.group = group
        self.run = run
        self.clock = clock
        self.counts: torch.Tensor | None = None  # (layers, experts) int64 on the device of the first observation
        self.num_tokens: torch.Tensor | None = None  # (layers,) int64
        self.dropped: torch.Tensor | None = None  # (layers,) int64
        self.saw_drops = False

    def _buffers(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(counts, num_tokens, dropped), made together on the device of the first observation."""
        if self.counts is None or self.num_tokens is None or self.dropped is None:
            self.counts = torch.zeros((self.num_layers, self.num_experts), dtype=torch.int64, device=device)
            self.num_tokens = torch.zeros(self.num_layers, dtype=torch.int64, device=device)
            self.dropped = torch.zeros(self.num_layers, dtype=torch.int64, device=device)
        return self.counts, self.num_tokens, self.dropped

    @torch.no_grad()
    def observe(
        self,
        layer: int,
        tokens_per_expert: torch.Tensor,
        num_tokens: int,
        dropped_tokens: int | torch.Tensor | None = None,
    ) -> None:
        """Add one router call's (experts,) counts for ``layer`` (``num_tokens`` before top-k expansion).

        Pass ``dropped_tokens`` (even 0) when a capacity limit applies: records then carry ``dropped_tokens``.
        """
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer={layer} is out of range: this monitor has layers 0..{self.num_layers - 1}")
        if tokens_per_expert.shape != (self.num_experts,):
            raise ValueError(
                f"tokens_per_expert has shape {tuple(tokens_per_expert.shape)}, expected ({self.num_experts},)"
            )
        counts, tokens, dropped = self._buffers(tokens_per_expert.device)
        counts[layer] += tokens_per_expert.to(counts.device, torch.int64)
        tokens[layer] += int(num_tokens)
        if dropped_tokens is not None:
            dropped[layer] += torch.as_tensor(dropped_tokens, dtype=torch.int64).to(dropped.device)
            self.saw_drops = True

    def hook(self, layer: int) -> Callable:
        """A forward hook for ``module.register_forward_hook`` that observes the module's routing output."""

        def _hook(_module: torch.nn.Module, _inputs: Any, output: Any) -> None:
            routing = _find_routing(output)
            self.observe(layer, routing.tokens_per_expert, routing.topk_idx.shape[0])

        return _hook

    def step(self, step: int) -> list[dict] | None:
        """Call after each training step; flushes (and returns the records) every ``every_n_steps`` steps."""
        if (step + 1) % self.every_n_steps == 0:
            return self.flush(step)
        return None

    @torch.no_grad()
    def flush(self, step: int) -> list[dict]:
        """All-reduce the window's counts, write one record per observed layer (group rank 0), start a new window.

        Returns the records on every rank.
        """
        if self.counts is None or self.num_tokens is None or self.dropped is None:
            return []
        packed = torch.cat([self.counts.reshape(-1), self.num_tokens, self.dropped])  # one collective for all
        group = default_group(self.group)
        rank, world_size = 0, 1
        if group is not None:
            dist.all_reduce(packed, op=dist.ReduceOp.SUM, group=group)
            rank, world_size = dist.get_rank(group), dist.get_world_size(group)
        packed = packed.cpu()
        size = self.num_layers * self.num_experts
        counts = packed[:size].view(self.num_layers, self.num_experts)
        num_tokens = packed[size : size + self.num_layers]
        dropped = packed[size + self.num_layers :]
        now = self.clock()
        records = []
        for layer in range(self.num_layers):
            if int(num_tokens[layer]) == 0:
                continue  # layer not seen in this window
            optional = {"rank": rank, "world_size": world_size, "time_unix_s": float(now), "run": self.run}
            if self.saw_drops:
                optional["dropped_tokens"] = int(dropped[layer])
            records.append(
                make_record(
                    step=step,
                    layer=layer,
                    tokens_per_expert=counts[layer],
                    top_k=self.top_k,
                    num_tokens=int(num_tokens[layer]),
                    **optional,
                )
            )
        if rank == 0 and records:
            write_records(self.path, records)
        self.counts.zero_()
        self.num_tokens.zero_()
        self.dropped.zero_()
        return records
