# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's checks of one director's settings, before any file changes.

Numbers keepalived or the kernel refuse later, values its parser reads differently than written (quotes, comments),
addresses and families, VRIDs, sync groups, checks and quorum of one host's config (resolved by
``_lvs_director_config.resolve``). Checks across directors live in ``_lvs_director_peer_problems``.
"""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import (
    NOTIFY_KEYS,
    REAL_SERVER_SCRIPT_KEYS,
    SYNC_GROUP_DEFAULTS,
    TRACK_PROCESS_DELAY_KEYS,
    address_family,
    check_names,
)
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import (
    FAMILY_NAMES,
    PRIORITY_RANGE,
    finding,
    vip_address,
)
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_route_problems import route_problems
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_scripts import script_problems

# keepalived caps a VRRPv2 password at 8 characters and silently ignores the rest.
AUTH_PASS_MAX_CHARS = 8
VRID_RANGE = (1, 255)
# VRRPv2 carries the advert interval in whole seconds (1-255); VRRPv3 in centiseconds (12 bits: 0.01-40.95 s).
ADVERT_INT_V2_RANGE_S = (1, 255)
ADVERT_INT_V3_RANGE_S = (0.01, 40.95)
# The only forwarding method the role sets up end to end (VIP on the real servers' lo, ARP kept quiet there).
SUPPORTED_METHODS = ("DR",)
# keepalived 2.2.7 reads these as whole seconds (read_unsigned_strvec in vrrp_parser.c / check_misc.c).
WHOLE_SECOND_KEYS = ("interval_s", "timeout_s")
# max_auto_priority takes -1 (off) to 99 (sched_get_priority_max(SCHED_RR)), keepalived.conf(5).
MAX_AUTO_PRIORITY_RANGE = (-1, 99)
# An unquoted # or ! starts a comment in keepalived's parser; a " ends a quoted string and cannot be escaped in
# most keywords, a newline ends the line: such values are quoted (# !) or refused (" \ newline).
COMMENT_CHARS = ("#", "!")
UNQUOTABLE_CHARS = ('"', "\\", "\n", "\r")
# The role writes the names of VRRP instances, scripts and sync groups as bare words: keepalived's parser splits a
# line at blanks, starts a comment at # or !, reads a brace as a block's edge and a quote as a string's (parser.c).
# Such a name fails `keepalived -t` ("vrrp_instance must have a name", "Unknown keyword '}'").
NAME_BREAKING = re.compile(r'[\s#!{}"]')
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
# keepalived.conf(5) and vrrp_parser.c: preempt_delay 0-1000 s ("Preempt_delay not valid! must be between 0-1000"),
# a vrrp_script weight -253 to 253 ("weight ... must be in [-253, 253]"); both fail `keepalived --config-test`.
PREEMPT_DELAY_RANGE_S = (0, 1000)
SCRIPT_WEIGHT_RANGE = (-253, 253)
# A track_file's weight as VRRP instances use it (keepalived.conf(5), "Track files": -254..254 in track_file { }).
TRACK_FILE_WEIGHT_RANGE = (-254, 254)
# A vrrp_track_process (keepalived.conf(5) 2.2.7, "VRRP track processes", and its config test's messages): weight
# -254..254, also in an instance's track_process block; quorum 1..65535, quorum_max 0..65535 (0 only with quorum 1:
# "quorum_max is less than quorum - ignoring"); each delay 0.000001..3600 s in whole microseconds; param_match initial
# or partial ("Invalid param_match type"). Without full_command, parameters or param_match keepalived compares the
# process with /proc/PID/comm, which holds the program's file name without its folder, cut to TASK_COMM_LEN - 1 = 15
# bytes (proc(5)): a longer name, or a path, never matches.
TRACK_PROCESS_WEIGHT_RANGE = (-254, 254)
QUORUM_RANGE = (1, 65535)
QUORUM_MAX_RANGE = (0, 65535)
PROCESS_DELAY_RANGE_S = (0.000001, 3600)
PARAM_MATCHES = ("initial", "partial")
COMM_MAX_BYTES = 15
# What an instance tracks by name: (its list of names, the config key that defines them, the role variable).
TRACKED = (("track_scripts", "vrrp_scripts", "lvs_director_vrrp_scripts"),
           ("track_files", "track_files", "lvs_director_track_files"),
           ("track_processes", "track_processes", "lvs_director_track_processes"))
# A weight keepalived does not take: on an address owner (priority 255), and on an instance in a sync group.
OWNER_WEIGHTED = {
    "track_scripts": "{key}.priority is 255 (address owner) with the weighted track script '{name}' (weight "
    "{weight}), which keepalived drops (\"Cannot have weighted track script\"), so it can never move the VIP; use a "
    "priority of 254 or less, or a script without weight",
    "track_files": "{key}.priority is 255 (address owner) with the track file '{name}' of weight {weight}, and "
    "keepalived.conf(5) requires weight 0 for an address owner; use a priority of 254 or less, or weight 0 (a non-zero "
    "number in the file then faults the instance)",
    "track_processes": "{key}.priority is 255 (address owner) with the track process '{name}' of weight {weight}, "
    "and keepalived.conf(5) requires weight 0 for an address owner (whose priority track_process cannot lower, so the "
    "weight never moves the VIP; keepalived's config test passes it); use a priority of 254 or less, or weight 0 (a "
    "lost quorum then faults the instance)",
}
SYNC_GROUP_WEIGHTED = {
    "track_scripts": "{key} has {member}, which tracks the weighted script(s) {names}; keepalived ignores weights in a "
    "sync group and its config test fails (\"ignoring tracked script ... with weights due to SYNC group\"); drop the "
    "weight (a failing script then faults the whole group)",
    "track_files": "{key} has {member}, which tracks the track file(s) {names} with a weight, and keepalived.conf(5) "
    "requires weight 0 for a track file of an instance in a sync group; set weight 0 (a non-zero number in the file "
    "then faults the whole group)",
    "track_processes": "{key} has {member}, which tracks the track process(es) {names} with a weight, and "
    "keepalived.conf(5) requires weight 0 for a track process of an instance in a sync group (keepalived's config test "
    "passes it, and the members' priorities then differ); set weight 0 (a lost quorum then faults the whole group)",
}


def _instance_problems(host: str, config: dict[str, Any], instance: dict[str, Any]) -> list[dict[str, Any]]:
    key = f"{host}: lvs_director_vrrp_instances[{instance['name']}]"
    found = []
    vrid, priority, version = instance["virtual_router_id"], instance["priority"], instance["vrrp_version"]
    if not VRID_RANGE[0] <= vrid <= VRID_RANGE[1]:
        found.append(f"{key}.virtual_router_id is {vrid}; use a VRID from 1 to 255, the same on every peer")
    if not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
        found.append(
            f"{key}.priority is {priority} (lvs_director_priority unless the instance sets it); use 1 to 255, "
            "highest on the intended master"
        )
    known = config["known_interfaces"]
    if not instance["interface"]:
        found.append(
            f"{key}.interface is empty (lvs_director_interface found no default IPv4 route); set "
            "lvs_director_interface to the NIC that carries the VIPs"
        )
    elif known is not None and instance["interface"] not in known:
        found.append(
            f"{key}.interface is {instance['interface']}, which this host does not have "
            f"({', '.join(sorted(known))}); set lvs_director_interface (or the instance's interface) to the NIC that "
            "carries the VIPs"
        )
    if not instance["virtual_ipaddresses"]:
        found.append(f"{key}.virtual_ipaddresses is empty; list the VIPs this instance moves")
    if instance["auth_pass"] is not None:
        if version == 3:
            found.append(
                f"{key}.auth_pass is set with vrrp_version 3, which has no authentication; remove auth_pass or use "
                "vrrp_version 2"
            )
        elif len(instance["auth_pass"]) > AUTH_PASS_MAX_CHARS:
            found.append(
                f"{key}.auth_pass is {len(instance['auth_pass'])} characters but keepalived uses only the first "
                f"{AUTH_PASS_MAX_CHARS}; use a secret of at most {AUTH_PASS_MAX_CHARS} characters"
            )
    advert = instance["advert_int_s"]
    whole_seconds = isinstance(advert, int) and ADVERT_INT_V2_RANGE_S[0] <= advert <= ADVERT_INT_V2_RANGE_S[1]
    if version == 2 and not whole_seconds:
        found.append(
            f"{key}.advert_int_s is {advert} with vrrp_version 2, which counts whole seconds (1-255); use a whole "
            "number, or vrrp_version 3 for sub-second adverts"
        )
    if version == 3 and not ADVERT_INT_V3_RANGE_S[0] <= advert <= ADVERT_INT_V3_RANGE_S[1]:
        found.append(f"{key}.advert_int_s is {advert}; VRRPv3 allows 0.01 to 40.95 seconds")
    if instance["nopreempt"] and instance["state"] == "MASTER":
        found.append(
            f"{key}.nopreempt is set with state MASTER, which keepalived does not honour; use state BACKUP on every "
            "peer of a nopreempt instance"
        )
    if instance["preempt_delay_s"] is not None and instance["nopreempt"]:
        found.append(
            f"{key}.preempt_delay_s is set with nopreempt, which never preempts; keep one of the two"
        )
    elif instance["preempt_delay_s"] is not None and instance["state"] == "MASTER":
        found.append(
            f"{key}.preempt_delay_s is set with state MASTER, which keepalived ignores (and its config test fails); "
            "use state BACKUP on every peer of an instance with preempt_delay_s"
        )
    delay = instance["preempt_delay_s"]
    if delay is not None and not PREEMPT_DELAY_RANGE_S[0] <= delay <= PREEMPT_DELAY_RANGE_S[1]:
        found.append(f"{key}.preempt_delay_s is {delay}; keepalived takes 0 to 1000 seconds")
    found += _unicast_problems(config, instance, key)
    found += _instance_address_problems(config, instance, key)
    for kind, defined_in, variable in TRACKED:
        for name, definition in _tracked(config, instance, kind, defined_in):
            if definition is None:
                found.append(
                    f"{key}.{kind} names '{name}', which {variable} does not define; define it there or remove it"
                )
            elif priority == PRIORITY_RANGE[1] and definition["weight"]:
                found.append(OWNER_WEIGHTED[kind].format(key=key, name=name, weight=definition["weight"]))
    found += _instance_process_problems(instance, key)
    if instance["auth_pass"] is not None and _unquotable(instance["auth_pass"]):
        found.append(
            f"{key}.auth_pass contains a double quote, a backslash or a line break, which keepalived cannot read "
            "inside a quoted value (the secret is not shown); use a secret without them"
        )
    return [finding([host], message) for message in found]


def _repeated(names: list[str]) -> list[str]:
    """The names that occur more than once, sorted."""
    return sorted({name for name in names if names.count(name) > 1})


def _tracked(config: dict[str, Any], instance: dict[str, Any] | None, kind: str,
             defined_in: str) -> list[tuple[str, dict[str, Any] | None]]:
    """(name, its definition or None) of each script, file or process the instance tracks, in the instance's order.

    A weight the instance gives a process replaces the definition's (keepalived.conf(5): "weight defaults to weight
    configured in vrrp_track_process").
    """
    definitions = {entry["name"]: entry for entry in config[defined_in]}
    found: list[tuple[str, dict[str, Any] | None]] = []
    for item in (instance or {}).get(kind, []):
        name, weight = (item["name"], item["weight"]) if isinstance(item, dict) else (item, None)
        definition = definitions.get(name)
        found.append((name, definition if definition is None or weight is None else dict(definition, weight=weight)))
    return found


def _instance_process_problems(instance: dict[str, Any], key: str) -> list[str]:
    """An instance's own track_process lines keepalived refuses: a name twice, a weight outside -254..254."""
    found = []
    names = [item["name"] for item in instance["track_processes"]]
    for name in _repeated(names):
        found.append(f"{key}.track_processes names '{name}' twice, which keepalived refuses (\"duplicate "
                     f"track_process {name} - ignoring\"); list it once")
    for item in instance["track_processes"]:
        if item["weight"] is not None and _out_of_range(item["weight"], *TRACK_PROCESS_WEIGHT_RANGE):
            found.append(f"{key}.track_processes gives '{item['name']}' weight {item['weight']}; keepalived takes "
                         "-254 to 254")
    return found


