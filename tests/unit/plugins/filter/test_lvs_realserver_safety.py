"""Issue 18 on the real servers: a VIP left on another interface (#16).

The address listing follows `ip -j addr show` of iproute2 6.1 (Debian 12), captured on the lab's hosts: one object
per interface with ``ifname`` and ``addr_info`` entries (``local``, ``prefixlen``, ``label``); IPv6 entries have
``family`` inet6 and no ``label``. The IPv6 switches follow ``sysctl -e`` of procps 4.0.2 (Debian 12), which prints
nothing for a key the kernel lacks.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_realserver import lvs_realserver_problems


def interface(name, *addresses):
    return {"ifindex": 1, "ifname": name, "flags": ["UP"], "addr_info": [
        {"family": "inet", "local": local, "prefixlen": prefix, "scope": "global", "label": label}
        for local, prefix, label in addresses]}


def interface6(name, *addresses):
    return {"ifindex": 2, "ifname": name, "flags": ["UP"], "addr_info": [
        {"family": "inet6", "local": local, "prefixlen": prefix, "scope": "global"} for local, prefix in addresses]}


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


def settings6(addresses=(), ipv6_sysctls=None):
    found = settings(list(addresses))
    found["vips"] = ["198.18.0.100", "fd00::100"]
    found["ipv6_sysctls"] = ipv6_sysctls
    return found


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        pytest.param([interface6("lo", ("fd00::100", 128)), interface6("eth0", ("fd00::21", 64))], [],
                     id="IPv6 VIP only on lo"),
        pytest.param([interface6("eth0", ("fd00::21", 64), ("fd00:0:0::100", 64))],
                     ["rs1: fd00:0:0::100 (lvs_realserver_vips) is also on eth0 as fd00:0:0::100/64, so this host "
                      "answers neighbour solicitations for it there and takes the VIP's traffic from the director; "
                      "remove it (ip addr del fd00:0:0::100/64 dev eth0) and keep it only on lo"],
                     id="IPv6 VIP on eth0, spelled differently"),
    ],
)
def test_an_ipv6_vip_on_another_interface_is_refused_with_the_command_that_removes_it(addresses, expected):
    assert lvs_realserver_problems(settings6(addresses)) == expected


ALL_ON = "net.ipv6.conf.all.disable_ipv6 = 0\nnet.ipv6.conf.lo.disable_ipv6 = 0\n"


@pytest.mark.parametrize(
    ("ipv6_sysctls", "expected"),
    [
        pytest.param(ALL_ON, [], id="IPv6 on"),
        pytest.param(None, [], id="not read"),
        pytest.param("", ["rs1: lvs_realserver_vips has fd00::100 (IPv6), but this host's kernel has no IPv6 (no "
                          "/proc/sys/net/ipv6; booted with ipv6.disable=1?); enable IPv6 or list only IPv4 VIPs"],
                     id="kernel without IPv6"),
        # The preflight reads the ARP keys in the same `sysctl -e` call: on a kernel without IPv6 they are all it
        # prints (sysctl(8): -e ignores unknown keys), and they must not pass for the IPv6 switches.
        pytest.param("net.ipv4.conf.all.arp_ignore = 0\nnet.ipv4.conf.all.arp_announce = 0\n",
                     ["rs1: lvs_realserver_vips has fd00::100 (IPv6), but this host's kernel has no IPv6 (no "
                      "/proc/sys/net/ipv6; booted with ipv6.disable=1?); enable IPv6 or list only IPv4 VIPs"],
                     id="kernel without IPv6, ARP keys beside"),
        pytest.param(ALL_ON + "net.ipv4.conf.all.arp_ignore = 0\n", [], id="IPv6 on, ARP keys beside"),
        pytest.param(ALL_ON.replace("all.disable_ipv6 = 0", "all.disable_ipv6 = 1"),
                     ["rs1: lvs_realserver_vips has fd00::100 (IPv6), but net.ipv6.conf.all.disable_ipv6 is 1 here; "
                      "set it to 0 (sysctl -w net.ipv6.conf.all.disable_ipv6=0, and in /etc/sysctl.d) or list only "
                      "IPv4 VIPs"], id="IPv6 disabled on all"),
        pytest.param(ALL_ON.replace("lo.disable_ipv6 = 0", "lo.disable_ipv6 = 1"),
                     ["rs1: lvs_realserver_vips has fd00::100 (IPv6), but net.ipv6.conf.lo.disable_ipv6 is 1 here; "
                      "set it to 0 (sysctl -w net.ipv6.conf.lo.disable_ipv6=0, and in /etc/sysctl.d) or list only "
                      "IPv4 VIPs"], id="IPv6 disabled on lo"),
    ],
)
def test_an_ipv6_vip_on_a_host_without_ipv6_is_refused(ipv6_sysctls, expected):
    assert lvs_realserver_problems(settings6(ipv6_sysctls=ipv6_sysctls)) == expected


def test_a_host_without_ipv6_is_fine_when_every_vip_is_ipv4():
    found = settings([])
    found["ipv6_sysctls"] = ""
    assert lvs_realserver_problems(found) == []
