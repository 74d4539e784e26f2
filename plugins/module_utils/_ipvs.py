# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for the IPVS tables: /proc/net/ip_vs, /proc/net/ip_vs_stats, /proc/net/ip_vs_conn (the connection entries)
and ``ipvsadm -Ln [--stats] --exact``.

Why two sources: /proc/net/ip_vs (hex addresses, ports and persistence timeout in jiffies) gives weights and
active/inactive connections but no per-server counters; ``ipvsadm -Ln --stats --exact`` gives the per-server
conns/packets/bytes but no weights, so the ipvsadm source reads ``-Ln --exact`` and ``-Ln --stats --exact`` and merges
them. ``--exact`` matters: without it ipvsadm rounds large counters to K/M/G, which these parsers refuse.

Every parser returns plain dicts (JSON-friendly) and raises ValueError with the line number and text of the first line
it cannot read. ``parse_proc_ip_vs`` and ``parse_ipvsadm`` are the fast paths (str.split, one pass); their slow,
obvious regex twins live with the tests that use them as oracles (tests/unit/plugins/module_utils/ipvs_reference.py).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any, NoReturn

HEADER_PREFIX = "IP Virtual Server version "
COUNTER_KEYS = ("conns", "in_packets", "out_packets", "in_bytes", "out_bytes")
FORWARD_METHODS = ("Masq", "Local", "Tunnel", "Route", "Bypass")
# Schedulers that hash the client's source address: every client behind one NAT address lands on one real server.
SOURCE_HASH_SCHEDULERS = {"sh": "sh-port", "mh": "mh-port"}


class IpvsParseError(ValueError):
    """Input that is not (complete) IPVS output; the message names the line."""


def _fail(line_number: int, line: str, expected: str) -> NoReturn:
    raise IpvsParseError(
        f"line {line_number}: expected {expected}, got {line.strip()!r}; is the input complete and unmodified?"
    )


def _header(lines: list[str], source: str) -> tuple[str, int | None]:
    if not lines or not lines[0].strip():
        raise IpvsParseError(
            f"empty {source}: expected the 'IP Virtual Server version' header; is the ip_vs kernel module loaded?")
    first = lines[0]
    if not first.startswith(HEADER_PREFIX):
        raise IpvsParseError(
            f"line 1: expected the 'IP Virtual Server version' header of {source}, got {first.strip()!r}"
        )
    version, dummy, size = first[len(HEADER_PREFIX):].partition(" ")
    table_size = None
    if size.startswith("(size=") and size.rstrip().endswith(")"):
        try:
            table_size = int(size.rstrip()[len("(size="):-1])
        except ValueError:
            table_size = None
    return version, table_size


def _new_service(protocol: str, address: str | None, port: int | None, fwmark: int | None, family: str | None,
                 scheduler: str | None) -> dict[str, Any]:
    return {
        "protocol": protocol,
        "address": address,
        "port": port,
        "fwmark": fwmark,
        "family": family,
        "scheduler": scheduler,
        "flags": [],
        "persistent": False,
        "persistence_timeout_s": None,
        "persistence_netmask": None,
        "one_packet_scheduling": False,
        "persistence_engine": None,
        "conns": None,
        "in_packets": None,
        "out_packets": None,
        "in_bytes": None,
        "out_bytes": None,
        "real_servers": [],
    }


def _read_listing_columns(server: dict[str, Any], tokens: list[str]) -> None:
    """Forward, Weight, ActiveConn, InActConn: the same four columns after the address in /proc/net/ip_vs and in
    `ipvsadm -Ln` (tokens: the split real-server line, starting with '->')."""
    server["forward"] = tokens[2]
    server["weight"] = int(tokens[3])
    server["active_conns"] = int(tokens[4])
    server["inactive_conns"] = int(tokens[5])