def _name_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Names keepalived would read as something else than one word (NAME_BREAKING)."""
    named = [(f"lvs_director_{kind}", entry["name"])
             for kind in ("vrrp_instances", "vrrp_scripts", "track_files", "track_processes", "vrrp_sync_groups")
             for entry in config[kind]]
    return [
        f"{host}: {key}[{name}].name is {name!r}, which keepalived cannot read as one word (a blank, #, !, a brace "
        "or a quote splits or ends it); use letters, digits, '_', '-' and '.'"
        for key, name in named if not name or NAME_BREAKING.search(name)
    ]


def _unquotable(value: Any) -> bool:
    return any(char in str(value) for char in UNQUOTABLE_CHARS)


def _quote_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Values the template writes in double quotes: keepalived has no escape for a quote there."""
    found = []
    if _unquotable(config["router_id"]):
        found.append(f"{host}: lvs_director_router_id {config['router_id']!r} contains a double quote, a backslash "
                     "or a line break, which keepalived cannot read; use plain characters")
    values = [(f"lvs_director_vrrp_scripts[{s['name']}].script", s["script"]) for s in config["vrrp_scripts"]]
    values += [(f"lvs_director_track_files[{t['name']}].file", t["file"]) for t in config["track_files"]]
    values += [(f"lvs_director_track_processes[{p['name']}].process", word)
               for p in config["track_processes"] for word in p["process"]]
    for instance in config["vrrp_instances"]:
        values += [(f"lvs_director_vrrp_instances[{instance['name']}].{k}", instance[k]) for k in NOTIFY_KEYS]
    for group in config["vrrp_sync_groups"]:
        values += [(f"lvs_director_vrrp_sync_groups[{group['name']}].{k}", group[k]) for k in SYNC_GROUP_DEFAULTS]
    for server in config["virtual_servers"]:
        key = f"lvs_director_virtual_servers[{server['address']}:{server['port']}]"
        values += [(f"{key}.{k}", server[k]) for k in ("quorum_up", "quorum_down", "virtualhost")]
        for real in server["real_servers"]:
            real_key = f"{key}.real_servers[{real['address']}]"
            values += [(f"{real_key}.{k}", real[k]) for k in REAL_SERVER_SCRIPT_KEYS]
            values += [(f"{real_key}.{name}.{k}", check[k])
                       for name, check in zip(check_names(real["checks"]), real["checks"])
                       for k in ("misc_path", "url_path", "virtualhost")]
    for key, value in values:
        if value is not None and _unquotable(value):
            found.append(f"{host}: {key} is {value!r}, which holds a double quote, a backslash or a line break that "
                         "keepalived cannot read inside a quoted value; use a wrapper script without them")
    return found


