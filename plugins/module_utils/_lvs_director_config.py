# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's config model, first room: one director's role variables -> its complete config.

``resolve`` fills in every default once (each VRRP instance gets the host's interface, state, priority, version and
advert interval unless it sets its own; each real server the service's port and check), turns numbers into numbers and
VIPs into addresses with a prefix length. The role's template renders only its result, and
``_lvs_director_problems`` checks it. A value it cannot read raises ``LvsDirectorConfigError`` naming the variable;
the filter plugin turns that into an AnsibleFilterError.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Callable

from ansible_collections.hpc.balance.plugins.module_utils._addresses import address_spelling
from ansible_collections.hpc.balance.plugins.module_utils._booleans import BooleanInputError, read_boolean

INSTANCE_DEFAULTS: dict[str, Any] = {
    "auth_pass": None,
    "nopreempt": False,
    "preempt_delay_s": None,
    "unicast_src_ip": None,
    "unicast_peers": None,
    "track_scripts": [],
    "track_files": [],
    "track_processes": [],
    "track_interfaces": [],
    "virtual_routes": [],
    "notify": None,
    "notify_master": None,
    "notify_backup": None,
    "notify_fault": None,
    "notify_stop": None,
}
# notify_stop runs when keepalived's VRRP process stops (keepalived.conf(5), vrrp_instance and vrrp_sync_group).
NOTIFY_KEYS = ("notify_master", "notify_backup", "notify_fault", "notify_stop", "notify")
# A route of a VRRP instance's virtual_routes: keepalived adds it on becoming MASTER and deletes it on leaving MASTER
# (keepalived.conf(5), "virtual_routes"). `track` (keepalived's default): a route deleted by someone else faults the
# instance; keepalived can follow only a route with an interface (dev). Otherwise written with no_track.
ROUTE_DEFAULTS: dict[str, Any] = {
    "via": None, "dev": None, "src": None, "table": None, "metric": None, "blackhole": False, "track": True,
}
# A vrrp_sync_group: instances that change state together, with notify scripts of the group (keepalived.conf(5)).
SYNC_GROUP_DEFAULTS: dict[str, Any] = {
    "notify": None, "notify_master": None, "notify_backup": None, "notify_fault": None, "notify_stop": None,
}
VRRP_SCRIPT_DEFAULTS: dict[str, Any] = {"interval_s": 1, "timeout_s": None, "fall": None, "rise": None, "weight": None}
# A track_file: keepalived reads a number from the file whenever it changes (keepalived.conf(5), "Track files"). With
# weight 0 a non-zero number faults the instances that track it; otherwise number x weight is added to their priority.
# keepalived's own default weight is 1; init_value writes that number at startup where the file is missing.
TRACK_FILE_DEFAULTS: dict[str, Any] = {"weight": 1, "init_value": None, "init_overwrite": False}
# A vrrp_track_process: keepalived counts the running processes that match `process` (keepalived.conf(5), "VRRP track
# processes"); quorum to quorum_max of them is OK. With weight 0 a lost quorum faults the instances that track it;
# otherwise the weight is added to (or, negative, taken from) their priority. keepalived.conf(5) gives weight 1 as the
# default, but keepalived 2.2.7 starts a block at 0 (its config test refuses a second weight line only after a non-zero
# one: "Weight already set for track process"), so the role keeps the man page's 1 and the template always writes it.
# A track process's delays, in seconds (keepalived's delay, fork_delay, terminate_delay).
TRACK_PROCESS_DELAY_KEYS = ("fork_delay_s", "terminate_delay_s", "delay_s")
TRACK_PROCESS_DEFAULTS: dict[str, Any] = {
    "weight": 1, "reverse": False, "param_match": None, "quorum": None, "quorum_max": None,
    "fork_delay_s": None, "terminate_delay_s": None, "delay_s": None, "full_command": False,
}
VIRTUAL_SERVER_DEFAULTS: dict[str, Any] = {
    "protocol": "TCP",
    "lvs_sched": "wlc",
    "scheduler_flags": [],
    "lvs_method": "DR",
    "persistence_timeout_s": None,
    "persistence_granularity": None,
    "quorum": None,
    "hysteresis": None,
    "quorum_up": None,
    "quorum_down": None,
    "sorry_server": None,
    "sorry_server_inhibit": False,
    "alpha": False,
    "virtualhost": None,
    "delay_loop_s": 6,
}
REAL_SERVER_SCRIPT_KEYS = ("notify_up", "notify_down")
CHECK_DEFAULTS: dict[str, Any] = {
    "type": None,
    "connect_timeout_s": 3,
    "retry": 3,
    "delay_before_retry_s": 2,
    "connect_port": None,
    "url_path": "/",
    "status_code": "200-299",
    "virtualhost": None,
    "misc_path": None,
    "misc_timeout_s": None,
    "require_reply": False,
    "payload_hex": None,
    "dns_type": None,
    "dns_name": None,
    # The MD5 of the page's body as keepalived's genhash prints it (HTTP_GET, SSL_GET): with status_code, both must
    # match (keepalived.conf(5), "url": "healthcheck needs digest or status_code and digest").
    "digest": None,
}
CHECK_TYPES = ("TCP_CHECK", "HTTP_GET", "SSL_GET", "UDP_CHECK", "DNS_CHECK", "PING_CHECK", "MISC_CHECK", "none")
# The check a service gets when it names none: a connect for TCP, a UDP probe for UDP, an ICMP echo for SCTP.
# keepalived 2.2.7 has no SCTP check: TCP_CHECK opens a TCP connection (check_tcp.c), which an SCTP-only service
# never accepts, so every real server would fail it; PING_CHECK (check_ping.c) at least finds a host that is gone.
DEFAULT_CHECK_BY_PROTOCOL = {"TCP": "TCP_CHECK", "SCTP": "PING_CHECK", "UDP": "UDP_CHECK"}


class LvsDirectorConfigError(ValueError):
    """A role variable that cannot be read (not a number, not an address); the message names it and the fix."""


def _flag(value: Any, what: str, default: bool = False) -> bool:
    """A boolean role variable read the way Ansible reads one ("false", "no", "0", "off" are False)."""
    try:
        return read_boolean(value, what, default=default)
    except BooleanInputError as error:
        raise LvsDirectorConfigError(f"lvs_director_resolve: {error}") from None


def address_family(address: Any) -> int | None:
    """4 or 6 for an address with or without a prefix length ('2001:db8::1/128' -> 6); None when it is none."""
    try:
        return ipaddress.ip_interface(str(address).strip()).version
    except ValueError:
        return None


def _number(value: Any, what: str) -> int | float:
    """An int when the value is whole (so 1 renders as 1, not 1.0), else a float; LvsDirectorConfigError otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LvsDirectorConfigError(f"lvs_director_resolve: {what} must be a number, got {value!r}") from None
    return int(number) if number.is_integer() else number


def _int(value: Any, what: str) -> int:
    number = _number(value, what)
    if not isinstance(number, int):
        raise LvsDirectorConfigError(f"lvs_director_resolve: {what} must be a whole number, got {value!r}")
    return number


def _optional(value: Any, convert: Callable[[Any, str], Any], what: str) -> Any:
    return None if value is None or value == "" else convert(value, what)


def _cidr(address: Any, what: str) -> str:
    """'198.18.0.100' -> '198.18.0.100/32'; keeps a given prefix length."""
    try:
        interface = ipaddress.ip_interface(str(address).strip())
    except ValueError:
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: {what} {address!r} is not an IP address (write it as 198.18.0.100 or "
            "198.18.0.100/32)"
        ) from None
    return interface.with_prefixlen


def _resolve_check(check: dict | None, default: dict, what: str, protocol: str = "TCP") -> dict[str, Any]:
    merged = dict(default)
    merged.update({key: value for key, value in (check or {}).items() if value is not None})
    merged["type"] = str(merged["type"] or DEFAULT_CHECK_BY_PROTOCOL.get(protocol, "TCP_CHECK"))
    if merged["type"] not in CHECK_TYPES:
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: {what}.type is {merged['type']!r}; use one of {CHECK_TYPES}"
        )
    # misc_timeout is a whole number in keepalived 2.2.7: kept as given, lvs_director_problems names a fraction.
    for key in ("connect_timeout_s", "delay_before_retry_s", "misc_timeout_s"):
        merged[key] = _optional(merged[key], _number, f"{what}.{key}")
    for key in ("retry", "connect_port"):
        merged[key] = _optional(merged[key], _int, f"{what}.{key}")
    merged["status_code"] = " ".join(str(merged["status_code"]).split())
    merged["require_reply"] = _flag(merged["require_reply"], f"{what}.require_reply")
    return merged


def _resolve_checks(entry: dict, inherited: list[dict], what: str, protocol: str) -> list[dict[str, Any]]:
    """A service's or a real server's health checks. keepalived runs every checker of a real server and counts it up
    only while none has failed (keepalived 2.2.7, check_data.h: real_server_t.num_failed_checkers).

    `checks` lists them, each over the role's defaults; `check` gives one, over the inherited one (a real server's
    over its service's, which then must have one); neither keeps the inherited ones."""
    single, several = entry.get("check"), entry.get("checks")
    if single is not None and several is not None:
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: {what} sets both check and checks; keep one (checks lists several)"
        )
    if several is not None:
        if not isinstance(several, (list, tuple)) or not several:
            raise LvsDirectorConfigError(
                f"lvs_director_resolve: {what}.checks is {several!r}; list one or more checks (type none for no "
                "check)"
            )
        return [_resolve_check(check, CHECK_DEFAULTS, f"{what}.checks[{index}]", protocol)
                for index, check in enumerate(several)]
    if len(inherited) > 1:
        if single is None:
            return [dict(check) for check in inherited]
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: {what}.check would change one of its service's {len(inherited)} checks; give "
            "it a list of its own in checks"
        )
    return [_resolve_check(single, inherited[0], f"{what}.check", protocol)]


