"""Slow, obvious regex twins of the fast IPVS parsers in ``_ipvs.py``: the oracles the tests (and the benchmark in
tests/perf) compare ``parse_proc_ip_vs`` and ``parse_ipvsadm`` against, for well-formed input. Test code only: it is
kept here, not in module_utils, so nothing ships to a target that only a test runs."""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.hpc.balance.plugins.module_utils._ipvs import (
    COUNTER_KEYS,
    IpvsParseError,
    _header,
    _new_real_server,
    _new_service,
)

_REF_V4 = r"(?P<a4>[0-9A-F]{8}):(?P<p4>[0-9A-F]{4})"
_REF_V6 = r"\[(?P<a6>[0-9a-f:]+)\]:(?P<p6>[0-9A-F]{4})"
_REF_PROC_SERVICE = re.compile(
    r"^(?:(?P<proto>[A-Z]+)  (?:" + _REF_V4 + "|" + _REF_V6 + r")|FWM  (?P<mark>[0-9A-F]{8})) (?P<sched>[a-z]+)"
    r"(?P<ops> ops)? *(?:persistent (?P<timeout>\d+) (?P<mask>[0-9A-F]{8}))? *$"
)
_REF_PROC_SERVER = re.compile(
    r"^  -> (?:" + _REF_V4 + "|" + _REF_V6 + r") +(?P<fwd>[A-Za-z]+) +(?P<weight>-?\d+) +(?P<active>-?\d+)"
    r" +(?P<inactive>-?\d+) *$"
)


def _ref_endpoint(match):
    if match.group("a4") is not None:
        number = int(match.group("a4"), 16)
        return str(ipaddress.IPv4Address(number)), int(match.group("p4"), 16), "ipv4"
    return str(ipaddress.IPv6Address(match.group("a6"))), int(match.group("p6"), 16), "ipv6"


def reference_parse_proc_ip_vs(text, kernel_hz=250):
    """Regex twin of ``parse_proc_ip_vs`` for well-formed input."""
    lines = text.splitlines()
    version, table_size = _header(lines, "/proc/net/ip_vs")
    services = []
    for line in lines[3:]:
        if not line.strip():
            continue
        server_match = _REF_PROC_SERVER.match(line)
        if server_match:
            address, port, family = _ref_endpoint(server_match)
            server = _new_real_server(address, port, family)
            server["forward"] = server_match.group("fwd")
            server["weight"] = int(server_match.group("weight"))
            server["active_conns"] = int(server_match.group("active"))
            server["inactive_conns"] = int(server_match.group("inactive"))
            services[-1]["real_servers"].append(server)
            if services[-1]["family"] is None:
                services[-1]["family"] = family
            continue
        match = _REF_PROC_SERVICE.match(line)
        if not match:
            raise IpvsParseError(f"reference parser cannot read {line!r}")
        if match.group("mark") is not None:
            service = _new_service("FWM", None, None, int(match.group("mark"), 16), None, match.group("sched"))
        else:
            address, port, family = _ref_endpoint(match)
            service = _new_service(match.group("proto"), address, port, None, family, match.group("sched"))
        if match.group("ops"):
            service["one_packet_scheduling"] = True
            service["flags"].append("ops")
        if match.group("timeout") is not None:
            service["persistent"] = True
            service["flags"].append("persistent")
            service["persistence_timeout_s"] = int(match.group("timeout")) // kernel_hz
            service["persistence_netmask"] = match.group("mask")
        services.append(service)
    for service in services:
        mask = service["persistence_netmask"]
        if mask is None:
            continue
        value = int(mask, 16)
        if service["family"] == "ipv6":
            service["persistence_netmask"] = str(value if value <= 128 else int.from_bytes(
                value.to_bytes(4, "big"), "little"))
        else:
            service["persistence_netmask"] = str(ipaddress.IPv4Address(value))
    return {"version": version, "conn_table_size": table_size, "services": services}


