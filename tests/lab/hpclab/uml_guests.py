"""Real-kernel guests on a running netns lab: bring them up, take them down, reboot one, report on them.

  up(prefix, state_dir)        taps on the lab's bridge, one `linux` per guest (in parallel), wait for sshd,
                               write <state-dir>/inventory-uml.yml; returns the inventory path
  down(prefix, state_dir)      stop the recorded guests, delete their taps and files (harmless when none)
  reboot(prefix, state_dir, name)   reboot one guest from inside and wait until it is back
  status(prefix, state_dir)    one line per guest; 0 when all run and answer ssh

The netns lab must be up first: the guests use its switch namespace, bridge, guard, key and ssh path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import netns_state, ssh_probe, uml_image, uml_inventory, uml_process
from .files import control_path, lab_key_path
from .system import LabError, LabRefused, ProcessIdentity, ip_batch, is_alive, netns_names, run
from .topology import BRIDGE, GUESTS, LabHost, bridge_port, check_guest_addresses, guest_named, switch_netns
from .uml_boot import GUEST_MEMORY_MIB, disk_arguments, kernel_arguments
from .uml_seed import write_seed
from .uml_state import GuestRecord, GuestsState, console_log, cow_file, guest_dir, kept_consoles_dir, load, uml_dir

TIMINGS_FILE = "timings-uml.json"
# How long `status` waits for each guest's ssh banner.
STATUS_PROBE_TIMEOUT_S = 6.0
DEFAULT_SSH_TIMEOUT_S = 240.0
DEFAULT_REBOOT_TIMEOUT_S = 240.0
# After the banners: how long each guest may refuse a login, one try's limit (ssh's ConnectTimeout is 5 s), the pause.
LOGIN_TIMEOUT_S = 60.0
LOGIN_ATTEMPT_TIMEOUT_S = 20.0
LOGIN_RETRY_S = 0.5
REQUIRED_TOOLS = ("ip", "linux", "mkfs.ext4", "ssh", "ssh-keygen", "nc", "gcc")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def console_tail(state_dir: Path, guest: LabHost, lines: int = 30) -> str:
    """The last lines of a guest's console log, labelled, for error messages."""
    path = console_log(state_dir, guest)
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return f"(no console log at {path})"
    return f"--- {path} (last {lines} lines) ---\n" + ("\n".join(text) if text else "(empty)")


def check_lab(prefix: str, state_dir: Path) -> str:
    """The switch namespace of a running netns lab, or LabError saying how to bring it up."""
    if os.geteuid() != 0:
        raise LabError("the lab guests need root (taps, network namespaces): run as root")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise LabError(f"missing tools {missing}: {uml_image.MACHINE_PACKAGES_HINT}, gcc, openssh-client")
    check_guest_addresses()
    switch = switch_netns(prefix)
    lab = netns_state.load(state_dir)
    if switch not in netns_names() or lab is None or lab.phase != "up":
        raise LabError(
            f"the netns lab {prefix!r} is not up (namespace {switch}, record in {state_dir}): bring it up first "
            f"with `python3 tests/lab/lab.py up --prefix {prefix} --state-dir {state_dir}`"
        )
    if not lab_key_path(state_dir).is_file():
        raise LabError(f"the lab key {lab_key_path(state_dir)} is missing: recreate the netns lab")
    return switch


def _existing_taps(switch: str) -> list[str]:
    output = run(["ip", "-n", switch, "-o", "link", "show"])
    names = [line.split(":")[1].strip().split("@")[0] for line in output.splitlines() if ":" in line]
    return [bridge_port(guest) for guest in GUESTS if bridge_port(guest) in names]


