"""What lvs_director_firewall decides: the role's accept rules, the warnings read from real `nft -j list ruleset`
captures (tests/unit/fixtures/nftables, nftables 1.0.6), and the checks of lvs_director_sync_daemon."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_director_firewall import (
    lvs_director_firewall_findings,
    lvs_director_firewall_rules,
    lvs_director_sync_daemon_problems,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nftables"


def director(**changes):
    """The keys of a resolved config (lvs_director_resolve) these filters read: the lab's one service."""
    config = {
        "host": "dir1",
        "vrrp_only": False,
        "known_interfaces": ["lo", "eth0"],
        "vrrp_instances": [{"name": "VI_LVS", "interface": "eth0", "virtual_ipaddresses": ["198.18.0.100/32"],
                            "unicast_peers": None}],
        "virtual_servers": [{"address": "198.18.0.100", "port": 80, "protocol": "TCP"}],
    }
    config.update(changes)
    return config


def capture(name):
    return (FIXTURES / f"{name}.json").read_text()


def flows(findings):
    """(chain, what) of each finding, read from its message."""
    return [(f["message"].split("nftables chain ")[1].split(" (")[0],
             f["message"].split("accepts ")[1].split(", so")[0]) for f in findings]


# ---------------------------------------------------------------- the role's rules
def test_rules_accept_vrrp_on_the_instance_interface_and_the_service_to_its_vip():
    assert lvs_director_firewall_rules(director()) == [
        {"rule": 'iifname "eth0" meta nfproto ipv4 meta l4proto 112',
         "comment": "VRRP (IP protocol 112) of instance VI_LVS"},
        {"rule": "ip daddr 198.18.0.100 tcp dport 80", "comment": "tcp port 80 of virtual server 198.18.0.100:80"},
    ]


def test_rules_accept_vrrp_only_from_the_unicast_peers_when_the_instance_has_them():
    instance = {"name": "VI_LVS", "interface": "eth0", "virtual_ipaddresses": ["198.18.0.100/32"],
                "unicast_peers": ["198.18.0.12", "198.18.0.13"]}
    vrrp = lvs_director_firewall_rules(director(vrrp_instances=[instance]))[0]
    assert vrrp["rule"] == "ip saddr { 198.18.0.12, 198.18.0.13 } meta nfproto ipv4 meta l4proto 112"


def test_rules_accept_vrrp_over_ipv6_and_the_service_with_ip6_daddr_for_an_ipv6_vip():
    instance = {"name": "VI_V6", "interface": "eth0", "virtual_ipaddresses": ["2001:db8::100/128"],
                "unicast_peers": None}
    server = {"address": "2001:db8::100", "port": 53, "protocol": "UDP"}
    rules = lvs_director_firewall_rules(director(vrrp_instances=[instance], virtual_servers=[server]))
    assert [r["rule"] for r in rules] == [
        'iifname "eth0" meta nfproto ipv6 meta l4proto 112', "ip6 daddr 2001:db8::100 udp dport 53"]


def test_rules_name_one_service_port_once_however_many_entries_share_it():
    servers = [{"address": "198.18.0.100", "port": 80, "protocol": "TCP"}] * 2
    assert len(lvs_director_firewall_rules(director(virtual_servers=servers))) == 2


def test_rules_accept_the_sync_daemon_with_keepalived_default_group_and_port():
    rules = lvs_director_firewall_rules(director(), {"interface": "eth0", "instance": "VI_LVS"})
    assert rules[-1] == {"rule": 'iifname "eth0" ip daddr 224.0.0.81 udp dport 8848',
                         "comment": "udp port 8848 of the IPVS sync daemon (group 224.0.0.81)"}


# ---------------------------------------------------------------- findings from real captures
@pytest.mark.parametrize(("fixture", "expected"), [
    ("debian-default", []),
    ("drop-vrrp-and-service", []),
    ("drop-with-jump", []),
    ("drop-ssh-only", [("inet filter input", "VRRP (IP protocol 112) of instance VI_LVS"),
                       ("inet filter input", "tcp port 80 of virtual server 198.18.0.100:80")]),
    ("drop-vrrp-port-range", []),
    ("accept-then-reject", [("inet filter input", "VRRP (IP protocol 112) of instance VI_LVS"),
                            ("inet filter input", "tcp port 80 of virtual server 198.18.0.100:80")]),
    ("role-table-beside-drop", [("inet filter input", "VRRP (IP protocol 112) of instance VI_LVS"),
                                ("inet filter input", "tcp port 80 of virtual server 198.18.0.100:80")]),
])
def test_findings_name_each_input_chain_that_would_drop_a_flow(fixture, expected):
    assert flows(lvs_director_firewall_findings(capture(fixture), director())) == expected


