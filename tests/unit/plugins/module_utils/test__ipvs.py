"""IPVS parsers: captured-shape fixtures (empty, DR, IPv6, FWM, u64 counters), truncated and wrong input, merging,
pinning warnings, and the fast parsers against their regex references."""

from __future__ import annotations

from pathlib import Path

import ipvs_tables
import pytest
from ipvs_reference import reference_parse_ipvsadm, reference_parse_proc_ip_vs

from ansible_collections.hpc.balance.plugins.module_utils._ipvs import (
    IpvsParseError,
    live_connections,
    merge_ipvsadm,
    parse_ipvsadm,
    parse_proc_ip_vs,
    parse_proc_ip_vs_conn,
    parse_proc_ip_vs_stats,
    pinning_warning,
    proc_conn_address,
    service_key,
    totals,
)

FIXTURES = Path(__file__).parent / "fixtures"
U64_MAX = 2**64 - 1


def fixture(name):
    return (FIXTURES / name).read_text()


def server(address, port, forward, weight, active, inactive, counters=(None,) * 5, family="ipv4"):
    conns, in_packets, out_packets, in_bytes, out_bytes = counters
    return {"address": address, "port": port, "family": family, "forward": forward, "weight": weight,
            "active_conns": active, "inactive_conns": inactive, "conns": conns, "in_packets": in_packets,
            "out_packets": out_packets, "in_bytes": in_bytes, "out_bytes": out_bytes}


def service(protocol, address, port, scheduler, servers, fwmark=None, family="ipv4", flags=(), timeout_s=None,
            netmask=None, ops=False, counters=(None,) * 5):
    conns, in_packets, out_packets, in_bytes, out_bytes = counters
    return {"protocol": protocol, "address": address, "port": port, "fwmark": fwmark, "family": family,
            "scheduler": scheduler, "flags": list(flags), "persistent": timeout_s is not None,
            "persistence_timeout_s": timeout_s, "persistence_netmask": netmask, "one_packet_scheduling": ops,
            "persistence_engine": None, "conns": conns, "in_packets": in_packets, "out_packets": out_packets,
            "in_bytes": in_bytes, "out_bytes": out_bytes, "real_servers": servers}


PROC_CASES = [
    ("empty", []),
    ("dr", [
        service("TCP", "198.18.0.100", 80, "wlc", [
            server("198.18.0.11", 80, "Route", 1, 12, 40), server("198.18.0.12", 80, "Route", 1, 11, 38)]),
        service("UDP", "198.18.0.100", 53, "rr", [
            server("198.18.0.11", 53, "Masq", 2, 0, 3), server("198.18.0.12", 53, "Masq", 1, 0, 1),
            server("198.18.0.13", 53, "Masq", 0, 0, 0)], flags=["ops"], ops=True),
    ]),
    ("ipv6", [
        service("TCP", "2001:db8::100", 443, "sh", [
            server("2001:db8::11", 443, "Route", 1, 900, 10, family="ipv6"),
            server("2001:db8::12", 443, "Route", 1, 3, 0, family="ipv6")],
            family="ipv6", flags=["persistent"], timeout_s=300, netmask="64"),
    ]),
    ("fwm", [
        service("FWM", None, None, "wrr", [
            server("198.18.0.11", 0, "Route", 3, 30, 0), server("198.18.0.12", 0, "Route", 1, 10, 0)],
            fwmark=1, flags=["persistent"], timeout_s=1800, netmask="255.255.255.0"),
        service("FWM", None, None, "mh", [
            server("2001:db8::11", 0, "Tunnel", 1, 5, 1, family="ipv6"),
            server("2001:db8::12", 0, "Tunnel", 1, 5, 2, family="ipv6")], fwmark=2, family="ipv6"),
    ]),
]


@pytest.mark.parametrize(("name", "expected"), PROC_CASES, ids=[case[0] for case in PROC_CASES])
def test_proc_ip_vs_fixture(name, expected):
    table = parse_proc_ip_vs(fixture(f"proc_ip_vs_{name}.txt"))
    assert (table["version"], table["conn_table_size"]) == ("1.2.1", 4096)
    assert table["services"] == expected