def check_names(checks: list[dict[str, Any]]) -> list[str]:
    """How messages name each of a real server's checks: 'check' when it has one, else 'checks[0]', 'checks[1]'."""
    return ["check"] if len(checks) == 1 else [f"checks[{index}]" for index in range(len(checks))]


def _resolve_instance(instance: Any, host_defaults: dict[str, Any], index: int) -> dict[str, Any]:
    what = f"lvs_director_vrrp_instances[{index}]"
    if not isinstance(instance, dict) or not instance.get("name"):
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: {what} needs at least name, virtual_router_id, virtual_ipaddresses"
        )
    what = f"lvs_director_vrrp_instances[{instance['name']}]"
    resolved: dict[str, Any] = dict(INSTANCE_DEFAULTS)
    resolved.update(host_defaults)
    resolved.update({key: value for key, value in instance.items() if value is not None})
    resolved["name"] = str(resolved["name"])
    resolved["state"] = str(resolved["state"]).upper()
    resolved["virtual_router_id"] = _int(resolved.get("virtual_router_id"), f"{what}.virtual_router_id")
    resolved["priority"] = _int(resolved["priority"], f"{what}.priority")
    resolved["vrrp_version"] = _int(resolved["vrrp_version"], f"{what}.vrrp_version")
    resolved["advert_int_s"] = _number(resolved["advert_int_s"], f"{what}.advert_int_s")
    resolved["preempt_delay_s"] = _optional(resolved["preempt_delay_s"], _number, f"{what}.preempt_delay_s")
    resolved["nopreempt"] = _flag(resolved["nopreempt"], f"{what}.nopreempt")
    resolved["auth_pass"] = None if resolved["auth_pass"] in (None, "") else str(resolved["auth_pass"])
    resolved["virtual_ipaddresses"] = [
        _cidr(address, f"{what}.virtual_ipaddresses") for address in resolved.get("virtual_ipaddresses") or []
    ]
    if resolved["unicast_peers"] is not None:
        resolved["unicast_peers"] = [str(peer) for peer in resolved["unicast_peers"]]
    # keepalived takes an instance's family from its first VIP and ignores VIPs of the other family
    # (vrrp_parser.c: "address family must match VRRP instance"); lvs_director_problems refuses a mix.
    families = [address_family(vip) for vip in resolved["virtual_ipaddresses"]]
    resolved["family"] = families[0] if families else address_family(resolved["unicast_src_ip"]) or 4
    resolved["track_scripts"] = [str(name) for name in resolved["track_scripts"]]
    resolved["track_files"] = [str(name) for name in resolved["track_files"]]
    resolved["track_processes"] = [
        _resolve_instance_process(item, f"{what}.track_processes[{position}]")
        for position, item in enumerate(resolved["track_processes"])
    ]
    resolved["track_interfaces"] = [str(name) for name in resolved["track_interfaces"]]
    resolved["virtual_routes"] = [
        _resolve_route(route, f"{what}.virtual_routes[{position}]")
        for position, route in enumerate(resolved["virtual_routes"])
    ]
    for key in NOTIFY_KEYS:
        resolved[key] = None if resolved[key] in (None, "") else str(resolved[key])
    return resolved


