"""torch.distributed plumbing shared by the balancer and the monitor: which process group an all-reduce uses."""

from __future__ import annotations

import torch.distributed as dist


def default_group(group: dist.ProcessGroup | None) -> dist.ProcessGroup | None:
    """``None`` means the default process group when torch.distributed is initialised, else no all-reduce."""
    if group is not None:
        return group
    if dist.is_available() and dist.is_initialized():
        return dist.group.WORLD
    return None
