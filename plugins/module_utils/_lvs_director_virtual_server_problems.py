# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's checks of one virtual server, its real servers and their health checks.

One entry of lvs_director_virtual_servers (resolved by ``_lvs_director_config.resolve``) against what keepalived and
IPVS accept: ports, weights, quorum and hysteresis, persistence granularity (check_parser.c), scheduler flags of sh and
mh, the forwarding method the role sets up (DR, which cannot rewrite ports or cross address families), and each real
server's checks (a kind that speaks the service's protocol, values keepalived 2.2.7 reads). Kept apart from the VRRP
checks (``_lvs_director_vrrp_problems``) and the host-wide ones (``_lvs_director_host_problems``, which calls
``virtual_server_problems`` for each virtual server).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import address_family, check_names
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import (
    FAMILY_NAMES,
    finding,
    out_of_range,
    whole_positive,
)

# The only forwarding method the role sets up end to end (VIP on the real servers' lo, ARP kept quiet there).
SUPPORTED_METHODS = ("DR",)
# Checks that speak TCP, and those that work for a UDP service (keepalived.conf(5): UDP_CHECK, DNS_CHECK over UDP,
# PING_CHECK over ICMP, MISC_CHECK runs a program).
TCP_ONLY_CHECKS = ("TCP_CHECK", "HTTP_GET", "SSL_GET")
UDP_CHECKS = ("UDP_CHECK", "DNS_CHECK", "PING_CHECK", "MISC_CHECK", "none")
# keepalived 2.2.7 has no SCTP check: TCP_CHECK, HTTP_GET and SSL_GET connect over TCP (layer4.c, tcp_connect),
# UDP_CHECK and DNS_CHECK send UDP datagrams, and an SCTP-only service answers neither. What works on an SCTP service:
# PING_CHECK (ICMP echo, check_ping.c), MISC_CHECK (a program that speaks SCTP) or no check.
SCTP_CHECKS = ("PING_CHECK", "MISC_CHECK", "none")
# persistence_granularity (check_parser.c, pgr_handler): an IPv6 service reads a prefix length of 1 to 128
# (read_unsigned_strvec); an IPv4 service reads a netmask with getaddrinfo(AI_NUMERICHOST), so "24" passes
# keepalived -t as 0.0.0.24. The template writes the granularity only with persistence_timeout_s.
GRANULARITY_V6_RANGE = (1, 128)
# Schedulers that hash the client's source address (ipvs_spread warns about the same ones, _ipvs.py).
SOURCE_HASH_SCHEDULERS = ("sh", "mh")
# The scheduler flags keepalived 2.2 writes for sh and mh (check_parser.c: sh-port, sh-fallback, mh-port,
# mh-fallback; "sh-port only applies to sh scheduler" fails `keepalived -t`), and the one of each that hashes the
# client's port too, so clients behind one NAT address spread (ip_vs_sh.c, ip_vs_mh.c: IP_VS_SVC_F_SCHED_SH_PORT).
SCHEDULER_FLAGS = {"sh": ("sh-port", "sh-fallback"), "mh": ("mh-port", "mh-fallback")}
PORT_HASH_FLAGS = {"sh": "sh-port", "mh": "mh-port"}
STATUS_CODE_PART = r"[1-5][0-9][0-9](-[1-5][0-9][0-9])?"
PORT_RANGE = (1, 65535)
# A real server's weight: keepalived reads 0 to IPVS_WEIGHT_LIMIT (check_parser.c, rs_weight_handler: "Real server
# weight %s is outside range"), and ipvsadm -w takes 0-65535, the range IPVS is used with (ipvsadm(8)).
WEIGHT_RANGE = (0, 65535)