def _resolve_virtual_server(server: Any, index: int, inhibit_on_failure: bool = True,
                            weights: dict[str, int] | None = None,
                            drained: frozenset[str] = frozenset()) -> dict[str, Any]:
    port = server.get("port") if isinstance(server, dict) else None
    what = f"lvs_director_virtual_servers[{index}]"
    if port is None or not server.get("address"):
        raise LvsDirectorConfigError(f"lvs_director_resolve: {what} needs address, port and real_servers")
    resolved: dict[str, Any] = dict(VIRTUAL_SERVER_DEFAULTS, inhibit_on_failure=inhibit_on_failure)
    resolved.update({key: value for key, value in server.items() if value is not None})
    resolved["address"] = str(resolved["address"])
    resolved["family"] = address_family(resolved["address"])
    resolved["port"] = _int(resolved["port"], f"{what}.port")
    what = f"lvs_director_virtual_servers[{resolved['address']}:{resolved['port']}]"
    resolved["protocol"] = str(resolved["protocol"]).upper()
    resolved["lvs_sched"] = str(resolved["lvs_sched"])
    resolved["scheduler_flags"] = [str(flag) for flag in resolved["scheduler_flags"]]
    resolved["lvs_method"] = str(resolved["lvs_method"]).upper()
    resolved["delay_loop_s"] = _number(resolved["delay_loop_s"], f"{what}.delay_loop_s")
    resolved["persistence_timeout_s"] = _optional(
        resolved["persistence_timeout_s"], _int, f"{what}.persistence_timeout_s"
    )
    for key in ("quorum", "hysteresis"):
        resolved[key] = _optional(resolved[key], _int, f"{what}.{key}")
    for key in ("inhibit_on_failure", "sorry_server_inhibit", "alpha"):
        resolved[key] = _flag(resolved[key], f"{what}.{key}")
    for key in ("persistence_granularity", "quorum_up", "quorum_down", "virtualhost"):
        resolved[key] = None if resolved[key] in (None, "") else str(resolved[key])
    if resolved["sorry_server"]:
        sorry = resolved["sorry_server"]
        resolved["sorry_server"] = {
            "address": str(sorry["address"]),
            "port": _int(sorry["port"] if sorry.get("port") is not None else resolved["port"],
                         f"{what}.sorry_server.port"),
        }
    checks = _resolve_checks(server, [CHECK_DEFAULTS], what, resolved["protocol"])
    resolved["checks"] = checks
    real_servers = []
    for real in server.get("real_servers") or []:
        real_what = f"{what}.real_servers[{real.get('address')}]"
        configured = _int(real.get("weight") if real.get("weight") is not None else 1, f"{real_what}.weight")
        real_servers.append(
            {
                "address": str(real["address"]),
                "port": _int(real.get("port") if real.get("port") is not None else resolved["port"],
                             f"{real_what}.port"),
                # A weight set from measured capacity (playbooks/rebalance.yml) wins over the configured one.
                "weight": (weights or {}).get(address_spelling(real["address"]), configured),
                "configured_weight": configured,
                # Drained (playbooks/lvs_drain.yml): written with weight 0, which keeps its connections.
                "drained": address_spelling(real["address"]) in drained,
                "notify_up": None if not real.get("notify_up") else str(real["notify_up"]),
                "notify_down": None if not real.get("notify_down") else str(real["notify_down"]),
                "checks": _resolve_checks(real, checks, real_what, resolved["protocol"]),
            }
        )
    resolved["real_servers"] = real_servers
    return resolved


