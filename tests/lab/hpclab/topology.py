"""The lab's fixed shape: hosts and guests, addresses, groups and the names derived from a lab prefix.

Two kinds of machine share one bridge: netns hosts (network + mount + UTS + PID namespaces, sshd as PID 1) and
real-kernel guests (user-mode Linux with IPVS and systemd). Everything else in the lab (namespaces, taps, files,
inventories) is computed from these two tables, so a machine or address changes in exactly one place.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

SUBNET = "198.18.0.0/24"
PREFIX_LENGTH = 24
SWITCH_ADDRESS = "198.18.0.1"
# Addresses no lab host uses: keepalived VIPs first, then real-kernel guests attached to the same bridge.
VIP_RANGE = ("198.18.0.100", "198.18.0.149")
GUEST_RANGE = ("198.18.0.150", "198.18.0.199")
# VRRP (224.0.0.18) and IGMP use the link-local multicast block; it never crosses a router.
LINK_LOCAL_MULTICAST = "224.0.0.0/24"
# The lab's own unique-local IPv6 prefix (RFC 4193, with a random global ID), on the bridge only: no host has an IPv6
# route beyond it. Every lab address has an IPv6 twin in it (see address6).
SUBNET6 = "fd6c:8b1e:52a9::/64"
PREFIX_LENGTH6 = 64
# What IPv6 needs on a link besides the lab prefix: link-local sources and targets, the unspecified source of duplicate
# address detection, and link-scope multicast (neighbour discovery, MLD, VRRP's ff02::12).
LINK_LOCAL6 = "fe80::/10"
UNSPECIFIED6 = "::"
LINK_LOCAL_MULTICAST6 = "ff02::/16"

HOST_INTERFACE = "eth0"
# The guest's only network interface: UML's vector driver names it vec0.
GUEST_INTERFACE = "vec0"
BRIDGE = "br0"
SSH_PORT = 22

# The groups of the collection's architecture, in the order the inventory lists them.
GROUPS = ("lvs_directors", "lvs_realservers", "lvs_clients", "gpu_nodes", "windows_storage")

DEFAULT_PREFIX = "hb"
_PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9]{0,11}$")


@dataclass(frozen=True)
class LabHost:
    """One lab machine: its name (also its hostname), its address on the lab bridge and its inventory group."""

    name: str
    address: str
    group: str


HOSTS = (
    LabHost("client", "198.18.0.10", "lvs_clients"),
    LabHost("dir1", "198.18.0.11", "lvs_directors"),
    LabHost("dir2", "198.18.0.12", "lvs_directors"),
    LabHost("rs1", "198.18.0.21", "lvs_realservers"),
    LabHost("rs2", "198.18.0.22", "lvs_realservers"),
    LabHost("gpu1", "198.18.0.31", "gpu_nodes"),
)

# The real-kernel guests (`lab.py up --flavour uml`), in the guest range.
GUESTS = (
    LabHost("udir1", "198.18.0.151", "lvs_directors"),
    LabHost("udir2", "198.18.0.152", "lvs_directors"),
    LabHost("urs1", "198.18.0.153", "lvs_realservers"),
    LabHost("urs2", "198.18.0.154", "lvs_realservers"),
)


def address6(address: str) -> str:
    """The IPv6 twin of a lab IPv4 address: the lab prefix with the last octet's digits as interface id.

    198.18.0.153 -> fd6c:8b1e:52a9::153, so a reader maps one to the other at a glance.
    """
    last_octet = ipaddress.IPv4Address(address).packed[-1]
    return str(ipaddress.IPv6Address(f"{ipaddress.IPv6Network(SUBNET6).network_address}{last_octet}"))


def guest_named(name: str) -> LabHost:
    """The guest with this name; ValueError listing the names when there is none."""
    for guest in GUESTS:
        if guest.name == name:
            return guest
    raise ValueError(f"no lab guest named {name!r}: the guests are {', '.join(g.name for g in GUESTS)}")


def check_guest_addresses() -> None:
    """Every guest address lies inside the lab's guest range (a table edit cannot collide with netns hosts)."""
    first, last = (ipaddress.IPv4Address(address) for address in GUEST_RANGE)
    for guest in GUESTS:
        if not first <= ipaddress.IPv4Address(guest.address) <= last:
            raise ValueError(f"guest {guest.name} address {guest.address} is outside the guest range {GUEST_RANGE}")


def validate_prefix(prefix: str) -> str:
    """Return the prefix if it can name namespaces unambiguously, else raise ValueError saying what fits."""
    if not _PREFIX_PATTERN.match(prefix):
        raise ValueError(
            f"lab prefix {prefix!r} is not usable: use 1-12 characters, a lowercase letter first, then lowercase "
            "letters or digits (no '-', so one lab's names never start with another lab's prefix)"
        )
    return prefix


def switch_netns(prefix: str) -> str:
    """Name of the namespace that holds the bridge (the lab's switch)."""
    return f"{prefix}-sw"


def host_netns(prefix: str, host: LabHost) -> str:
    """Name of the network namespace of one host."""
    return f"{prefix}-{host.name}"


def lab_netns_names(prefix: str) -> list[str]:
    """Every namespace name a lab with this prefix creates: the switch first, then the hosts."""
    return [switch_netns(prefix)] + [host_netns(prefix, host) for host in HOSTS]


def bridge_port(host: LabHost) -> str:
    """The bridge's port for a machine, inside the switch namespace: a host's veth end or a guest's tap."""
    return f"to-{host.name}"
