"""Run one function on N gloo ranks, each in a fresh process on this host, and collect what every rank returned or
raised. A FileStore in the test's folder does the rendezvous and gloo talks over loopback only; the process group has
a timeout and the spawn a deadline, so a rank that never answers fails the test instead of hanging it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

GROUP_TIMEOUT_S = 30  # a collective nobody answers raises after this long
SPAWN_DEADLINE_S = 180  # the whole run, start-up included


def _rank_main(rank, world_size, folder, target, args):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only
    torch.set_num_threads(1)
    store = dist.FileStore(os.path.join(folder, "store"), world_size)
    dist.init_process_group(
        "gloo", rank=rank, world_size=world_size, store=store, timeout=timedelta(seconds=GROUP_TIMEOUT_S)
    )
    try:
        outcome = {"value": target(rank, world_size, *args)}
    except Exception as exc:  # reported to the test, which asserts on it
        outcome = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        dist.destroy_process_group()
    torch.save(outcome, os.path.join(folder, f"rank{rank}.pt"))
    # NOTE: the outcome is on disk; skip the interpreter's teardown, which takes seconds with torch loaded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ranks(target: Callable[..., Any], world_size: int, folder: Path, *args: Any) -> list[dict]:
    """``target(rank, world_size, *args)`` on ``world_size`` gloo ranks; per rank ``{"value": ...}`` or
    ``{"error": "Type: message"}``. target must be importable by name (a module-level function)."""
    context = mp.start_processes(
        _rank_main, args=(world_size, str(folder), target, args), nprocs=world_size, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + SPAWN_DEADLINE_S
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            raise TimeoutError(f"{world_size} gloo ranks did not finish within {SPAWN_DEADLINE_S} s")
    return [torch.load(folder / f"rank{rank}.pt", weights_only=False) for rank in range(world_size)]
