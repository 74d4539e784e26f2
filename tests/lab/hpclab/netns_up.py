"""Bring a lab up: switch namespace with a bridge and the guard, one namespace per host, sshd as each host's PID 1.

Steps and their record: the state dir is created first (it is also the lock), every namespace and process is
written to state.json before the next step, so a failure at any point can be undone by `down`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import guard, ssh_probe
from .files import host_dir, host_log, write_state_files
from .netns_inventory import render
from .netns_state import HostRecord, LabState
from .system import (
    NETNS_DIR,
    LabError,
    LabRefused,
    children,
    identify,
    ip_batch,
    netns_names,
    netns_pids,
    run,
    set_sysctls,
)
from .topology import (
    BRIDGE,
    HOST_INTERFACE,
    HOSTS,
    PREFIX_LENGTH,
    PREFIX_LENGTH6,
    SWITCH_ADDRESS,
    address6,
    bridge_port,
    host_netns,
    lab_netns_names,
    switch_netns,
)

HERE = Path(__file__).resolve().parent
INIT_SCRIPT = HERE / "host-init.sh"
INVENTORY_FILE = "inventory.yml"
TIMINGS_FILE = "timings.json"
REQUIRED_TOOLS = ("ip", "unshare", "nsenter", "sysctl", "nft", "nc", "ssh", "ssh-keygen", "/usr/sbin/sshd")
# A unix socket path holds at most 107 bytes; ssh adds a 17-byte suffix while it creates the control socket.
_CONTROL_PATH_BUDGET = 107 - len("/cp-198.18.0.255") - 17
# A namespace of this lab's that no process is in, made longer ago than this, is a killed run's leftover.
LEFTOVER_AFTER_S = 60.0

# The switch has no address of either family in IPv6: it only bridges.
_NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
# A host's IPv6: the lab prefix only, set by hand. No router advertisement is taken (so no route can appear), no
# forwarding, and no duplicate address detection (the lab's table keeps addresses unique; DAD would hold a new
# address, and the link-local one VRRPv3 sends from, tentative for a second).
_HOST_IPV6 = {
    f"net.ipv6.conf.{scope}.{key}": value
    for scope in ("all", "default")
    for key, value in {"disable_ipv6": "0", "accept_ra": "0", "accept_dad": "0", "forwarding": "0"}.items()
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def leftover_namespaces(prefix: str, taken: list[str], *, now_s: float | None = None) -> list[str]:
    """The namespaces in `taken` that a killed run of this lab left: all of them, or none.

    A run killed with its machine (or by SIGKILL) leaves the namespace files behind while every process that was
    inside is gone. They are leftovers only when each is one of this lab's own names, holds no process, and was made
    more than LEFTOVER_AFTER_S ago (an `up` elsewhere makes its namespaces a moment before it starts their hosts).
    """
    now_s = time.time() if now_s is None else now_s
    own = set(lab_netns_names(prefix))
    if not taken or not set(taken) <= own:
        return []
    for name in taken:
        try:
            age_s = now_s - os.stat(f"{NETNS_DIR}/{name}").st_mtime
        except FileNotFoundError:
            return []
        if age_s < LEFTOVER_AFTER_S or netns_pids(name):
            return []
    return list(taken)


def check_no_lab(prefix: str, state_dir: Path) -> None:
    """Refuse when a live lab of this prefix or the state dir exists (no change made).

    A killed run's leftover namespaces are removed first (see leftover_namespaces).
    """
    taken = [name for name in netns_names() if name.startswith(f"{prefix}-")]
    leftovers = [] if state_dir.exists() else leftover_namespaces(prefix, taken)
    if leftovers:
        log(f"lab {prefix}: removing namespaces a killed run left, with no process inside: {', '.join(leftovers)}")
        for name in leftovers:
            run(["ip", "netns", "delete", name])
        taken = [name for name in netns_names() if name.startswith(f"{prefix}-")]
    if taken:
        raise LabRefused(
            f"a lab with prefix {prefix!r} seems to exist: network namespace(s) {', '.join(taken)} exist. "
            f"Run `make lab-down` (tests/lab/lab.py down --prefix {prefix}) or choose another PREFIX."
        )
    if state_dir.exists():
        raise LabRefused(
            f"lab state dir {state_dir} exists. Run `make lab-down` (tests/lab/lab.py down --prefix {prefix} "
            f"--state-dir {state_dir}) or choose another PREFIX."
        )


def check_machine(state_dir: Path) -> None:
    """Fail early, before anything is made, when the machine lacks what the lab needs."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root (network namespaces, mounts): run it as root")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise LabError(
            f"missing tools {missing}: install iproute2 util-linux procps nftables netcat-openbsd openssh-server "
            "openssh-client (make setup)"
        )
    with open("/proc/filesystems", encoding="ascii") as filesystems:
        if "overlay" not in filesystems.read().split():
            raise LabError("this kernel has no overlay filesystem, which the hosts' /etc needs: run `modprobe overlay`")
    if len(str(state_dir)) > _CONTROL_PATH_BUDGET:
        raise LabError(
            f"lab state dir {state_dir} is {len(str(state_dir))} characters long; ssh control sockets inside it "
            f"need at most {_CONTROL_PATH_BUDGET}: pass a shorter --state-dir"
        )


