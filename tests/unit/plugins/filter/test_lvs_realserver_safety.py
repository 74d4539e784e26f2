"""Issue 18 on the real servers: a VIP left on another interface (#16).

The address listing follows `ip -j addr show` of iproute2 6.1 (Debian 12), captured on the lab's hosts: one object
per interface with ``ifname`` and ``addr_info`` entries (``local``, ``prefixlen``, ``label``).
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_realserver import lvs_realserver_problems


def interface(name, *addresses):
    return {"ifindex": 1, "ifname": name, "flags": ["UP"], "addr_info": [
        {"family": "inet", "local": local, "prefixlen": prefix, "scope": "global", "label": label}
        for local, prefix, label in addresses]}


def settings(addresses):
    return {"host": "rs1", "vips": ["198.18.0.100"], "interface": "eth0", "known_interfaces": ["eth0", "lo"],
            "own_addresses": ["198.18.0.21"], "arp_ignore": 1, "arp_announce": 2, "check_ports": [80],
            "addresses": json.dumps(addresses)}


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        pytest.param([interface("lo", ("127.0.0.1", 8, "lo"), ("198.18.0.100", 32, "lo:lvs")),
                      interface("eth0", ("198.18.0.21", 24, "eth0"))], [], id="VIP only on lo"),
        pytest.param([interface("lo", ("127.0.0.1", 8, "lo")),
                      interface("eth0", ("198.18.0.21", 24, "eth0"), ("198.18.0.100", 24, "eth0"))],
                     ["rs1: 198.18.0.100 (lvs_realserver_vips) is also on eth0 as 198.18.0.100/24, so this host "
                      "answers ARP for it there and takes the VIP's traffic from the director; remove it (ip addr del "
                      "198.18.0.100/24 dev eth0) and keep it only on lo"],
                     id="VIP left as a secondary address on eth0 by a former director"),
        pytest.param([interface("eth1", ("198.18.0.100", 32, "eth1"))],
                     ["rs1: 198.18.0.100 (lvs_realserver_vips) is also on eth1 as 198.18.0.100/32, so this host "
                      "answers ARP for it there and takes the VIP's traffic from the director; remove it (ip addr del "
                      "198.18.0.100/32 dev eth1) and keep it only on lo"],
                     id="VIP on a second NIC"),
    ],
)
def test_a_vip_on_another_interface_is_refused_with_the_command_that_removes_it(addresses, expected):  # 16
    assert lvs_realserver_problems(settings(addresses)) == expected


def test_without_the_address_listing_the_check_is_skipped():
    found = settings([])
    found["addresses"] = None
    assert lvs_realserver_problems(found) == []