def _named_entry(entry: Any, index: int, variable: str, required: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """A list entry that needs a name and `required`, with `defaults` under what it sets (None counts as unset)."""
    if not isinstance(entry, dict) or not entry.get("name") or not entry.get(required):
        raise LvsDirectorConfigError(f"lvs_director_resolve: {variable}[{index}] needs name and {required}")
    resolved = dict(defaults)
    resolved.update({key: value for key, value in entry.items() if value is not None})
    return resolved


def _resolve_script(script: Any, index: int) -> dict[str, Any]:
    resolved = _named_entry(script, index, "lvs_director_vrrp_scripts", "script", VRRP_SCRIPT_DEFAULTS)
    what = f"lvs_director_vrrp_scripts[{script['name']}]"
    # Kept as given (0.5 stays 0.5): lvs_director_problems names a fraction keepalived 2.2.7 cannot read.
    resolved["interval_s"] = _number(resolved["interval_s"], f"{what}.interval_s")
    resolved["timeout_s"] = _optional(resolved["timeout_s"], _number, f"{what}.timeout_s")
    for key in ("fall", "rise", "weight"):
        resolved[key] = _optional(resolved[key], _int, f"{what}.{key}")
    return resolved


def _resolve_track_file(track_file: Any, index: int) -> dict[str, Any]:
    resolved = _named_entry(track_file, index, "lvs_director_track_files", "file", TRACK_FILE_DEFAULTS)
    what = f"lvs_director_track_files[{track_file['name']}]"
    resolved["name"] = str(resolved["name"])
    resolved["file"] = str(resolved["file"])
    resolved["weight"] = _int(resolved["weight"], f"{what}.weight")
    resolved["init_value"] = _optional(resolved["init_value"], _int, f"{what}.init_value")
    resolved["init_overwrite"] = _flag(resolved["init_overwrite"], f"{what}.init_overwrite")
    return resolved


def _resolve_track_process(track_process: Any, index: int) -> dict[str, Any]:
    resolved = _named_entry(track_process, index, "lvs_director_track_processes", "process", TRACK_PROCESS_DEFAULTS)
    what = f"lvs_director_track_processes[{track_process['name']}]"
    resolved["name"] = str(resolved["name"])
    # The command, then its parameters: `process: haproxy` or `process: [/usr/sbin/haproxy, -f, /etc/haproxy.cfg]`.
    process = resolved["process"]
    resolved["process"] = [str(word) for word in process] if isinstance(process, (list, tuple)) else [str(process)]
    resolved["weight"] = _int(resolved["weight"], f"{what}.weight")
    resolved["param_match"] = None if resolved["param_match"] in (None, "") else str(resolved["param_match"])
    for key in ("quorum", "quorum_max"):
        resolved[key] = _optional(resolved[key], _int, f"{what}.{key}")
    for key in TRACK_PROCESS_DELAY_KEYS:
        resolved[key] = _optional(resolved[key], _number, f"{what}.{key}")
    for key in ("reverse", "full_command"):
        resolved[key] = _flag(resolved[key], f"{what}.{key}")
    return resolved


def _resolve_route(route: Any, what: str) -> dict[str, Any]:
    """{to, via, dev, src, table, metric, blackhole, track} -> the same with text as text, numbers as numbers, and the
    family of `to` (None when it is no address: lvs_director_problems names it)."""
    if not isinstance(route, dict) or route.get("to") in (None, ""):
        raise LvsDirectorConfigError(f"lvs_director_resolve: {what} needs to (the destination, e.g. 198.18.0.240/28)")
    resolved = dict(ROUTE_DEFAULTS)
    resolved.update({key: value for key, value in route.items() if value is not None})
    resolved["to"] = str(resolved["to"]).strip()
    for key in ("via", "dev", "src"):
        resolved[key] = None if resolved[key] in (None, "") else str(resolved[key]).strip()
    for key in ("table", "metric"):
        resolved[key] = _optional(resolved[key], _int, f"{what}.{key}")
    for key in ("blackhole", "track"):
        resolved[key] = _flag(resolved[key], f"{what}.{key}")
    resolved["family"] = address_family(resolved["to"])
    resolved["spelling"] = route_spelling(resolved)
    # The line of keepalived's virtual_routes block, without no_track: the template writes it, peers compare it.
    resolved["line"] = (f"src {resolved['src']} to " if resolved["src"] else "") + resolved["spelling"]
    return resolved


def route_spelling(route: dict[str, Any]) -> str:
    """A virtual route as keepalived's virtual_routes and `ip route del` read it, without src and no_track:
    'blackhole 198.18.0.240/28', '198.18.0.224/28 via 198.18.0.1 dev eth0 metric 5 table 100'."""
    words = ["blackhole"] if route["blackhole"] else []
    words.append(route["to"])
    words += [f"{key} {route[key]}" for key in ("via", "dev", "metric", "table") if route[key] is not None]
    return " ".join(words)


def _resolve_instance_process(item: Any, what: str) -> dict[str, Any]:
    """An instance's track_processes entry, a name or {name, weight} -> {name, weight (None: the process's own)}."""
    if not isinstance(item, dict):
        return {"name": str(item), "weight": None}
    if not item.get("name"):
        raise LvsDirectorConfigError(f"lvs_director_resolve: {what} needs a name")
    return {"name": str(item["name"]), "weight": _optional(item.get("weight"), _int, f"{what}.weight")}


def resolve(settings: Any) -> dict[str, Any]:
    """One director's role variables -> its complete config (every default filled in, numbers as numbers).

    settings -- a dict of the role variables without the prefix: host, router_id, interface, priority, state,
                advert_int_s, vrrp_version, vrrp_instances, vrrp_scripts, track_files, track_processes,
                virtual_servers, clients_behind_nat,
                vrrp_only, own_addresses, host_addresses, inhibit_on_failure, sysctls, lvs_timeouts, max_auto_priority,
                script_files (paths the role deploys), global_defs_extra, vrrp_sync_groups,
                real_server_weights ({real server address: weight} from playbooks/rebalance.yml),
                drained_real_servers (real server addresses playbooks/lvs_drain.yml drained)
    """
    if not isinstance(settings, dict):
        raise LvsDirectorConfigError(f"lvs_director_resolve: expects a dict of settings, got {type(settings).__name__}")
    inhibit_on_failure = _flag(settings.get("inhibit_on_failure"), "lvs_director_inhibit_on_failure", True)
    weights = _resolve_weights(settings.get("real_server_weights"))
    drained = _resolve_drained(settings.get("drained_real_servers"))
    host_defaults = {
        "interface": str(settings.get("interface") or ""),
        "priority": settings.get("priority", 100),
        "state": settings.get("state", "BACKUP"),
        "advert_int_s": settings.get("advert_int_s", 1),
        "vrrp_version": settings.get("vrrp_version", 3),
    }
    return {
        "host": str(settings.get("host", "")),
        "router_id": str(settings.get("router_id") or settings.get("host", "")),
        "interface": host_defaults["interface"],
        "clients_behind_nat": _flag(settings.get("clients_behind_nat"), "lvs_director_clients_behind_nat"),
        "vrrp_only": _flag(settings.get("vrrp_only"), "lvs_director_vrrp_only"),
        "own_addresses": sorted({str(a) for a in settings.get("own_addresses") or [] if a}),
        # Every address of the host (facts), for the checks across directors; None when unknown.
        "host_addresses": None if settings.get("host_addresses") is None
        else sorted({str(a).split("%", maxsplit=1)[0] for a in settings["host_addresses"] if a}),
        # None when unknown (facts not gathered): the checks that need them are then skipped.
        "known_interfaces": None if settings.get("known_interfaces") is None else list(settings["known_interfaces"]),
        "ipvs_available": _flag(settings.get("ipvs_available"), "ipvs_available (found by the preflight)", True),
        # What the kernel's process events connector answered keepalived's request here: None when it served it or
        # was not asked (no track process), else its refusal.
        "process_events_refused": None if not settings.get("process_events_refused")
        else str(settings["process_events_refused"]),
        "vrrp_instances": [
            _resolve_instance(instance, host_defaults, index)
            for index, instance in enumerate(settings.get("vrrp_instances") or [])
        ],
        "vrrp_sync_groups": [
            _resolve_sync_group(group, index) for index, group in enumerate(settings.get("vrrp_sync_groups") or [])
        ],
        "vrrp_scripts": [_resolve_script(script, i) for i, script in enumerate(settings.get("vrrp_scripts") or [])],
        "track_files": [_resolve_track_file(item, i) for i, item in enumerate(settings.get("track_files") or [])],
        "track_processes": [
            _resolve_track_process(item, i) for i, item in enumerate(settings.get("track_processes") or [])
        ],
        "virtual_servers": [
            _resolve_virtual_server(server, index, inhibit_on_failure, weights, drained)
            for index, server in enumerate(settings.get("virtual_servers") or [])
        ],
        # None when unknown: the checks that compare with them are then skipped.
        "sysctls": None if settings.get("sysctls") is None else dict(settings["sysctls"]),
        "lvs_timeouts": _resolve_timeouts(settings.get("lvs_timeouts")),
        "max_auto_priority": _optional(settings.get("max_auto_priority"), _int, "lvs_director_max_auto_priority"),
        "script_files": sorted({str(path) for path in settings.get("script_files") or []}),
        # {path: stat result} of every script the config names, added by the role's preflight (None: not looked).
        "script_stats": settings.get("script_stats"),
    }


def _resolve_weights(weights: Any) -> dict[str, int]:
    """lvs_director_real_server_weights {address: weight} -> the same with whole numbers and one address spelling."""
    if weights in (None, ""):
        return {}
    if not isinstance(weights, dict):
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: lvs_director_real_server_weights must map real server addresses to weights, got "
            f"{type(weights).__name__}"
        )
    return {address_spelling(address): _int(weight, f"lvs_director_real_server_weights[{address}]")
            for address, weight in weights.items()}


