"""lvs_realserver_problems names each mistake with host, variable and fix; lvs_realserver_vip_plan touches only
the addresses the role owns on lo."""

from __future__ import annotations

import json

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_realserver import (
    lvs_realserver_problems,
    lvs_realserver_vip_plan,
)


def settings(**overrides):
    base = {
        "host": "rs1",
        "vips": ["198.18.0.100"],
        "interface": "eth0",
        "known_interfaces": ["eth0", "lo"],
        "own_addresses": ["198.18.0.21"],
        "arp_ignore": 1,
        "arp_announce": 2,
        "check_ports": [80],
    }
    base.update(overrides)
    return base


def test_correct_settings_have_no_problem():
    assert lvs_realserver_problems(settings()) == []


def test_numbers_given_as_text_count_as_numbers():
    assert lvs_realserver_problems(settings(arp_ignore="1", arp_announce="2", check_ports=["80"])) == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({"vips": []}, "rs1: lvs_realserver_vips is empty; list the VIPs the directors send to this host",
                     id="no VIP"),
        pytest.param({"vips": ["vip"]}, "rs1: lvs_realserver_vips has 'vip', which is not an IP address; write it as "
                     "198.18.0.100", id="not an address"),
        pytest.param({"vips": ["198.18.0.100/24"]}, "rs1: lvs_realserver_vips has 198.18.0.100/24 with a /24 prefix; "
                     "a VIP on lo must be a single address (/32), or lo owns the whole subnet; write 198.18.0.100",
                     id="VIP with a subnet prefix"),
        pytest.param({"vips": ["198.18.0.100", "198.18.0.100"]},
                     "rs1: lvs_realserver_vips lists 198.18.0.100 more than once; keep one entry", id="duplicate VIP"),
        pytest.param({"vips": ["198.18.0.21"]}, "rs1: lvs_realserver_vips has 198.18.0.21, which is this host's own "
                     "address; a VIP is the service address the directors hold, not a real server's address",
                     id="own address as VIP"),
        pytest.param({"interface": ""}, "rs1: lvs_realserver_interface is empty (no default IPv4 route in the facts); "
                     "set it to the NIC that faces the directors and clients", id="no interface"),
        pytest.param({"interface": "vec0"}, "rs1: lvs_realserver_interface is vec0, which this host does not have "
                     "(eth0, lo); set it to the NIC that faces the directors and clients", id="interface missing"),
        pytest.param({"arp_ignore": 0}, "rs1: lvs_realserver_arp_ignore is 0, which lets this host answer or announce "
                     "ARP for the VIPs on lo and steal their traffic; use 1 or 2", id="arp_ignore 0"),
        pytest.param({"arp_announce": 1}, "rs1: lvs_realserver_arp_announce is 1, which lets this host answer or "
                     "announce ARP for the VIPs on lo and steal their traffic; use 2", id="arp_announce 1"),
        pytest.param({"check_ports": [0]}, "rs1: lvs_realserver_check_ports has 0; use TCP port numbers from 1 to "
                     "65535", id="port 0"),
    ],
)
def test_each_mistake_is_named_with_host_key_and_fix(overrides, expected):
    assert lvs_realserver_problems(settings(**overrides)) == [expected]


LO_JSON = json.dumps([{
    "ifname": "lo",
    "addr_info": [
        {"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "label": "lo"},
        {"family": "inet", "local": "198.18.0.100", "prefixlen": 32, "label": "lo:lvs"},
        {"family": "inet", "local": "198.18.0.101", "prefixlen": 32, "label": "lo:lvs"},
        {"family": "inet", "local": "10.9.9.9", "prefixlen": 32, "label": "lo"},
        {"family": "inet6", "local": "::1", "prefixlen": 128},
    ],
}])


def test_vip_plan_adds_what_is_missing_and_removes_only_its_own_unlisted_addresses():
    plan = lvs_realserver_vip_plan(LO_JSON, ["198.18.0.100/32", "198.18.0.102/32", "10.9.9.9/32"], "lo:lvs")
    assert plan == {"add": ["198.18.0.102/32"], "remove": ["198.18.0.101/32"]}


def test_vip_plan_leaves_addresses_without_the_label_alone():
    plan = lvs_realserver_vip_plan(LO_JSON, [], "lo:lvs")
    assert plan == {"add": [], "remove": ["198.18.0.100/32", "198.18.0.101/32"]}


def test_vip_plan_is_empty_when_lo_is_as_wanted():
    assert lvs_realserver_vip_plan(json.loads(LO_JSON), ["198.18.0.100/32", "198.18.0.101/32"], "lo:lvs") == {
        "add": [],
        "remove": [],
    }
