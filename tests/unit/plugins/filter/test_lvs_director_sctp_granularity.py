"""Issue 28 (#8, #13): checks on an SCTP service, and persistence_granularity as keepalived reads it.

Each mistake is made on the correct pair (lvs_director_pair.py) and must be the only finding. keepalived behaviour
each fixture follows, from keepalived 2.2.7 (acassen/keepalived) and keepalived.conf(5):
- TCP_CHECK, HTTP_GET and SSL_GET open a TCP connection (lib/layer4.c, tcp_connect: SOCK_STREAM, IPPROTO_TCP);
  UDP_CHECK (check_udp.c) and DNS_CHECK (check_dns.c) send UDP datagrams. keepalived has no SCTP check, so on an
  SCTP-only service every real server fails them; PING_CHECK (check_ping.c, ICMP echo), MISC_CHECK (a program) and no
  check work.
- check_parser.c, pgr_handler: an IPv6 service reads persistence_granularity with read_unsigned_strvec(1, 128); an
  IPv4 service with getaddrinfo(AI_NUMERICHOST, AF_INET), which takes "24" as the address 0.0.0.24 and passes
  `keepalived -t`, and does not require a contiguous netmask ("ipvsadm doesn't and the kernel doesn't require it").
- keepalived.conf(5): persistence_granularity narrows persistence_timeout; the role's template writes it only inside
  persistence_timeout (keepalived.conf.j2), so without persistence_timeout_s it is dropped without a word.
"""

from __future__ import annotations

import pytest
from lvs_director_pair import REAL_SERVERS, VIP, VIP6, pair_settings

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_problems, lvs_director_resolve

KEY = f"lvs_director_virtual_servers[{VIP}:80]"
KEY6 = f"lvs_director_virtual_servers[{VIP6}:80]"


def findings(**both):
    """Problems of the correct pair with ``both`` set on both directors: (errors, warnings) as messages."""
    found = lvs_director_problems([lvs_director_resolve(pair_settings(host, **both)) for host in ("dir1", "dir2")])
    return [entry["message"] for entry in found["errors"]], [entry["message"] for entry in found["warnings"]]


def service(**fields):
    """The pair's virtual server with one real server (one check, so one finding per director)."""
    return [{"address": VIP, "port": 80, "real_servers": [{"address": REAL_SERVERS[0]}], **fields}]


def service6(**fields):
    """An IPv6 service on an IPv6 VRRP instance of its own."""
    instances = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP]},
                 {"name": "VI_LVS6", "virtual_router_id": 51, "virtual_ipaddresses": [VIP6]}]
    groups = [{"name": "G_LVS", "instances": ["VI_LVS", "VI_LVS6"]}]
    return {"vrrp_instances": instances, "vrrp_sync_groups": groups,
            "virtual_servers": [{"address": VIP6, "port": 80, "real_servers": [{"address": "2001:db8::21"}],
                                 **fields}]}


def both_hosts(message):
    return [f"{host}: {message}" for host in ("dir1", "dir2")]


# ------------------------------------------------------------------------------------------------ SCTP (#8)


def test_an_sctp_service_without_a_check_gets_ping_check_and_passes():
    config = lvs_director_resolve(pair_settings("dir1", virtual_servers=service(protocol="SCTP")))
    assert config["virtual_servers"][0]["checks"][0]["type"] == "PING_CHECK"
    assert config["virtual_servers"][0]["real_servers"][0]["checks"][0]["type"] == "PING_CHECK"
    assert findings(virtual_servers=service(protocol="SCTP")) == ([], [])


@pytest.mark.parametrize(("check", "spoken"), [("TCP_CHECK", "TCP"), ("HTTP_GET", "TCP"), ("SSL_GET", "TCP"),
                                               ("UDP_CHECK", "UDP"), ("DNS_CHECK", "UDP")])
def test_a_check_that_speaks_tcp_or_udp_on_an_sctp_service_is_refused(check, spoken):
    errors, warnings = findings(virtual_servers=service(protocol="sctp", check={"type": check}))
    assert errors == both_hosts(
        f"{KEY}.real_servers[{REAL_SERVERS[0]}].check is {check} on an SCTP service, but {check} speaks {spoken}, "
        "which an SCTP-only service never answers, so every real server fails it and leaves the pool; use MISC_CHECK "
        "with a script that speaks SCTP, PING_CHECK (the real server answers ping) or none"
    )
    assert warnings == []


def test_a_real_servers_own_tcp_check_on_an_sctp_service_is_refused_for_that_real_server_only():
    reals = [{"address": REAL_SERVERS[0]}, {"address": REAL_SERVERS[1], "check": {"type": "TCP_CHECK"}}]
    errors, _warnings = findings(virtual_servers=service(protocol="SCTP", real_servers=reals))
    assert errors == both_hosts(
        f"{KEY}.real_servers[{REAL_SERVERS[1]}].check is TCP_CHECK on an SCTP service, but TCP_CHECK speaks TCP, "
        "which an SCTP-only service never answers, so every real server fails it and leaves the pool; use MISC_CHECK "
        "with a script that speaks SCTP, PING_CHECK (the real server answers ping) or none"
    )


@pytest.mark.parametrize("check", [{"type": "PING_CHECK"}, {"type": "none"},
                                   {"type": "MISC_CHECK", "misc_path": "/usr/local/sbin/sctp-probe"}])