def _unicast_problems(config: dict[str, Any], instance: dict[str, Any], key: str) -> list[str]:
    peers, source = instance["unicast_peers"], instance["unicast_src_ip"]
    if peers is None and source is None:
        return []
    if not peers:
        return [
            f"{key}.unicast_peers is empty while unicast is configured (unicast_src_ip or unicast_peers is set); "
            "list the other directors' addresses, or drop both keys for multicast"
        ]
    own = set(config["own_addresses"]) | ({str(source)} if source else set())
    mine = sorted(own.intersection(peers))
    if mine:
        return [f"{key}.unicast_peers contains this host's own address {', '.join(mine)}; list only the peers"]
    return []


def _virtual_server_problems(host: str, config: dict[str, Any], server: dict[str, Any]
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
    if kind == "MISC_CHECK" and check["misc_timeout_s"] is not None and not _whole_positive(check["misc_timeout_s"]):
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


def _whole_positive(value: Any) -> bool:
    return isinstance(value, int) and value >= 1


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


def _global_problems(host: str, config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the host-wide settings."""
    found, warnings = [], []
    auto = config["max_auto_priority"]
    if auto is not None and not MAX_AUTO_PRIORITY_RANGE[0] <= auto <= MAX_AUTO_PRIORITY_RANGE[1]:
        found.append(f"{host}: lvs_director_max_auto_priority is {auto}; use -1 (off) to 99")
    for key, value in (config["lvs_timeouts"] or {}).items():
        if not _whole_positive(value):
            found.append(f"{host}: lvs_director_lvs_timeouts.{key} is {value}; use a whole number of seconds, 1 or "
                         "more")
    for script in config["vrrp_scripts"]:
        found += _script_range_problems(host, script)
        for key in WHOLE_SECOND_KEYS:
            value = script[key]
            if value is not None and not _whole_positive(value):
                found.append(
                    f"{host}: lvs_director_vrrp_scripts[{script['name']}].{key} is {value}, but keepalived 2.2.7 "
                    "reads whole seconds; use a whole number of at least 1"
                )
    found += _track_file_problems(host, config)
    found += _track_process_problems(host, config)
    sysctls = config["sysctls"] or {}
    inhibited = [server for server in config["virtual_servers"] if server["inhibit_on_failure"]]
    if config["virtual_servers"] and not inhibited and str(
        sysctls.get("net.ipv4.vs.expire_quiescent_template", "0")
    ) == "1":
        warnings.append(
            f"{host}: lvs_director_sysctls sets net.ipv4.vs.expire_quiescent_template=1, which acts only on real "
            "servers at weight 0, but no virtual server sets inhibit_on_failure; set inhibit_on_failure: true or "
            "drop the setting"
        )
    return found, warnings


def _track_file_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Track files keepalived would refuse or read elsewhere: a duplicate name, a relative path, a weight off range."""
    found = []
    names = [track["name"] for track in config["track_files"]]
    for name in _repeated(names):
        found.append(f"{host}: lvs_director_track_files has two entries named '{name}'; rename one")
    for track in config["track_files"]:
        key = f"{host}: lvs_director_track_files[{track['name']}]"
        if not track["file"].startswith("/"):
            found.append(
                f"{key}.file is {track['file']!r}, a relative path, which keepalived resolves against its own working "
                "folder; give an absolute path"
            )
        if _out_of_range(track["weight"], *TRACK_FILE_WEIGHT_RANGE):
            found.append(f"{key}.weight is {track['weight']}; a VRRP instance takes -254 to 254")
    return found


def _track_process_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Track processes keepalived would refuse or never match: a duplicate name, a value off range, a quorum above
    quorum_max, a process name /proc/PID/comm cannot hold."""
    found = []
    names = [track["name"] for track in config["track_processes"]]
    for name in _repeated(names):
        found.append(f"{host}: lvs_director_track_processes has two entries named '{name}', and keepalived tracks "
                     "only the first; rename one")
    for track in config["track_processes"]:
        key = f"{host}: lvs_director_track_processes[{track['name']}]"
        found += _process_range_problems(key, track)
        quorum, quorum_max = track["quorum"] or 1, track["quorum_max"]
        if quorum_max is not None and (quorum_max or quorum > 1) and quorum_max < quorum:
            found.append(f"{key}.quorum is {quorum}, above quorum_max {quorum_max}, and keepalived ignores "
                         "quorum_max then (\"quorum_max is less than quorum - ignoring\"); raise quorum_max or lower "
                         "quorum")
        if track["param_match"] is not None and track["param_match"] not in PARAM_MATCHES:
            found.append(f"{key}.param_match is {track['param_match']!r}, which keepalived ignores (\"Invalid "
                         "param_match type\"); use initial or partial, or leave it unset")
        command = track["process"][0]
        matches_comm = not (track["full_command"] or track["param_match"] or len(track["process"]) > 1)
        if matches_comm and ("/" in command or len(command.encode()) > COMM_MAX_BYTES):
            found.append(f"{key}.process is {command!r}, but without full_command keepalived compares it with the "
                         "process name (/proc/PID/comm), which is the program's file name without its folder and at "
                         f"most {COMM_MAX_BYTES} bytes, so it never matches; give that name, or set full_command: true")
    return found


def _process_range_problems(key: str, track: dict[str, Any]) -> list[str]:
    found = []
    if _out_of_range(track["weight"], *TRACK_PROCESS_WEIGHT_RANGE):
        found.append(f"{key}.weight is {track['weight']}; a VRRP instance takes -254 to 254")
    for field, (low, high) in (("quorum", QUORUM_RANGE), ("quorum_max", QUORUM_MAX_RANGE)):
        if track[field] is not None and _out_of_range(track[field], low, high):
            found.append(f"{key}.{field} is {track[field]}; keepalived takes {low} to {high}")
    for field in TRACK_PROCESS_DELAY_KEYS:
        value = track[field]
        if value is not None and (_out_of_range(value, *PROCESS_DELAY_RANGE_S) or round(value * 1e6, 3) % 1):
            found.append(f"{key}.{field} is {value}; keepalived takes 0.000001 to 3600 seconds in whole "
                         "microseconds")
    return found


def _process_events_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Track processes on a host whose kernel gives keepalived no process events.

    keepalived reads /proc once at its start and then learns of each process start and end from the kernel's process
    events (keepalived.conf(5), "VRRP track processes"). The kernel sends them only when built with CONFIG_PROC_EVENTS
    (Debian's user-mode Linux 6.1 is not, and keepalived there never sees a process start) and only in the initial
    network namespace: in a container's or an `ip netns` one it refuses the request (ECONNREFUSED), and keepalived
    2.2.7 logs "Failed to set/clear process event listen - errno 111 - Connection refused" and holds each instance
    that tracks a process in FAULT however many run.
    """
    refused = config["process_events_refused"]
    trackers = [instance["name"] for instance in config["vrrp_instances"] if instance["track_processes"]]
    if refused is None or not trackers:
        return []
    return [
        f"{host}: lvs_director_vrrp_instances {', '.join(trackers)} track processes, but keepalived would learn of no "
        f"process start or end on this host ({refused.strip()}): the kernel sends process events only when built with "
        "CONFIG_PROC_EVENTS, and only in the initial network namespace, not in a container's own or an ip netns one. "
        "An instance that tracks a process would keep the state it had when keepalived started, or stay in FAULT "
        "where the kernel refuses keepalived's request (\"Failed to set/clear process event listen\"); run keepalived "
        "in the host's network namespace on a kernel with process events, or track the process with a vrrp script "
        "(lvs_director_vrrp_scripts, e.g. pidof) instead"
    ]


def host_problems(config: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    host = config["host"]
    errors, warnings = [], []
    global_errors, global_warnings = _global_problems(host, config)
    errors += [finding([host], message) for message in global_errors]
    warnings += [finding([host], message) for message in global_warnings]
    errors += [finding([host], message) for message in _quote_problems(host, config) + script_problems(host, config)]
    if not config["vrrp_only"] and not config["ipvs_available"]:
        errors.append(
            finding(
                [host], f"{host}: this kernel has no IPVS (no /proc/net/ip_vs and modprobe cannot load ip_vs), so "
                "keepalived would exit a second after it starts; install the ip_vs module, or set "
                "lvs_director_vrrp_only: true to run VRRP only"
            )
        )
    errors += [finding([host], message) for message in _process_events_problems(host, config)]
    if not config["vrrp_instances"]:
        errors.append(
            finding([host], f"{host}: lvs_director_vrrp_instances is empty; define at least one VRRP instance")
        )
    errors += [finding([host], message) for message in _name_problems(host, config)]
    names = [instance["name"] for instance in config["vrrp_instances"]]
    for name in _repeated(names):
        errors.append(
            finding([host], f"{host}: lvs_director_vrrp_instances has two instances named '{name}'; rename one")
        )
    for instance in config["vrrp_instances"]:
        errors += _instance_problems(host, config, instance)
    errors += [finding([host], message) for message in route_problems(host, config)]
    errors += [finding([host], m) for m in _vrid_problems(host, config) + _sync_group_problems(host, config)]
    endpoints = [(s["address"], s["port"], s["protocol"]) for s in config["virtual_servers"]]
    for address, port, protocol in sorted({e for e in endpoints if endpoints.count(e) > 1}):
        errors.append(
            finding(
                [host], f"{host}: lvs_director_virtual_servers lists {address}:{port}/{protocol} more than once; "
                "merge the entries"
            )
        )
    for server in config["virtual_servers"]:
        server_errors, server_warnings = _virtual_server_problems(host, config, server)
        errors += server_errors
        warnings += server_warnings
    return errors, warnings


def _out_of_range(value: Any, low: float, high: float | None = None) -> bool:
    return value is not None and (value < low or (high is not None and value > high))


def _port_problem(key: str, port: Any) -> list[str]:
    return [f"{key} is {port}; use a port from 1 to 65535"] if _out_of_range(port, *PORT_RANGE) else []


def _virtual_server_range_problems(key: str, server: dict[str, Any]) -> list[str]:
    """Ports, weights and times of one virtual server; a real server's port is checked only where it differs (DR)."""
    found = _port_problem(f"{key}.port", server["port"])
    sorry = server["sorry_server"]
    if sorry and sorry["port"] != server["port"]:
        found += _port_problem(f"{key}.sorry_server.port", sorry["port"])
    if server["delay_loop_s"] <= 0:
        found.append(f"{key}.delay_loop_s is {server['delay_loop_s']}; use a positive number of seconds")
    if _out_of_range(server["persistence_timeout_s"], 0):
        found.append(f"{key}.persistence_timeout_s is {server['persistence_timeout_s']}; use 0 (off) or more seconds")
    found += _granularity_problems(key, server)
    if _out_of_range(server["quorum"], 1):
        found.append(f"{key}.quorum is {server['quorum']}; keepalived replaces a quorum below 1 with 1: use 1 or more")
    for real in server["real_servers"]:
        real_key = f"{key}.real_servers[{real['address']}]"
        if real["port"] != server["port"]:
            found += _port_problem(f"{real_key}.port", real["port"])
        if _out_of_range(real["weight"], *WEIGHT_RANGE):
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
    if _out_of_range(check["retry"], 0):
        found.append(f"{key}.retry is {check['retry']}; use 0 or more retries")
    if _out_of_range(check["delay_before_retry_s"], 0):
        found.append(f"{key}.delay_before_retry_s is {check['delay_before_retry_s']}; use 0 or more seconds")
    return found


def _script_range_problems(host: str, script: dict[str, Any]) -> list[str]:
    key = f"{host}: lvs_director_vrrp_scripts[{script['name']}]"
    found = []
    if _out_of_range(script["weight"], *SCRIPT_WEIGHT_RANGE):
        found.append(f"{key}.weight is {script['weight']}; keepalived takes -253 to 253")
    for field in ("fall", "rise"):
        if _out_of_range(script[field], 1):
            found.append(f"{key}.{field} is {script[field]}; use 1 or more")
    return found


def _family_name(address: Any) -> str:
    return FAMILY_NAMES.get(address_family(address), "not an address")


def _instance_address_problems(config: dict[str, Any], instance: dict[str, Any], key: str) -> list[str]:
    """VIPs that are this host's own addresses, VIPs of two families, unicast addresses of the other family."""
    found = []
    own = sorted(set(config["own_addresses"]) & {vip_address(vip) for vip in instance["virtual_ipaddresses"]})
    if own:
        found.append(
            f"{key}.virtual_ipaddresses has {', '.join(own)}, which is this host's own address, so a failover would "
            "take it from this host; use a free address as the VIP"
        )
    if len({address_family(vip) for vip in instance["virtual_ipaddresses"]}) > 1:
        found.append(
            f"{key}.virtual_ipaddresses mixes IPv4 and IPv6 ({', '.join(instance['virtual_ipaddresses'])}), so "
            "keepalived keeps the family of the first and the other VIPs stay up on every node (keepalived issue "
            "2146); use one instance per family (they may share the VRID) and put both in one "
            "lvs_director_vrrp_sync_groups entry"
        )
    family = FAMILY_NAMES[instance["family"]]
    source = instance["unicast_src_ip"]
    if source and address_family(source) != instance["family"]:
        found.append(
            f"{key}.unicast_src_ip {source} is {_family_name(source)} but the instance's VIPs are {family}; use "
            f"this host's {family} address"
        )
    other = [peer for peer in instance["unicast_peers"] or [] if address_family(peer) != instance["family"]]
    if other:
        found.append(
            f"{key}.unicast_peers has {', '.join(other)}, not {family} like the instance's VIPs; list the peers' "
            f"{family} addresses"
        )
    return found


def _vrid_problems(host: str, config: dict[str, Any]) -> list[str]:
    """keepalived keys instances by VRID, family and interface: two alike on one host fail its config test."""
    seen = defaultdict(list)
    for instance in config["vrrp_instances"]:
        seen[(instance["virtual_router_id"], instance["family"], instance["interface"])].append(instance["name"])
    return [
        f"{host}: lvs_director_vrrp_instances {' and '.join(names)} all use VRID {vrid} for {FAMILY_NAMES[family]} on "
        f"{interface}, which keepalived refuses; give each its own VRID (an IPv4 and an IPv6 instance may share one)"
        for (vrid, family, interface), names in sorted(seen.items()) if len(names) > 1
    ]


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


def _sync_group_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Groups keepalived refuses or that cannot move together: unknown or shared members, mixed states, one member."""
    found = []
    instances = {instance["name"]: instance for instance in config["vrrp_instances"]}
    names = [group["name"] for group in config["vrrp_sync_groups"]]
    for name in _repeated(names):
        found.append(f"{host}: lvs_director_vrrp_sync_groups has two groups named '{name}'; rename one")
    member_of = defaultdict(list)
    for group in config["vrrp_sync_groups"]:
        key = f"{host}: lvs_director_vrrp_sync_groups[{group['name']}]"
        members = list(dict.fromkeys(group["instances"]))
        for member in members:
            member_of[member].append(group["name"])
            if member not in instances:
                found.append(
                    f"{key}.instances names '{member}', which lvs_director_vrrp_instances does not define; define it "
                    "there or remove it from the group"
                )
        if len(members) < 2:
            found.append(
                f"{key} has {len(members)} instance(s), and keepalived's config test fails on a sync group of fewer "
                f"than two (\"Sync group {group['name']} has only 1 virtual router(s)\"); list the instances that "
                "must move together, or drop the group"
            )
        for kind, defined_in, _variable in TRACKED:
            for member in members:
                weighted = [name for name, definition in _tracked(config, instances.get(member), kind, defined_in)
                            if definition is not None and definition["weight"]]
                if weighted:
                    found.append(SYNC_GROUP_WEIGHTED[kind].format(key=key, member=member, names=", ".join(weighted)))
        states = {member: instances[member]["state"] for member in members if member in instances}
        if len(set(states.values())) > 1:
            listing = ", ".join(f"{member} {state}" for member, state in states.items())
            found.append(
                f"{key} has members in different states ({listing}), but a sync group changes state as one; give "
                "its instances one state"
            )
    for member, groups in sorted(member_of.items()):
        if len(groups) > 1:
            found.append(
                f"{host}: lvs_director_vrrp_instances[{member}] is in more than one sync group "
                f"({', '.join(groups)}), and keepalived allows one; keep it in one group"
            )
    return found
