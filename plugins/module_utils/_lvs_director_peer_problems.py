# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's checks across every director of a play.

A keepalived pair fails in ways no single host can see: two nodes that both think they are MASTER, peers whose VRID
or secret differ (each one then ignores the other and both hold the VIP), an intended master that a higher-priority
backup outranks, unicast peers that do not name each other. keepalived itself accepts such configs, so the role checks
them here, before any file changes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import CHECK_DEFAULTS, address_family
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import (
    FAMILY_NAMES,
    PRIORITY_RANGE,
    finding,
    vip_address,
)
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_route_problems import peer_route_problems

# Keys of one virtual server that must be the same on every director that can hold its VIP.
PEER_VIRTUAL_SERVER_KEYS = ("lvs_sched", "lvs_method", "persistence_timeout_s", "persistence_granularity",
                            "quorum", "hysteresis", "sorry_server", "inhibit_on_failure", "delay_loop_s", "check",
                            "real_servers")


def _peer_problems(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mistakes only visible across hosts: peers (one instance name) that disagree, masters of one VRID."""
    errors = []
    by_name, by_vrid = defaultdict(list), defaultdict(list)
    for config in configs:
        for instance in config["vrrp_instances"]:
            by_name[instance["name"]].append((config["host"], instance))
            by_vrid[(instance["virtual_router_id"], instance["family"])].append((config["host"], instance))
    for name, members in sorted(by_name.items()):
        key = f"lvs_director_vrrp_instances[{name}]"
        hosts = [host for host, _instance in members]
        for field, fix in (
            ("virtual_router_id", "use one VRID for the instance on every director"),
            ("vrrp_version", "use one vrrp_version on every director"),
            ("advert_int_s", "use one advert_int_s on every director"),
            ("family", "use VIPs of one address family in the instance on every director"),
        ):
            if len({str(instance[field]) for _host, instance in members}) > 1:
                listing = ", ".join(f"{host}={instance[field]}" for host, instance in members)
                errors.append(finding(hosts, f"{key}.{field} differs between peers ({listing}); {fix}"))
        if len({instance["auth_pass"] for _host, instance in members}) > 1:
            errors.append(
                finding(
                    hosts,
                    f"{key}.auth_pass differs between peers ({', '.join(hosts)}), so each ignores the other's adverts "
                    "and every one holds the VIP; use one secret (one vault variable) on every director",
                )
            )
    for (vrid, family), members in sorted(by_vrid.items()):
        vrid = f"{vrid} ({FAMILY_NAMES[family]})"
        hosts = [host for host, _instance in members]
        masters = [(host, instance) for host, instance in members if instance["state"] == "MASTER"]
        if len(masters) > 1:
            master_hosts = ", ".join(host for host, _instance in masters)
            errors.append(
                finding(
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
                    finding(
                        hosts,
                        f"VRID {vrid}: {master} has state MASTER with priority {master_instance['priority']} but "
                        f"{', '.join(outranking)} is not lower, so {master} would not keep the VIP; give the master "
                        "the highest lvs_director_priority",
                    )
                )
    return errors


def _priority_gap_warnings(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A failing weighted track script on the intended master that cannot bring it below its best backup."""
    warnings = []
    scripts = {config["host"]: {s["name"]: s for s in config["vrrp_scripts"]} for config in configs}
    by_vrid = defaultdict(list)
    for config in configs:
        for instance in config["vrrp_instances"]:
            by_vrid[(instance["virtual_router_id"], instance["family"])].append((config["host"], instance))
    for (vrid, family), members in sorted(by_vrid.items()):
        vrid = f"{vrid} ({FAMILY_NAMES[family]})"
        masters = [(host, inst) for host, inst in members if inst["state"] == "MASTER"]
        backups = [(host, inst) for host, inst in members if inst["state"] != "MASTER"]
        if len(masters) != 1 or not backups:
            continue
        master, inst = masters[0]
        backup, best = max(backups, key=lambda member: member[1]["priority"])
        for name in inst["track_scripts"]:
            weight = (scripts[master].get(name) or {}).get("weight")
            if weight is None or weight >= 0 or inst["priority"] == PRIORITY_RANGE[1]:
                continue
            lowered = inst["priority"] + weight
            if lowered >= best["priority"]:
                gap = inst["priority"] - best["priority"]
                warnings.append(
                    finding(
                        [master],
                        f"{master}: lvs_director_vrrp_scripts[{name}].weight is {weight}: a failure lowers {master}'s "
                        f"priority for VRID {vrid} from {inst['priority']} to {lowered}, not below {backup}'s "
                        f"{best['priority']}, so it never moves the VIP; use a weight of -{gap + 1} or lower",
                    )
                )
    return warnings


def _check_view(check: dict[str, Any]) -> str:
    """A health check as one comparable text: its type and every parameter not at the role's default (HTTP path,
    status codes, timeouts, retries, ...); two directors whose checks differ take real servers out of the pool at
    different times."""
    settings = ", ".join(f"{key} {value}" for key, value in sorted(check.items())
                         if key != "type" and value != CHECK_DEFAULTS.get(key))
    return f"{check['type']} ({settings})" if settings else str(check["type"])


def _checks_view(checks: list[dict[str, Any]]) -> str:
    """A real server's or service's checks as one comparable text (keepalived runs them all; their order is not
    significant)."""
    return " + ".join(sorted(_check_view(check) for check in checks))


def _virtual_server_view(server: dict[str, Any]) -> dict[str, Any]:
    """What a client gets from a virtual server, comparable between directors."""
    view = {key: server[key] for key in PEER_VIRTUAL_SERVER_KEYS if key not in ("real_servers", "check")}
    view["check"] = _checks_view(server["checks"])
    view["real_servers"] = sorted(
        f"{real['address']}:{real['port']} weight {real['weight']}{' drained' if real['drained'] else ''} "
        f"{_checks_view(real['checks'])}"
        for real in server["real_servers"]
    )
    return view


def _peer_virtual_server_problems(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Directors that can hold one VIP must serve it the same way, or a failover silently changes the service."""
    errors = []
    ipvs = [config for config in configs if not config["vrrp_only"]]
    holders = defaultdict(list)
    for config in ipvs:
        for vip in sorted({v.split("/")[0] for i in config["vrrp_instances"] for v in i["virtual_ipaddresses"]}):
            holders[vip].append(config)
    for vip, members in sorted(holders.items()):
        if len(members) < 2:
            continue
        services: dict[str, dict[str, dict[str, Any]]] = {}
        for config in members:
            for server in config["virtual_servers"]:
                if server["address"] == vip:
                    endpoint = f"{server['address']}:{server['port']}/{server['protocol']}"
                    services.setdefault(endpoint, {})[config["host"]] = _virtual_server_view(server)
        for endpoint, views in sorted(services.items()):
            hosts = [config["host"] for config in members]
            missing = [host for host in hosts if host not in views]
            differing = [key for key in PEER_VIRTUAL_SERVER_KEYS
                         if len({repr(view[key]) for view in views.values()}) > 1]
            if not missing and not differing:
                continue
            details = [f"{', '.join(missing)} does not define it"] if missing else []
            for key in differing:
                listing = "; ".join(f"{host}: {views[host][key]}" for host in hosts if host in views)
                details.append(f"{key} ({listing})")
            errors.append(
                finding(
                    hosts,
                    f"lvs_director_virtual_servers[{endpoint}] differs between the directors that can hold {vip} "
                    f"({', '.join(hosts)}): {', '.join(details)}; a failover would change the service: define it "
                    "once for all of them (group_vars/lvs_directors)",
                )
            )
    return errors


def _shared_address_problems(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A VIP in two instances (one instance name is one VIP's owner on every peer), or also a real server's address."""
    errors = []
    holders, reals = defaultdict(list), defaultdict(list)
    for config in configs:
        for instance in config["vrrp_instances"]:
            for vip in dict.fromkeys(vip_address(v) for v in instance["virtual_ipaddresses"]):
                holders[vip].append((config["host"], instance["name"]))
        for server in config["virtual_servers"]:
            for real in server["real_servers"]:
                reals[real["address"]].append((config["host"], f"{server['address']}:{server['port']}"))
    for vip, members in sorted(holders.items()):
        hosts = [host for host, _name in members]
        names = sorted({name for _host, name in members})
        if len(names) > 1:
            listing = "; ".join(f"{name} on {', '.join(h for h, n in members if n == name)}" for name in names)
            errors.append(finding(
                hosts, f"{vip} is a VIP of more than one VRRP instance ({listing}), so the instances fight over it; "
                "keep each VIP in one instance (peers share it under one instance name)"
            ))
        if vip in reals:
            services = sorted({service for _host, service in reals[vip]})
            errors.append(finding(
                hosts + [host for host, _service in reals[vip]],
                f"{vip} is a VIP of lvs_director_vrrp_instances[{names[0]}] and also a real server of "
                f"lvs_director_virtual_servers[{', '.join(services)}]; a real server needs an address of its own: "
                "use the real server's own address there, or another VIP",
            ))
    return errors


def _is_unicast(instance: dict[str, Any]) -> bool:
    return instance["unicast_peers"] is not None or instance["unicast_src_ip"] is not None


def _sending_addresses(config: dict[str, Any], instance: dict[str, Any]) -> list[str] | None:
    """The addresses a peer may list for this director's instance: its unicast_src_ip when set, else every address
    of the host in the instance's family (keepalived sends from the interface's primary address), VIPs excluded;
    None when they are unknown (facts not gathered)."""
    source = instance["unicast_src_ip"]
    if source:
        # One of the other family is refused on its own host (_lvs_director_vrrp_problems).
        return [str(source)] if address_family(source) == instance["family"] else None
    if config.get("host_addresses") is None:
        return None
    vips = {vip_address(v) for other in config["vrrp_instances"] for v in other["virtual_ipaddresses"]}
    return sorted(a for a in config["host_addresses"]
                  if a not in vips and address_family(a) == instance["family"])


def _unicast_peer_problems(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Peers of one instance that cannot hear each other: unicast on one and multicast on another, a unicast peer
    list that misses another director (it never gets this one's adverts and becomes MASTER too), or VIP sets that
    differ (after a failover the new master holds other addresses). keepalived -t passes all three."""
    errors = []
    by_name = defaultdict(list)
    for config in configs:
        for instance in config["vrrp_instances"]:
            by_name[instance["name"]].append((config, instance))
    for name, members in sorted(by_name.items()):
        if len(members) < 2:
            continue
        key = f"lvs_director_vrrp_instances[{name}]"
        hosts = [config["host"] for config, _instance in members]
        unicast = [config["host"] for config, instance in members if _is_unicast(instance)]
        if unicast and len(unicast) < len(members):
            multicast = [host for host in hosts if host not in unicast]
            errors.append(finding(hosts, (
                f"{key} uses unicast on {', '.join(unicast)} and multicast on {', '.join(multicast)}: neither hears "
                "the other's adverts, so both hold the VIP (split brain); give every director unicast_peers naming "
                "the others, or drop unicast_src_ip and unicast_peers on all of them")))
        for config, instance in members:
            # Peers of the other family are refused on their own host (_lvs_director_vrrp_problems).
            peers = {peer for peer in instance["unicast_peers"] or [] if address_family(peer) == instance["family"]}
            if not peers:
                continue
            for other, other_instance in members:
                if other is config:
                    continue
                addresses = _sending_addresses(other, other_instance)
                if addresses and not peers.intersection(addresses):
                    errors.append(finding([config["host"], other["host"]], (
                        f"{config['host']}: {key}.unicast_peers ({', '.join(sorted(peers))}) does not name "
                        f"{other['host']} (its addresses: {', '.join(addresses)}), so {config['host']} never sends "
                        f"it adverts and {other['host']} holds the VIP too (split brain); add {other['host']}'s "
                        "address (its unicast_src_ip, or the address it sends from)")))
        vip_sets = {config["host"]: sorted({vip_address(v) for v in instance["virtual_ipaddresses"]})
                    for config, instance in members}
        if len({tuple(vips) for vips in vip_sets.values()}) > 1:
            listing = "; ".join(f"{host}: {', '.join(vips) or 'none'}" for host, vips in vip_sets.items())
            errors.append(finding(hosts, (
                f"{key}.virtual_ipaddresses differs between peers ({listing}), so a failover moves other addresses "
                "than the master held; use one list on every director (group_vars/lvs_directors)")))
    return errors


def _sync_group_problems(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A sync group must hold the same instances on every director that defines it: keepalived moves the instances of
    one group together (vrrp_sync.c), so a group of VI_4 and VI_6 on one director and VI_4 alone on the other lets
    the IPv6 VIP stay behind after a failover."""
    members: defaultdict[str, dict[str, list[str]]] = defaultdict(dict)
    for config in configs:
        for group in config.get("vrrp_sync_groups") or []:
            members[group["name"]][config["host"]] = sorted(group["instances"])
    errors = []
    for name, by_host in sorted(members.items()):
        if len({repr(instances) for instances in by_host.values()}) > 1:
            listing = "; ".join(f"{host}: {', '.join(instances)}" for host, instances in sorted(by_host.items()))
            errors.append(
                finding(
                    list(by_host),
                    f"lvs_director_vrrp_sync_groups[{name}] holds other instances on each director ({listing}); "
                    "keepalived moves a group's instances together, so a failover would leave VIPs behind: list the "
                    "same instances everywhere (group_vars/lvs_directors)",
                )
            )
    return errors


def _lifted_backup_warnings(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A backup whose positive track-script weights, when its scripts succeed, lift it above the intended master with
    the master's own successful scripts: keepalived adds a positive weight while the script succeeds
    (keepalived.conf(5), vrrp_script weight), so the backup takes the VIP in the healthy steady state."""
    warnings = []
    scripts = {config["host"]: {s["name"]: s for s in config["vrrp_scripts"]} for config in configs}
    by_vrid = defaultdict(list)
    for config in configs:
        for instance in config["vrrp_instances"]:
            by_vrid[(instance["virtual_router_id"], instance["family"])].append((config["host"], instance))

    def lifted(host: str, instance: dict[str, Any]) -> int:
        weights = ((scripts[host].get(name) or {}).get("weight") for name in instance["track_scripts"])
        return instance["priority"] + sum(weight for weight in weights if weight is not None and weight > 0)

    for (vrid, family), members in sorted(by_vrid.items()):
        masters = [(host, inst) for host, inst in members if inst["state"] == "MASTER"]
        if len(masters) != 1:
            continue
        master, master_instance = masters[0]
        for host, inst in members:
            if inst["state"] == "MASTER" or lifted(host, inst) <= lifted(master, master_instance):
                continue
            warnings.append(
                finding(
                    [host],
                    f"{host}: with every track script succeeding, {host}'s priority for VRID {vrid} "
                    f"({FAMILY_NAMES[family]}) is {lifted(host, inst)} (positive script weights on "
                    f"{inst['priority']}), above the intended master {master}'s {lifted(master, master_instance)}, "
                    f"so {host} takes the VIP while all is well; lower the positive weights or the priority",
                )
            )
    return warnings


def peer_problems(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every error across the directors of a play (each finding names the hosts it stops)."""
    return (_peer_problems(configs) + _unicast_peer_problems(configs) + _peer_virtual_server_problems(configs)
            + _shared_address_problems(configs) + _sync_group_problems(configs) + peer_route_problems(configs))


def peer_warnings(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What across the directors works but likely not as meant."""
    return _priority_gap_warnings(configs) + _lifted_backup_warnings(configs)
