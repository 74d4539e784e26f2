"""The hpc.balance local lab, one command line for both flavours.

netns: six hosts in network namespaces on one bridge, reached by Ansible over ssh. uml: the same, plus four
real-kernel guests (user-mode Linux with IPVS and systemd) on that bridge.

  lab.py up     [--prefix hb] [--state-dir DIR] [--flavour netns|uml]
                                                   create it; the last stdout line is the inventory path
                                                   (uml: the inventory with the guests as directors and real servers)
  lab.py down   [--prefix hb] [--state-dir DIR]   remove all it made, guests included (harmless when there is none)
  lab.py status [--prefix hb] [--state-dir DIR]   hosts, guests, processes, sshd, guard counters
  lab.py guard  [--prefix hb]                      guard value (frames that tried to leave); exit 1 when > 0
  lab.py exec HOST [--prefix hb] [-- CMD ...]      run CMD (default: a shell) inside a netns host's namespaces
  lab.py reboot GUEST [--prefix hb] [--state-dir DIR] [--timeout-s S]
                                                   reboot a guest from inside, wait until it is back; prints JSON
  lab.py image                                     build (or find in the cache) the guests' image; prints its path

See tests/lab/README.md and tests/lab/README-guests.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import guard, netns_down, netns_state, netns_up, ssh_probe, uml_guests, uml_image
from .files import host_log
from .system import LabError, LabRefused, is_alive, netns_names
from .topology import DEFAULT_PREFIX, GUESTS, HOSTS, switch_netns, validate_prefix

REPO_ROOT = Path(__file__).resolve().parents[3]
EXIT_FAILED = 1
EXIT_REFUSED = 2


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def default_state_dir(prefix: str) -> Path:
    return REPO_ROOT / ".lab" / prefix


def down_hint(prefix: str, state_dir: Path) -> str:
    """The command that removes this lab."""
    hint = f"{sys.argv[0]} down --prefix {prefix}"
    return hint if state_dir == default_state_dir(prefix) else f"{hint} --state-dir {state_dir}"


def _raise_on_sigterm(signum: int, _frame: object) -> None:
    """Turn a termination request during `up` into an error, so what was made gets removed."""
    raise LabError(f"interrupted by signal {signum}")


def command_up(prefix: str, state_dir: Path, ssh_timeout_s: float, keep_on_failure: bool, flavour: str) -> int:
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    inventory = state_dir / netns_up.INVENTORY_FILE
    try:
        timings = netns_up.up(prefix, state_dir, ssh_timeout_s=ssh_timeout_s)
        if flavour == "uml":
            # Guests boot through the switch namespace the netns lab just made; sshd in a guest takes far longer.
            inventory = uml_guests.up(prefix, state_dir, ssh_timeout_s=max(ssh_timeout_s, 240.0))
    except LabRefused as error:
        log(f"lab up refused: {error}")
        return EXIT_REFUSED
    except (LabError, OSError, KeyboardInterrupt) as error:
        log(f"lab up failed: {error}")
        if not (state_dir / netns_state.STATE_FILE).exists():
            log("nothing was made")
        elif keep_on_failure:
            log(f"kept what was made for debugging; remove it with: {down_hint(prefix, state_dir)}")
        else:
            log("removing what was made")
            command_down(prefix, state_dir)
        return EXIT_FAILED
    log(
        f"lab {prefix} up; its network namespaces and hosts in {timings['total_s']:.2f} s "
        f"({', '.join(f'{k} {v}' for k, v in timings.items())})"
    )
    log(f"  ssh: ssh -F {state_dir / 'ssh_config'} rs1 | debug: {sys.argv[0]} exec rs1 --prefix {prefix}")
    print(inventory)
    return 0


def command_down(prefix: str, state_dir: Path) -> int:
    started = time.monotonic()
    try:
        # Guests run inside the switch namespace: stop them (by recorded PID) before the namespaces go.
        rc_guests = uml_guests.down(prefix, state_dir)
        guests_s = time.monotonic() - started
        rc = netns_down.down(prefix, state_dir)
    except LabError as error:
        log(f"lab down failed: {error}")
        return EXIT_FAILED
    total_s = time.monotonic() - started
    netns_s = total_s - guests_s
    log(f"lab {prefix} down in {total_s:.2f} s (guests {guests_s:.2f} s, network namespaces {netns_s:.2f} s)")
    return max(rc_guests, rc)


def command_status(prefix: str, state_dir: Path) -> int:
    state = netns_state.load(state_dir)
    if state is None:
        log(f"no lab {prefix!r}: no record in {state_dir}")
        return EXIT_FAILED
    existing = set(netns_names())
    switch = switch_netns(prefix)
    ssh_ready = _probe(switch) if switch in existing else {}
    healthy = state.phase == "up" and switch in existing
    print(f"lab {prefix} ({state.phase}), state dir {state_dir}")
    print(f"{'host':<8}{'address':<14}{'netns':<14}{'init pid':<10}{'alive':<7}sshd")
    for host in HOSTS:
        record = state.hosts.get(host.name)
        netns_ok = record is not None and record.netns in existing
        init_alive = record is not None and record.init is not None and is_alive(record.init)
        sshd_ok = bool(ssh_ready.get(host.address))
        healthy = healthy and netns_ok and init_alive and sshd_ok
        pid = record.init.pid if record is not None and record.init is not None else "-"
        netns = record.netns if netns_ok else "missing"
        print(
            f"{host.name:<8}{host.address:<14}{netns:<14}{pid!s:<10}{'yes' if init_alive else 'no':<7}"
            f"{'answers' if sshd_ok else 'silent'}"
        )
        if not init_alive:
            print(f"  log: {host_log(state_dir, host)}")
    if switch in existing:
        counters = guard.read_counters(switch)
        print(f"guard: {guard.escaped_packets(counters)} escaped ({json.dumps(counters)})")
        healthy = healthy and guard.escaped_packets(counters) == 0
    if (state_dir / "uml").exists():
        healthy = uml_guests.status(prefix, state_dir) == 0 and healthy
    return 0 if healthy else EXIT_FAILED


def _probe(switch: str) -> dict[str, bool]:
    """Which hosts' sshd answers right now (probed from the switch namespace)."""
    argv = ssh_probe.probe_argv(switch, 0.5, [host.address for host in HOSTS], ssh_probe.HOST_ATTEMPT_TIMEOUT_S)
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        return json.loads(completed.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        log(f"sshd probe failed: {completed.stderr.strip()}")
        return {}


def command_guard(prefix: str) -> int:
    switch = switch_netns(prefix)
    if switch not in netns_names():
        log(f"no lab {prefix!r}: namespace {switch} does not exist")
        return EXIT_REFUSED
    counters = guard.read_counters(switch)
    value = guard.escaped_packets(counters)
    log(f"guard counters of {switch}: {json.dumps(counters)}")
    print(value)
    return 0 if value == 0 else EXIT_FAILED


def command_exec(prefix: str, state_dir: Path, host_name: str, argv: list[str]) -> int:
    state = netns_state.load(state_dir)
    record = state.hosts.get(host_name) if state is not None else None
    if record is None or record.init is None or not is_alive(record.init):
        names = ", ".join(host.name for host in HOSTS)
        log(f"host {host_name!r} of lab {prefix!r} is not running (hosts: {names}; see `lab.py status`)")
        return EXIT_FAILED
    command = argv or [os.environ.get("SHELL", "/bin/sh")]
    nsenter = ["nsenter", f"--target={record.init.pid}", "--mount", "--uts", "--net", "--pid", "--", *command]
    os.execvp(nsenter[0], nsenter)
    return EXIT_FAILED  # not reached


def command_reboot(prefix: str, state_dir: Path, name: str, timeout_s: float) -> int:
    try:
        result = uml_guests.reboot(prefix, state_dir, name, timeout_s=timeout_s)
    except (LabError, ValueError) as error:
        log(f"reboot of {name} failed: {error}")
        return EXIT_FAILED
    print(json.dumps(result))
    return 0


def command_image() -> int:
    try:
        image = uml_image.ensure_image()
    except LabError as error:
        log(f"guest image build failed: {error}")
        return EXIT_FAILED
    log(f"guest image {image.key}: {'built in ' + str(image.build_s) + ' s' if image.built_now else 'cached'}")
    print(image.path)
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lab.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("image")
    for name in ("up", "down", "status", "guard", "exec", "reboot"):
        command = commands.add_parser(name)
        command.add_argument("--prefix", default=DEFAULT_PREFIX, help="lab name prefix (default %(default)s)")
        command.add_argument("--state-dir", type=Path, help="state dir (default <repo>/.lab/<prefix>)")
        if name == "up":
            command.add_argument("--ssh-timeout-s", type=float, default=20.0, help="wait for sshd (default 20)")
            command.add_argument("--keep-on-failure", action="store_true", help="leave a failed lab for debugging")
            command.add_argument("--flavour", choices=("netns", "uml"), default="netns",
                                 help="netns hosts only, or also the real-kernel guests (default %(default)s)")
        if name == "exec":
            command.add_argument("host", help="lab host name; the command follows -- (default: a shell)")
        if name == "reboot":
            command.add_argument("guest", help=f"guest name ({', '.join(guest.name for guest in GUESTS)})")
            command.add_argument("--timeout-s", type=float, default=uml_guests.DEFAULT_REBOOT_TIMEOUT_S)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    # `exec HOST [options] -- CMD ...`: everything after the first -- is the command, never lab.py's options.
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.command == "image":
        return command_image()
    try:
        prefix = validate_prefix(args.prefix)
    except ValueError as error:
        log(str(error))
        return EXIT_REFUSED
    state_dir = (args.state_dir or default_state_dir(prefix)).absolute()
    if args.command == "up":
        return command_up(prefix, state_dir, args.ssh_timeout_s, args.keep_on_failure, args.flavour)
    if args.command == "down":
        return command_down(prefix, state_dir)
    if args.command == "status":
        return command_status(prefix, state_dir)
    if args.command == "guard":
        return command_guard(prefix)
    if args.command == "reboot":
        return command_reboot(prefix, state_dir, args.guest, args.timeout_s)
    return command_exec(prefix, state_dir, args.host, command)
