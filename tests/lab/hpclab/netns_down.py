"""Take a lab down: close ssh control connections, kill the recorded host processes, delete the namespaces,
remove the state dir. Only pids recorded by `up` (and still carrying the recorded start time) are signalled.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from . import netns_state
from .system import LabError, kill_if_same, netns_names, netns_pids, run, wait_gone
from .topology import lab_netns_names, switch_netns

_HOST_EXIT_TIMEOUT_S = 5.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def close_control_connections(state_dir: Path) -> None:
    """Ask every ssh master using the lab's control sockets to exit (they would otherwise linger 60 s)."""
    for socket_path in sorted(state_dir.glob("cp-*")):
        subprocess.run(
            ["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "lab-host"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=5,
            check=False,
        )


def stop_hosts(state: netns_state.LabState) -> list[str]:
    """SIGKILL each host's PID 1 (ending its PID namespace), then any launcher left; return what survived."""
    inits = [record.init for record in state.hosts.values() if record.init is not None]
    for identity in inits:
        kill_if_same(identity)
    survivors = wait_gone(inits, _HOST_EXIT_TIMEOUT_S)
    launchers = [record.launcher for record in state.hosts.values() if record.launcher is not None]
    launchers = wait_gone(launchers, 0.5)
    for identity in launchers:
        kill_if_same(identity)
    survivors += wait_gone(launchers, _HOST_EXIT_TIMEOUT_S)
    return [f"pid {identity.pid}" for identity in survivors]


def delete_namespaces(names: list[str], switch: str) -> list[str]:
    """Delete the named namespaces that exist; return notes on processes still inside them (left alone)."""
    notes = []
    existing = set(netns_names())
    for name in names:
        if name not in existing:
            continue
        strangers = netns_pids(name)
        if strangers and name == switch:
            notes.append(f"{name}: pids {strangers} (ssh ProxyCommand `nc`, ends with its ssh master) left running")
        elif strangers:
            notes.append(f"{name}: pids {strangers} were not started by this lab's record and were left running")
        run(["ip", "netns", "delete", name])
    return notes


def down(prefix: str, state_dir: Path) -> int:
    """Remove the lab; 0 when nothing of it remains (or there was none), 1 when something had to be left."""
    state = netns_state.load(state_dir)
    if state is not None and state.prefix != prefix:
        raise LabError(
            f"state dir {state_dir} belongs to lab {state.prefix!r}, not {prefix!r}: pass --prefix {state.prefix}"
        )
    if state is None and state_dir.exists() and any(state_dir.iterdir()):
        raise LabError(f"{state_dir} holds no lab record ({netns_state.STATE_FILE}); not removing it: check the path")
    names = lab_netns_names(prefix)
    if state is not None:
        names = list(dict.fromkeys([*state.netns, *names]))
    existing = [name for name in names if name in netns_names()]
    if state is None and not existing and not state_dir.exists():
        log(f"no lab {prefix!r} here (no state dir {state_dir}, no namespace {prefix}-*): nothing to do")
        return 0
    problems = []
    if state is None:
        problems.append(f"no record in {state_dir}: processes inside {existing} were not killed")
    else:
        close_control_connections(state_dir)
        survivors = stop_hosts(state)
        if survivors:
            problems.append(f"host processes still alive after SIGKILL: {', '.join(survivors)}")
    hosts_first = [name for name in names if name != switch_netns(prefix)] + [switch_netns(prefix)]
    notes = delete_namespaces(hosts_first, switch_netns(prefix))
    for note in notes:
        log(f"note: {note}")
    if state_dir.exists():
        shutil.rmtree(state_dir)
    for problem in problems:
        log(f"warning: {problem}")
    return 1 if problems or any("were not started" in note for note in notes) else 0