def create_network(state: LabState) -> None:
    """Namespaces, bridge with the switch address and guard, veth pairs, host addresses and dead-end routes."""
    prefix = state.prefix
    switch = switch_netns(prefix)
    for name in lab_netns_names(prefix):
        run(["ip", "netns", "add", name])
        state.netns.append(name)
        state.save()
    set_sysctls(switch, {"net.ipv4.ip_forward": "0", **_NO_IPV6})
    for host in HOSTS:
        set_sysctls(host_netns(prefix, host), _HOST_IPV6)
    switch_commands = [
        "link set lo up",
        f"link add {BRIDGE} type bridge stp_state 0 mcast_snooping 0",
        f"address add {SWITCH_ADDRESS}/{PREFIX_LENGTH} dev {BRIDGE}",
    ]
    for host in HOSTS:
        port = bridge_port(host)
        switch_commands += [
            f"link add {port} type veth peer name {HOST_INTERFACE} netns {host_netns(prefix, host)}",
            f"link set {port} master {BRIDGE} up",
        ]
    switch_commands.append(f"link set {BRIDGE} up")
    ip_batch(switch_commands, netns=switch)
    guard.install(switch)
    for host in HOSTS:
        ip_batch(
            [
                "link set lo up",
                f"address add {host.address}/{PREFIX_LENGTH} dev {HOST_INTERFACE}",
                f"address add {address6(host.address)}/{PREFIX_LENGTH6} dev {HOST_INTERFACE} nodad",
                f"link set {HOST_INTERFACE} up",
                f"route add default via {SWITCH_ADDRESS} dev {HOST_INTERFACE}",
            ],
            netns=host_netns(prefix, host),
        )


def start_hosts(state: LabState, state_dir: Path) -> dict[str, subprocess.Popen]:
    """Start every host's init detached (own session, output to its log); record launcher and init pids."""
    launchers = {}
    for host in HOSTS:
        netns = host_netns(state.prefix, host)
        argv = [
            "ip", "netns", "exec", netns,
            "unshare", "--uts", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
            "/bin/sh", str(INIT_SCRIPT), host.name, str(host_dir(state_dir, host)),
        ]  # fmt: skip
        with open(host_log(state_dir, host), "ab") as host_output:
            launcher = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=host_output, stderr=subprocess.STDOUT, start_new_session=True
            )
        launchers[host.name] = launcher
        state.hosts[host.name] = HostRecord(address=host.address, netns=netns, launcher=identify(launcher.pid))
        state.save()
    deadline = time.monotonic() + 5.0
    for host in HOSTS:
        record = state.hosts[host.name]
        while record.init is None:
            found = children(launchers[host.name].pid)
            if found:
                record.init = identify(found[0])
            elif launchers[host.name].poll() is not None or time.monotonic() > deadline:
                raise LabError(
                    f"host {host.name} did not start (its namespace launcher ended or never forked)"
                    f"\n{log_tail(host_log(state_dir, host))}"
                )
            else:
                time.sleep(0.005)
    state.save()
    return launchers