def virtual_server_problems(host: str, config: dict[str, Any], server: dict[str, Any]
                            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    key = f"{host}: lvs_director_virtual_servers[{server['address']}:{server['port']}]"
    errors: list[str] = []
    warnings: list[str] = []
    reals = server["real_servers"]
    if not reals:
        errors.append(f"{key}.real_servers is empty; list at least one real server")
    if server["lvs_method"] not in SUPPORTED_METHODS:
        errors.append(
            f"{key}.lvs_method is {server['lvs_method']}, which this role does not set up (NAT needs ip_forward and "
            "the replies routed back through the director, TUN an ipip tunnel on every real server); use "
            "lvs_method: DR"
        )
    errors += _virtual_server_range_problems(key, server) + _family_problems(key, server)
    seen = set()
    for real in reals:
        endpoint = (real["address"], real["port"])
        if endpoint in seen:
            errors.append(f"{key}.real_servers lists {real['address']}:{real['port']} more than once; keep one entry")
        seen.add(endpoint)
        errors += _checks_problems(f"{key}.real_servers[{real['address']}]", server, real["checks"])
        if real["port"] != server["port"]:
            errors.append(
                f"{key}.real_servers[{real['address']}].port is {real['port']} but DR cannot rewrite ports; use port "
                f"{server['port']}"
            )
    errors += _quorum_problems(key, server, warnings)
    sorry = server["sorry_server"]
    if sorry and sorry["port"] != server["port"]:
        errors.append(
            f"{key}.sorry_server.port is {sorry['port']} but DR cannot rewrite ports, so the sorry server would get "
            f"the traffic on port {server['port']}; use port {server['port']} (or leave the port out)"
        )
    errors += _scheduler_flag_problems(key, server)
    pinning = _pinning_advice(key, server)
    if pinning and config["clients_behind_nat"]:
        errors.append(pinning + " (lvs_director_clients_behind_nat is true)")
    elif pinning and server["lvs_sched"] in SOURCE_HASH_SCHEDULERS:
        warnings.append(pinning)
    sysctls = config["sysctls"] or {}
    if not server["inhibit_on_failure"] and str(sysctls.get("net.ipv4.vs.expire_nodest_conn", "0")) == "1":
        warnings.append(
            f"{key}.inhibit_on_failure is false: a failed check (a false alarm too) removes the real server and, with "
            "net.ipv4.vs.expire_nodest_conn=1, resets its established sessions; set inhibit_on_failure: true "
            "(weight 0 keeps them), or set expire_nodest_conn to 0 in lvs_director_sysctls"
        )
    vips = {vip.split("/")[0] for instance in config["vrrp_instances"] for vip in instance["virtual_ipaddresses"]}
    if server["address"] not in vips:
        warnings.append(
            f"{key} has an address that no VRRP instance of this host moves; add it to an instance's "
            "virtual_ipaddresses unless it is configured another way"
        )
    return [finding([host], m) for m in errors], [finding([host], m) for m in warnings]


def _checks_problems(key: str, server: dict[str, Any], checks: list[dict[str, Any]]) -> list[str]:
    """A real server's checks: each on its own, and `none` only alone (it means no check at all)."""
    found = []
    for name, check in zip(check_names(checks), checks):
        found += _check_problems(f"{key}.{name}", server, check)
    if len(checks) > 1 and any(check["type"] == "none" for check in checks):
        found.append(f"{key}.checks lists type none beside other checks; drop it (none means no check at all)")
    return found


def _check_problems(key: str, server: dict[str, Any], check: dict[str, Any]) -> list[str]:
    """One real server's check against its service: a kind that fits the protocol, values keepalived can read."""
    found = []
    kind = check["type"]
    if kind == "MISC_CHECK" and not check["misc_path"]:
        found.append(f"{key} is MISC_CHECK without misc_path; set misc_path to the check command")
    found += _check_range_problems(key, check)
    if server["protocol"] == "UDP" and kind in TCP_ONLY_CHECKS:
        found.append(
            f"{key} is {kind} on a UDP service, so every real server fails it and leaves the pool; use UDP_CHECK, "
            "DNS_CHECK, PING_CHECK or MISC_CHECK"
        )
    if server["protocol"] == "SCTP" and kind not in SCTP_CHECKS:
        spoken = "TCP" if kind in TCP_ONLY_CHECKS else "UDP"
        found.append(
            f"{key} is {kind} on an SCTP service, but {kind} speaks {spoken}, which an SCTP-only service never "
            "answers, so every real server fails it and leaves the pool; use MISC_CHECK with a script that speaks "
            "SCTP, PING_CHECK (the real server answers ping) or none"
        )
    if kind == "MISC_CHECK" and check["misc_timeout_s"] is not None and not whole_positive(check["misc_timeout_s"]):
        found.append(
            f"{key}.misc_timeout_s is {check['misc_timeout_s']}, but keepalived 2.2.7 reads whole seconds; use a "
            "whole number of at least 1"
        )
    if kind in ("HTTP_GET", "SSL_GET") and not re.fullmatch(
        rf"{STATUS_CODE_PART}( {STATUS_CODE_PART})*", check["status_code"]
    ):
        found.append(
            f"{key}.status_code is {check['status_code']!r}; use codes or ranges from 100 to 599 separated by spaces, "
            "e.g. 200-299 (keepalived's default) or 200 301"
        )
    if kind in ("HTTP_GET", "SSL_GET") and check["digest"] is not None and not re.fullmatch(
        r"[0-9a-fA-F]{32}", str(check["digest"])
    ):
        found.append(
            f"{key}.digest is {check['digest']!r}, which keepalived refuses; use the 32 hexadecimal digits of the "
            "page's MD5 as keepalived's genhash prints them"
        )
    if kind == "UDP_CHECK" and check["payload_hex"] and not re.fullmatch(r"[0-9a-fA-F ]+", str(check["payload_hex"])):
        found.append(f"{key}.payload_hex is {check['payload_hex']!r}; use hexadecimal digits, e.g. 68656c6c6f")
    return found


def _quorum_problems(key: str, server: dict[str, Any], warnings: list[str]) -> list[str]:
    found = []
    total_weight = sum(real["weight"] for real in server["real_servers"])
    quorum = server["quorum"]
    if quorum is not None and quorum > total_weight:
        found.append(
            f"{key}.quorum is {quorum} but the real servers' weights add up to {total_weight}, so the "
            f"service could never be up; use a quorum of at most {total_weight}"
        )
    if server["hysteresis"] is not None and not 0 <= server["hysteresis"] < (quorum or 1):
        found.append(
            f"{key}.hysteresis is {server['hysteresis']}; use 0 to {(quorum or 1) - 1} (below the quorum, "
            f"{quorum or 1})"
        )
    if quorum is not None and not server["sorry_server"] and not server["quorum_down"]:
        warnings.append(
            f"{key}.quorum is set without sorry_server or quorum_down: when the quorum is lost keepalived changes "
            "nothing in IPVS (only a sorry server replaces the pool); add sorry_server or quorum_down, or drop quorum"
        )
    return found


def _scheduler_flag_problems(key: str, server: dict[str, Any]) -> list[str]:
    """A flag of another scheduler, or one given twice (keepalived -t refuses the first; the second is a typo)."""
    allowed = SCHEDULER_FLAGS.get(server["lvs_sched"], ())
    flags = server["scheduler_flags"]
    found = [
        f"{key}.scheduler_flags has {flag}, which keepalived applies only to the "
        f"{flag.split('-')[0]} scheduler, not {server['lvs_sched']}; "
        + (f"use {' or '.join(allowed)}" if allowed else "drop it")
        for flag in flags if flag not in allowed
    ]
    found += [f"{key}.scheduler_flags lists {flag} more than once; keep one"
              for flag in sorted({flag for flag in flags if flags.count(flag) > 1})]
    return found


def _pinning_advice(key: str, server: dict[str, Any]) -> str | None:
    """sh / mh (without the port flag) and persistence pin every client behind one NAT address to one real server
    (as ipvs_spread says)."""
    scheduler = server["lvs_sched"]
    if scheduler in SOURCE_HASH_SCHEDULERS and PORT_HASH_FLAGS[scheduler] not in server["scheduler_flags"]:
        return (
            f"{key}.lvs_sched is {scheduler} (source hashing): clients behind one NAT address all land on "
            "one real server, and so does persistence_timeout_s; use wlc or lc, which spread connections, or add "
            f"{PORT_HASH_FLAGS[scheduler]} to scheduler_flags"
        )
    if server["persistence_timeout_s"]:
        return (
            f"{key}.persistence_timeout_s is {server['persistence_timeout_s']}: every client behind one NAT address "
            "stays on one real server for that time; drop persistence, or narrow it with persistence_granularity "
            "only where sessions need it"
        )
    return None


def _port_problem(key: str, port: Any) -> list[str]:
    return [f"{key} is {port}; use a port from 1 to 65535"] if out_of_range(port, *PORT_RANGE) else []


def _virtual_server_range_problems(key: str, server: dict[str, Any]) -> list[str]:
    """Ports, weights and times of one virtual server; a real server's port is checked only where it differs (DR)."""
    found = _port_problem(f"{key}.port", server["port"])
    sorry = server["sorry_server"]
    if sorry and sorry["port"] != server["port"]:
        found += _port_problem(f"{key}.sorry_server.port", sorry["port"])
    if server["delay_loop_s"] <= 0:
        found.append(f"{key}.delay_loop_s is {server['delay_loop_s']}; use a positive number of seconds")
    if out_of_range(server["persistence_timeout_s"], 0):
        found.append(f"{key}.persistence_timeout_s is {server['persistence_timeout_s']}; use 0 (off) or more seconds")
    found += _granularity_problems(key, server)
    if out_of_range(server["quorum"], 1):
        found.append(f"{key}.quorum is {server['quorum']}; keepalived replaces a quorum below 1 with 1: use 1 or more")
    for real in server["real_servers"]:
        real_key = f"{key}.real_servers[{real['address']}]"
        if real["port"] != server["port"]:
            found += _port_problem(f"{real_key}.port", real["port"])
        if out_of_range(real["weight"], *WEIGHT_RANGE):
            found.append(f"{real_key}.weight is {real['weight']}; use 0 to 65535 (0 takes it out of rotation)")
    return found


def _granularity_problems(key: str, server: dict[str, Any]) -> list[str]:
    """persistence_granularity as keepalived reads it: a dotted netmask (IPv4) or a prefix length (IPv6), with
    persistence_timeout_s (without it the template, like keepalived, has nothing to narrow)."""
    value = server["persistence_granularity"]
    if value is None:
        return []
    key = f"{key}.persistence_granularity"
    found = []
    if not server["persistence_timeout_s"]:
        found.append(
            f"{key} is {value!r} without persistence_timeout_s, so keepalived drops it without a word (it only "
            "narrows persistence); set persistence_timeout_s, or drop persistence_granularity"
        )
    if server["family"] == 6:
        low, high = GRANULARITY_V6_RANGE
        if not re.fullmatch(r"[0-9]+", value) or not low <= int(value) <= high:
            found.append(
                f"{key} is {value!r}, but an IPv6 service takes a prefix length from 1 to 128; write e.g. 64"
            )
    elif server["family"] == 4:
        found += _netmask_problems(key, value)
    return found


def _netmask_problems(key: str, value: str) -> list[str]:
    """An IPv4 granularity must be a contiguous netmask in dotted form; keepalived takes a bare number as an
    address (inet_aton: "24" is 0.0.0.24) and does not require the ones to be contiguous."""
    if re.fullmatch(r"[0-9]+", value) and int(value) < 2 ** 32:
        number = int(value)
        fix = f"{_netmask(number)} for a /{number}" if number <= 32 else "a dotted netmask such as 255.255.255.0"
        return [
            f"{key} is {value!r}, which keepalived reads as the netmask {ipaddress.IPv4Address(number)} on an IPv4 "
            f"service (it takes a dotted netmask, not a prefix length); write {fix}"
        ]
    try:
        mask = int(ipaddress.IPv4Address(value))
    except ValueError:
        return [f"{key} is {value!r}, which is not a netmask; an IPv4 service takes a dotted netmask, e.g. "
                "255.255.255.0 for a /24"]
    inverse = ~mask & 0xFFFFFFFF
    if inverse & (inverse + 1):
        return [
            f"{key} is {value!r}, which is not a contiguous netmask (its ones are not all on the left), so clients "
            "of unrelated subnets would share a real server; write a contiguous one, e.g. 255.255.255.0 for a /24"
        ]
    return []


def _netmask(prefix: int) -> str:
    return str(ipaddress.IPv4Network(f"0.0.0.0/{prefix}").netmask)


def _check_range_problems(key: str, check: dict[str, Any]) -> list[str]:
    found = _port_problem(f"{key}.connect_port", check["connect_port"])
    if check["connect_timeout_s"] is not None and check["connect_timeout_s"] <= 0:
        found.append(f"{key}.connect_timeout_s is {check['connect_timeout_s']}; use a positive number of seconds")
    if out_of_range(check["retry"], 0):
        found.append(f"{key}.retry is {check['retry']}; use 0 or more retries")
    if out_of_range(check["delay_before_retry_s"], 0):
        found.append(f"{key}.delay_before_retry_s is {check['delay_before_retry_s']}; use 0 or more seconds")
    return found


def _family_problems(key: str, server: dict[str, Any]) -> list[str]:
    """DR cannot cross families: keepalived skips a real server of the other family ("Address family ... don't
    match - skipping real server", check_parser.c)."""
    if server["family"] is None:
        return [f"{key}.address {server['address']} is not an IP address; use the VIP the service listens on"]
    family = FAMILY_NAMES[server["family"]]
    addresses = [real["address"] for real in server["real_servers"]]
    if server["sorry_server"]:
        addresses.append(server["sorry_server"]["address"])
    other = [address for address in addresses if address_family(address) != server["family"]]
    if not other:
        return []
    return [
        f"{key} is {family} but {', '.join(other)} is not, and DR cannot cross address families (keepalived skips "
        f"such a real server); use {family} addresses for its real servers and sorry server"
    ]
