"""Errors that every rank raises together: one rank's bad input must stop the whole group, never hang it.

A collective that one rank skips (because it raised) leaves the others waiting until the process group's timeout,
and a collective whose ranks disagree on sizes aborts gloo outright ("Received data size doesn't match"). So every
entry point checks its input locally, tells the group whether it passed (a flag, or a column of a gather it does
anyway), and only when some rank failed do the ranks swap their messages (``all_gather_object``) and raise the same
``ExpertParallelError`` everywhere.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch
import torch.distributed as dist


class ExpertParallelError(ValueError):
    """Raised on every rank of the group with the same message when any rank's input was refused."""


def collective_device(group: dist.ProcessGroup | None) -> torch.device:
    """Where a small collective's tensor must live: the current GPU under NCCL, the CPU otherwise."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def tensor_digest(*tensors: torch.Tensor) -> int:
    """CRC-32 of the tensors' shapes and bytes (CPU copies), to compare what ranks hold without sending it all."""
    digest = 0
    for tensor in tensors:
        data = tensor.detach().to("cpu").contiguous()
        digest = zlib.crc32(repr((tuple(data.shape), str(data.dtype))).encode(), digest)
        digest = zlib.crc32(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"", digest)
    return digest


def raise_for_failed_ranks(
    failed: Sequence[bool], local_error: str | None, what: str, group: dist.ProcessGroup | None
) -> None:
    """Raise ``ExpertParallelError`` on every rank when any rank failed; ``failed`` (ranks,) is known to all ranks.

    Every rank must call this with the same ``failed``: the messages are only exchanged when one is set.
    """
    if not any(failed):
        return
    messages: list[str | None] = [None] * len(failed)
    dist.all_gather_object(messages, local_error if local_error is not None else "", group=group)
    by_message: dict[str, list[int]] = {}
    for rank, bad in enumerate(failed):
        if bad:
            by_message.setdefault(messages[rank] or "refused", []).append(rank)
    lines = [f"{describe_ranks(ranks)}: {message}" for message, ranks in by_message.items()]
    raise ExpertParallelError(f"{what} refused on {sum(map(bool, failed))} of {len(failed)} ranks; " + "; ".join(lines))


def describe_ranks(ranks: list[int]) -> str:
    """``rank 3`` or ``ranks 0, 1, 2``."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def agree_on_every_rank(
    local_error: str | None,
    what: str,
    group: dist.ProcessGroup | None,
    *,
    digest: int = 0,
    digest_of: str = "",
    fix: str = "",
) -> None:
    """Stop every rank when any rank's input failed its local check, or when the ranks hold different inputs.

    local_error: this rank's message (None when its input passed). digest: ``tensor_digest`` of what the ranks must
    agree on, named by ``digest_of`` in the error, with ``fix`` (what to do) after it. One all_gather of two int64
    per rank; the messages travel only on failure.
    """
    world_size = dist.get_world_size(group)
    mine = torch.tensor([int(local_error is not None), digest], dtype=torch.int64, device=collective_device(group))
    gathered = [torch.empty_like(mine) for _rank in range(world_size)]
    dist.all_gather(gathered, mine, group=group)
    table = torch.stack(gathered).cpu()  # (ranks, 2): failed flag, digest
    raise_for_failed_ranks(table[:, 0].bool().tolist(), local_error, what, group)
    digests = table[:, 1].tolist()
    if len(set(digests)) > 1:
        groups = {value: [rank for rank, other in enumerate(digests) if other == value] for value in digests}
        described = " vs ".join(describe_ranks(members) for members in groups.values())
        raise ExpertParallelError(
            f"{what} refused on every rank: the ranks hold different {digest_of} ({described}); {fix}"
        )
