"""The real-kernel guests' fixed shape: names, addresses, groups, and the names derived from a lab prefix.

The guests are user-mode Linux kernels attached to the netns lab's bridge, so they share its subnet, switch,
guard and ssh path; everything here is computed from this one table and `lab_topology`.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

from lab_topology import GUEST_RANGE, PREFIX_LENGTH, SWITCH_ADDRESS

# The guest's only network interface: UML's vector driver names it vec0 (the netns hosts have eth0).
GUEST_INTERFACE = "vec0"
# Guest RAM in MiB. UML touches only what the guest uses; systemd + sshd + an Ansible task stay far below it.
GUEST_MEMORY_MIB = 256
# Size of the guest's root filesystem (sparse; the cached image and each copy-on-write file grow only as written).
ROOT_FS_SIZE_MIB = 2048


@dataclass(frozen=True)
class Guest:
    """One guest: its name (also its hostname), its address on the lab bridge and its inventory group."""

    name: str
    address: str
    group: str


GUESTS = (
    Guest("udir1", "198.18.0.151", "lvs_directors"),
    Guest("udir2", "198.18.0.152", "lvs_directors"),
    Guest("urs1", "198.18.0.153", "lvs_realservers"),
    Guest("urs2", "198.18.0.154", "lvs_realservers"),
)


def guest_named(name: str) -> Guest:
    """The guest with this name; ValueError listing the names when there is none."""
    for guest in GUESTS:
        if guest.name == name:
            return guest
    raise ValueError(f"no lab guest named {name!r}: the guests are {', '.join(g.name for g in GUESTS)}")


def tap_name(guest: Guest) -> str:
    """The tap device on the switch's bridge that carries the guest's vec0 (inside the switch namespace)."""
    return f"to-{guest.name}"


def mac_address(guest: Guest) -> str:
    """A fixed, locally administered MAC built from the address, so a rebooted guest keeps its MAC too."""
    octets = ipaddress.IPv4Address(guest.address).packed
    return "02:00:" + ":".join(f"{octet:02x}" for octet in octets)


def machine_id(prefix: str, guest: Guest) -> str:
    """A stable systemd machine id per lab and guest (32 hex digits), so journal and D-Bus see one machine."""
    return hashlib.sha256(f"hpc.balance lab {prefix} {guest.name}".encode()).hexdigest()[:32]


def kernel_arguments(prefix: str, guest: Guest) -> list[str]:
    """Guest kernel arguments besides the disks: memory, network, identity, consoles, no IPv6.

    `ip=` is read by systemd-network-generator in the guest (the UML kernel has no IP autoconfiguration), which
    writes a systemd-networkd configuration: static address, default route to the lab switch (a dead end).
    """
    netmask = str(ipaddress.IPv4Network(f"0.0.0.0/{PREFIX_LENGTH}").netmask)
    return [
        f"mem={GUEST_MEMORY_MIB}M",
        "root=/dev/ubda",
        "rw",
        f"vec0:transport=tap,ifname={tap_name(guest)},mac={mac_address(guest)},gro=1",
        f"ip={guest.address}::{SWITCH_ADDRESS}:{netmask}:{guest.name}:{GUEST_INTERFACE}:off",
        f"systemd.hostname={guest.name}",
        f"systemd.machine_id={machine_id(prefix, guest)}",
        # The lab carries IPv4 only; the guard counts any IPv6 frame as an escape.
        "ipv6.disable=1",
        # Plain text in the console log (it is shown when a guest fails to boot).
        "systemd.log_color=0",
        # Console 0 writes to the UML process's stdout (the console log); no other consoles or serial lines.
        "con=null",
        "con0=null,fd:1",
        "ssl=null",
    ]


def check_guest_addresses() -> None:
    """Every guest address lies inside the lab's guest range (a table edit cannot collide with netns hosts)."""
    first, last = (ipaddress.IPv4Address(address) for address in GUEST_RANGE)
    for guest in GUESTS:
        if not first <= ipaddress.IPv4Address(guest.address) <= last:
            raise ValueError(f"guest {guest.name} address {guest.address} is outside the guest range {GUEST_RANGE}")
