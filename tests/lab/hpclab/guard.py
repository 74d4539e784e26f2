"""The guard: nftables counters in the switch namespace that prove no frame tried to leave the lab.

Every frame the bridge forwards between hosts, delivers to the switch itself or sends from it is classified.
Allowed: ARP between lab addresses, IPv4 from a lab address to a lab address, to link-local multicast
(VRRP, IGMP) or to the limited broadcast, and IPv6 inside the lab's unique-local prefix and link scope (link-local
addresses, the unspecified source of duplicate address detection, ff02:: multicast). Anything else (an outside IPv4
or IPv6 address, or another protocol) is counted and dropped. The `inspected` counter shows the guard saw traffic at
all, so a zero guard value is evidence and not silence.
"""

from __future__ import annotations

import json

from .system import LabError, netns_run
from .topology import LINK_LOCAL6, LINK_LOCAL_MULTICAST, LINK_LOCAL_MULTICAST6, SUBNET, SUBNET6, UNSPECIFIED6

TABLE = "lab_guard"
INSPECTED = "inspected"
# Counters whose packets make up the guard value.
ESCAPE_COUNTERS = ("ipv4_outside_lab", "arp_outside_lab", "ipv6_outside_lab", "other_protocols")


def ruleset(subnet: str = SUBNET, subnet6: str = SUBNET6) -> str:
    """The nft script that creates the guard table (bridge family, forward + input + output hooks)."""
    counters = "\n".join(f"  counter {name} {{ }}" for name in (INSPECTED, *ESCAPE_COUNTERS))
    ipv6_sources = f"{subnet6}, {LINK_LOCAL6}, {UNSPECIFIED6}"
    ipv6_targets = f"{subnet6}, {LINK_LOCAL6}, {LINK_LOCAL_MULTICAST6}"
    return f"""table bridge {TABLE} {{
{counters}
  chain classify {{
    counter name "{INSPECTED}"
    ether type arp arp saddr ip {{ 0.0.0.0, {subnet} }} arp daddr ip {subnet} return
    ether type arp counter name "arp_outside_lab" drop
    ether type ip ip saddr {subnet} ip daddr {{ {subnet}, {LINK_LOCAL_MULTICAST}, 255.255.255.255 }} return
    ether type ip counter name "ipv4_outside_lab" drop
    ether type ip6 ip6 saddr {{ {ipv6_sources} }} ip6 daddr {{ {ipv6_targets} }} return
    ether type ip6 counter name "ipv6_outside_lab" drop
    counter name "other_protocols" drop
  }}
  chain forward {{ type filter hook forward priority 0; policy accept; jump classify; }}
  chain input {{ type filter hook input priority 0; policy accept; jump classify; }}
  chain output {{ type filter hook output priority 0; policy accept; jump classify; }}
}}
"""


def install(switch_netns: str) -> None:
    """Load the guard table into the switch namespace."""
    netns_run(switch_netns, ["nft", "-f", "-"], stdin_text=ruleset())


def read_counters(switch_netns: str) -> dict[str, int]:
    """Packets per guard counter, read from the switch namespace."""
    output = netns_run(switch_netns, ["nft", "-j", "list", "counters", "table", "bridge", TABLE])
    packets = {}
    for item in json.loads(output).get("nftables", []):
        counter = item.get("counter")
        if counter is not None:
            packets[counter["name"]] = int(counter["packets"])
    missing = [name for name in (INSPECTED, *ESCAPE_COUNTERS) if name not in packets]
    if missing:
        raise LabError(f"guard table bridge {TABLE} in {switch_netns} lacks counters {missing}: recreate the lab")
    return packets


def escaped_packets(counters: dict[str, int]) -> int:
    """The guard value: frames that tried to leave the lab or used a protocol the lab does not carry."""
    return sum(counters[name] for name in ESCAPE_COUNTERS)