MERGED_CASES = [
    ("empty", []),
    ("dr", [
        service("TCP", "198.18.0.100", 80, "wlc", [
            server("198.18.0.11", 80, "Route", 1, 12, 40, (5210, 31260, 0, 2084000, 0)),
            server("198.18.0.12", 80, "Route", 1, 11, 38, (4790, 28740, 0, 1916000, 0))],
            counters=(10000, 60000, 0, 4000000, 0)),
        service("UDP", "198.18.0.100", 53, "rr", [
            server("198.18.0.11", 53, "Masq", 2, 0, 3, (600, 600, 600, 43200, 81000)),
            server("198.18.0.12", 53, "Masq", 1, 0, 1, (300, 300, 300, 21600, 40500)),
            server("198.18.0.13", 53, "Masq", 0, 0, 0, (0, 0, 0, 0, 0))],
            flags=["ops"], ops=True, counters=(900, 900, 900, 64800, 121500)),
    ]),
    ("ipv6", [
        service("TCP", "2001:db8::100", 443, "sh", [
            server("2001:db8::11", 443, "Route", 1, 900, 10,
                   (U64_MAX - 615, 90000000000000, 0, 18000000000000000000, 0), family="ipv6"),
            server("2001:db8::12", 443, "Route", 1, 3, 0, (15, 900, 0, 120000, 0), family="ipv6")],
            family="ipv6", flags=["sh-fallback", "persistent"], timeout_s=300, netmask="64",
            counters=(U64_MAX - 600, 90000000000900, 0, 18000000000000120000, 0)),
    ]),
    ("fwm", [
        service("FWM", None, None, "wrr", [
            server("198.18.0.11", 0, "Route", 3, 30, 0, (3000, 1, 0, 1, 0)),
            server("198.18.0.12", 0, "Route", 1, 10, 0, (1000, 1, 0, 1, 0))],
            fwmark=1, flags=["persistent"], timeout_s=1800, netmask="255.255.255.0", counters=(4000, 2, 0, 2, 0)),
        service("FWM", None, None, "mh", [
            server("2001:db8::11", 0, "Tunnel", 1, 5, 1, (50, 500, 0, 50000, 0), family="ipv6"),
            server("2001:db8::12", 0, "Tunnel", 1, 5, 2, (50, 500, 0, 50000, 0), family="ipv6")],
            fwmark=2, family="ipv6", flags=["mh-port"], counters=(100, 1000, 0, 100000, 0)),
    ]),
]


@pytest.mark.parametrize(("name", "expected"), MERGED_CASES, ids=[case[0] for case in MERGED_CASES])
def test_ipvsadm_listing_and_stats_merge(name, expected):
    listing = parse_ipvsadm(fixture(f"ipvsadm_list_{name}.txt"))
    stats = parse_ipvsadm(fixture(f"ipvsadm_stats_{name}.txt"))
    assert (listing["kind"], stats["kind"]) == ("list", "stats")
    assert merge_ipvsadm(listing, stats)["services"] == expected


@pytest.mark.parametrize(("name", "expected"), [
    ("stats", {"conns": 0x1A2B3C4D5, "in_packets": 0xFFFFFFFFFF, "out_packets": 0, "in_bytes": U64_MAX,
               "out_bytes": 0, "conns_per_second": 16, "in_packets_per_second": 512, "out_packets_per_second": 0,
               "in_bytes_per_second": 256000, "out_bytes_per_second": 0}),
    ("stats_idle", dict.fromkeys(("conns", "in_packets", "out_packets", "in_bytes", "out_bytes", "conns_per_second",
                                  "in_packets_per_second", "out_packets_per_second", "in_bytes_per_second",
                                  "out_bytes_per_second"), 0)),
])
def test_proc_ip_vs_stats_fixture(name, expected):
    assert parse_proc_ip_vs_stats(fixture(f"proc_ip_vs_{name}.txt")) == expected


def _cut(name, marker, keep):
    """The fixture up to ``keep`` characters past the start of the line holding ``marker`` (a torn read)."""
    text = fixture(name)
    return text[:text.index(marker) + keep]