def log_tail(path: Path, lines: int = 20) -> str:
    """The last lines of a host log, labelled, for error messages."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return f"(no log at {path})"
    return f"--- {path} (last {lines} lines) ---\n" + ("\n".join(text) if text else "(empty)")


def wait_for_sshd(state: LabState, state_dir: Path, launchers: dict[str, subprocess.Popen], timeout_s: float) -> None:
    """Wait until every sshd sends its banner; fail at once, with its log, when a host dies meanwhile."""
    argv = ssh_probe.probe_argv(switch_netns(state.prefix), timeout_s, [host.address for host in HOSTS],
                                ssh_probe.HOST_ATTEMPT_TIMEOUT_S)  # fmt: skip
    probe = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while probe.poll() is None:
            dead = [name for name, launcher in launchers.items() if launcher.poll() is not None]
            if dead:
                logs = "\n".join(log_tail(host_log(state_dir, host)) for host in HOSTS if host.name in dead)
                raise LabError(f"lab host(s) {', '.join(dead)} exited while starting sshd\n{logs}")
            time.sleep(0.01)
    finally:
        if probe.poll() is None:
            probe.kill()
        output = probe.communicate()[0]
    try:
        ready = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError) as error:
        raise LabError(f"the sshd probe in {switch_netns(state.prefix)} failed: {output.strip()}") from error
    slow = [host for host in HOSTS if not ready.get(host.address)]
    if slow:
        logs = "\n".join(log_tail(host_log(state_dir, host)) for host in slow)
        raise LabError(
            f"sshd did not answer within {timeout_s} s on {', '.join(f'{h.name} ({h.address})' for h in slow)}\n{logs}"
        )


def up(prefix: str, state_dir: Path, *, ssh_timeout_s: float) -> dict[str, float]:
    """Create the lab and write its inventory; return the seconds each phase took (also in timings.json).

    On failure the caller removes what was made (state.json lists it).
    """
    started = time.monotonic()
    timings = {}
    check_no_lab(prefix, state_dir)
    check_machine(state_dir)
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        state_dir.mkdir(mode=0o700)
    except FileExistsError as error:
        raise LabRefused(
            f"lab state dir {state_dir} appeared meanwhile: another `up` runs; choose another PREFIX"
        ) from error
    state = LabState(prefix=prefix, state_dir=str(state_dir))
    state.save()
    mark = time.monotonic()
    write_state_files(state_dir, switch_netns(prefix))
    timings["files_s"] = time.monotonic() - mark
    mark = time.monotonic()
    create_network(state)
    timings["network_s"] = time.monotonic() - mark
    log(f"lab {prefix}: network ready ({len(HOSTS)} hosts on {switch_netns(prefix)}), starting hosts")
    mark = time.monotonic()
    launchers = start_hosts(state, state_dir)
    timings["start_s"] = time.monotonic() - mark
    mark = time.monotonic()
    wait_for_sshd(state, state_dir, launchers, ssh_timeout_s)
    timings["sshd_ready_s"] = time.monotonic() - mark
    (state_dir / INVENTORY_FILE).write_text(render(prefix, state_dir), encoding="utf-8")
    state.phase = "up"
    state.save()
    timings["total_s"] = time.monotonic() - started
    rounded = {name: round(seconds, 3) for name, seconds in timings.items()}
    (state_dir / TIMINGS_FILE).write_text(json.dumps(rounded, indent=2) + "\n", encoding="utf-8")
    return rounded
