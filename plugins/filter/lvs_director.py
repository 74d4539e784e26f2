"""The lvs_director role's configuration model: fill in defaults once, then find mistakes across every director.

A keepalived pair fails in ways no single host can see: two nodes that both think they are MASTER, peers whose VRID
or secret differ (each one then ignores the other and both hold the VIP), an intended master that a higher-priority
backup outranks. keepalived itself accepts such configs, so the role checks them here, before any file changes.

``lvs_director_resolve`` turns one host's role variables into a complete, normalised config (the template renders
only that); ``lvs_director_problems`` reads the resolved configs of all directors of the play and returns
``{"errors": [...], "warnings": [...]}``, one sentence each, naming the host, the variable and the fix.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict

from ansible.errors import AnsibleFilterError

# keepalived caps a VRRPv2 password at 8 characters and silently ignores the rest.
AUTH_PASS_MAX_CHARS = 8
VRID_RANGE = (1, 255)
PRIORITY_RANGE = (1, 255)
# VRRPv2 carries the advert interval in whole seconds (1-255); VRRPv3 in centiseconds (12 bits: 0.01-40.95 s).
ADVERT_INT_V2_RANGE_S = (1, 255)
ADVERT_INT_V3_RANGE_S = (0.01, 40.95)
DIRECT_METHODS = ("DR", "TUN")  # methods that do not rewrite the destination port

INSTANCE_DEFAULTS = {
    "auth_pass": None,
    "nopreempt": False,
    "preempt_delay_s": None,
    "unicast_src_ip": None,
    "unicast_peers": None,
    "track_scripts": [],
    "track_interfaces": [],
    "notify": None,
    "notify_master": None,
    "notify_backup": None,
    "notify_fault": None,
}
VRRP_SCRIPT_DEFAULTS = {"interval_s": 1, "timeout_s": None, "fall": None, "rise": None, "weight": None}
VIRTUAL_SERVER_DEFAULTS = {
    "protocol": "TCP",
    "lvs_sched": "wlc",
    "lvs_method": "DR",
    "persistence_timeout_s": None,
    "quorum": None,
    "sorry_server": None,
    "delay_loop_s": 6,
}
CHECK_DEFAULTS = {
    "type": "TCP_CHECK",
    "connect_timeout_s": 3,
    "retry": 3,
    "delay_before_retry_s": 2,
    "connect_port": None,
    "url_path": "/",
    "status_code": 200,
    "misc_path": None,
    "misc_timeout_s": None,
}
CHECK_TYPES = ("TCP_CHECK", "HTTP_GET", "MISC_CHECK", "none")


def _number(value, what):
    """An int when the value is whole (so 1 renders as 1, not 1.0), else a float; AnsibleFilterError otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"lvs_director_resolve: {what} must be a number, got {value!r}") from None
    return int(number) if number.is_integer() else number


def _int(value, what):
    number = _number(value, what)
    if not isinstance(number, int):
        raise AnsibleFilterError(f"lvs_director_resolve: {what} must be a whole number, got {value!r}")
    return number


def _optional(value, convert, what):
    return None if value is None or value == "" else convert(value, what)


def _cidr(address, what):
    """'198.18.0.100' -> '198.18.0.100/32'; keeps a given prefix length."""
    try:
        interface = ipaddress.ip_interface(str(address).strip())
    except ValueError:
        raise AnsibleFilterError(
            f"lvs_director_resolve: {what} {address!r} is not an IP address (write it as 198.18.0.100 or "
            "198.18.0.100/32)"
        ) from None
    return interface.with_prefixlen


def _resolve_check(check, default, what):
    merged = dict(default)
    merged.update({key: value for key, value in (check or {}).items() if value is not None})
    merged["type"] = str(merged["type"])
    if merged["type"] not in CHECK_TYPES:
        raise AnsibleFilterError(f"lvs_director_resolve: {what}.type is {merged['type']!r}; use one of {CHECK_TYPES}")
    for key in ("connect_timeout_s", "delay_before_retry_s", "misc_timeout_s"):
        merged[key] = _optional(merged[key], _number, f"{what}.{key}")
    for key in ("retry", "connect_port", "status_code"):
        merged[key] = _optional(merged[key], _int, f"{what}.{key}")
    return merged