ERROR_CASES = [
    ("empty_proc", parse_proc_ip_vs, "",
     "empty /proc/net/ip_vs: expected the 'IP Virtual Server version' header; is the ip_vs kernel module loaded?"),
    ("not_ipvs", parse_proc_ip_vs, "Inter-|   Receive\n face |bytes\n",
     "line 1: expected the 'IP Virtual Server version' header of /proc/net/ip_vs, got 'Inter-|   Receive'"),
    ("torn_real_server_line", parse_proc_ip_vs, _cut("proc_ip_vs_dr.txt", "  -> C612000C:0050", 30),
     "line 6: expected '  -> ADDRESS:PORT Forward Weight ActiveConn InActConn', got '-> C612000C:0050      Route'; "
     "is the input complete and unmodified?"),
    ("torn_service_line", parse_proc_ip_vs, _cut("proc_ip_vs_dr.txt", "UDP  C6120064", 10),
     "line 7: expected 'Prot ADDRESS:PORT Scheduler [ops] [persistent TIMEOUT NETMASK]', got 'UDP  C6120'; "
     "is the input complete and unmodified?"),
    ("real_server_first", parse_proc_ip_vs,
     "".join(fixture("proc_ip_vs_dr.txt").splitlines(keepends=True)[:3]) + "  -> C612000B:0050      Route   1  0  0\n",
     "line 4: expected a virtual service line before the first real server, got '-> C612000B:0050      Route   1  "
     "0  0'; is the input complete and unmodified?"),
    ("stats_torn", parse_proc_ip_vs_stats, _cut("proc_ip_vs_stats.txt", " Conns/s", 0),
     "/proc/net/ip_vs_stats: expected 2 rows of hex counters (totals and rates), found 1; is the input complete?"),
    ("rounded_counters", parse_ipvsadm,
     fixture("ipvsadm_stats_dr.txt").replace("    10000    60000", "      10K      60K"),
     "line 4: counter '10K' is not an exact integer in 'TCP  198.18.0.100:80                   10K      60K        0"
     "  4000000        0'; run ipvsadm with --exact so counters are not rounded to K/M/G"),
    ("rate_listing", parse_ipvsadm,
     "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port                 CPS    InPPS   OutPPS"
     "    InBPS   OutBPS\n  -> RemoteAddress:Port\n",
     "line 2: this is the --rate listing; run ipvsadm -Ln --stats --exact instead"),
    ("torn_ipvsadm_server", parse_ipvsadm, _cut("ipvsadm_list_fwm.txt", "  -> [2001:db8::12]", 40),
     "line 9: expected '  -> ADDRESS:PORT Forward Weight ActiveConn InActConn', got '-> [2001:db8::12]:0             "
     "Tunnel'; is the input complete and unmodified?"),
    ("torn_ipvsadm_address", parse_ipvsadm, _cut("ipvsadm_stats_ipv6.txt", "TCP  [2001:db8::100]", 14),
     "line 4: expected 'Prot ADDRESS:PORT Conns InPkts OutPkts InBytes OutBytes', got 'TCP  [2001:db8'; "
     "is the input complete and unmodified?"),
]


@pytest.mark.parametrize(("parser", "text", "message"), [case[1:] for case in ERROR_CASES],
                         ids=[case[0] for case in ERROR_CASES])
def test_bad_input_names_the_line(parser, text, message):
    with pytest.raises(IpvsParseError) as error:
        parser(text)
    assert str(error.value) == message


def test_proc_timeout_uses_the_kernel_hz():
    text = fixture("proc_ip_vs_fwm.txt")
    assert parse_proc_ip_vs(text, kernel_hz=1000)["services"][0]["persistence_timeout_s"] == 450
    with pytest.raises(ValueError, match="kernel_hz is 0: give the kernel's CONFIG_HZ"):
        parse_proc_ip_vs(text, kernel_hz=0)


def test_merge_keeps_a_real_server_added_between_the_two_reads():
    listing = parse_ipvsadm(fixture("ipvsadm_list_dr.txt"))
    added_line = "  -> 198.18.0.14:80                     7        7        0      700        0\n"
    stats_text = fixture("ipvsadm_stats_dr.txt").replace("  -> 198.18.0.12:80 ", added_line + "  -> 198.18.0.12:80 ")
    merged = merge_ipvsadm(listing, parse_ipvsadm(stats_text))["services"][0]["real_servers"]
    assert [(s["address"], s["weight"], s["conns"]) for s in merged] == [
        ("198.18.0.11", 1, 5210), ("198.18.0.12", 1, 4790), ("198.18.0.14", None, 7)]


def test_merge_wants_the_listing_first():
    stats = parse_ipvsadm(fixture("ipvsadm_stats_dr.txt"))
    with pytest.raises(IpvsParseError, match="needs the plain listing first and the --stats listing second"):
        merge_ipvsadm(stats, stats)


@pytest.mark.parametrize(("name", "keys"), [
    ("dr", ["TCP 198.18.0.100:80", "UDP 198.18.0.100:53"]),
    ("ipv6", ["TCP [2001:db8::100]:443"]),
    ("fwm", ["FWM 1", "FWM 2 IPv6"]),
])
def test_service_keys(name, keys):
    assert [service_key(s) for s in parse_ipvsadm(fixture(f"ipvsadm_list_{name}.txt"))["services"]] == keys


