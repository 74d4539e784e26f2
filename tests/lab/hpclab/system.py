"""Thin wrappers over the tools the lab drives: commands, network namespaces and process identity.

Processes are identified by (pid, start time in clock ticks) so the lab never signals a process that merely
reuses a recorded pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

NETNS_DIR = "/run/netns"


class LabError(Exception):
    """A lab step failed; the message says what, with which value, and what to do."""


class LabRefused(LabError):
    """`up` would clobber or collide with something that exists; nothing was changed."""


def run(argv: Sequence[str], *, stdin_text: str | None = None, timeout_s: float = 30.0) -> str:
    """Run a command and return its stdout; raise LabError with the command and its stderr when it fails."""
    try:
        completed = subprocess.run(
            list(argv), input=stdin_text, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError as error:
        raise LabError(f"command not found: {argv[0]} (install the lab's Debian packages: make setup)") from error
    except subprocess.TimeoutExpired as error:
        raise LabError(f"command took longer than {timeout_s} s: {' '.join(argv)}") from error
    if completed.returncode != 0:
        detail = (completed.stderr or completed.stdout).strip()
        raise LabError(f"command failed (rc {completed.returncode}): {' '.join(argv)}\n{detail}")
    return completed.stdout


def netns_names() -> list[str]:
    """Names of all named network namespaces on this machine (the files `ip netns add` creates)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def netns_run(netns: str, argv: Sequence[str], *, stdin_text: str | None = None) -> str:
    """Run a command inside a named network namespace."""
    return run(["ip", "netns", "exec", netns, *argv], stdin_text=stdin_text)


def netns_pids(netns: str) -> list[int]:
    """Pids of the processes whose network namespace is the named one (empty when it does not exist)."""
    if netns not in netns_names():
        return []
    output = run(["ip", "netns", "pids", netns])
    return [int(word) for word in output.split()]


def ip_batch(commands: Sequence[str], *, netns: str | None = None) -> None:
    """Apply several `ip` commands in one process; the error names the batch so the failing line can be found."""
    argv = ["ip", "-batch", "-"] if netns is None else ["ip", "-n", netns, "-batch", "-"]
    run(argv, stdin_text="\n".join(commands) + "\n")


def set_sysctls(netns: str, values: dict[str, str]) -> None:
    """Set per-namespace sysctls (net.*) inside a network namespace."""
    netns_run(netns, ["sysctl", "-q", "-w", *[f"{key}={value}" for key, value in values.items()]])


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as the kernel knows it: pid plus start time, which a reused pid cannot match."""

    pid: int
    start_ticks: int


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (field 3 onwards), or None when the pid is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat_file:
            text = stat_file.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2 :].split()


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of a running process, or None when no such pid exists."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return ProcessIdentity(pid=pid, start_ticks=int(fields[19]))


def is_alive(identity: ProcessIdentity) -> bool:
    """True while this very process runs (a zombie or a new process under the same pid does not count)."""
    fields = _stat_fields(identity.pid)
    if fields is None:
        return False
    return fields[0] != "Z" and int(fields[19]) == identity.start_ticks


def children(pid: int) -> list[int]:
    """Direct children of a process (empty when it has none or is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as children_file:
            return [int(word) for word in children_file.read().split()]
    except FileNotFoundError:
        return []


def kill_if_same(identity: ProcessIdentity) -> bool:
    """SIGKILL the process only if it is still the one recorded; True when a signal was sent."""
    if not is_alive(identity):
        return False
    try:
        os.kill(identity.pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def wait_gone(identities: Sequence[ProcessIdentity], timeout_s: float) -> list[ProcessIdentity]:
    """Wait until none of the processes is alive; return those still alive after the timeout."""
    deadline = time.monotonic() + timeout_s
    remaining = [identity for identity in identities if is_alive(identity)]
    while remaining and time.monotonic() < deadline:
        time.sleep(0.01)
        remaining = [identity for identity in remaining if is_alive(identity)]
    return remaining
