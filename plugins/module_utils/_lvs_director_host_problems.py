# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's checks of one director's settings, before any file changes.

Numbers keepalived or the kernel refuse later, values its parser reads differently than written (quotes, comments),
addresses and families, VRIDs, sync groups, checks and quorum of one host's config (resolved by
``_lvs_director_config.resolve``), all given by ``host_problems`` in one order. This file keeps what is about the host
as a whole (names, quoting, global settings, vrrp scripts' ranges); the VRRP instances, their tracking and sync groups
are checked in ``_lvs_director_vrrp_problems``, each virtual server in ``_lvs_director_virtual_server_problems``.
Checks across directors live in ``_lvs_director_peer_problems``.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import (
    NOTIFY_KEYS,
    REAL_SERVER_SCRIPT_KEYS,
    SYNC_GROUP_DEFAULTS,
    check_names,
)
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import (
    finding,
    out_of_range,
    unquotable,
    whole_positive,
)
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_route_problems import route_problems
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_scripts import script_problems
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_virtual_server_problems import (
    virtual_server_problems,
)
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_vrrp_problems import (
    instance_problems,
    process_events_problems,
    repeated,
    sync_group_problems,
    track_file_problems,
    track_process_problems,
    vrid_problems,
)

# keepalived 2.2.7 reads these as whole seconds (read_unsigned_strvec in vrrp_parser.c / check_misc.c).
WHOLE_SECOND_KEYS = ("interval_s", "timeout_s")
# max_auto_priority takes -1 (off) to 99 (sched_get_priority_max(SCHED_RR)), keepalived.conf(5).
MAX_AUTO_PRIORITY_RANGE = (-1, 99)
# The role writes the names of VRRP instances, scripts and sync groups as bare words: keepalived's parser splits a
# line at blanks, starts a comment at # or !, reads a brace as a block's edge and a quote as a string's (parser.c).
# Such a name fails `keepalived -t` ("vrrp_instance must have a name", "Unknown keyword '}'").
NAME_BREAKING = re.compile(r'[\s#!{}"]')
# keepalived.conf(5) and vrrp_parser.c: a vrrp_script weight -253 to 253 ("weight ... must be in [-253, 253]"),
# which fails `keepalived --config-test`.
SCRIPT_WEIGHT_RANGE = (-253, 253)


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


def _quote_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Values the template writes in double quotes: keepalived has no escape for a quote there."""
    found = []
    if unquotable(config["router_id"]):
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
        if value is not None and unquotable(value):
            found.append(f"{host}: {key} is {value!r}, which holds a double quote, a backslash or a line break that "
                         "keepalived cannot read inside a quoted value; use a wrapper script without them")
    return found


def _global_problems(host: str, config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the host-wide settings."""
    found, warnings = [], []
    auto = config["max_auto_priority"]
    if auto is not None and not MAX_AUTO_PRIORITY_RANGE[0] <= auto <= MAX_AUTO_PRIORITY_RANGE[1]:
        found.append(f"{host}: lvs_director_max_auto_priority is {auto}; use -1 (off) to 99")
    for key, value in (config["lvs_timeouts"] or {}).items():
        if not whole_positive(value):
            found.append(f"{host}: lvs_director_lvs_timeouts.{key} is {value}; use a whole number of seconds, 1 or "
                         "more")
    for script in config["vrrp_scripts"]:
        found += _script_range_problems(host, script)
        for key in WHOLE_SECOND_KEYS:
            value = script[key]
            if value is not None and not whole_positive(value):
                found.append(
                    f"{host}: lvs_director_vrrp_scripts[{script['name']}].{key} is {value}, but keepalived 2.2.7 "
                    "reads whole seconds; use a whole number of at least 1"
                )
    found += track_file_problems(host, config)
    found += track_process_problems(host, config)
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
    errors += [finding([host], message) for message in process_events_problems(host, config)]
    if not config["vrrp_instances"]:
        errors.append(
            finding([host], f"{host}: lvs_director_vrrp_instances is empty; define at least one VRRP instance")
        )
    errors += [finding([host], message) for message in _name_problems(host, config)]
    names = [instance["name"] for instance in config["vrrp_instances"]]
    for name in repeated(names):
        errors.append(
            finding([host], f"{host}: lvs_director_vrrp_instances has two instances named '{name}'; rename one")
        )
    for instance in config["vrrp_instances"]:
        errors += instance_problems(host, config, instance)
    errors += [finding([host], message) for message in route_problems(host, config)]
    errors += [finding([host], m) for m in vrid_problems(host, config) + sync_group_problems(host, config)]
    endpoints = [(s["address"], s["port"], s["protocol"]) for s in config["virtual_servers"]]
    for address, port, protocol in sorted({e for e in endpoints if endpoints.count(e) > 1}):
        errors.append(
            finding(
                [host], f"{host}: lvs_director_virtual_servers lists {address}:{port}/{protocol} more than once; "
                "merge the entries"
            )
        )
    for server in config["virtual_servers"]:
        server_errors, server_warnings = virtual_server_problems(host, config, server)
        errors += server_errors
        warnings += server_warnings
    return errors, warnings


def _script_range_problems(host: str, script: dict[str, Any]) -> list[str]:
    key = f"{host}: lvs_director_vrrp_scripts[{script['name']}]"
    found = []
    if out_of_range(script["weight"], *SCRIPT_WEIGHT_RANGE):
        found.append(f"{key}.weight is {script['weight']}; keepalived takes -253 to 253")
    for field in ("fall", "rise"):
        if out_of_range(script[field], 1):
            found.append(f"{key}.{field} is {script[field]}; use 1 or more")
    return found