def test_totals_sum_known_counters_and_stay_unknown_otherwise():
    merged = merge_ipvsadm(parse_ipvsadm(fixture("ipvsadm_list_dr.txt")),
                           parse_ipvsadm(fixture("ipvsadm_stats_dr.txt")))
    assert totals(merged["services"]) == {"conns": 10900, "in_packets": 60900, "out_packets": 900,
                                          "in_bytes": 4064800, "out_bytes": 121500}
    assert totals(parse_proc_ip_vs(fixture("proc_ip_vs_dr.txt"))["services"])["conns"] is None
    assert totals([]) == dict.fromkeys(("conns", "in_packets", "out_packets", "in_bytes", "out_bytes"), 0)


PINNING_CASES = [
    ("wlc", "ipvsadm_list_dr.txt", 0, None),
    ("sh_without_port_flag", "ipvsadm_list_ipv6.txt", 0,
     "TCP [2001:db8::100]:443 uses the 'sh' scheduler, which hashes the client's source address: all clients behind "
     "one NAT address land on the same real server. Use a connection scheduler (wlc, rr) or add the sh-port flag "
     "(hpc.balance.lvs_director: the virtual server's scheduler_flags)."),
    ("persistent", "ipvsadm_list_fwm.txt", 0,
     "FWM 1 is persistent (1800 s, netmask 255.255.255.0): every connection from one client address - and all "
     "clients behind one NAT address - stays on one real server for that time, so the spread follows the number of "
     "client addresses, not connections."),
    ("mh_with_port_flag", "ipvsadm_list_fwm.txt", 1, None),
]


@pytest.mark.parametrize(("name", "index", "expected"), [case[1:] for case in PINNING_CASES],
                         ids=[case[0] for case in PINNING_CASES])
def test_pinning_warning(name, index, expected):
    assert pinning_warning(parse_ipvsadm(fixture(name))["services"][index]) == expected


def test_sh_with_port_flag_does_not_pin():
    text = fixture("ipvsadm_list_ipv6.txt").replace("(sh-fallback) persistent 300 mask 64", "(sh-port)")
    assert pinning_warning(parse_ipvsadm(text)["services"][0]) is None


@pytest.mark.parametrize("name", sorted(ipvs_tables.FIXTURE_TABLES))
def test_fixtures_follow_the_kernel_and_ipvsadm_layouts(name):
    tables = ipvs_tables.FIXTURE_TABLES[name]
    assert fixture(f"proc_ip_vs_{name}.txt") == ipvs_tables.proc_ip_vs(tables)
    assert fixture(f"ipvsadm_list_{name}.txt") == ipvs_tables.ipvsadm_list(tables)
    assert fixture(f"ipvsadm_stats_{name}.txt") == ipvs_tables.ipvsadm_stats(tables)


@pytest.mark.parametrize("name", sorted(ipvs_tables.FIXTURE_TABLES) + ["big"])
def test_fast_parsers_match_the_regex_references(name):
    tables = [ipvs_tables.big_service(1500)] if name == "big" else ipvs_tables.FIXTURE_TABLES[name]
    for text in (ipvs_tables.proc_ip_vs(tables),):
        assert parse_proc_ip_vs(text) == reference_parse_proc_ip_vs(text)
    for text in (ipvs_tables.ipvsadm_list(tables), ipvs_tables.ipvsadm_stats(tables)):
        assert parse_ipvsadm(text) == reference_parse_ipvsadm(text)


# /proc/net/ip_vs_conn in the format of ip_vs_conn.c's ip_vs_conn_seq_show (Linux 6.1): the header line, then
# "%-3s %08X %04X %08X %04X %s %04X %-11s %7u%s" (protocol, client, virtual and destination address in hex - %pI6 for
# IPv6 - with hex ports, the state name, whole seconds until the entry expires, persistence-engine data). The DR
# fixture holds the entries behind proc_ip_vs_dr.txt's counters: per real server as many ESTABLISHED TCP entries as
# ActiveConn and as many others (FIN_WAIT, CLOSE; UDP) as InActConn.
CONN_HEADER = "Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n"


def test_conn_entries_match_the_active_and_inactive_counters_of_the_table():
    table = parse_proc_ip_vs(fixture("proc_ip_vs_dr.txt"))
    entries = parse_proc_ip_vs_conn(fixture("proc_ip_vs_conn_dr.txt"))
    for svc in table["services"]:
        for real in svc["real_servers"]:
            mine = [e for e in entries if (e["protocol"], e["virtual_port"], e["destination_address"],
                                           e["destination_port"]) == (svc["protocol"], svc["port"], real["address"],
                                                                      real["port"])]
            active = [e for e in mine if e["state"] == "ESTABLISHED"]
            assert (len(active), len(mine) - len(active)) == (real["active_conns"], real["inactive_conns"])