def _resolve_instance(instance, host_defaults, index):
    what = f"lvs_director_vrrp_instances[{index}]"
    if not isinstance(instance, dict) or not instance.get("name"):
        raise AnsibleFilterError(f"lvs_director_resolve: {what} needs at least name, virtual_router_id, "
                                 "virtual_ipaddresses")
    what = f"lvs_director_vrrp_instances[{instance['name']}]"
    resolved = dict(INSTANCE_DEFAULTS)
    resolved.update(host_defaults)
    resolved.update({key: value for key, value in instance.items() if value is not None})
    resolved["name"] = str(resolved["name"])
    resolved["state"] = str(resolved["state"]).upper()
    resolved["virtual_router_id"] = _int(resolved.get("virtual_router_id"), f"{what}.virtual_router_id")
    resolved["priority"] = _int(resolved["priority"], f"{what}.priority")
    resolved["vrrp_version"] = _int(resolved["vrrp_version"], f"{what}.vrrp_version")
    resolved["advert_int_s"] = _number(resolved["advert_int_s"], f"{what}.advert_int_s")
    resolved["preempt_delay_s"] = _optional(resolved["preempt_delay_s"], _number, f"{what}.preempt_delay_s")
    resolved["nopreempt"] = bool(resolved["nopreempt"])
    resolved["auth_pass"] = None if resolved["auth_pass"] in (None, "") else str(resolved["auth_pass"])
    resolved["virtual_ipaddresses"] = [
        _cidr(address, f"{what}.virtual_ipaddresses") for address in resolved.get("virtual_ipaddresses") or []
    ]
    if resolved["unicast_peers"] is not None:
        resolved["unicast_peers"] = [str(peer) for peer in resolved["unicast_peers"]]
    resolved["track_scripts"] = [str(name) for name in resolved["track_scripts"]]
    resolved["track_interfaces"] = [str(name) for name in resolved["track_interfaces"]]
    return resolved


def _resolve_virtual_server(server, index):
    port = server.get("port") if isinstance(server, dict) else None
    what = f"lvs_director_virtual_servers[{index}]"
    if port is None or not server.get("address"):
        raise AnsibleFilterError(f"lvs_director_resolve: {what} needs address, port and real_servers")
    resolved = dict(VIRTUAL_SERVER_DEFAULTS)
    resolved.update({key: value for key, value in server.items() if value is not None})
    resolved["address"] = str(resolved["address"])
    resolved["port"] = _int(resolved["port"], f"{what}.port")
    what = f"lvs_director_virtual_servers[{resolved['address']}:{resolved['port']}]"
    resolved["protocol"] = str(resolved["protocol"]).upper()
    resolved["lvs_sched"] = str(resolved["lvs_sched"])
    resolved["lvs_method"] = str(resolved["lvs_method"]).upper()
    resolved["delay_loop_s"] = _number(resolved["delay_loop_s"], f"{what}.delay_loop_s")
    resolved["persistence_timeout_s"] = _optional(
        resolved["persistence_timeout_s"], _int, f"{what}.persistence_timeout_s"
    )
    resolved["quorum"] = _optional(resolved["quorum"], _int, f"{what}.quorum")
    if resolved["sorry_server"]:
        sorry = resolved["sorry_server"]
        resolved["sorry_server"] = {
            "address": str(sorry["address"]),
            "port": _int(sorry.get("port", resolved["port"]), f"{what}.sorry_server.port"),
        }
    check = _resolve_check(server.get("check"), CHECK_DEFAULTS, f"{what}.check")
    resolved["check"] = check
    real_servers = []
    for real in server.get("real_servers") or []:
        real_what = f"{what}.real_servers[{real.get('address')}]"
        real_servers.append(
            {
                "address": str(real["address"]),
                "port": _int(real.get("port") if real.get("port") is not None else resolved["port"],
                             f"{real_what}.port"),
                "weight": _int(real.get("weight") if real.get("weight") is not None else 1, f"{real_what}.weight"),
                "check": _resolve_check(real.get("check"), check, f"{real_what}.check"),
            }
        )
    resolved["real_servers"] = real_servers
    return resolved


def _resolve_script(script, index):
    if not isinstance(script, dict) or not script.get("name") or not script.get("script"):
        raise AnsibleFilterError(f"lvs_director_resolve: lvs_director_vrrp_scripts[{index}] needs name and script")
    resolved = dict(VRRP_SCRIPT_DEFAULTS)
    resolved.update({key: value for key, value in script.items() if value is not None})
    what = f"lvs_director_vrrp_scripts[{script['name']}]"
    resolved["interval_s"] = _number(resolved["interval_s"], f"{what}.interval_s")
    resolved["timeout_s"] = _optional(resolved["timeout_s"], _number, f"{what}.timeout_s")
    for key in ("fall", "rise", "weight"):
        resolved[key] = _optional(resolved[key], _int, f"{what}.{key}")
    return resolved