_REF_ADDR = r"(?:(?P<a4>\d+\.\d+\.\d+\.\d+)|\[(?P<a6>[0-9a-fA-F:.]+)\]):(?P<port>\d+)"
_REF_HEAD = r"^(?:(?P<proto>TCP|UDP|SCTP)  " + _REF_ADDR + r"|FWM  (?P<mark>\d+)(?P<v6> IPv6)?)"
_REF_COUNTERS = r" +(?P<conns>\d+) +(?P<inpkts>\d+) +(?P<outpkts>\d+) +(?P<inbytes>\d+) +(?P<outbytes>\d+) *$"
_REF_ADM_SERVICE_LIST = re.compile(
    _REF_HEAD + r" +(?P<sched>\S+)(?: \((?P<schedflags>[^)]*)\))?(?: persistent (?P<timeout>\d+))?"
    r"(?: mask (?P<mask>\S+))?(?: pe (?P<pe>\S+))?(?P<ops> ops)? *$"
)
_REF_ADM_SERVICE_STATS = re.compile(_REF_HEAD + _REF_COUNTERS)
_REF_ADM_SERVER_LIST = re.compile(
    r"^  -> " + _REF_ADDR + r" +(?P<fwd>\S+) +(?P<weight>-?\d+) +(?P<active>\d+) +(?P<inactive>\d+) *$"
)
_REF_ADM_SERVER_STATS = re.compile(r"^  -> " + _REF_ADDR + _REF_COUNTERS)
_REF_COUNTER_GROUPS = ("conns", "inpkts", "outpkts", "inbytes", "outbytes")


def _ref_adm_endpoint(match):
    if match.group("a4") is not None:
        return str(ipaddress.IPv4Address(match.group("a4"))), int(match.group("port")), "ipv4"
    return str(ipaddress.IPv6Address(match.group("a6"))), int(match.group("port")), "ipv6"


def _ref_counters(target, match):
    for key, group in zip(COUNTER_KEYS, _REF_COUNTER_GROUPS, strict=True):
        target[key] = int(match.group(group))


def reference_parse_ipvsadm(text):
    """Regex twin of ``parse_ipvsadm`` for well-formed input."""
    lines = text.splitlines()
    version, table_size = _header(lines, "ipvsadm output")
    kind = "stats" if "Conns" in lines[1] else "list"
    service_pattern = _REF_ADM_SERVICE_STATS if kind == "stats" else _REF_ADM_SERVICE_LIST
    server_pattern = _REF_ADM_SERVER_STATS if kind == "stats" else _REF_ADM_SERVER_LIST
    services = []
    for line in lines[3:]:
        if not line.strip():
            continue
        match = server_pattern.match(line)
        if match:
            server = _new_real_server(*_ref_adm_endpoint(match))
            if kind == "stats":
                _ref_counters(server, match)
            else:
                server["forward"] = match.group("fwd")
                server["weight"] = int(match.group("weight"))
                server["active_conns"] = int(match.group("active"))
                server["inactive_conns"] = int(match.group("inactive"))
            services[-1]["real_servers"].append(server)
            if services[-1]["family"] is None:
                services[-1]["family"] = server["family"]
            continue
        match = service_pattern.match(line)
        if not match:
            raise IpvsParseError(f"reference parser cannot read {line!r}")
        if match.group("mark") is not None:
            service = _new_service("FWM", None, None, int(match.group("mark")),
                                   "ipv6" if match.group("v6") else None, None)
        else:
            address, port, family = _ref_adm_endpoint(match)
            service = _new_service(match.group("proto"), address, port, None, family, None)
        if kind == "stats":
            _ref_counters(service, match)
        else:
            service["scheduler"] = match.group("sched")
            if match.group("schedflags"):
                service["flags"].extend(match.group("schedflags").split(","))
            if match.group("timeout") is not None:
                service["persistent"] = True
                service["flags"].append("persistent")
                service["persistence_timeout_s"] = int(match.group("timeout"))
                service["persistence_netmask"] = match.group("mask") or (
                    "128" if service["family"] == "ipv6" else "255.255.255.255")
            service["persistence_engine"] = match.group("pe")
            if match.group("ops"):
                service["one_packet_scheduling"] = True
                service["flags"].append("ops")
        services.append(service)
    return {"version": version, "conn_table_size": table_size, "kind": kind, "services": services}