def _attach_real_server(service: dict[str, Any], server: dict[str, Any]) -> None:
    """Add a real server to its service; a firewall-mark service takes its family from its first real server."""
    service["real_servers"].append(server)
    if service["family"] is None:
        service["family"] = server["family"]


def _new_real_server(address: str, port: int, family: str) -> dict[str, Any]:
    return {
        "address": address,
        "port": port,
        "family": family,
        "forward": None,
        "weight": None,
        "active_conns": None,
        "inactive_conns": None,
        "conns": None,
        "in_packets": None,
        "out_packets": None,
        "in_bytes": None,
        "out_bytes": None,
    }


def service_key(service: dict[str, Any]) -> str:
    """A stable text id: 'TCP 10.0.0.1:80', 'UDP [2001:db8::1]:53', 'FWM 7' or 'FWM 7 IPv6'."""
    if service["fwmark"] is not None:
        suffix = " IPv6" if service["family"] == "ipv6" else ""
        return f"FWM {service['fwmark']}{suffix}"
    return f"{service['protocol']} {endpoint(service['address'], service['port'], service['family'])}"


def endpoint(address: str, port: int, family: str | None) -> str:
    """'10.0.0.1:80' or '[2001:db8::1]:80'."""
    if family == "ipv6":
        return f"[{address}]:{port}"
    return f"{address}:{port}"


# ---------------------------------------------------------------- /proc/net/ip_vs (hex) -- fast path


def _proc_ipv4(hex_address: str) -> str:
    return socket.inet_ntoa(bytes.fromhex(hex_address))


def _proc_ipv6(bracketed: str) -> str:
    # %pI6 prints eight groups of four hex digits; ipaddress gives the usual compressed form.
    return ipaddress.IPv6Address(bracketed[1:-1]).compressed


def _proc_endpoint(token: str) -> tuple[str, int, str]:
    """'0A000001:0050' or '[2001:0db8:...:0001]:0050' -> (address, port, family)."""
    if token.startswith("["):
        address, dummy, port = token.rpartition(":")
        if not address.endswith("]"):
            raise ValueError(token)
        return _proc_ipv6(address), int(port, 16), "ipv6"
    address, dummy, port = token.partition(":")
    if len(address) != 8 or not port:
        raise ValueError(token)
    return _proc_ipv4(address), int(port, 16), "ipv4"


def _proc_netmask(hex_mask: str, family: str | None) -> str:
    """/proc prints ntohl(netmask): a dotted mask for IPv4, a prefix length (byte-swapped on little endian) for IPv6."""
    value = int(hex_mask, 16)
    if family == "ipv6":
        if value > 128:
            value = int.from_bytes(value.to_bytes(4, "big"), "little")
        return str(value)
    return socket.inet_ntoa(value.to_bytes(4, "big"))


def _proc_service_tail(service: dict[str, Any], tokens: list[str], kernel_hz: int) -> None:
    """Flags after the scheduler: optional 'ops', optional 'persistent TIMEOUT_JIFFIES NETMASK'."""
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "ops":
            service["one_packet_scheduling"] = True
            service["flags"].append("ops")
            index += 1
        elif token == "persistent" and index + 2 < len(tokens):
            service["persistent"] = True
            service["flags"].append("persistent")
            jiffies = int(tokens[index + 1])
            service["persistence_timeout_s"] = jiffies // kernel_hz
            service["persistence_netmask"] = tokens[index + 2]  # resolved once the family is known
            index += 3
        else:
            raise ValueError(token)