def test_a_port_range_lets_in_ports_inside_it_only():
    servers = [{"address": "198.18.0.100", "port": 8080, "protocol": "TCP"}]
    assert flows(lvs_director_firewall_findings(capture("drop-vrrp-port-range"), director(virtual_servers=servers))) \
        == [("ip filter input", "tcp port 8080 of virtual server 198.18.0.100:8080")]


def test_an_ip6_chain_does_not_concern_an_ipv4_director():
    assert lvs_director_firewall_findings(capture("drop-vrrp-port-range"), director()) == []


def test_the_sync_port_is_looked_for_too():
    sync = {"interface": "eth0", "instance": "VI_LVS"}
    assert flows(lvs_director_firewall_findings(capture("drop-vrrp-and-service"), director(), sync)) == [
        ("inet filter input", "udp port 8848 of the IPVS sync daemon (group 224.0.0.81)")]
    assert lvs_director_firewall_findings(capture("drop-with-jump"), director(), sync) == []


def test_the_warning_names_host_chain_consequence_and_the_rule_to_add():
    finding = lvs_director_firewall_findings(capture("drop-ssh-only"), director())[0]
    assert finding == {"hosts": ["dir1"], "message": (
        "dir1: nftables chain inet filter input (hook input, policy drop) has no rule that accepts VRRP (IP protocol "
        "112) of instance VI_LVS, so this director does not hear its peers' adverts and becomes MASTER beside them. "
        'Add `iifname "eth0" meta nfproto ipv4 meta l4proto 112 accept` to that chain; an accept in another table '
        "(lvs_director_firewall: nftables included) does not stop this chain's drop")}


def test_a_final_reject_rule_is_named_as_such():
    finding = lvs_director_firewall_findings(capture("accept-then-reject"), director())[0]
    assert "(hook input, ends in a drop or reject)" in finding["message"]


def test_no_output_from_nft_means_nothing_to_warn_about():
    assert lvs_director_firewall_findings("", director()) == []


def test_a_parsed_ruleset_reads_like_its_text():
    assert lvs_director_firewall_findings(json.loads(capture("drop-ssh-only")), director()) == \
        lvs_director_firewall_findings(capture("drop-ssh-only"), director())


def test_protocol_112_written_as_a_number_counts_like_vrrp():
    text = capture("drop-vrrp-port-range").replace('"right": "vrrp"', '"right": 112')
    assert '"right": 112' in text
    assert lvs_director_firewall_findings(text, director()) == []


# ---------------------------------------------------------------- lvs_director_sync_daemon
def test_sync_daemon_off_has_no_problems():
    assert lvs_director_sync_daemon_problems(director(), None) == []


def test_sync_daemon_with_a_known_instance_and_interface_has_no_problems():
    sync = {"interface": "eth0", "instance": "VI_LVS", "sync_id": 51, "maxlen_bytes": 1472, "port": 8848, "ttl": 1,
            "group": "224.0.0.81"}
    assert lvs_director_sync_daemon_problems(director(), sync) == []


def test_sync_daemon_instance_that_does_not_exist_is_an_error():
    assert lvs_director_sync_daemon_problems(director(), {"interface": "eth0", "instance": "VI_WEB"}) == [
        "dir1: lvs_director_sync_daemon.instance is 'VI_WEB', but this director has no VRRP instance of that name "
        "(VI_LVS); keepalived would run without the sync daemon. Name one of lvs_director_vrrp_instances"]


@pytest.mark.parametrize(("change", "message"), [
    ({"interface": "eth9"}, "dir1: lvs_director_sync_daemon.interface 'eth9' is not an interface of this host "
                            "(eth0, lo)"),
    ({"sync_id": 256}, "dir1: lvs_director_sync_daemon.sync_id is 256; use a whole number 0-255"),
    ({"port": 0}, "dir1: lvs_director_sync_daemon.port is 0; use a whole number 1-65535"),
    ({"group": "198.18.0.1"}, "dir1: lvs_director_sync_daemon.group '198.18.0.1' is not a multicast address; use one "
                              "such as 224.0.0.81 (the default)"),
    ({"syncid": 5}, "dir1: lvs_director_sync_daemon.syncid is 5; it is not an option (use interface, instance, "
                    "sync_id, maxlen_bytes, port, ttl, group)"),
])
def test_sync_daemon_values_keepalived_would_ignore_are_errors(change, message):
    assert lvs_director_sync_daemon_problems(director(), {"interface": "eth0", "instance": "VI_LVS", **change}) == [
        message]


def test_sync_daemon_without_ipvs_is_an_error():
    assert lvs_director_sync_daemon_problems(director(vrrp_only=True), {"interface": "eth0", "instance": "VI_LVS"}) \
        == ["dir1: lvs_director_sync_daemon needs IPVS, but lvs_director_vrrp_only is true; set "
            "lvs_director_sync_daemon: null"]