def test_live_connections_are_established_entries_and_handshakes_seen_within_3_s():
    # ip_vs_proto_tcp.c: a SYN_RECV entry expires 60 s after the client's last SYN; Linux resends an unanswered SYN
    # 1 s and 3 s after the first, so an entry refreshed less than 3 s ago may still become a connection.
    def entry(state, expires_s):
        return {"state": state, "expires_s": expires_s}

    assert live_connections([entry("ESTABLISHED", 3), entry("ESTABLISHED", 899)]) == 2
    assert live_connections([entry("SYN_RECV", 60), entry("SYN_RECV", 58)]) == 2
    assert live_connections([entry("SYN_RECV", 57), entry("SYN_RECV", 41), entry("FIN_WAIT", 119),
                             entry("CLOSE", 9), entry("UDP", 299)]) == 0


def test_the_kernel_counts_handshakes_a_reboot_left_as_active_and_live_connections_does_not():
    # Recorded on the lab's director (kernel 6.1.176) 20 s after its real server 198.18.0.153 rebooted under a client
    # connecting every 0.25 s: ActiveConn 18 is the 18 SYN_RECV entries of connections it never answered.
    table = parse_proc_ip_vs(fixture("proc_ip_vs_dr_after_reboot.txt"))
    rebooted = next(real for real in table["services"][0]["real_servers"] if real["address"] == "198.18.0.153")
    entries = parse_proc_ip_vs_conn(fixture("proc_ip_vs_conn_dr_after_reboot.txt"), destination="198.18.0.153")
    assert rebooted["active_conns"] == sum(1 for e in entries if e["state"] == "SYN_RECV") == 18
    assert live_connections(entries) == 0


def test_conn_entries_of_one_destination_are_read_in_full():
    entries = parse_proc_ip_vs_conn(fixture("proc_ip_vs_conn_dr.txt"), destination="198.18.0.11")
    assert len(entries) == 12 + 40 + 3
    assert {e["destination_address"] for e in entries} == {"198.18.0.11"}
    first = next(e for e in entries if e["state"] == "ESTABLISHED" and e["expires_s"] == 611)
    assert first == {"protocol": "TCP", "client_address": "198.18.0.10", "client_port": 40000,
                     "virtual_address": "198.18.0.100", "virtual_port": 80, "destination_address": "198.18.0.11",
                     "destination_port": 80, "state": "ESTABLISHED", "expires_s": 611}


def test_conn_entries_in_ipv6_and_with_persistence_engine_data():
    text = CONN_HEADER + (
        "TCP 2001:0db8:0000:0000:0000:0000:0000:00c1 D431 2001:0db8:0000:0000:0000:0000:0000:0100 01BB "
        "2001:0db8:0000:0000:0000:0000:0000:0011 01BB ESTABLISHED     899\n"
        "UDP C612000A 13C4 C6120064 13C4 C612000B 13C4 UDP             173 sip 3a4f-42\n")
    entries = parse_proc_ip_vs_conn(text)
    assert entries[0]["client_address"] == "2001:db8::c1" and entries[0]["destination_address"] == "2001:db8::11"
    assert (entries[0]["client_port"], entries[0]["virtual_port"], entries[0]["expires_s"]) == (54321, 443, 899)
    assert entries[1]["state"] == "UDP" and entries[1]["destination_port"] == 5060
    assert parse_proc_ip_vs_conn(text, destination="2001:db8::11") == entries[:1]


def test_conn_address_spelling_is_the_kernels():
    assert proc_conn_address("198.18.0.11") == "C612000B"
    assert proc_conn_address("2001:db8::11") == "2001:0db8:0000:0000:0000:0000:0000:0011"


@pytest.mark.parametrize("text, expected", [
    ("TCP C612000A 9C40 C6120064 0050 C612000B 0050 ESTABLISHED 611\n", "column header"),
    (CONN_HEADER + "TCP C612000A 9C40 C6120064 0050 C612000B 0050 ESTABLISHED\n", "line 2: expected"),
    (CONN_HEADER + "TCP 198.18.0.10 9C40 C6120064 0050 C612000B 0050 ESTABLISHED 611\n", "line 2: expected"),
])
def test_conn_entries_refuse_what_the_kernel_does_not_print(text, expected):
    with pytest.raises(IpvsParseError, match=expected):
        parse_proc_ip_vs_conn(text)
