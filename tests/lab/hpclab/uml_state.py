"""The record the guests keep of what they made (<state-dir>/uml/guests.json), so `down` removes exactly that.

`up` saves it before each step that creates something: the taps it added on the switch and, per guest, the pid
and start time of its `linux` process. Paths of the guests' files are derived from the state dir.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .system import LabError, ProcessIdentity
from .topology import LabHost

UML_DIR = "uml"
RECORD_FILE = "guests.json"


def uml_dir(state_dir: Path) -> Path:
    """Folder of everything the guests add to a lab's state dir."""
    return state_dir / UML_DIR


def guest_dir(state_dir: Path, guest: LabHost) -> Path:
    """Folder of one guest: copy-on-write file, seed disk, console log, UML's pid/mconsole folder."""
    return uml_dir(state_dir) / guest.name


def console_log(state_dir: Path, guest: LabHost) -> Path:
    """The guest's console: kernel messages and systemd's boot and shutdown lines, across reboots."""
    return guest_dir(state_dir, guest) / "console.log"


def kept_consoles_dir(state_dir: Path) -> Path:
    """Where `down` keeps the guests' console logs: beside the state dir, which `down` removes, so a guest that hung
    at a boot or reboot can still be read after the lab is gone (CI prints their tails when a scenario fails)."""
    return state_dir.parent / f"{state_dir.name}-consoles"


def cow_file(state_dir: Path, guest: LabHost) -> Path:
    """The guest's copy-on-write file over the cached image: everything the guest writes to its disk."""
    return guest_dir(state_dir, guest) / "root.cow"


@dataclass
class GuestRecord:
    """One started guest: its `linux` process (pid + start time) and the command that started it."""

    address: str
    process: ProcessIdentity | None = None
    argv: list[str] = field(default_factory=list)


@dataclass
class GuestsState:
    """What the guests of one lab made; `phase` is 'creating' until every guest answered ssh, then 'up'."""

    prefix: str
    switch_netns: str
    image: str = ""
    phase: str = "creating"
    taps: list[str] = field(default_factory=list)
    guests: dict[str, GuestRecord] = field(default_factory=dict)

    def save(self, state_dir: Path) -> None:
        """Write the record atomically (a crash never leaves half a file)."""
        path = uml_dir(state_dir) / RECORD_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, path)


def load(state_dir: Path) -> GuestsState | None:
    """The guests' record in a lab's state dir, or None when there is none."""
    path = uml_dir(state_dir) / RECORD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise LabError(
            f"cannot read the guests' record {path}: {error}; stop the guests' `linux` processes by hand"
        ) from error
    guests = {
        name: GuestRecord(
            address=record["address"],
            process=None if record.get("process") is None else ProcessIdentity(**record["process"]),
            argv=list(record.get("argv", [])),
        )
        for name, record in data.get("guests", {}).items()
    }
    return GuestsState(
        prefix=data["prefix"],
        switch_netns=data["switch_netns"],
        image=data.get("image", ""),
        phase=data.get("phase", "creating"),
        taps=list(data.get("taps", [])),
        guests=guests,
    )