def test_checks_that_work_on_an_sctp_service_are_accepted(check):
    assert findings(virtual_servers=service(protocol="SCTP", check=check)) == ([], [])


def test_a_tcp_service_keeps_tcp_check_by_default():
    config = lvs_director_resolve(pair_settings("dir1", virtual_servers=service()))
    assert config["virtual_servers"][0]["checks"][0]["type"] == "TCP_CHECK"


# ------------------------------------------------------------------------------------------------ granularity (#13)


@pytest.mark.parametrize("granularity", ["255.255.255.0", "255.255.0.0", "255.255.255.255", "0.0.0.0"])
def test_a_contiguous_dotted_netmask_with_persistence_is_accepted_on_ipv4(granularity):
    both = {"virtual_servers": service(persistence_timeout_s=300, persistence_granularity=granularity)}
    assert findings(**both) == ([], [])


@pytest.mark.parametrize(("granularity", "read", "fix"), [
    ("24", "0.0.0.24", "255.255.255.0 for a /24"),
    ("16", "0.0.0.16", "255.255.0.0 for a /16"),
    ("32", "0.0.0.32", "255.255.255.255 for a /32"),
    ("64", "0.0.0.64", "a dotted netmask such as 255.255.255.0"),
])
def test_a_prefix_length_on_an_ipv4_service_is_refused_with_the_dotted_netmask(granularity, read, fix):
    errors, _warnings = findings(virtual_servers=service(persistence_timeout_s=300,
                                                         persistence_granularity=granularity))
    assert errors == both_hosts(
        f"{KEY}.persistence_granularity is '{granularity}', which keepalived reads as the netmask {read} on an IPv4 "
        f"service (it takes a dotted netmask, not a prefix length); write {fix}"
    )


def test_a_whole_number_from_yaml_is_read_like_its_string():
    errors, _warnings = findings(virtual_servers=service(persistence_timeout_s=300, persistence_granularity=24))
    assert errors == both_hosts(
        f"{KEY}.persistence_granularity is '24', which keepalived reads as the netmask 0.0.0.24 on an IPv4 service "
        "(it takes a dotted netmask, not a prefix length); write 255.255.255.0 for a /24"
    )


@pytest.mark.parametrize("granularity", ["foo", "255.255.255", "/24", "255.255.255.0/24", "0xffffff00"])
def test_a_granularity_that_is_no_netmask_is_refused_on_ipv4(granularity):
    errors, _warnings = findings(virtual_servers=service(persistence_timeout_s=300,
                                                         persistence_granularity=granularity))
    assert errors == both_hosts(
        f"{KEY}.persistence_granularity is '{granularity}', which is not a netmask; an IPv4 service takes a dotted "
        "netmask, e.g. 255.255.255.0 for a /24"
    )


@pytest.mark.parametrize("granularity", ["255.0.255.0", "0.255.255.255", "255.255.255.1"])
def test_a_netmask_whose_ones_are_not_contiguous_is_refused(granularity):
    errors, _warnings = findings(virtual_servers=service(persistence_timeout_s=300,
                                                         persistence_granularity=granularity))
    assert errors == both_hosts(
        f"{KEY}.persistence_granularity is '{granularity}', which is not a contiguous netmask (its ones are not all "
        "on the left), so clients of unrelated subnets would share a real server; write a contiguous one, e.g. "
        "255.255.255.0 for a /24"
    )


@pytest.mark.parametrize("granularity", ["1", "64", "128"])
def test_a_prefix_length_from_1_to_128_is_accepted_on_ipv6(granularity):
    assert findings(**service6(persistence_timeout_s=300, persistence_granularity=granularity)) == ([], [])


@pytest.mark.parametrize("granularity", ["0", "129", "ffff:ffff::", "255.255.255.0", "foo", "/64"])
def test_anything_but_a_prefix_length_from_1_to_128_is_refused_on_ipv6(granularity):
    errors, _warnings = findings(**service6(persistence_timeout_s=300, persistence_granularity=granularity))
    assert errors == both_hosts(
        f"{KEY6}.persistence_granularity is '{granularity}', but an IPv6 service takes a prefix length from 1 to "
        "128; write e.g. 64"
    )


@pytest.mark.parametrize("timeout", [None, 0])
def test_a_granularity_without_persistence_timeout_is_refused(timeout):
    errors, _warnings = findings(virtual_servers=service(persistence_timeout_s=timeout,
                                                         persistence_granularity="255.255.255.0"))
    assert errors == both_hosts(
        f"{KEY}.persistence_granularity is '255.255.255.0' without persistence_timeout_s, so keepalived drops it "
        "without a word (it only narrows persistence); set persistence_timeout_s, or drop persistence_granularity"
    )


def test_a_granularity_without_persistence_and_in_the_wrong_form_gets_both_findings():
    errors, _warnings = findings(virtual_servers=service(persistence_granularity="24"))
    assert errors == [message for host in ("dir1", "dir2") for message in (
        f"{host}: {KEY}.persistence_granularity is '24' without persistence_timeout_s, so keepalived drops it without "
        "a word (it only narrows persistence); set persistence_timeout_s, or drop persistence_granularity",
        f"{host}: {KEY}.persistence_granularity is '24', which keepalived reads as the netmask 0.0.0.24 on an IPv4 "
        "service (it takes a dotted netmask, not a prefix length); write 255.255.255.0 for a /24",
    )]
