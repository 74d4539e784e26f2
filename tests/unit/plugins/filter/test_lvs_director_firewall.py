"""What lvs_director_firewall decides: the role's accept rules, the errors and warnings read from real `nft -j list
ruleset` captures (tests/unit/fixtures/nftables, nftables 1.0.6), and the checks of lvs_director_sync_daemon."""

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
VRRP = "VRRP (IP protocol 112) of instance VI_LVS"
HTTP = "tcp port 80 of virtual server 198.18.0.100:80"
SYNC = "udp port 8848 of the IPVS sync daemon (group 224.0.0.81)"


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


def with_peers(*peers, vip="198.18.0.100/32"):
    """director() whose instance sends its adverts to unicast peers instead of the VRRP group."""
    return director(vrrp_instances=[{"name": "VI_LVS", "interface": "eth0", "virtual_ipaddresses": [vip],
                                     "unicast_peers": list(peers)}])


def capture(name):
    return (FIXTURES / f"{name}.json").read_text()


def flows(findings):
    """(severity, chain, what) of each finding."""
    return [(f["severity"], f["chain"], f["flow"]) for f in findings]


def errors(findings):
    return [(chain, what) for severity, chain, what in flows(findings) if severity == "error"]


def ruleset(*rules, policy="accept", family="inet"):
    """`nft -j list ruleset` of one input base chain, written by hand in the shape of libnftables-json(5): a CHAIN
    object (family, table, name, type, hook, prio, policy) and one RULE object (family, table, chain, handle, expr)
    per rule, each expr a list of statements such as {"match": {"op", "left", "right"}} and a verdict
    ({"drop": null})."""
    chain = {"family": family, "table": "filter", "name": "input", "handle": 1, "type": "filter", "hook": "input",
             "prio": 0, "policy": policy}
    return {"nftables": [{"table": {"family": family, "name": "filter", "handle": 1}}, {"chain": chain}] + [
        {"rule": {"family": family, "table": "filter", "chain": "input", "handle": handle, "expr": expr}}
        for handle, expr in enumerate(rules, start=2)]}


def match(left, right, op="=="):
    return {"match": {"op": op, "left": left, "right": right}}


L4PROTO = {"meta": {"key": "l4proto"}}
SADDR = {"payload": {"protocol": "ip", "field": "saddr"}}


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
    ("drop-with-jump", [("warning", "inet filter input", HTTP)]),
    ("drop-ssh-only", [("error", "inet filter input", VRRP), ("error", "inet filter input", HTTP)]),
    ("drop-vrrp-port-range", []),
    ("accept-then-reject", [("error", "inet filter input", VRRP), ("error", "inet filter input", HTTP)]),
    ("role-table-beside-drop", [("error", "inet filter input", VRRP), ("error", "inet filter input", HTTP)]),
    ("drop-vrrp-rule", [("error", "inet filter input", VRRP)]),
    ("drop-multicast", [("error", "ip mcast input", VRRP)]),
    ("drop-in-jumped-chain", [("error", "ip filter input", VRRP)]),
    ("vmap-and-goto", []),
    ("accept-from-admin-net", [("warning", "inet filter input", VRRP), ("warning", "inet filter input", HTTP)]),
])
def test_findings_name_each_input_chain_that_drops_or_may_drop_a_flow(fixture, expected):
    assert flows(lvs_director_firewall_findings(capture(fixture), director())) == expected


def test_a_port_range_lets_in_ports_inside_it_only():
    servers = [{"address": "198.18.0.100", "port": 8080, "protocol": "TCP"}]
    assert errors(lvs_director_firewall_findings(capture("drop-vrrp-port-range"), director(virtual_servers=servers))) \
        == [("ip filter input", "tcp port 8080 of virtual server 198.18.0.100:8080")]


def test_an_ip6_chain_does_not_concern_an_ipv4_director():
    assert lvs_director_firewall_findings(capture("drop-vrrp-port-range"), director()) == []


