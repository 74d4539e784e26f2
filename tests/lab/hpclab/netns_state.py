"""The record a lab keeps of what it made (state.json in its state dir), so `down` removes exactly that.

`up` saves the record before each step that creates something, so even a lab whose start failed halfway
can be removed: namespaces it added and the pids (with start times) of the processes it started.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .system import LabError, ProcessIdentity

STATE_FILE = "state.json"


@dataclass
class HostRecord:
    """What was started for one host: the launcher (`ip netns exec` turned `unshare`) and the host's PID 1."""

    address: str
    netns: str
    launcher: ProcessIdentity | None = None
    init: ProcessIdentity | None = None


@dataclass
class LabState:
    """Everything one lab made; `phase` is 'creating' until `up` finished, then 'up'."""

    prefix: str
    state_dir: str
    phase: str = "creating"
    netns: list[str] = field(default_factory=list)
    hosts: dict[str, HostRecord] = field(default_factory=dict)

    def save(self) -> None:
        """Write the record atomically (a crash never leaves half a file)."""
        path = Path(self.state_dir) / STATE_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, path)


def _identity(data: dict | None) -> ProcessIdentity | None:
    return None if data is None else ProcessIdentity(pid=int(data["pid"]), start_ticks=int(data["start_ticks"]))


def load(state_dir: Path) -> LabState | None:
    """The record in a state dir, or None when the dir holds none."""
    path = state_dir / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise LabError(f"cannot read the lab record {path}: {error}; remove the lab's namespaces by hand") from error
    hosts = {
        name: HostRecord(
            address=host["address"],
            netns=host["netns"],
            launcher=_identity(host.get("launcher")),
            init=_identity(host.get("init")),
        )
        for name, host in data.get("hosts", {}).items()
    }
    return LabState(
        prefix=data["prefix"],
        state_dir=data["state_dir"],
        phase=data.get("phase", "creating"),
        netns=list(data.get("netns", [])),
        hosts=hosts,
    )
