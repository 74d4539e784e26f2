# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's checks of one director's VRRP instances, what they track, and their sync groups.

VRIDs, priorities, advert intervals, authentication, preemption, unicast peers and VIP families of each instance; the
vrrp scripts, track files and track processes it names, and weights keepalived does not take on an address owner or
in a sync group (keepalived.conf(5)); track files and track processes keepalived refuses or never matches; sync groups
its config test fails; and a kernel that gives keepalived no process events. Kept apart from the virtual server checks
(``_lvs_director_virtual_server_problems``) and the host-wide ones (``_lvs_director_host_problems``, which calls these
in its order of findings).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import (
    TRACK_PROCESS_DELAY_KEYS,
    address_family,
)
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import (
    FAMILY_NAMES,
    PRIORITY_RANGE,
    finding,
    out_of_range,
    unquotable,
    vip_address,
)

# keepalived caps a VRRPv2 password at 8 characters and silently ignores the rest.
AUTH_PASS_MAX_CHARS = 8
VRID_RANGE = (1, 255)
# VRRPv2 carries the advert interval in whole seconds (1-255); VRRPv3 in centiseconds (12 bits: 0.01-40.95 s).
ADVERT_INT_V2_RANGE_S = (1, 255)
ADVERT_INT_V3_RANGE_S = (0.01, 40.95)
# keepalived.conf(5) and vrrp_parser.c: preempt_delay 0-1000 s ("Preempt_delay not valid! must be between 0-1000"),
# which fails `keepalived --config-test`.
PREEMPT_DELAY_RANGE_S = (0, 1000)
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


def instance_problems(host: str, config: dict[str, Any], instance: dict[str, Any]) -> list[dict[str, Any]]:
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
    if instance["auth_pass"] is not None and unquotable(instance["auth_pass"]):
        found.append(
            f"{key}.auth_pass contains a double quote, a backslash or a line break, which keepalived cannot read "
            "inside a quoted value (the secret is not shown); use a secret without them"
        )
    return [finding([host], message) for message in found]


def repeated(names: list[str]) -> list[str]:
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
    for name in repeated(names):
        found.append(f"{key}.track_processes names '{name}' twice, which keepalived refuses (\"duplicate "
                     f"track_process {name} - ignoring\"); list it once")
    for item in instance["track_processes"]:
        if item["weight"] is not None and out_of_range(item["weight"], *TRACK_PROCESS_WEIGHT_RANGE):
            found.append(f"{key}.track_processes gives '{item['name']}' weight {item['weight']}; keepalived takes "
                         "-254 to 254")
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


def track_file_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Track files keepalived would refuse or read elsewhere: a duplicate name, a relative path, a weight off range."""
    found = []
    names = [track["name"] for track in config["track_files"]]
    for name in repeated(names):
        found.append(f"{host}: lvs_director_track_files has two entries named '{name}'; rename one")
    for track in config["track_files"]:
        key = f"{host}: lvs_director_track_files[{track['name']}]"
        if not track["file"].startswith("/"):
            found.append(
                f"{key}.file is {track['file']!r}, a relative path, which keepalived resolves against its own working "
                "folder; give an absolute path"
            )
        if out_of_range(track["weight"], *TRACK_FILE_WEIGHT_RANGE):
            found.append(f"{key}.weight is {track['weight']}; a VRRP instance takes -254 to 254")
    return found


def track_process_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Track processes keepalived would refuse or never match: a duplicate name, a value off range, a quorum above
    quorum_max, a process name /proc/PID/comm cannot hold."""
    found = []
    names = [track["name"] for track in config["track_processes"]]
    for name in repeated(names):
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
    if out_of_range(track["weight"], *TRACK_PROCESS_WEIGHT_RANGE):
        found.append(f"{key}.weight is {track['weight']}; a VRRP instance takes -254 to 254")
    for field, (low, high) in (("quorum", QUORUM_RANGE), ("quorum_max", QUORUM_MAX_RANGE)):
        if track[field] is not None and out_of_range(track[field], low, high):
            found.append(f"{key}.{field} is {track[field]}; keepalived takes {low} to {high}")
    for field in TRACK_PROCESS_DELAY_KEYS:
        value = track[field]
        if value is not None and (out_of_range(value, *PROCESS_DELAY_RANGE_S) or round(value * 1e6, 3) % 1):
            found.append(f"{key}.{field} is {value}; keepalived takes 0.000001 to 3600 seconds in whole "
                         "microseconds")
    return found


def process_events_problems(host: str, config: dict[str, Any]) -> list[str]:
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


def vrid_problems(host: str, config: dict[str, Any]) -> list[str]:
    """keepalived keys instances by VRID, family and interface: two alike on one host fail its config test."""
    seen = defaultdict(list)
    for instance in config["vrrp_instances"]:
        seen[(instance["virtual_router_id"], instance["family"], instance["interface"])].append(instance["name"])
    return [
        f"{host}: lvs_director_vrrp_instances {' and '.join(names)} all use VRID {vrid} for {FAMILY_NAMES[family]} on "
        f"{interface}, which keepalived refuses; give each its own VRID (an IPv4 and an IPv6 instance may share one)"
        for (vrid, family, interface), names in sorted(seen.items()) if len(names) > 1
    ]


def sync_group_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Groups keepalived refuses or that cannot move together: unknown or shared members, mixed states, one member."""
    found = []
    instances = {instance["name"]: instance for instance in config["vrrp_instances"]}
    names = [group["name"] for group in config["vrrp_sync_groups"]]
    for name in repeated(names):
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
