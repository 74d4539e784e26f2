"""A guest's `linux` process on the machine running the lab: start it, measure it, stop it.

Each guest is one user-mode Linux kernel started in the switch namespace (where its tap is) in a session of its
own. UML runs every guest address space as a further host process of that session, so stopping a guest means its
`linux` process first (SIGTERM: UML kills its own helpers and exits), then whatever of that session remains.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

from .system import LabError, ProcessIdentity, identify, is_alive, run, wait_gone
from .uml_image import cache_root

HERE = Path(__file__).resolve().parent
PRELOAD_SOURCE = HERE / "uml_preload.c"
UML_BINARY = "linux"
# Comm names of the processes a guest's session may hold: the kernel, its clones, the helpers it execs.
_SESSION_COMMS = ("linux", "uml_")
_TERM_TIMEOUT_S = 5.0
_KILL_TIMEOUT_S = 5.0
# Guests run slightly ahead of the rest of the machine (pip installs, the controller's forks): a guest that waits
# for a core stalls every module run on it.
GUEST_NICE = -10


def preload_library() -> Path:
    """The compiled uml_preload.c (cached beside the images, keyed by the source's hash); built when missing."""
    source = PRELOAD_SOURCE.read_bytes()
    library = cache_root() / f"uml-preload-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if library.is_file():
        return library
    compiler = shutil.which("gcc")
    if compiler is None:
        raise LabError(f"gcc is missing; it builds {PRELOAD_SOURCE.name} for the guests: apt-get install gcc")
    library.parent.mkdir(parents=True, exist_ok=True)
    temporary = library.with_suffix(f".{os.getpid()}.tmp")
    run([compiler, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(temporary), str(PRELOAD_SOURCE)])
    os.replace(temporary, library)
    return library


def memory_folder(fallback: Path, needed_mib: int) -> Path:
    """Where UML keeps guest RAM (a deleted file it maps): /dev/shm when it has room, else `fallback` on disk."""
    shm = Path("/dev/shm")
    if shm.is_dir():
        stats = os.statvfs(shm)
        if stats.f_bavail * stats.f_frsize >= needed_mib * 1024 * 1024:
            return shm
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def guest_cpus(count: int, allowed: set[int] | None = None) -> list[int]:
    """One host CPU per guest, round robin over the CPUs this process may use (`allowed`; default: its affinity).

    UML runs a guest's kernel and the process it serves as two host processes that hand over on every page fault
    and system call (ptrace). Held on one CPU, each hand-over is a switch on that CPU; spread over several, it is a
    cross-CPU wake-up. On a 2-core machine, touching 20 MiB in a guest took 5.04 s unpinned and 0.71 s pinned.
    """
    cpus = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    if not cpus:
        raise LabError("no CPU is allowed to this process")
    return [cpus[index % len(cpus)] for index in range(count)]


def _hold_to_cpu(cpu: int):
    """A preexec function: the child (and all it forks, UML's helpers too) runs on `cpu` only, at GUEST_NICE."""

    def hold() -> None:
        os.sched_setaffinity(0, {cpu})
        os.setpriority(os.PRIO_PROCESS, 0, GUEST_NICE)

    return hold


def start(
    switch_netns: str, argv: list[str], memory_dir: Path, preload: Path, console: Path, cpu: int | None = None
) -> ProcessIdentity:
    """Start `linux ARGV` in the switch namespace, detached in its own session, console output to `console`.

    With `cpu`, the guest is held to that host CPU (see guest_cpus). Only stdin, stdout and stderr are passed on
    (the preload library closes anything else at each boot).
    """
    command = [
        "ip", "netns", "exec", switch_netns,
        "env", f"TMPDIR={memory_dir}", f"LD_PRELOAD={preload}",
        UML_BINARY, *argv,
    ]  # fmt: skip
    with open(console, "ab") as console_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=console_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=None if cpu is None else _hold_to_cpu(cpu),
        )
    identity = identify(process.pid)
    if identity is None:
        raise LabError(f"the guest process {command} ended at once; see {console}")
    return identity


def memory_mib(identity: ProcessIdentity) -> float | None:
    """Guest RAM the machine holds for this guest: the allocated size of UML's memory file (None when gone).

    UML maps guest RAM from an unnamed file it creates in TMPDIR (`/dev/shm/#123 (deleted)`); the largest such
    file the process holds open is it.
    """
    if not is_alive(identity):
        return None
    try:
        descriptors = os.listdir(f"/proc/{identity.pid}/fd")
    except OSError:
        return None
    sizes = []
    for descriptor in descriptors:
        path = f"/proc/{identity.pid}/fd/{descriptor}"
        try:
            if os.readlink(path).endswith("(deleted)") and "/#" in os.readlink(path):
                sizes.append(os.stat(path).st_blocks * 512)
        except OSError:
            continue
    return round(max(sizes) / (1024 * 1024), 1) if sizes else None


def _session_members(identity: ProcessIdentity) -> list[ProcessIdentity]:
    """Processes of the guest's session (sid = the guest's pid) started no earlier than the guest, by UML's names."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == identity.pid:
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        session, start_ticks = int(fields[3]), int(fields[19])
        if session == identity.pid and start_ticks >= identity.start_ticks and comm.startswith(_SESSION_COMMS):
            members.append(ProcessIdentity(pid=int(entry), start_ticks=start_ticks))
    return members


def stop(identities: list[ProcessIdentity]) -> list[str]:
    """Stop guests: SIGTERM each recorded `linux` still alive, then SIGKILL what is left of their sessions.

    Returns descriptions of processes still alive afterwards (empty when all are gone).
    """
    alive = [identity for identity in identities if is_alive(identity)]
    for identity in alive:
        try:
            os.kill(identity.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    stubborn = wait_gone(alive, _TERM_TIMEOUT_S)
    leftovers = list(stubborn)
    for identity in identities:
        leftovers += _session_members(identity)
    for identity in leftovers:
        if is_alive(identity):
            try:
                os.kill(identity.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return [f"pid {identity.pid}" for identity in wait_gone(leftovers, _KILL_TIMEOUT_S)]
