"""lvs_realserver_problems names each mistake with host, variable and fix; lvs_realserver_vip_plan touches only
the addresses the role owns on lo."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_realserver import (
    lvs_realserver_problems,
    lvs_realserver_vip_cidrs,
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


def test_an_ipv6_vip_with_or_without_its_full_prefix_has_no_problem():
    assert lvs_realserver_problems(settings(vips=["198.18.0.100", "fd00::100", "fd00::101/128"])) == []


@pytest.mark.parametrize("value", ["false", "no", "0", "off", "true", "yes", "1", False, None])
def test_booleans_given_as_text_by_extra_vars_or_ini_inventories_are_accepted(value):
    assert lvs_realserver_problems(settings(loose_rp_filter=value)) == []


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
        pytest.param({"vips": ["fd00::100/64"]}, "rs1: lvs_realserver_vips has fd00::100/64 with a /64 prefix; a VIP "
                     "on lo must be a single address (/128), or lo owns the whole subnet; write fd00::100",
                     id="IPv6 VIP with a subnet prefix"),
        pytest.param({"vips": ["fd00::100", "FD00:0::100"]},
                     "rs1: lvs_realserver_vips lists fd00::100 more than once; keep one entry",
                     id="the same IPv6 VIP in two spellings"),
        pytest.param({"vips": ["fd00:0:0::21"], "own_addresses": ["fd00::21"]}, "rs1: lvs_realserver_vips has "
                     "fd00::21, which is this host's own address; a VIP is the service address the directors hold, "
                     "not a real server's address", id="own IPv6 address in another spelling"),
        pytest.param({"loose_rp_filter": "flase"}, "rs1: lvs_realserver_loose_rp_filter is 'flase', which is not a "
                     "boolean: set it to true or false (yes/no, on/off, 1/0 read the same)",
                     id="loose_rp_filter that is no boolean"),
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


LO_V6_JSON = json.dumps([{
    "ifname": "lo",
    "addr_info": [
        {"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "label": "lo"},
        {"family": "inet6", "local": "fd00::100", "prefixlen": 128, "nodad": True},
        {"family": "inet6", "local": "fd00::101", "prefixlen": 128, "nodad": True},
        {"family": "inet6", "local": "::1", "prefixlen": 128},
    ],
}])  # ip -j addr show dev lo (iproute2 6.1) after `ip addr add fd00::100/128 dev lo nodad`: inet6 has no label


def test_vip_plan_finds_an_ipv6_vip_on_lo_whatever_its_spelling():
    assert lvs_realserver_vip_plan(LO_V6_JSON, ["FD00:0::100/128", "fd00::102/128"], "lo:lvs") == {
        "add": ["fd00::102/128"],
        "remove": [],
    }


def test_vip_plan_never_removes_an_ipv6_address_since_it_carries_no_label():
    assert lvs_realserver_vip_plan(LO_V6_JSON, [], "lo:lvs") == {"add": [], "remove": []}


def test_vip_plan_refuses_a_wanted_vip_that_is_no_address():
    with pytest.raises(AnsibleFilterError) as raised:
        lvs_realserver_vip_plan(LO_JSON, ["vip/32"], "lo:lvs")
    assert str(raised.value) == ("lvs_realserver_vip_plan: 'vip/32' does not appear to be an IPv4 or IPv6 interface; "
                                 "list the VIPs as 198.18.0.100/32")


def test_vip_cidrs_are_written_as_ip_prints_them_with_the_full_prefix():
    assert lvs_realserver_vip_cidrs(["198.18.0.100", "198.18.0.101/32", "FD00:0::100", "fd00::101/128"]) == [
        "198.18.0.100/32", "198.18.0.101/32", "fd00::100/128", "fd00::101/128"]


def test_vip_cidrs_refuse_a_vip_that_is_no_address():
    with pytest.raises(AnsibleFilterError) as raised:
        lvs_realserver_vip_cidrs(["vip"])
    assert str(raised.value) == ("lvs_realserver_vip_cidrs: 'vip' is not an IP address; write it as 198.18.0.100 or "
                                 "fd00::100")
