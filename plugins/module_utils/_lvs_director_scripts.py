# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The programs an lvs_director config makes keepalived run, and the ones keepalived would silently disable.

keepalived only logs "could not find script" or "Unsafe permissions" and runs on without the script (a MISC_CHECK then
never fails, a track script never moves the VIP). The role's preflight reads each program and every folder above it
that ``script_lookups`` names in one step (``script_stat_command``), ``script_stats`` turns the read into facts, and
``script_problems`` names what keepalived would refuse: its check_security (keepalived 2.2.7, lib/notify.c) looks at
every part of a root script's path from / down.
"""

from __future__ import annotations

import re
from itertools import takewhile
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import (
    NOTIFY_KEYS,
    REAL_SERVER_SCRIPT_KEYS,
    check_names,
)

# keepalived's standard definitions (lib/parser.c, set_std_definitions): read_line replaces $NAME (followed by a
# blank, ",", ")" or the end) and ${NAME} anywhere in a line, inside quotes too, before the script line is split.
# find_definition: ${_RANDOM MIN MAX} takes numbers, the others none.
EXPANDED = {
    "_BANG": "!",
    "_HASH": "#",
    "_PWD": "keepalived's working folder while it reads the config (the folder of keepalived.conf)",
    "_INSTANCE": "keepalived's config id (-i)",
    "_RANDOM": "a random number (0 to 32767 unless given a range)",
}
_NAMES = "|".join(EXPANDED)
EXPANDED_TOKEN = re.compile(
    rf"\$(?:(?P<plain>{_NAMES})(?=[ \t,)]|$)|\{{(?P<braced>{_NAMES}) *\}}|\{{(?P<ranged>_RANDOM) [ 0-9]*[0-9]\}})"
)
# check_security's modes: group and other write, and the sticky bit that lets a folder be written by others.
GROUP_WRITE, OTHER_WRITE, STICKY = 0o020, 0o002, 0o1000


def _command_path(command: Any) -> str:
    """The program a keepalived script line runs: its first word."""
    words = str(command).split()
    return words[0] if words else ""


def _folders(path: str) -> list[str]:
    """Every folder above an absolute path, from / down: '/usr/local/sbin/chk' -> ['/', '/usr', '/usr/local',
    '/usr/local/sbin'], as keepalived's check_security walks it."""
    parts = [part for part in path.split("/")[:-1] if part]
    return ["/"] + ["/" + "/".join(parts[:index + 1]) for index in range(len(parts))]


def _commands(config: dict[str, Any]) -> list[tuple[str, str]]:
    """Every script line the config makes keepalived run, as (command, variable naming it), in config order."""
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
            for name, check in zip(check_names(real["checks"]), real["checks"]):
                if check["type"] == "MISC_CHECK" and check["misc_path"]:
                    named.append((check["misc_path"], f"{real_key}.{name}.misc_path"))
            for notify in REAL_SERVER_SCRIPT_KEYS:
                if real[notify]:
                    named.append((real[notify], f"{real_key}.{notify}"))
    return named


def script_paths(config: dict[str, Any]) -> list[dict[str, str]]:
    """Every program the config makes keepalived run, as [{"path", "key"}] (key: the variable naming it first)."""
    found, seen = [], set()
    for command, key in _commands(config):
        path = _command_path(command)
        if path not in seen:
            seen.add(path)
            found.append({"path": path, "key": key})
    return found


def script_lookups(config: dict[str, Any]) -> list[str]:
    """The paths the preflight looks at: each program the config runs that the role does not deploy, then every
    folder above each program the config runs, deployed ones too (from /, as keepalived's check_security walks them),
    each once. A deployed program is root:root 0755 once written, but a folder above it may not be safe."""
    run = [entry["path"] for entry in script_paths(config) if entry["path"].startswith("/")]
    programs = [path for path in run if path not in config["script_files"]]
    folders = {folder for path in run for folder in _folders(path)}
    return programs + sorted(folders - set(programs))


# One read on the host for every path script_lookups names (hpc.balance.read_commands runs it without a shell of its
# own): for each path that exists, following links as keepalived does, "x" or "-" for whether root may execute it
# (test -x: access(2), which also honours a noexec mount), then its raw st_mode in hex, its uid, its gid and the path.
SCRIPT_STAT_SHELL = (
    'for p do [ -e "$p" ] || continue; if [ -x "$p" ]; then printf "x "; else printf -- "- "; fi; '
    'stat -L --format="%f %u %g %n" -- "$p"; done'
)
_FILE_TYPE_MASK, _REGULAR_FILE = 0o170000, 0o100000


def script_stat_command(paths: list[str]) -> list[str]:
    """The argument vector that reads every one of ``paths`` in one step (see SCRIPT_STAT_SHELL)."""
    return ["/bin/sh", "-c", SCRIPT_STAT_SHELL, "sh", *paths]