def lvs_director_resolve(settings):
    """One director's role variables -> its complete config (every default filled in, numbers as numbers).

    settings -- a dict of the role variables without the prefix: host, router_id, interface, priority, state,
                advert_int_s, vrrp_version, vrrp_instances, vrrp_scripts, virtual_servers, clients_behind_nat,
                vrrp_only, own_addresses
    """
    if not isinstance(settings, dict):
        raise AnsibleFilterError(f"lvs_director_resolve: expects a dict of settings, got {type(settings).__name__}")
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
        "clients_behind_nat": bool(settings.get("clients_behind_nat", False)),
        "vrrp_only": bool(settings.get("vrrp_only", False)),
        "own_addresses": sorted({str(a) for a in settings.get("own_addresses") or [] if a}),
        # None when unknown (facts not gathered): the checks that need them are then skipped.
        "known_interfaces": None if settings.get("known_interfaces") is None else list(settings["known_interfaces"]),
        "ipvs_available": bool(settings.get("ipvs_available", True)),
        "vrrp_instances": [
            _resolve_instance(instance, host_defaults, index)
            for index, instance in enumerate(settings.get("vrrp_instances") or [])
        ],
        "vrrp_scripts": [_resolve_script(script, i) for i, script in enumerate(settings.get("vrrp_scripts") or [])],
        "virtual_servers": [
            _resolve_virtual_server(server, index) for index, server in enumerate(settings.get("virtual_servers") or [])
        ],
    }


# ---------------------------------------------------------------------------------------------------- problems


def _problem(hosts, message):
    """One finding: the hosts it concerns (each of them stops on it) and the sentence that names the fix."""
    return {"hosts": sorted(set(hosts)), "message": message}


def _instance_problems(host, config, instance):
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
    found += _unicast_problems(config, instance, key)
    known_scripts = {script["name"] for script in config["vrrp_scripts"]}
    for name in instance["track_scripts"]:
        if name not in known_scripts:
            found.append(
                f"{key}.track_scripts names '{name}', which lvs_director_vrrp_scripts does not define; define it "
                "there or remove it"
            )
    return [_problem([host], message) for message in found]


def _unicast_problems(config, instance, key):
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


def _virtual_server_problems(host, config, server):
    key = f"{host}: lvs_director_virtual_servers[{server['address']}:{server['port']}]"
    errors, warnings = [], []
    reals = server["real_servers"]
    if not reals:
        errors.append(f"{key}.real_servers is empty; list at least one real server")
    seen = set()
    for real in reals:
        endpoint = (real["address"], real["port"])
        if endpoint in seen:
            errors.append(f"{key}.real_servers lists {real['address']}:{real['port']} more than once; keep one entry")
        seen.add(endpoint)
        if real["check"]["type"] == "MISC_CHECK" and not real["check"]["misc_path"]:
            errors.append(
                f"{key}.real_servers[{real['address']}].check is MISC_CHECK without misc_path; set misc_path to the "
                "check command"
            )
        if server["lvs_method"] in DIRECT_METHODS and real["port"] != server["port"]:
            errors.append(
                f"{key}.real_servers[{real['address']}].port is {real['port']} but {server['lvs_method']} cannot "
                f"rewrite ports; use port {server['port']} (or lvs_method NAT)"
            )
    total_weight = sum(real["weight"] for real in reals)
    if server["quorum"] is not None and server["quorum"] > total_weight:
        errors.append(
            f"{key}.quorum is {server['quorum']} but the real servers' weights add up to {total_weight}, so the "
            f"service could never be up; use a quorum of at most {total_weight}"
        )
    if server["lvs_sched"] == "sh":
        text = (
            f"{key}.lvs_sched is sh (source hashing): clients behind one NAT address all hash to one real server; "
            "use wlc or lc for long sessions, or persistence_timeout_s for affinity"
        )
        if config["clients_behind_nat"]:
            errors.append(text + " (lvs_director_clients_behind_nat is true)")
        else:
            warnings.append(text)
    vips = {vip.split("/")[0] for instance in config["vrrp_instances"] for vip in instance["virtual_ipaddresses"]}
    if server["address"] not in vips:
        warnings.append(
            f"{key} has an address that no VRRP instance of this host moves; add it to an instance's "
            "virtual_ipaddresses unless it is configured another way"
        )
    return [_problem([host], m) for m in errors], [_problem([host], m) for m in warnings]