def parse_proc_ip_vs(text: str, kernel_hz: int = 250) -> dict[str, Any]:
    """Parse /proc/net/ip_vs. ``kernel_hz`` (CONFIG_HZ, 250 on Debian) turns the jiffies timeout into seconds."""
    if kernel_hz < 1:
        raise ValueError(f"kernel_hz is {kernel_hz!r}: give the kernel's CONFIG_HZ (100, 250, 300 or 1000)")
    lines = text.splitlines()
    version, table_size = _header(lines, "/proc/net/ip_vs")
    services = []
    current = None
    for number in range(2, len(lines) + 1):
        line = lines[number - 1]
        if number <= 3:
            if not line.lstrip().startswith(("Prot ", "-> ")):
                _fail(number, line, "the column header of /proc/net/ip_vs")
            continue
        tokens = line.split()
        if not tokens:
            continue
        try:
            if tokens[0] == "->":
                if current is None:
                    _fail(number, line, "a virtual service line before the first real server")
                if len(tokens) != 6:
                    raise ValueError(line)
                address, port, family = _proc_endpoint(tokens[1])
                server = _new_real_server(address, port, family)
                _read_listing_columns(server, tokens)
                _attach_real_server(current, server)
                continue
            if tokens[0] == "FWM":
                if len(tokens) < 3:
                    raise ValueError(line)
                current = _new_service("FWM", None, None, int(tokens[1], 16), None, tokens[2])
            else:
                if len(tokens) < 3:
                    raise ValueError(line)
                address, port, family = _proc_endpoint(tokens[1])
                current = _new_service(tokens[0], address, port, None, family, tokens[2])
            _proc_service_tail(current, tokens[3:], kernel_hz)
            services.append(current)
        except IpvsParseError:
            raise
        except (ValueError, IndexError, OSError):
            if tokens[0] == "->":
                _fail(number, line, "'  -> ADDRESS:PORT Forward Weight ActiveConn InActConn'")
            _fail(number, line, "'Prot ADDRESS:PORT Scheduler [ops] [persistent TIMEOUT NETMASK]'")
    for service in services:
        if service["persistence_netmask"] is not None:
            service["persistence_netmask"] = _proc_netmask(service["persistence_netmask"], service["family"])
    return {"version": version, "conn_table_size": table_size, "services": services}


# ---------------------------------------------------------------- /proc/net/ip_vs_conn (hex)

PROC_CONN_HEADER = "Pro FromIP"


def proc_conn_address(address: str) -> str:
    """An address as /proc/net/ip_vs_conn prints it: %08X of an IPv4 address, %pI6 (eight groups of four) of IPv6."""
    parsed = ipaddress.ip_address(address)
    return parsed.exploded if parsed.version == 6 else f"{int(parsed):08X}"


def _proc_conn_endpoint(address: str, port: str) -> tuple[str, int]:
    if ":" in address:
        return ipaddress.IPv6Address(address).compressed, int(port, 16)
    if len(address) != 8:
        raise ValueError(address)
    return _proc_ipv4(address), int(port, 16)


def parse_proc_ip_vs_conn(text: str, destination: str | None = None) -> list[dict[str, Any]]:
    """Parse /proc/net/ip_vs_conn, one dict per connection entry (ip_vs_conn.c, ip_vs_conn_seq_show: protocol,
    client, virtual and destination address and port, state, seconds until the entry expires).

    With ``destination`` (an address) only the entries to that real server are parsed: a busy director's table holds
    hundreds of thousands, and the others are skipped on a string comparison.
    """
    wanted = proc_conn_address(destination) if destination is not None else None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if number == 1:
            if not line.startswith(PROC_CONN_HEADER):
                _fail(number, line, f"the column header of /proc/net/ip_vs_conn ('{PROC_CONN_HEADER} ...')")
            continue
        tokens = line.split()
        if not tokens or (wanted is not None and len(tokens) > 5 and tokens[5] != wanted):
            continue
        try:
            client, client_port = _proc_conn_endpoint(tokens[1], tokens[2])
            virtual, virtual_port = _proc_conn_endpoint(tokens[3], tokens[4])
            destination_address, destination_port = _proc_conn_endpoint(tokens[5], tokens[6])
            entries.append({
                "protocol": tokens[0], "client_address": client, "client_port": client_port,
                "virtual_address": virtual, "virtual_port": virtual_port,
                "destination_address": destination_address, "destination_port": destination_port,
                "state": tokens[7], "expires_s": int(tokens[8]),
            })
        except (ValueError, IndexError):
            _fail(number, line, "'PROTO CLIENT CPORT VIRTUAL VPORT DEST DPORT STATE EXPIRES [PENAME PEDATA]' in hex")
    return entries