def create_taps(state: GuestsState, state_dir: Path) -> None:
    """One tap per guest on the lab's bridge, recorded before it is made."""
    state.taps = [bridge_port(guest) for guest in GUESTS]
    state.save(state_dir)
    commands = []
    for guest in GUESTS:
        commands += [
            f"tuntap add dev {bridge_port(guest)} mode tap",
            f"link set {bridge_port(guest)} master {BRIDGE} up",
        ]
    ip_batch(commands, netns=state.switch_netns)


def probe_argv(switch: str, timeout_s: float, addresses: list[str]) -> list[str]:
    """The command that waits for the guests' ssh banners from inside the switch namespace."""
    return ssh_probe.probe_argv(switch, timeout_s, addresses, ssh_probe.GUEST_ATTEMPT_TIMEOUT_S)


def wait_for_sshd(
    state: GuestsState, state_dir: Path, started_at: dict[str, float], timeout_s: float
) -> dict[str, float]:
    """Wait until every guest's sshd sends its banner; seconds from each guest's start. Fails with its console."""
    probes = {
        guest.name: subprocess.Popen(
            probe_argv(state.switch_netns, timeout_s, [guest.address]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for guest in GUESTS
    }
    ready_s: dict[str, float] = {}
    try:
        while len(ready_s) < len(GUESTS):
            for guest in GUESTS:
                if guest.name in ready_s:
                    continue
                process = state.guests[guest.name].process
                if process is None or not is_alive(process):
                    raise LabError(f"lab guest {guest.name} stopped while booting\n{console_tail(state_dir, guest)}")
                rc = probes[guest.name].poll()
                if rc == 0:
                    ready_s[guest.name] = round(time.monotonic() - started_at[guest.name], 2)
                    log(f"lab guests: {guest.name} answers ssh after {ready_s[guest.name]} s")
                elif rc is not None:
                    raise LabError(
                        f"sshd of lab guest {guest.name} ({guest.address}) did not answer within {timeout_s} s\n"
                        f"{console_tail(state_dir, guest)}"
                    )
            time.sleep(0.1)
    finally:
        for probe in probes.values():
            if probe.poll() is None:
                probe.kill()
                probe.wait()
    return ready_s


def login_argv(state_dir: Path, guest_name: str) -> list[str]:
    """A root login that runs `true` on a guest, through the lab's ssh config (it leaves a control master behind)."""
    return ["ssh", "-F", str(state_dir / uml_inventory.SSH_CONFIG_FILE), "-o", "BatchMode=yes", guest_name, "true"]


def wait_for_login(state_dir: Path, timeout_s: float) -> dict[str, int]:
    """Log in to every guest, retrying each for up to timeout_s; return the tries each took.

    An sshd that sends its banner may still drop the first session of a guest that is booting, and then the first
    task of a play finds the host unreachable. A login that ran a command is what a play needs; the control master it
    leaves is the one the play's first task reuses.
    """
    deadline_s = time.monotonic() + timeout_s
    tries = {guest.name: 0 for guest in GUESTS}
    pending = [guest.name for guest in GUESTS]
    while pending:
        logins = {name: subprocess.Popen(login_argv(state_dir, name), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                  for name in pending}  # fmt: skip
        failed = {}
        for name, login in logins.items():
            tries[name] += 1
            try:
                _stdout, stderr = login.communicate(timeout=LOGIN_ATTEMPT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                login.kill()
                login.communicate()
                failed[name] = f"no answer within {LOGIN_ATTEMPT_TIMEOUT_S} s"
                continue
            if login.returncode != 0:
                failed[name] = f"rc {login.returncode}: {stderr.strip() or 'no message'}"
        for name, reason in failed.items():
            log(f"lab guests: login to {name} failed on try {tries[name]} ({reason}); trying again")
        pending = list(failed)
        if pending and time.monotonic() + LOGIN_RETRY_S > deadline_s:
            raise LabError(f"lab guests {', '.join(pending)} answer ssh but refuse a login after {timeout_s} s: "
                           f"{failed}")
        if pending:
            time.sleep(LOGIN_RETRY_S)
    return tries


def up(prefix: str, state_dir: Path, *, ssh_timeout_s: float = DEFAULT_SSH_TIMEOUT_S) -> Path:
    """Boot every guest on the running netns lab; return the inventory path. Timings go to timings-uml.json.

    On failure the caller runs down() (the record lists what was made).
    """
    started = time.monotonic()
    switch = check_lab(prefix, state_dir)
    if load(state_dir) is not None or uml_dir(state_dir).exists():
        raise LabRefused(
            f"lab {prefix!r} already has guests ({uml_dir(state_dir)} exists): run "
            f"`python3 tests/lab/lab.py down --prefix {prefix} --state-dir {state_dir}` first"
        )
    taken = _existing_taps(switch)
    if taken:
        raise LabRefused(f"taps {taken} already exist in {switch}: another guest set uses this lab; take it down")
    timings: dict[str, object] = {}
    image = uml_image.ensure_image()
    timings["image_build_s"] = image.build_s if image.built_now else 0.0
    timings["image_key"] = image.key
    mark = time.monotonic()
    preload = uml_process.preload_library()
    timings["preload_s"] = round(time.monotonic() - mark, 2)

    uml_dir(state_dir).mkdir()
    state = GuestsState(prefix=prefix, switch_netns=switch, image=str(image.path))
    state.save(state_dir)
    mark = time.monotonic()
    authorized_key = lab_key_path(state_dir).with_suffix(".pub").read_text(encoding="utf-8")
    seeds = {}
    for guest in GUESTS:
        guest_dir(state_dir, guest).mkdir()
        seeds[guest.name] = write_seed(guest_dir(state_dir, guest), guest, authorized_key)
    create_taps(state, state_dir)
    timings["prepare_s"] = round(time.monotonic() - mark, 2)

    memory_dir = uml_process.memory_folder(uml_dir(state_dir) / "memory", GUEST_MEMORY_MIB * len(GUESTS))
    started_at = {}
    cpus = uml_process.guest_cpus(len(GUESTS))
    timings["guest_cpus"] = {guest.name: cpu for guest, cpu in zip(GUESTS, cpus, strict=True)}
    for guest, cpu in zip(GUESTS, cpus, strict=True):
        argv = [
            f"umid={guest.name}",
            f"uml_dir={guest_dir(state_dir, guest)}",
            *disk_arguments(cow_file(state_dir, guest), image.path, seeds[guest.name]),
            *kernel_arguments(prefix, guest),
        ]
        record = GuestRecord(address=guest.address, argv=argv)
        state.guests[guest.name] = record
        started_at[guest.name] = time.monotonic()
        record.process = uml_process.start(
            switch, argv, memory_dir, preload, console_log(state_dir, guest), cpu=cpu
        )
        state.save(state_dir)
    log(f"lab guests: {len(GUESTS)} guests booting on {switch} (consoles in {uml_dir(state_dir)}/*/console.log)")
    boot_started = time.monotonic()
    ready_s = wait_for_sshd(state, state_dir, started_at, ssh_timeout_s)
    timings["ssh_ready_s"] = ready_s
    timings["all_ssh_ready_s"] = round(time.monotonic() - boot_started, 2)
    timings["memory_mib_at_ready"] = {
        name: uml_process.memory_mib(record.process) for name, record in state.guests.items() if record.process
    }

    inventory = state_dir / uml_inventory.INVENTORY_FILE
    inventory.write_text(uml_inventory.render(prefix, state_dir), encoding="utf-8")
    (state_dir / uml_inventory.SSH_CONFIG_FILE).write_text(
        uml_inventory.ssh_config_text(prefix, state_dir), encoding="utf-8"
    )
    mark = time.monotonic()
    timings["login_tries"] = wait_for_login(state_dir, LOGIN_TIMEOUT_S)
    timings["login_s"] = round(time.monotonic() - mark, 2)
    state.phase = "up"
    state.save(state_dir)
    timings["total_s"] = round(time.monotonic() - started, 2)
    _write_timings(state_dir, {"up": timings})
    log(
        f"lab guests: {len(GUESTS)} guests up in {timings['total_s']} s (every banner after "
        f"{timings['all_ssh_ready_s']} s, every login {timings['login_s']} s later)"
    )
    return inventory


def _write_timings(state_dir: Path, update: dict[str, object]) -> None:
    """Merge `update` into <state-dir>/timings-uml.json (reboots are appended under 'reboots')."""
    path = state_dir / TIMINGS_FILE
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    for key, value in update.items():
        if key == "reboots":
            data.setdefault("reboots", []).extend(value)
        else:
            data[key] = value
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _close_control_connections(state_dir: Path) -> None:
    """Ask the ssh masters of the guests' addresses to exit (they would linger, holding `nc` in the switch)."""
    for guest in GUESTS:
        socket_path = Path(control_path(state_dir).replace("%h", guest.address))
        if socket_path.exists():
            subprocess.run(
                ["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", guest.name],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=5, check=False,
            )  # fmt: skip


def keep_console_logs(state_dir: Path) -> Path | None:
    """Copy each guest's console log to kept_consoles_dir (replacing an earlier lab's); None when that fails.

    A failure here only warns: taking the lab down matters more than its logs.
    """
    target = kept_consoles_dir(state_dir)
    try:
        target.mkdir(exist_ok=True)
        for guest in GUESTS:
            source = console_log(state_dir, guest)
            if source.is_file():
                shutil.copyfile(source, target / f"{guest.name}.log")
    except OSError as error:
        log(f"warning: could not keep the guests' console logs in {target}: {error}")
        return None
    return target


def down(prefix: str, state_dir: Path) -> int:
    """Stop the recorded guests and delete their taps and files; 0 when nothing of them remains (or there was none)."""
    state = load(state_dir)
    if state is None:
        if uml_dir(state_dir).exists():
            log(f"warning: {uml_dir(state_dir)} holds no guests' record; not removing it: check the path")
            return 1
        return 0
    if state.prefix != prefix:
        raise LabError(f"the guests in {state_dir} belong to lab {state.prefix!r}, not {prefix!r}")
    _close_control_connections(state_dir)
    identities = [record.process for record in state.guests.values() if record.process is not None]
    survivors = uml_process.stop(identities)
    if state.switch_netns in netns_names():
        existing = set(_existing_taps(state.switch_netns))
        commands = [f"link delete {tap}" for tap in state.taps if tap in existing]
        if commands:
            ip_batch(commands, netns=state.switch_netns)
    for name in (uml_inventory.INVENTORY_FILE, uml_inventory.SSH_CONFIG_FILE, TIMINGS_FILE):
        (state_dir / name).unlink(missing_ok=True)
    if survivors:
        log(f"warning: guest processes still alive after SIGKILL: {', '.join(survivors)}; record kept")
        return 1
    kept = keep_console_logs(state_dir)
    if kept is not None:
        log(f"lab guests: console logs kept in {kept}")
    shutil.rmtree(uml_dir(state_dir))
    return 0


def _ssh(state_dir: Path, guest: LabHost, command: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
    """Run a command on a guest over a fresh ssh connection (never a control master a reboot left stale)."""
    argv = [
        "ssh", "-F", str(state_dir / uml_inventory.SSH_CONFIG_FILE),
        "-o", "ControlPath=none", "-o", "ConnectTimeout=5", "-o", "BatchMode=yes",
        guest.name, command,
    ]  # fmt: skip
    try:
        return subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 255, "", f"ssh timed out after {timeout_s} s")


def _running_guest(state_dir: Path, name: str) -> tuple[LabHost, ProcessIdentity]:
    guest = guest_named(name)
    state = load(state_dir)
    record = state.guests.get(name) if state is not None else None
    if state is None or state.phase != "up" or record is None or record.process is None:
        raise LabError(f"lab guest {name} is not up (no running guests in {state_dir}); run `lab.py up --flavour uml`")
    if not is_alive(record.process):
        raise LabError(f"lab guest {name} is not running (pid {record.process.pid} ended)\n"
                       f"{console_tail(state_dir, guest)}")  # fmt: skip
    return guest, record.process


def reboot(prefix: str, state_dir: Path, name: str, *, timeout_s: float = DEFAULT_REBOOT_TIMEOUT_S) -> dict:
    """Reboot one guest with `systemctl reboot` and wait until it answers with a new boot id and its address.

    UML reboots by exec()ing itself: the same process, tap, address and copy-on-write disk come back.
    """
    guest, process = _running_guest(state_dir, name)
    before = _ssh(state_dir, guest, "cat /proc/sys/kernel/random/boot_id")
    if before.returncode != 0:
        raise LabError(f"cannot reach {name} over ssh before the reboot: {before.stderr.strip()}")
    started = time.monotonic()
    _ssh(state_dir, guest, "systemctl reboot", timeout_s=15.0)  # the connection may drop: rc 255 is expected
    deadline = started + timeout_s
    while True:
        if not is_alive(process):
            raise LabError(f"lab guest {name} ended instead of rebooting\n{console_tail(state_dir, guest)}")
        after = _ssh(state_dir, guest, "cat /proc/sys/kernel/random/boot_id; ip -4 -o address show", 10.0)
        if after.returncode == 0 and after.stdout.split()[:1] != before.stdout.split()[:1]:
            break
        if time.monotonic() > deadline:
            raise LabError(f"lab guest {name} did not come back within {timeout_s} s\n{console_tail(state_dir, guest)}")
        time.sleep(1.0)
    result = {
        "guest": name,
        "reboot_s": round(time.monotonic() - started, 2),
        "boot_id_before": before.stdout.strip(),
        "boot_id_after": after.stdout.split()[0],
        "same_process": is_alive(process),
        "address_back": f" {guest.address}/" in after.stdout,
    }
    if not result["address_back"]:
        raise LabError(f"lab guest {name} came back without its address {guest.address}:\n{after.stdout}")
    _write_timings(state_dir, {"reboots": [result]})
    return result


def status(prefix: str, state_dir: Path) -> int:
    """Print one line per guest (process, sshd, memory); 0 when every guest runs and answers."""
    state = load(state_dir)
    if state is None:
        log(f"lab {prefix!r} has no guests (no record in {uml_dir(state_dir)})")
        return 1
    answers = {}
    if state.switch_netns in netns_names():
        argv = probe_argv(state.switch_netns, STATUS_PROBE_TIMEOUT_S, [guest.address for guest in GUESTS])
        completed = subprocess.run(argv, capture_output=True, text=True, check=False)
        try:
            answers = json.loads(completed.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            answers = {}
    healthy = state.phase == "up"
    print(f"guests of lab {prefix} ({state.phase}), image {state.image}")
    print(f"{'guest':<8}{'address':<15}{'pid':<9}{'alive':<7}{'sshd':<9}memory MiB")
    for guest in GUESTS:
        record = state.guests.get(guest.name)
        process = record.process if record is not None else None
        alive = process is not None and is_alive(process)
        sshd = bool(answers.get(guest.address))
        memory = uml_process.memory_mib(process) if process is not None else None
        healthy = healthy and alive and sshd
        pid = process.pid if process is not None else "-"
        print(f"{guest.name:<8}{guest.address:<15}{pid!s:<9}{'yes' if alive else 'no':<7}"
              f"{'answers' if sshd else 'silent':<9}{memory if memory is not None else '-'}")  # fmt: skip
        if not alive:
            print(f"  console: {console_log(state_dir, guest)}")
    return 0 if healthy else 1