def _resolve_drained(addresses: Any) -> frozenset[str]:
    """lvs_director_drained_real_servers [address, ...] -> the addresses in one spelling."""
    if addresses in (None, ""):
        return frozenset()
    if not isinstance(addresses, (list, tuple)):
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: lvs_director_drained_real_servers must be a list of real server addresses, got "
            f"{type(addresses).__name__}"
        )
    return frozenset(address_spelling(address) for address in addresses)


def _resolve_timeouts(timeouts: Any) -> dict[str, int | float]:
    """lvs_timeouts {tcp_s, tcpfin_s, udp_s} -> the same with whole numbers; None or {} when not set."""
    resolved = {}
    for key, value in (timeouts or {}).items():
        if key not in ("tcp_s", "tcpfin_s", "udp_s"):
            raise LvsDirectorConfigError(
                f"lvs_director_resolve: lvs_director_lvs_timeouts.{key} is not a timeout; use tcp_s, tcpfin_s, udp_s"
            )
        resolved[key] = _optional(value, _number, f"lvs_director_lvs_timeouts.{key}")
    return {key: value for key, value in resolved.items() if value is not None}


def _resolve_sync_group(group: Any, index: int) -> dict[str, Any]:
    """{name, instances, notify*} -> the same with names as strings and unset scripts as None."""
    if not isinstance(group, dict) or not group.get("name"):
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: lvs_director_vrrp_sync_groups[{index}] needs name and instances"
        )
    what = f"lvs_director_vrrp_sync_groups[{group['name']}]"
    instances = group.get("instances") or []
    if isinstance(instances, (str, dict)) or not isinstance(instances, (list, tuple)):
        raise LvsDirectorConfigError(
            f"lvs_director_resolve: {what}.instances is {instances!r}; list the names of the VRRP instances"
        )
    resolved: dict[str, Any] = dict(SYNC_GROUP_DEFAULTS, name=str(group["name"]),
                                    instances=[str(name) for name in instances])
    for key in SYNC_GROUP_DEFAULTS:
        resolved[key] = None if group.get(key) in (None, "") else str(group[key])
    return resolved