def _host_problems(config):
    host = config["host"]
    errors, warnings = [], []
    if not config["vrrp_only"] and not config["ipvs_available"]:
        errors.append(
            _problem(
                [host], f"{host}: this kernel has no IPVS (no /proc/net/ip_vs and modprobe cannot load ip_vs), so "
                "keepalived would exit a second after it starts; install the ip_vs module, or set "
                "lvs_director_vrrp_only: true to run VRRP only"
            )
        )
    if not config["vrrp_instances"]:
        errors.append(
            _problem([host], f"{host}: lvs_director_vrrp_instances is empty; define at least one VRRP instance")
        )
    names = [instance["name"] for instance in config["vrrp_instances"]]
    for name in sorted({name for name in names if names.count(name) > 1}):
        errors.append(
            _problem([host], f"{host}: lvs_director_vrrp_instances has two instances named '{name}'; rename one")
        )
    for instance in config["vrrp_instances"]:
        errors += _instance_problems(host, config, instance)
    endpoints = [(s["address"], s["port"], s["protocol"]) for s in config["virtual_servers"]]
    for address, port, protocol in sorted({e for e in endpoints if endpoints.count(e) > 1}):
        errors.append(
            _problem(
                [host], f"{host}: lvs_director_virtual_servers lists {address}:{port}/{protocol} more than once; "
                "merge the entries"
            )
        )
    for server in config["virtual_servers"]:
        server_errors, server_warnings = _virtual_server_problems(host, config, server)
        errors += server_errors
        warnings += server_warnings
    return errors, warnings


def _peer_problems(configs):
    """Mistakes only visible across hosts: peers (one instance name) that disagree, masters of one VRID."""
    errors = []
    by_name, by_vrid = defaultdict(list), defaultdict(list)
    for config in configs:
        for instance in config["vrrp_instances"]:
            by_name[instance["name"]].append((config["host"], instance))
            by_vrid[instance["virtual_router_id"]].append((config["host"], instance))
    for name, members in sorted(by_name.items()):
        key = f"lvs_director_vrrp_instances[{name}]"
        hosts = [host for host, _instance in members]
        for field, fix in (
            ("virtual_router_id", "use one VRID for the instance on every director"),
            ("vrrp_version", "use one vrrp_version on every director"),
            ("advert_int_s", "use one advert_int_s on every director"),
        ):
            if len({str(instance[field]) for _host, instance in members}) > 1:
                listing = ", ".join(f"{host}={instance[field]}" for host, instance in members)
                errors.append(_problem(hosts, f"{key}.{field} differs between peers ({listing}); {fix}"))
        if len({instance["auth_pass"] for _host, instance in members}) > 1:
            errors.append(
                _problem(
                    hosts,
                    f"{key}.auth_pass differs between peers ({', '.join(hosts)}), so each ignores the other's adverts "
                    "and every one holds the VIP; use one secret (one vault variable) on every director",
                )
            )
    for vrid, members in sorted(by_vrid.items()):
        hosts = [host for host, _instance in members]
        masters = [(host, instance) for host, instance in members if instance["state"] == "MASTER"]
        if len(masters) > 1:
            master_hosts = ", ".join(host for host, _instance in masters)
            errors.append(
                _problem(
                    hosts,
                    f"VRID {vrid}: {master_hosts} all have state MASTER; keep state MASTER on one director and set "
                    "lvs_director_state: BACKUP (and a lower lvs_director_priority) on the others",
                )
            )
        elif masters:
            master, master_instance = masters[0]
            outranking = [
                f"{host} ({instance['priority']})"
                for host, instance in members
                if host != master and instance["priority"] >= master_instance["priority"]
            ]
            if outranking:
                errors.append(
                    _problem(
                        hosts,
                        f"VRID {vrid}: {master} has state MASTER with priority {master_instance['priority']} but "
                        f"{', '.join(outranking)} is not lower, so {master} would not keep the VIP; give the master "
                        "the highest lvs_director_priority",
                    )
                )
    return errors


def lvs_director_problems(configs, failed_hosts=None):
    """Every mistake across the directors of a play: ``{"errors": [...], "warnings": [...]}``.

    Each entry is ``{"hosts": [...], "message": "..."}``: the hosts it concerns and one sentence naming the host, the
    variable and the fix. A run must stop on every director when ``errors`` is not empty.

    configs      -- resolved configs (from lvs_director_resolve), one per director; None entries are skipped
    failed_hosts -- hosts of the play that failed before the check (their settings cannot be checked)
    """
    configs = [config for config in configs or [] if config]
    errors, warnings = [], []
    for host in sorted(failed_hosts or []):
        errors.append(
            _problem(
                [host], f"{host}: failed or was unreachable earlier in this play, so the checks across directors "
                "cannot see its settings; fix it (see its error above) or leave it out with --limit"
            )
        )
    for config in configs:
        host_errors, host_warnings = _host_problems(config)
        errors += host_errors
        warnings += host_warnings
    errors += _peer_problems(configs)
    return {"errors": errors, "warnings": warnings}


class FilterModule:
    """Filters of the lvs_director role."""

    def filters(self):
        return {"lvs_director_resolve": lvs_director_resolve, "lvs_director_problems": lvs_director_problems}
