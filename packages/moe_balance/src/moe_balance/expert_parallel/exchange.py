"""Token exchange between expert-parallel ranks: ``all_to_all_single`` with the reverse exchange as its backward.

``torch.distributed.all_to_all_single(output, input, output_split_sizes, input_split_sizes)`` sends the first
``input_split_sizes[0]`` rows of ``input`` to rank 0, the next ones to rank 1, ..., and fills ``output`` with
``output_split_sizes[r]`` rows from each rank r in rank order (PyTorch docs, torch.distributed.all_to_all_single).
The gradient of an exchange is the same exchange run backwards: the gradient of each received row goes back to the
rank that sent it, so backward swaps the two split lists (as ``torch.distributed.nn.functional.all_to_all_single``
does). Gloo implements it on CPU tensors (``alltoall_base``), NCCL on GPU tensors; no fallback is needed.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def exchange_rows(
    rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], group: dist.ProcessGroup | None
) -> torch.Tensor:
    """One all-to-all of whole rows, without autograd. rows: (sum(send_counts), ...) -> (sum(recv_counts), ...)."""
    received = rows.new_empty((sum(recv_counts), *rows.shape[1:]))
    dist.all_to_all_single(
        received, rows.contiguous(), output_split_sizes=recv_counts, input_split_sizes=send_counts, group=group
    )
    return received


class _AllToAllRows(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], group: dist.ProcessGroup | None
    ) -> torch.Tensor:
        ctx.send_counts, ctx.recv_counts, ctx.group = send_counts, recv_counts, group
        return exchange_rows(rows, send_counts, recv_counts, group)

    @staticmethod
    def backward(ctx: Any, grad_received: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        # NOTE: the reverse exchange: each rank gets back the gradients of the rows it sent, in the order it sent them.
        grad_rows = exchange_rows(grad_received, ctx.recv_counts, ctx.send_counts, ctx.group)
        return grad_rows, None, None, None


def all_to_all_rows(
    rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Differentiable all-to-all of rows. rows: (sum(send_counts), ...) ordered by destination rank.

    send_counts[r]: rows this rank sends to rank r; recv_counts[r]: rows it receives from rank r (both (ranks,)
    lists of int, consistent across ranks: what rank a sends to b is what b receives from a). Returns
    (sum(recv_counts), ...) ordered by source rank.
    """
    return _AllToAllRows.apply(rows, list(send_counts), list(recv_counts), group)