def test_the_sync_port_is_looked_for_too():
    sync = {"interface": "eth0", "instance": "VI_LVS"}
    assert errors(lvs_director_firewall_findings(capture("drop-vrrp-and-service"), director(), sync)) == [
        ("inet filter input", SYNC)]
    assert errors(lvs_director_firewall_findings(capture("drop-with-jump"), director(), sync)) == []
    assert errors(lvs_director_firewall_findings(capture("vmap-and-goto"), director(), sync)) == [
        ("inet filter input", SYNC)]


def test_a_chain_that_drops_vrrp_is_an_error_naming_host_chain_rule_and_fix():
    finding = lvs_director_firewall_findings(capture("drop-vrrp-rule"), director())[0]
    assert finding == {"hosts": ["dir1"], "severity": "error", "chain": "inet filter input", "flow": VRRP, "message": (
        "dir1: nftables chain inet filter input (hook input, priority 0) drops VRRP (IP protocol 112) of instance "
        "VI_LVS at its rule handle 6 (drop), and no rule before that accepts it, so this director does not hear its "
        "peers' adverts and becomes MASTER beside them. Fix: add `iifname \"eth0\" meta nfproto ipv4 meta l4proto 112 "
        "accept` to chain inet filter input before that point (`nft -a list chain inet filter input` shows the "
        "handles), or remove the drop; an accept ends only its own base chain and every input base chain judges the "
        "packet on its own (nft(8)), so the role's own table inet hpc_balance_lvs (lvs_director_firewall: nftables) "
        "cannot override this chain's drop")}


def test_a_policy_drop_is_named_as_such():
    finding = lvs_director_firewall_findings(capture("drop-ssh-only"), director())[0]
    assert "drops VRRP (IP protocol 112) of instance VI_LVS by its policy drop, and no rule" in finding["message"]


def test_a_final_reject_rule_is_named_with_its_handle():
    finding = lvs_director_firewall_findings(capture("accept-then-reject"), director())[0]
    assert "at its rule handle 4 (reject)" in finding["message"]


def test_a_drop_in_a_chain_jumped_to_names_that_chain():
    finding = lvs_director_firewall_findings(capture("drop-in-jumped-chain"), director())[0]
    assert "at rule handle 3 (reject) of chain ip filter blocked, which it jumps to" in finding["message"]


def test_the_roles_own_table_does_not_make_another_tables_drop_harmless():
    # role-table-beside-drop: inet hpc_balance_lvs accepts VRRP and the service at priority filter - 10, inet filter
    # drops them at priority filter. Each base chain judges the packet on its own, so the drop still wins.
    findings = lvs_director_firewall_findings(capture("role-table-beside-drop"), director())
    assert {f["chain"] for f in findings} == {"inet filter input"}
    assert all(f["severity"] == "error" for f in findings)
    assert "the role's own table inet hpc_balance_lvs (lvs_director_firewall: nftables) cannot override" in \
        findings[0]["message"]


def test_an_ipv6_director_is_judged_by_the_ip6_and_inet_chains():
    instance = {"name": "VI_V6", "interface": "eth0", "virtual_ipaddresses": ["2001:db8::100/128"],
                "unicast_peers": None}
    config = director(vrrp_instances=[instance], virtual_servers=[])
    assert errors(lvs_director_firewall_findings(capture("drop-multicast"), config)) == [
        ("ip6 mcast6 input", "VRRP (IP protocol 112) of instance VI_V6")]
    assert errors(lvs_director_firewall_findings(capture("role-table-beside-drop"), config)) == [
        ("inet filter input", "VRRP (IP protocol 112) of instance VI_V6")]


def test_a_drop_of_the_vrrp_group_does_not_concern_unicast_peers():
    sync = {"interface": "eth0", "instance": "VI_LVS"}
    assert errors(lvs_director_firewall_findings(capture("drop-multicast"), director(), sync)) == [
        ("ip mcast input", VRRP), ("ip mcast input", SYNC)]
    assert lvs_director_firewall_findings(capture("drop-multicast"), with_peers("198.18.0.12")) == []