# IPVS's timeout of a TCP entry in SYN_RECV, fixed in the kernel (ip_vs_proto_tcp.c, tcp_timeouts: 60 s; ipvsadm --set
# changes only tcp, tcpfin and udp). In DR the director sees the client's half of a connection only: SYN_RECV is an
# entry whose client sent a SYN and no ACK since, and each SYN the client sends again starts the 60 s anew.
SYN_RECV_TIMEOUT_S = 60
# A handshake younger than this may still complete: Linux resends an unanswered SYN after 1 s and again 2 s later
# (RFC 6298's initial 1 s timeout, doubled), so a client still trying has refreshed its entry within 3 s.
HANDSHAKE_IN_FLIGHT_S = 3


def live_connections(entries: list[dict[str, Any]]) -> int:
    """The connection entries that may still carry a client's connection: ESTABLISHED, and SYN_RECV seen within the
    last HANDSHAKE_IN_FLIGHT_S.

    The kernel's ActiveConn counter also counts older SYN_RECV entries. A real server that was down while clients
    connected (a crash, a reboot) leaves one per attempt: the client's SYN reached the director, the real server never
    answered it, and the client gave up. On the lab's kernel 6.1, 20 s after a reboot, ActiveConn was 18 and the table
    held 18 SYN_RECV entries and no ESTABLISHED one (fixtures/proc_ip_vs_conn_dr_after_reboot.txt): a drain counting
    ActiveConn waits until they expire, a minute after the last attempt, for connections that never were.
    """
    young = SYN_RECV_TIMEOUT_S - HANDSHAKE_IN_FLIGHT_S
    return sum(1 for entry in entries if entry["state"] == "ESTABLISHED"
               or (entry["state"] == "SYN_RECV" and entry["expires_s"] > young))


# ---------------------------------------------------------------- /proc/net/ip_vs_stats (hex)

_STATS_TOTAL_KEYS = COUNTER_KEYS
_STATS_RATE_KEYS = ("conns_per_second", "in_packets_per_second", "out_packets_per_second",
                    "in_bytes_per_second", "out_bytes_per_second")


