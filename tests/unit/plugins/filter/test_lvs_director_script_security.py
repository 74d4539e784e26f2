"""Issue 28 (#17, #20): scripts as keepalived's script security judges them, and tokens its parser replaces.

Each mistake is made on the correct pair (lvs_director_pair.py) and must be the only finding. keepalived behaviour
each fixture follows, from keepalived 2.2.7 (acassen/keepalived):
- lib/notify.c, check_security (called by check_script_secure for a script run as root; the role sets script_user
  root and enable_script_security): every part of the path from "/" down to the program is looked at (fstatat with
  AT_SYMLINK_NOFOLLOW, the path after realpath). A part is unsafe when its owner is not root, or - for a regular file,
  or a folder without the sticky bit - when others may write it, or its group may write it and that group is not root
  (gid 0). The first unsafe part disables the script ("Unsafe permissions found for script ... - disabling").
- lib/parser.c, set_std_definitions and read_line: $_BANG ("!"), $_HASH ("#"), $_PWD, $_INSTANCE and $_RANDOM (also
  ${_RANDOM MIN MAX}) are replaced anywhere in a line, inside quotes too (find_definition: $NAME must end at a blank,
  ",", ")" or the end of the line).
"""

from __future__ import annotations

import pytest
from lvs_director_pair import REAL_SERVERS, VIP, pair_settings, script_read

from ansible_collections.hpc.balance.plugins.filter.lvs_director import (
    lvs_director_problems,
    lvs_director_resolve,
    lvs_director_script_lookups,
    lvs_director_script_stats,
)

PROGRAM = "/usr/local/sbin/chk"
FOLDERS = ("/", "/usr", "/usr/local", "/usr/local/sbin")
KEY = f"lvs_director_vrrp_scripts[chk].script runs {PROGRAM}"
FIX = ("so keepalived's script security disables it (\"Unsafe permissions\"); make it root-owned and not group- or "
       "other-writable (chown root:root, chmod go-w) or deploy it with lvs_director_script_files")


def stat_results(**changed):
    """What the preflight's one read returns for PROGRAM and every folder above it, and those paths: root:root 0755
    unless ``changed`` ({path: fields}) says otherwise."""
    return script_read([(path, {"exists": True, "isreg": path == PROGRAM, "executable": True, "uid": 0, "gid": 0,
                                "mode": "0755", **changed.get(path, {})}) for path in (PROGRAM, *FOLDERS)])


def findings(results=None, **both):
    """(errors, warnings) of the pair whose track script runs PROGRAM, as the preflight would see it."""
    base = {"vrrp_scripts": [{"name": "chk", "script": f"{PROGRAM} --fast"}],
            "script_stats": lvs_director_script_stats(*(results if results is not None else stat_results()))}
    found = lvs_director_problems([lvs_director_resolve(pair_settings(host, **{**base, **both}))
                                   for host in ("dir1", "dir2")])
    return [entry["message"] for entry in found["errors"]], [entry["message"] for entry in found["warnings"]]


def both_hosts(message):
    return [f"{host}: {message}" for host in ("dir1", "dir2")]


def test_a_root_owned_program_in_root_owned_folders_passes():
    assert findings() == ([], [])


def test_the_preflight_looks_at_every_folder_from_the_root_down():
    config = lvs_director_resolve(pair_settings(
        "dir1", vrrp_scripts=[{"name": "chk", "script": f"{PROGRAM} --fast"},
                              {"name": "top", "script": "/chk-top"},
                              {"name": "opt", "script": "/opt/vendor/bin/probe x"}]))
    assert lvs_director_script_lookups(config) == [
        PROGRAM, "/chk-top", "/opt/vendor/bin/probe",
        "/", "/opt", "/opt/vendor", "/opt/vendor/bin", "/usr", "/usr/local", "/usr/local/sbin",
    ]


def test_each_program_carries_every_folder_above_it_from_the_root_down():
    facts = lvs_director_script_stats(*stat_results())
    assert [folder["path"] for folder in facts[PROGRAM]["folders"]] == list(FOLDERS)
    # A folder is no executable program (its mode's file type is a directory), though root may search it (test -x).
    assert facts[PROGRAM]["folders"][0] == {"path": "/", "exists": True, "executable": False, "uid": 0, "gid": 0,
                                            "mode": "0755"}