def test_an_accept_from_the_peers_own_network_lets_their_vrrp_in():
    # accept-from-admin-net: ip saddr 10.0.0.0/8 accept, then policy drop.
    findings = lvs_director_firewall_findings(capture("accept-from-admin-net"), with_peers("10.0.0.12", "10.0.0.13"))
    assert [f["flow"] for f in findings] == [HTTP]
    assert errors(lvs_director_firewall_findings(capture("accept-from-admin-net"), with_peers("192.0.2.12"))) == [
        ("inet filter input", VRRP)]


def test_a_drop_after_an_accept_this_check_cannot_weigh_is_a_warning():
    finding = lvs_director_firewall_findings(capture("accept-from-admin-net"), director())[0]
    assert finding["severity"] == "warning"
    assert finding["message"].startswith(
        "dir1: nftables chain inet filter input (hook input, priority 0) may drop VRRP (IP protocol 112) of instance "
        "VI_LVS by its policy drop: the rules before it that could accept that flow also match on something this "
        "check cannot weigh")


PEERS = with_peers("198.18.0.12", "198.18.0.13")


@pytest.mark.parametrize(("rules", "config", "expected"), [
    # A drop that cannot hit the flows: ip saddr of a named set, ct state invalid (a first packet is new).
    ([[match(SADDR, "@blocklist"), {"drop": None}],
      [match({"ct": {"key": "state"}}, "invalid", op="in"), {"drop": None}]], director(), []),
    # Protocol 112 dropped except from the peers.
    ([[match(SADDR, {"set": ["198.18.0.12", "198.18.0.13"]}, op="!="), match(L4PROTO, 112), {"drop": None}]],
     PEERS, []),
    # Protocol 112 dropped from one of the peers.
    ([[match(SADDR, "198.18.0.13"), match(L4PROTO, "vrrp"), {"drop": None}]], PEERS, [VRRP]),
    # Over a rate only: not every advert.
    ([[match(L4PROTO, "vrrp"), {"limit": {"rate": 10, "per": "second", "inv": True}}, {"drop": None}]],
     director(), []),
    # Dropped on another interface only.
    ([[match({"meta": {"key": "iifname"}}, "eth1"), {"drop": None}]], director(), []),
    # Dropped on eth* (a wildcard), which eth0 is; the service's interface is not known.
    ([[match({"meta": {"key": "iifname"}}, "eth*"), {"drop": None}]], director(), [VRRP]),
    # Multicast dropped by address type: the VRRP group, not adverts sent to the peers.
    ([[match({"fib": {"result": "type", "flags": ["daddr"]}}, "multicast"), {"drop": None}]], director(), [VRRP]),
    ([[match({"fib": {"result": "type", "flags": ["daddr"]}}, "multicast"), {"drop": None}]], PEERS, []),
    # A TCP port or an ICMP type never matches VRRP.
    ([[match({"payload": {"protocol": "tcp", "field": "dport"}}, 22), {"drop": None}],
      [match({"payload": {"protocol": "icmp", "field": "type"}}, "echo-request"), {"drop": None}]], director(), []),
    # The service dropped by its port within a set.
    ([[match({"payload": {"protocol": "th", "field": "dport"}}, {"set": [{"range": [1, 1023]}]}), {"drop": None}]],
     director(), [HTTP]),
])
def test_a_rule_drops_a_flow_only_when_each_of_its_matches_holds(rules, config, expected):
    assert [what for _chain, what in errors(lvs_director_firewall_findings(ruleset(*rules), config))] == expected


def test_an_accept_ends_only_its_own_chain_so_a_later_base_chain_still_drops():
    accepts = ruleset([match(L4PROTO, 112), {"accept": None}])
    drops = ruleset(policy="drop", family="ip")
    combined = {"nftables": accepts["nftables"] + [
        {"table": {"family": "ip", "name": "filter", "handle": 2}},
        *[item for item in drops["nftables"] if "chain" in item]]}
    assert errors(lvs_director_firewall_findings(combined, director())) == [
        ("ip filter input", VRRP), ("ip filter input", HTTP)]


def test_no_output_from_nft_means_nothing_to_report():
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