def parse_proc_ip_vs_stats(text: str) -> dict[str, Any]:
    """Parse /proc/net/ip_vs_stats: two hex rows (totals since load, and current rates)."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        tokens = line.split()
        if not tokens or not all(_is_hex(token) for token in tokens):
            continue
        if len(tokens) != 5:
            _fail(number, line, "five hex counters (Conns InPkts OutPkts InBytes OutBytes)")
        rows.append([int(token, 16) for token in tokens])
    if len(rows) != 2:
        raise IpvsParseError(
            f"/proc/net/ip_vs_stats: expected 2 rows of hex counters (totals and rates), found {len(rows)}; "
            f"is the input complete?"
        )
    result = dict(zip(_STATS_TOTAL_KEYS, rows[0]))
    result.update(zip(_STATS_RATE_KEYS, rows[1]))
    return result


def _is_hex(token: str) -> bool:
    try:
        int(token, 16)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- ipvsadm -Ln [--stats] --exact -- fast path


def _ipvsadm_endpoint(token: str) -> tuple[str, int, str]:
    """'10.0.0.1:80' or '[2001:db8::1]:80' -> (address, port, family)."""
    if token.startswith("["):
        address, dummy, port = token.rpartition(":")
        if not address.endswith("]"):
            raise ValueError(token)
        return ipaddress.IPv6Address(address[1:-1]).compressed, int(port), "ipv6"
    address, dummy, port = token.rpartition(":")
    socket.inet_aton(address)
    if address.count(".") != 3:
        raise ValueError(token)
    return address, int(port), "ipv4"


def _counter(token: str, line_number: int, line: str) -> int:
    if not token.isdigit():
        raise IpvsParseError(
            f"line {line_number}: counter {token!r} is not an exact integer in {line.strip()!r}; run ipvsadm with "
            f"--exact so counters are not rounded to K/M/G"
        )
    return int(token)


def _ipvsadm_service_tail(service: dict[str, Any], tokens: list[str]) -> None:
    """Flags after the scheduler in the plain listing: '(flag,...)', 'persistent N', 'mask M', 'pe NAME', 'ops'."""
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.startswith("(") and token.endswith(")"):
            service["flags"].extend(flag for flag in token[1:-1].split(",") if flag)
            index += 1
        elif token == "persistent":
            service["persistent"] = True
            service["flags"].append("persistent")
            service["persistence_timeout_s"] = int(tokens[index + 1])
            index += 2
        elif token == "mask":
            service["persistence_netmask"] = tokens[index + 1]
            index += 2
        elif token == "pe":
            service["persistence_engine"] = tokens[index + 1]
            index += 2
        elif token == "ops":
            service["one_packet_scheduling"] = True
            service["flags"].append("ops")
            index += 1
        else:
            raise ValueError(token)
    if service["persistent"] and service["persistence_netmask"] is None:
        service["persistence_netmask"] = "128" if service["family"] == "ipv6" else "255.255.255.255"


def _ipvsadm_service_head(tokens: list[str]) -> tuple[dict[str, Any], list[str]]:
    """(service, rest) from 'TCP  10.0.0.1:80 ...', 'FWM  7 ...' or 'FWM  7 IPv6 ...'."""
    if tokens[0] == "FWM":
        family = None
        rest = tokens[2:]
        if rest and rest[0] == "IPv6":
            family = "ipv6"
            rest = rest[1:]
        return _new_service("FWM", None, None, int(tokens[1]), family, None), rest
    address, port, family = _ipvsadm_endpoint(tokens[1])
    return _new_service(tokens[0], address, port, None, family, None), tokens[2:]


def parse_ipvsadm(text: str) -> dict[str, Any]:
    """Parse ``ipvsadm -Ln --exact`` (weights) or ``ipvsadm -Ln --stats --exact`` (counters); the header decides.

    Returns {"version", "conn_table_size", "kind": "list"|"stats", "services": [...]}.
    """
    lines = text.splitlines()
    version, table_size = _header(lines, "ipvsadm output")
    if len(lines) < 3 or not lines[1].startswith("Prot LocalAddress:Port"):
        _fail(2, lines[1] if len(lines) > 1 else "", "the 'Prot LocalAddress:Port ...' column header")
    kind = "stats" if "Conns" in lines[1].split() else "list"
    if "CPS" in lines[1].split():
        raise IpvsParseError("line 2: this is the --rate listing; run ipvsadm -Ln --stats --exact instead")
    if not lines[2].lstrip().startswith("-> RemoteAddress:Port"):
        _fail(3, lines[2], "the '  -> RemoteAddress:Port ...' column header")
    services = []
    current = None
    for number in range(4, len(lines) + 1):
        line = lines[number - 1]
        tokens = line.split()
        if not tokens:
            continue
        try:
            if tokens[0] == "->":
                if current is None:
                    _fail(number, line, "a virtual service line before the first real server")
                address, port, family = _ipvsadm_endpoint(tokens[1])
                server = _new_real_server(address, port, family)
                if kind == "stats":
                    if len(tokens) != 7:
                        raise ValueError(line)
                    for key, token in zip(COUNTER_KEYS, tokens[2:]):
                        server[key] = _counter(token, number, line)
                else:
                    if len(tokens) != 6:
                        raise ValueError(line)
                    _read_listing_columns(server, tokens)
                _attach_real_server(current, server)
                continue
            current, rest = _ipvsadm_service_head(tokens)
            if kind == "stats":
                if len(rest) != 5:
                    raise ValueError(line)
                for key, token in zip(COUNTER_KEYS, rest):
                    current[key] = _counter(token, number, line)
            else:
                if not rest:
                    raise ValueError(line)
                current["scheduler"] = rest[0]
                _ipvsadm_service_tail(current, rest[1:])
            services.append(current)
        except IpvsParseError:
            raise
        except (ValueError, IndexError, OSError):
            if tokens[0] == "->":
                if kind == "stats":
                    _fail(number, line, "'  -> ADDRESS:PORT Conns InPkts OutPkts InBytes OutBytes'")
                _fail(number, line, "'  -> ADDRESS:PORT Forward Weight ActiveConn InActConn'")
            if kind == "stats":
                _fail(number, line, "'Prot ADDRESS:PORT Conns InPkts OutPkts InBytes OutBytes'")
            _fail(number, line, "'Prot ADDRESS:PORT Scheduler [flags]' or 'FWM MARK [IPv6] Scheduler [flags]'")
    return {"version": version, "conn_table_size": table_size, "kind": kind, "services": services}


# ---------------------------------------------------------------- merging the two ipvsadm listings


def _server_key(server: dict[str, Any]) -> str:
    return endpoint(server["address"], server["port"], server["family"])


def merge_ipvsadm(listing: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """Add the counters of ``ipvsadm -Ln --stats --exact`` to the services of ``ipvsadm -Ln --exact``.

    Services or servers that appeared between the two reads are kept with the fields their one listing had.
    """
    if listing.get("kind") != "list" or stats.get("kind") != "stats":
        raise IpvsParseError("merge_ipvsadm needs the plain listing first and the --stats listing second")
    stats_by_key = {}
    for service in stats["services"]:
        stats_by_key[service_key(service)] = service
    merged = []
    for service in listing["services"]:
        counters = stats_by_key.pop(service_key(service), None)
        if counters is not None:
            for key in COUNTER_KEYS:
                service[key] = counters[key]
            servers_by_key = {_server_key(server): server for server in counters["real_servers"]}
            for server in service["real_servers"]:
                found = servers_by_key.pop(_server_key(server), None)
                if found is not None:
                    for key in COUNTER_KEYS:
                        server[key] = found[key]
            service["real_servers"].extend(servers_by_key.values())
        merged.append(service)
    merged.extend(stats_by_key.values())
    return {"version": listing["version"], "conn_table_size": listing["conn_table_size"], "kind": "merged",
            "services": merged}


def totals(services: list[dict[str, Any]]) -> dict[str, int | None]:
    """Sum of the per-service counters (None where a counter is unknown)."""
    result = {}
    for key in COUNTER_KEYS:
        known = [service[key] for service in services if service[key] is not None]
        result[key] = sum(known) if len(known) == len(services) else None
    return result


def pinning_warning(service: dict[str, Any]) -> str | None:
    """Plain words when a service pins every client behind one NAT address to one real server, else None."""
    name = service_key(service)
    scheduler = service["scheduler"]
    if scheduler in SOURCE_HASH_SCHEDULERS and SOURCE_HASH_SCHEDULERS[scheduler] not in service["flags"]:
        return (
            f"{name} uses the {scheduler!r} scheduler, which hashes the client's source address: all clients behind "
            f"one NAT address land on the same real server. Use a connection scheduler (wlc, rr) or add the "
            f"{SOURCE_HASH_SCHEDULERS[scheduler]} flag (hpc.balance.lvs_director: the virtual server's "
            f"scheduler_flags)."
        )
    if service["persistent"]:
        return (
            f"{name} is persistent ({service['persistence_timeout_s']} s, netmask {service['persistence_netmask']}): "
            f"every connection from one client address - and all clients behind one NAT address - stays on one real "
            f"server for that time, so the spread follows the number of client addresses, not connections."
        )
    return None