@pytest.mark.parametrize(("changed", "problem"), [
    pytest.param({"/usr/local": {"uid": 1000}}, "the folder /usr/local above it is writable by a non-root user "
                 "(owner uid 1000, mode 0755)", id="parent owned by a user"),
    pytest.param({"/": {"mode": "0777"}}, "the folder / above it is writable by a non-root user (owner uid 0, mode "
                 "0777)", id="root folder world-writable"),
    pytest.param({"/usr": {"gid": 100, "mode": "0775"}}, "the folder /usr above it is writable by a non-root user "
                 "(owner uid 0, group gid 100, mode 0775)", id="parent writable by a non-root group"),
    pytest.param({"/usr/local/sbin": {"uid": 1000, "mode": "1777"}}, "its folder /usr/local/sbin is writable by a "
                 "non-root user (owner uid 1000, mode 1777)", id="sticky folder of a user"),
    pytest.param({PROGRAM: {"gid": 100, "mode": "0775"}}, f"{PROGRAM} is writable by a non-root user (owner uid 0, "
                 "group gid 100, mode 0775)", id="program writable by a non-root group"),
    pytest.param({PROGRAM: {"mode": "1757"}}, f"{PROGRAM} is writable by a non-root user (owner uid 0, mode 1757)",
                 id="sticky bit does not save a file"),
    pytest.param({"/usr": {"uid": 1000}, "/usr/local/sbin": {"mode": "0777"}, PROGRAM: {"uid": 1000}},
                 "the folder /usr above it is writable by a non-root user (owner uid 1000, mode 0755)",
                 id="the first unsafe part from the root down"),
])
def test_a_path_keepalived_finds_unsafe_is_refused(changed, problem):
    errors, warnings = findings(stat_results(**changed))
    assert errors == both_hosts(f"{KEY}, but {problem}, {FIX}")
    assert warnings == []


@pytest.mark.parametrize("changed", [
    pytest.param({PROGRAM: {"mode": "0775"}}, id="program writable by the root group"),
    pytest.param({"/usr/local/sbin": {"mode": "0775"}}, id="folder writable by the root group"),
    pytest.param({"/usr/local/sbin": {"mode": "1777"}}, id="sticky world-writable folder of root"),
    pytest.param({"/usr/local": {"gid": 100, "mode": "1775"}}, id="sticky group-writable folder of root"),
])
def test_what_keepalived_accepts_is_accepted(changed):
    assert findings(stat_results(**changed)) == ([], [])


def test_a_folder_the_preflight_did_not_look_at_is_skipped():
    read, paths = stat_results()
    assert findings((read, [path for path in paths if path != "/usr"])) == ([], [])


def test_a_missing_program_is_named_as_missing_not_unsafe():
    errors, _warnings = findings(stat_results(**{PROGRAM: {"exists": False}, "/usr": {"uid": 1000}}))
    assert errors == both_hosts(
        f"{KEY}, which does not exist on this host, so keepalived disables it (\"could not find script\"); install it "
        "or deploy it with lvs_director_script_files"
    )


# ------------------------------------------------------------------------------------------------ $_ tokens


@pytest.mark.parametrize(("line", "token", "meaning", "fix"), [
    (f"{PROGRAM} --tag $_BANG", "$_BANG", "!", "write ! itself (the role quotes the command line)"),
    (f"{PROGRAM} --tag ${{_HASH}}", "${_HASH}", "#", "write # itself (the role quotes the command line)"),
    (f"{PROGRAM} --state $_PWD/state", None, None, None),
    (f"{PROGRAM} --state $_PWD", "$_PWD", "keepalived's working folder while it reads the config (the folder of "
     "keepalived.conf)", "compute the value inside the script instead"),
    (f"{PROGRAM} --id $_INSTANCE,x", "$_INSTANCE", "keepalived's config id (-i)",
     "compute the value inside the script instead"),
    (f"{PROGRAM} --seed $_RANDOM", "$_RANDOM", "a random number (0 to 32767 unless given a range)",
     "compute the value inside the script instead"),
    (f"{PROGRAM} --seed ${{_RANDOM 1 10}}", "${_RANDOM 1 10}", "a random number (0 to 32767 unless given a range)",
     "compute the value inside the script instead"),
    (f"{PROGRAM} --seed $_RANDOMX $HOME ${{_PWD 1}}", None, None, None),
])
def test_a_token_keepalived_replaces_in_a_script_line_is_refused(line, token, meaning, fix):
    errors, warnings = findings(vrrp_scripts=[{"name": "chk", "script": line}])
    expected = [] if token is None else both_hosts(
        f"lvs_director_vrrp_scripts[chk].script is {line!r}, which holds {token}: keepalived replaces it with "
        f"{meaning} when it reads keepalived.conf, even inside quotes, so the program gets other arguments than "
        f"written; {fix}"
    )
    assert (errors, warnings) == (expected, [])


