"""How a real-kernel guest boots: memory, disk size, MAC, machine id and the kernel's command line.

The guests themselves (names, addresses, groups) are rows of the lab's one table in `topology`; they are user-mode
Linux kernels on the netns lab's bridge, so they share its subnet, switch, guard and ssh path.
"""

from __future__ import annotations

import hashlib
import ipaddress
from pathlib import Path

from .topology import GUEST_INTERFACE, PREFIX_LENGTH, PREFIX_LENGTH6, SWITCH_ADDRESS, LabHost, address6, bridge_port

# LabHost RAM in MiB. UML touches only what the guest uses; systemd + sshd + an Ansible task stay far below it.
GUEST_MEMORY_MIB = 256
# Size of the guest's root filesystem (sparse; the cached image and each copy-on-write file grow only as written).
ROOT_FS_SIZE_MIB = 2048


def mac_address(guest: LabHost) -> str:
    """A fixed, locally administered MAC built from the address, so a rebooted guest keeps its MAC too."""
    octets = ipaddress.IPv4Address(guest.address).packed
    return "02:00:" + ":".join(f"{octet:02x}" for octet in octets)


def machine_id(prefix: str, guest: LabHost) -> str:
    """A stable systemd machine id per lab and guest (32 hex digits), so journal and D-Bus see one machine."""
    return hashlib.sha256(f"hpc.balance lab {prefix} {guest.name}".encode()).hexdigest()[:32]


def disk_arguments(cow: Path, image: Path, seed: Path) -> list[str]:
    """The guest's disks: its root as a copy-on-write file over the shared image, and its seed read-only.

    The root disk takes the 'c' flag: no host file lock on the copy-on-write file (ubd_kern.c's help: "file locking
    will be turned off"). UML reboots by exec()ing itself, and its disk I/O helper, which shares the old file table,
    can outlive the exec for a moment and with it the old lock: under load the new boot found root.cow "already
    locked by" its own pid and panicked ("VFS: Unable to mount root fs"). Each file has one guest, so no lock is lost.
    """
    return [f"ubd0c={cow},{image}", f"ubd1r={seed}"]


def kernel_arguments(prefix: str, guest: LabHost) -> list[str]:
    """LabHost kernel arguments besides the disks: memory, network, identity, consoles.

    `ip=` is read by systemd-network-generator in the guest (the UML kernel has no IP autoconfiguration), which
    writes a systemd-networkd configuration: static address, default route to the lab switch (a dead end). The
    second `ip=` adds the IPv6 twin of the address in the lab's unique-local prefix, with no gateway (no route out).
    """
    netmask = str(ipaddress.IPv4Network(f"0.0.0.0/{PREFIX_LENGTH}").netmask)
    return [
        f"mem={GUEST_MEMORY_MIB}M",
        "root=/dev/ubda",
        "rw",
        f"vec0:transport=tap,ifname={bridge_port(guest)},mac={mac_address(guest)},gro=1",
        f"ip={guest.address}::{SWITCH_ADDRESS}:{netmask}:{guest.name}:{GUEST_INTERFACE}:off",
        f"ip=[{address6(guest.address)}]:::{PREFIX_LENGTH6}:{guest.name}:{GUEST_INTERFACE}:off",
        f"systemd.hostname={guest.name}",
        f"systemd.machine_id={machine_id(prefix, guest)}",
        # Plain text in the console log (it is shown when a guest fails to boot).
        "systemd.log_color=0",
        # Console 0 writes to the UML process's stdout (the console log); no other consoles or serial lines.
        "con=null",
        "con0=null,fd:1",
        "ssl=null",
        # No legacy BSD ptys: the default 256 pairs made 595 tty devices for udev to trigger at each boot
        # (systemd-udev-trigger 11.8 s, against 5.1 s with 83 devices). drivers/tty/pty.c, legacy_count.
        "pty.legacy_count=0",
    ]