def script_stats(read: dict[str, Any] | None, paths: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The outcome of ``script_stat_command(paths)`` -> {path: its facts, with the facts of every folder above it
    that was looked at under "folders", from / down}. A path the read does not list does not exist."""
    found = {}
    for line in str((read or {}).get("stdout") or "").splitlines():
        fields = line.split(" ", 4)
        if len(fields) != 5:
            continue
        executable, raw_mode, uid, gid, path = fields
        st_mode = int(raw_mode, 16)
        regular = st_mode & _FILE_TYPE_MASK == _REGULAR_FILE
        found[path] = {"exists": True, "executable": executable == "x" and regular, "uid": int(uid),
                       "gid": int(gid), "mode": f"{st_mode & 0o7777:04o}"}
    missing = {"exists": False, "executable": False, "uid": None, "gid": None, "mode": None}
    facts = {path: found.get(path, missing) for path in paths or []}
    return {
        path: dict(fact, folders=[dict(facts[folder], path=folder) for folder in _folders(path) if folder in facts])
        for path, fact in facts.items()
    }


def _unsafe(stat: dict[str, Any], folder: bool) -> str | None:
    """Why keepalived's check_security (lib/notify.c) finds a path unsafe for a script it runs as root, or None.

    Unsafe: an owner other than root, or - for a file, or a folder without the sticky bit - write permission for
    other users, or for the group unless the group is root (gid 0). A missing gid counts as a non-root group.
    """
    mode = int(str(stat.get("mode") or "0"), 8)
    if stat.get("uid") != 0:
        return f"owner uid {stat.get('uid')}, mode {stat.get('mode')}"
    if folder and mode & STICKY:
        return None
    if mode & OTHER_WRITE:
        return f"owner uid 0, mode {stat.get('mode')}"
    if mode & GROUP_WRITE and stat.get("gid") != 0:
        return f"owner uid 0, group gid {stat.get('gid')}, mode {stat.get('mode')}"
    return None


def _first_unsafe_folder(path: str, folders: list[dict[str, Any]]) -> str | None:
    """The first of ``folders`` (their facts with "path", from / down to the program's own) keepalived would find
    unsafe, in words, or None."""
    parent = path.rsplit("/", 1)[0] or "/"
    for folder in folders:
        reason = _unsafe(folder, folder=True)
        if reason:
            what = (f"its folder {folder['path']}" if folder["path"] == parent
                    else f"the folder {folder['path']} above it")
            return f"{what} is writable by a non-root user ({reason})"
    return None


def _deployed_folder_problem(path: str, stats: dict[str, dict[str, Any]]) -> str | None:
    """The first existing folder above a program the role deploys that keepalived would find unsafe, or None. A
    folder that does not exist yet is created root:root 0755 by the role (tasks/config.yml), and so is every folder
    below it, so the walk ends at the first missing one."""
    existing = takewhile(lambda folder: folder["exists"],
                         (dict(stats.get(folder) or {"exists": False}, path=folder) for folder in _folders(path)))
    return _first_unsafe_folder(path, list(existing))


def _path_problem(path: str, stat: dict[str, Any]) -> str | None:
    """The first part of the path keepalived would find unsafe, from / down to the program, or None."""
    unsafe_folder = _first_unsafe_folder(path, stat.get("folders") or [])
    if unsafe_folder:
        return unsafe_folder
    reason = _unsafe(stat, folder=False)
    return f"{path} is writable by a non-root user ({reason})" if reason else None


def _expansion_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Script lines holding a token keepalived's parser replaces before it runs anything."""
    found = []
    for command, key in _commands(config):
        for match in EXPANDED_TOKEN.finditer(str(command)):
            name = match.group("plain") or match.group("braced") or match.group("ranged")
            fix = (f"write {EXPANDED[name]} itself (the role quotes the command line)" if name in ("_BANG", "_HASH")
                   else "compute the value inside the script instead")
            found.append(
                f"{host}: {key} is {str(command)!r}, which holds {match.group(0)}: keepalived replaces it with "
                f"{EXPANDED[name]} when it reads keepalived.conf, even inside quotes, so the program gets other "
                f"arguments than written; {fix}"
            )
    return found


def script_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Scripts keepalived would silently disable (missing, not executable, a path writable by non-root) or run with
    other arguments, named before any change. Paths the role deploys itself (lvs_director_script_files) are root-owned
    0755 by then. The role sets script_user root, so keepalived checks every path (need_script_protection)."""
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
        if path in config["script_files"] and stats is not None:
            unsafe = _deployed_folder_problem(path, stats)
            if unsafe:
                found.append(
                    f"{key} runs {path}, which lvs_director_script_files deploys, but {unsafe}, so keepalived's "
                    "script security disables it (\"Unsafe permissions\"); deploy it in a folder that root owns and "
                    "no other user can write (chown root:root, chmod go-w), e.g. /etc/keepalived/scripts"
                )
            continue
        if stats is None or path not in stats:
            continue
        stat = stats[path]
        unsafe = _path_problem(path, stat) if stat.get("exists") else None
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
        elif unsafe:
            found.append(
                f"{key} runs {path}, but {unsafe}, so keepalived's script security disables it "
                "(\"Unsafe permissions\"); make it root-owned and not group- or other-writable (chown root:root, "
                "chmod go-w) or deploy it with lvs_director_script_files"
            )
    return found + _expansion_problems(host, config)