def test_a_token_is_named_in_every_script_line_of_the_config():
    check = {"type": "MISC_CHECK", "misc_path": f"{PROGRAM} $_HASH"}
    servers = [{"address": VIP, "port": 80, "check": check,
                "real_servers": [{"address": REAL_SERVERS[0], "notify_down": f"{PROGRAM} down $_RANDOM"}]}]
    instances = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                  "notify_master": f"{PROGRAM} master $_BANG"}]
    errors, _warnings = findings(virtual_servers=servers, vrrp_instances=instances, vrrp_scripts=[])
    real = f"lvs_director_virtual_servers[{VIP}:80].real_servers[{REAL_SERVERS[0]}]"
    assert [error.split(", which holds")[0] for error in errors] == [
        f"{host}: {key} is {line!r}" for host in ("dir1", "dir2") for key, line in (
            ("lvs_director_vrrp_instances[VI_LVS].notify_master", f"{PROGRAM} master $_BANG"),
            (f"{real}.check.misc_path", f"{PROGRAM} $_HASH"),
            (f"{real}.notify_down", f"{PROGRAM} down $_RANDOM"),
        )
    ]


# ------------------------------------------------------------------------------ scripts the role deploys (#17)


DEPLOYED = "/etc/keepalived/scripts/chk"
DEPLOYED_FOLDERS = ("/", "/etc", "/etc/keepalived", "/etc/keepalived/scripts")


def deployed_findings(**changed):
    """(errors, warnings) of the pair whose track script runs DEPLOYED, which lvs_director_script_files deploys; the
    folders above it root:root 0755 unless ``changed`` ({path: fields}) says otherwise ({"exists": False}: missing)."""
    read = script_read([(path, {"exists": True, "uid": 0, "gid": 0, "mode": "0755", **changed.get(path, {})})
                        for path in DEPLOYED_FOLDERS])
    both = {"vrrp_scripts": [{"name": "chk", "script": DEPLOYED}], "script_files": [DEPLOYED],
            "script_stats": lvs_director_script_stats(*read)}
    found = lvs_director_problems([lvs_director_resolve(pair_settings(host, **both)) for host in ("dir1", "dir2")])
    return [entry["message"] for entry in found["errors"]], [entry["message"] for entry in found["warnings"]]


def test_the_folders_above_a_deployed_script_are_looked_at_but_not_the_script():
    config = lvs_director_resolve(pair_settings("dir1", vrrp_scripts=[{"name": "chk", "script": DEPLOYED}],
                                                script_files=[DEPLOYED]))
    assert lvs_director_script_lookups(config) == list(DEPLOYED_FOLDERS)


def test_a_deployed_script_in_root_owned_folders_passes():
    assert deployed_findings() == ([], [])


def test_a_deployed_script_whose_folder_is_missing_passes_since_the_role_creates_it():
    assert deployed_findings(**{"/etc/keepalived/scripts": {"exists": False}}) == ([], [])


@pytest.mark.parametrize(("folder", "fields", "part"), [
    ("/etc/keepalived/scripts", {"uid": 1000}, "its folder /etc/keepalived/scripts is writable by a non-root user "
                                               "(owner uid 1000, mode 0755)"),
    ("/etc/keepalived", {"mode": "0777"}, "the folder /etc/keepalived above it is writable by a non-root user "
                                          "(owner uid 0, mode 0777)"),
], ids=["its folder owned by a user", "a folder above world-writable"])
def test_a_deployed_script_under_an_unsafe_folder_is_refused(folder, fields, part):
    # keepalived's check_security walks the deployed path as any other: the script, root:root 0755, is disabled.
    errors, _warnings = deployed_findings(**{folder: fields})
    assert errors == both_hosts(
        f"lvs_director_vrrp_scripts[chk].script runs {DEPLOYED}, which lvs_director_script_files deploys, but {part}, "
        "so keepalived's script security disables it (\"Unsafe permissions\"); deploy it in a folder that root owns "
        "and no other user can write (chown root:root, chmod go-w), e.g. /etc/keepalived/scripts"
    )
