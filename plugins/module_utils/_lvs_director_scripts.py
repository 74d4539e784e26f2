# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The programs an lvs_director config makes keepalived run, and the ones keepalived would silently disable.

keepalived only logs "could not find script" or "Unsafe permissions" and runs on without the script (a MISC_CHECK then
never fails, a track script never moves the VIP). The role's preflight stats each program ``script_lookups`` names,
``script_stats`` turns the results into facts, and ``script_problems`` names what keepalived would refuse.
"""

from __future__ import annotations

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import (
    NOTIFY_KEYS,
    REAL_SERVER_SCRIPT_KEYS,
)


def _command_path(command):
    """The program a keepalived script line runs: its first word."""
    words = str(command).split()
    return words[0] if words else ""


def script_paths(config):
    """Every program the config makes keepalived run, as [{"path", "key"}] (key: the variable naming it first)."""
    named = []
    for script in config["vrrp_scripts"]:
        named.append((script["script"], f"lvs_director_vrrp_scripts[{script['name']}].script"))
    for instance in config["vrrp_instances"]:
        for notify in NOTIFY_KEYS:
            if instance[notify]:
                named.append((instance[notify], f"lvs_director_vrrp_instances[{instance['name']}].{notify}"))
    for group in config.get("vrrp_sync_groups") or []:
        for notify in NOTIFY_KEYS:
            if group[notify]:
                named.append((group[notify], f"lvs_director_vrrp_sync_groups[{group['name']}].{notify}"))
    for server in config["virtual_servers"]:
        key = f"lvs_director_virtual_servers[{server['address']}:{server['port']}]"
        for notify in ("quorum_up", "quorum_down"):
            if server[notify]:
                named.append((server[notify], f"{key}.{notify}"))
        for real in server["real_servers"]:
            real_key = f"{key}.real_servers[{real['address']}]"
            if real["check"]["type"] == "MISC_CHECK" and real["check"]["misc_path"]:
                named.append((real["check"]["misc_path"], f"{real_key}.check.misc_path"))
            for notify in REAL_SERVER_SCRIPT_KEYS:
                if real[notify]:
                    named.append((real[notify], f"{real_key}.{notify}"))
    found, seen = [], set()
    for command, key in named:
        path = _command_path(command)
        if path not in seen:
            seen.add(path)
            found.append({"path": path, "key": key})
    return found


def script_lookups(config):
    """The paths the preflight looks at: each program the config runs that the role does not deploy, and its folder."""
    programs = [entry["path"] for entry in script_paths(config)
                if entry["path"].startswith("/") and entry["path"] not in config["script_files"]]
    folders = [path.rsplit("/", 1)[0] or "/" for path in programs]
    return programs + sorted(set(folders) - set(programs))


def script_stats(results):
    """Results of the stat module looped over the programs and their folders -> {program: its facts + folder's}."""
    facts = {}
    for result in results or []:
        stat = result.get("stat") or {}
        facts[str(result.get("item"))] = {
            "exists": bool(stat.get("exists")),
            "executable": bool(stat.get("executable")) and bool(stat.get("isreg", True)),
            "uid": stat.get("uid"),
            "mode": stat.get("mode"),
        }
    # Folders are looked at too (keyed like programs): each program carries its folder's facts.
    return {path: dict(fact, folder=facts.get(path.rsplit("/", 1)[0] or "/")) for path, fact in facts.items()}


def _writable_by_non_root(stat):
    """keepalived's check_script_secure: a non-root owner, or group/other write permission, makes a path unsafe."""
    return stat.get("uid") != 0 or int(str(stat.get("mode") or "0"), 8) & 0o022 != 0


def script_problems(host, config):
    """Scripts keepalived would silently disable (missing, not executable, writable by non-root), named before any
    change. Paths the role deploys itself (lvs_director_script_files) are root-owned 0755 by then."""
    stats = config["script_stats"]
    found = []
    for entry in script_paths(config):
        path, key = entry["path"], f"{host}: {entry['key']}"
        if not path.startswith("/"):
            found.append(
                f"{key} runs {path!r}, which is not an absolute path; keepalived looks scripts up with a path of its "
                "own: write the full path (/usr/local/sbin/...)"
            )
            continue
        if path in config["script_files"] or stats is None or path not in stats:
            continue
        stat, folder = stats[path], stats[path].get("folder") or {}
        if not stat.get("exists"):
            found.append(
                f"{key} runs {path}, which does not exist on this host, so keepalived disables it (\"could not find "
                "script\"); install it or deploy it with lvs_director_script_files"
            )
        elif not stat.get("executable"):
            found.append(
                f"{key} runs {path}, which is not executable, so keepalived disables it; chmod 0755 it or deploy it "
                "with lvs_director_script_files"
            )
        elif _writable_by_non_root(stat) or (folder and _writable_by_non_root(folder)):
            folder_name = f"its folder {path.rsplit('/', 1)[0] or '/'}"
            what, shown = (path, stat) if _writable_by_non_root(stat) else (folder_name, folder)
            found.append(
                f"{key} runs {path}, but {what} is writable by a non-root user (owner uid {shown.get('uid')}, mode "
                f"{shown.get('mode')}), so keepalived's script security disables it (\"Unsafe permissions\"); make "
                "it root-owned and not group- or other-writable (chown root:root, chmod go-w) or deploy it with "
                "lvs_director_script_files"
            )
    return found
