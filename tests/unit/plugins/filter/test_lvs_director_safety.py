"""Issue 18: the production-safety findings of lvs_director_problems, each alone on an otherwise correct pair.

keepalived behaviour each finding rests on, from keepalived 2.2.7 (acassen/keepalived) and keepalived.conf(5):
- vrrp_script interval/timeout and MISC_CHECK misc_timeout are read with read_unsigned_strvec (vrrp_parser.c,
  check_misc.c): a fraction is a config error, caught here before any file changes (#10).
- vrrp.c drops a weighted track script of a priority-255 instance ("Cannot have weighted track script") (#8).
- check_script_secure disables a script that is missing ("could not find script") or writable by a non-root user
  ("Unsafe permissions found for script") - keepalived -t still passes (#1).
- UDP_CHECK / DNS_CHECK / PING_CHECK exist for UDP services; TCP_CHECK connects over TCP (#2).
- quorum acts on IPVS only through sorry_server; quorum_up/quorum_down run scripts; hysteresis dampens (#13).
- inhibit_on_failure sets weight 0 instead of removing the real server (#7); the kernel's
  Documentation/networking/ipvs-sysctl.rst: expire_nodest_conn expires connections to a removed destination,
  expire_quiescent_template acts on destinations with weight 0.
"""

from __future__ import annotations

import pytest
from lvs_director_pair import VIP, pair_settings, weighted_service

from ansible_collections.hpc.balance.plugins.filter.lvs_director import (
    lvs_director_problems,
    lvs_director_resolve,
    lvs_director_script_paths,
)

KEY = f"lvs_director_virtual_servers[{VIP}:80]"
# A program and every folder above it as lvs_director_script_stats gives them: root-owned, not writable by others.
SAFE = {"exists": True, "executable": True, "uid": 0, "gid": 0, "mode": "0755",
        "folders": [{"path": path, "uid": 0, "gid": 0, "mode": "0755"}
                    for path in ("/", "/usr", "/usr/local", "/usr/local/sbin")]}


def settings(host, **overrides):
    """The correct pair with IPVS (not VRRP only), wrr 3:1 and the role's default IPVS sysctls."""
    return pair_settings(host, **{"virtual_servers": weighted_service(), "vrrp_only": False,
                                  "sysctls": {"net.ipv4.vs.expire_nodest_conn": 1,
                                              "net.ipv4.vs.expire_quiescent_template": 1}, **overrides})


def findings(both=None, dir1=None, dir2=None):
    """Problems of the pair; `both` goes to both directors (peers share their virtual servers)."""
    configs = [lvs_director_resolve(settings(host, **(both or {}), **(extra or {})))
               for host, extra in (("dir1", dir1), ("dir2", dir2))]
    found = lvs_director_problems(configs)
    return [e["message"] for e in found["errors"]], [w["message"] for w in found["warnings"]]


def service(**fields):
    base = {"address": VIP, "port": 80, "real_servers": [{"address": "198.18.0.21", "weight": 3},
                                                         {"address": "198.18.0.22"}]}
    base.update(fields)
    return [base]


def test_the_safety_pair_has_no_problem():
    assert findings() == ([], [])


@pytest.mark.parametrize(
    ("both", "expected"),
    [
        pytest.param(  # 10
            {"vrrp_scripts": [{"name": "chk", "script": "/bin/true", "interval_s": 0.5}]},
            [f"{h}: lvs_director_vrrp_scripts[chk].interval_s is 0.5, but keepalived 2.2.7 reads whole seconds; use a "
             "whole number of at least 1" for h in ("dir1", "dir2")],
            id="10 vrrp_script interval as a fraction",
        ),
        pytest.param(  # 10
            {"vrrp_scripts": [{"name": "chk", "script": "/bin/true", "timeout_s": 1.5}]},
            [f"{h}: lvs_director_vrrp_scripts[chk].timeout_s is 1.5, but keepalived 2.2.7 reads whole seconds; use a "
             "whole number of at least 1" for h in ("dir1", "dir2")],
            id="10 vrrp_script timeout as a fraction",
        ),
        pytest.param(  # 10
            {"virtual_servers": service(check={"type": "MISC_CHECK", "misc_path": "/bin/true", "misc_timeout_s": 0.5},
                                        real_servers=[{"address": "198.18.0.21"}])},
            [f"{h}: {KEY}.real_servers[198.18.0.21].check.misc_timeout_s is 0.5, but keepalived 2.2.7 reads whole "
             "seconds; use a whole number of at least 1" for h in ("dir1", "dir2")],
            id="10 misc_timeout as a fraction",
        ),
        pytest.param(  # 2
            {"virtual_servers": service(protocol="UDP", port=53, address=VIP, check={"type": "TCP_CHECK"},
                                        real_servers=[{"address": "198.18.0.21"}])},
            [f"{h}: lvs_director_virtual_servers[{VIP}:53].real_servers[198.18.0.21].check is TCP_CHECK on a UDP "
             "service, so every real server fails it and leaves the pool; use UDP_CHECK, DNS_CHECK, PING_CHECK or "
             "MISC_CHECK" for h in ("dir1", "dir2")],
            id="2 TCP_CHECK on a UDP service",
        ),
        pytest.param(  # 3
            {"virtual_servers": service(lvs_method="NAT")},
            [f"{h}: {KEY}.lvs_method is NAT, which this role does not set up (NAT needs ip_forward and the replies "
             "routed back through the director, TUN an ipip tunnel on every real server); use lvs_method: DR"
             for h in ("dir1", "dir2")],
            id="3 NAT refused",
        ),
        pytest.param(  # 3
            {"virtual_servers": service(lvs_method="tun")},
            [f"{h}: {KEY}.lvs_method is TUN, which this role does not set up (NAT needs ip_forward and the replies "
             "routed back through the director, TUN an ipip tunnel on every real server); use lvs_method: DR"
             for h in ("dir1", "dir2")],
            id="3 TUN refused",
        ),
        pytest.param(  # 14
            {"virtual_servers": service(sorry_server={"address": "198.18.0.30", "port": 8080})},
            [f"{h}: {KEY}.sorry_server.port is 8080 but DR cannot rewrite ports, so the sorry server would get the "
             "traffic on port 80; use port 80 (or leave the port out)" for h in ("dir1", "dir2")],
            id="14 sorry server port under DR",
        ),
        pytest.param(  # 13
            {"virtual_servers": service(quorum=2, sorry_server={"address": "198.18.0.30"}, hysteresis=2)},
            [f"{h}: {KEY}.hysteresis is 2; use 0 to 1 (below the quorum, 2)" for h in ("dir1", "dir2")],
            id="13 hysteresis not below the quorum",
        ),
        pytest.param(  # 6
            {"vrrp_scripts": [{"name": "chk", "script": '/bin/test -f "/run/x"'}]},
            [f"{h}: lvs_director_vrrp_scripts[chk].script is '/bin/test -f \"/run/x\"', which holds a double quote, a "
             "backslash or a line break that keepalived cannot read inside a quoted value; use a wrapper script "
             "without them" for h in ("dir1", "dir2")],
            id="6 double quote in a script line",
        ),
        pytest.param(  # 6
            {"vrrp_version": 2, "advert_int_s": 1,
             "vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                                 "auth_pass": 'ab"cd'}]},
            [f"{h}: lvs_director_vrrp_instances[VI_LVS].auth_pass contains a double quote, a backslash or a line "
             "break, which keepalived cannot read inside a quoted value (the secret is not shown); use a secret "
             "without them" for h in ("dir1", "dir2")],
            id="6 double quote in auth_pass",
        ),
        pytest.param(  # options
            {"max_auto_priority": 100},
            [f"{h}: lvs_director_max_auto_priority is 100; use -1 (off) to 99" for h in ("dir1", "dir2")],
            id="max_auto_priority above 99",
        ),
        pytest.param(  # options
            {"lvs_timeouts": {"tcp_s": 0}},
            [f"{h}: lvs_director_lvs_timeouts.tcp_s is 0; use a whole number of seconds, 1 or more"
             for h in ("dir1", "dir2")],
            id="lvs_timeouts of zero",
        ),
        pytest.param(  # options
            {"virtual_servers": service(check={"type": "HTTP_GET", "status_code": "200-2999"},
                                        real_servers=[{"address": "198.18.0.21"}])},
            [f"{h}: {KEY}.real_servers[198.18.0.21].check.status_code is '200-2999'; use codes or ranges from 100 to "
             "599 separated by spaces, e.g. 200-299 (keepalived's default) or 200 301" for h in ("dir1", "dir2")],
            id="HTTP status-code range keepalived cannot read",
        ),
    ],
)
def test_each_safety_mistake_is_named_with_host_key_and_fix(both, expected):
    assert findings(both=both) == (expected, [])


def test_priority_255_with_a_weighted_track_script_is_refused():  # 8
    scripts = [{"name": "chk", "script": "/bin/true", "weight": -20}]
    errors, _warnings = findings(both={"vrrp_scripts": scripts}, dir1={"priority": 255, "vrrp_instances": [
        {"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "track_scripts": ["chk"]}]})
    assert errors == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].priority is 255 (address owner) with the weighted track script "
        "'chk' (weight -20), which keepalived drops (\"Cannot have weighted track script\"), so it can never move the "
        "VIP; use a priority of 254 or less, or a script without weight"
    ]


@pytest.mark.parametrize(("weight", "warned"), [(-20, True), (-50, True), (-51, False), (None, False)])
def test_a_track_script_weight_that_cannot_close_the_priority_gap_is_a_warning(weight, warned):  # 8
    script = {"name": "chk", "script": "/bin/true", **({} if weight is None else {"weight": weight})}
    tracked = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "track_scripts": ["chk"]}]
    errors, warnings = findings(both={"vrrp_scripts": [script], "vrrp_instances": tracked})
    assert errors == []
    expected = (
        f"dir1: lvs_director_vrrp_scripts[chk].weight is {weight}: a failure lowers dir1's priority for VRID 51 "
        f"(IPv4) from 150 to {150 + (weight or 0)}, not below dir2's 100, so it never moves the VIP; use a weight of "
        "-51 or lower"
    )
    assert warnings == ([expected] if warned else [])


@pytest.mark.parametrize(
    ("dir2", "detail"),
    [
        pytest.param({"virtual_servers": service(real_servers=[{"address": "198.18.0.21", "weight": 1},
                                                               {"address": "198.18.0.22"}])},
                     "real_servers (dir1: ['198.18.0.21:80 weight 3 TCP_CHECK', '198.18.0.22:80 weight 1 TCP_CHECK']; "
                     "dir2: ['198.18.0.21:80 weight 1 TCP_CHECK', '198.18.0.22:80 weight 1 TCP_CHECK'])",
                     id="weights"),
        pytest.param({"virtual_servers": service(lvs_sched="rr")}, "lvs_sched (dir1: wlc; dir2: rr)", id="scheduler"),
        pytest.param({"virtual_servers": service(persistence_timeout_s=300)},
                     "persistence_timeout_s (dir1: None; dir2: 300)", id="persistence"),
        pytest.param({"virtual_servers": service(check={"type": "HTTP_GET"})},
                     "check (dir1: TCP_CHECK; dir2: HTTP_GET), real_servers (dir1: ['198.18.0.21:80 weight 3 "
                     "TCP_CHECK', '198.18.0.22:80 weight 1 TCP_CHECK']; dir2: ['198.18.0.21:80 weight 3 HTTP_GET', "
                     "'198.18.0.22:80 weight 1 HTTP_GET'])", id="checks"),
        pytest.param({"virtual_servers": []}, "dir2 does not define it", id="missing on a peer"),
        # The same check type with other parameters takes real servers out at other times on each director.
        pytest.param({"virtual_servers": service(check={"type": "TCP_CHECK", "connect_timeout_s": 10})},
                     "check (dir1: TCP_CHECK; dir2: TCP_CHECK (connect_timeout_s 10)), real_servers (dir1: "
                     "['198.18.0.21:80 weight 3 TCP_CHECK', '198.18.0.22:80 weight 1 TCP_CHECK']; dir2: "
                     "['198.18.0.21:80 weight 3 TCP_CHECK (connect_timeout_s 10)', '198.18.0.22:80 weight 1 TCP_CHECK "
                     "(connect_timeout_s 10)'])", id="check parameters"),
    ],
)
def test_peers_that_serve_one_vip_differently_are_refused_with_a_diff(dir2, detail):  # 9
    errors, _warnings = findings(dir2=dir2)
    assert errors == [
        f"lvs_director_virtual_servers[{VIP}:80/TCP] differs between the directors that can hold {VIP} (dir1, dir2): "
        f"{detail}; a failover would change the service: define it once for all of them (group_vars/lvs_directors)"
    ]


@pytest.mark.parametrize(
    ("stat", "problem"),
    [
        pytest.param({"exists": False}, "which does not exist on this host, so keepalived disables it (\"could not "
                     "find script\"); install it or deploy it with lvs_director_script_files", id="missing"),
        pytest.param({**SAFE, "executable": False, "mode": "0644"}, "which is not executable, so keepalived disables "
                     "it; chmod 0755 it or deploy it with lvs_director_script_files", id="not executable"),
        pytest.param({**SAFE, "uid": 65534}, "but /usr/local/sbin/chk is writable by a non-root user (owner uid 65534, "
                     "mode 0755), so keepalived's script security disables it (\"Unsafe permissions\"); make it "
                     "root-owned and not group- or other-writable (chown root:root, chmod go-w) or deploy it with "
                     "lvs_director_script_files", id="owned by a non-root user"),
        pytest.param({**SAFE, "mode": "0777"}, "but /usr/local/sbin/chk is writable by a non-root user (owner uid 0, "
                     "mode 0777), so keepalived's script security disables it (\"Unsafe permissions\"); make it "
                     "root-owned and not group- or other-writable (chown root:root, chmod go-w) or deploy it with "
                     "lvs_director_script_files", id="world-writable"),
        pytest.param({**SAFE, "folders": [*SAFE["folders"][:3],
                                          {"path": "/usr/local/sbin", "uid": 0, "gid": 0, "mode": "0777"}]},
                     "but its folder /usr/local/sbin is writable by a non-root user (owner uid 0, mode 0777), so "
                     "keepalived's script security disables it (\"Unsafe permissions\"); make it root-owned and not "
                     "group- or other-writable (chown root:root, chmod go-w) or deploy it with "
                     "lvs_director_script_files", id="folder writable"),
    ],
)
def test_a_misc_check_script_keepalived_would_disable_is_refused(stat, problem):  # 1
    check = {"type": "MISC_CHECK", "misc_path": "/usr/local/sbin/chk 198.18.0.21"}
    both = {"virtual_servers": service(check=check, real_servers=[{"address": "198.18.0.21"}]),
            "script_stats": {"/usr/local/sbin/chk": stat}}
    errors, _warnings = findings(both=both)
    assert errors == [f"{h}: {KEY}.real_servers[198.18.0.21].check.misc_path runs /usr/local/sbin/chk, {problem}"
                      for h in ("dir1", "dir2")]


def test_a_script_the_role_deploys_needs_not_exist_yet():  # 1
    both = {"vrrp_scripts": [{"name": "chk", "script": "/etc/keepalived/chk"}],
            "script_files": ["/etc/keepalived/chk"], "script_stats": {"/etc/keepalived/chk": {"exists": False}}}
    assert findings(both=both) == ([], [])


def test_a_track_script_given_without_a_path_is_refused():  # 1
    errors, _warnings = findings(both={"vrrp_scripts": [{"name": "chk", "script": "pidof haproxy"}]})
    assert errors[0] == (
        "dir1: lvs_director_vrrp_scripts[chk].script runs 'pidof', which is not an absolute path; keepalived looks "
        "scripts up with a path of its own: write the full path (/usr/local/sbin/...)"
    )


def test_every_script_the_config_runs_is_looked_up_once():  # 1
    config = lvs_director_resolve(settings(
        "dir1",
        vrrp_scripts=[{"name": "chk", "script": "/usr/local/sbin/chk --fast"}],
        vrrp_instances=[{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                         "notify_master": "/usr/local/sbin/notify master", "notify": "/usr/local/sbin/notify"}],
        virtual_servers=service(quorum_down="/usr/local/sbin/page",
                                check={"type": "MISC_CHECK", "misc_path": "/usr/local/sbin/chk"},
                                real_servers=[{"address": "198.18.0.21", "notify_down": "/usr/local/sbin/rs down"}]),
    ))
    assert [entry["path"] for entry in lvs_director_script_paths(config)] == [
        "/usr/local/sbin/chk", "/usr/local/sbin/notify", "/usr/local/sbin/page", "/usr/local/sbin/rs"]


def test_quorum_without_a_sorry_server_or_quorum_down_is_a_warning():  # 13
    errors, warnings = findings(both={"virtual_servers": service(quorum=2)})
    assert errors == []
    assert warnings == [
        f"{h}: {KEY}.quorum is set without sorry_server or quorum_down: when the quorum is lost keepalived changes "
        "nothing in IPVS (only a sorry server replaces the pool); add sorry_server or quorum_down, or drop quorum"
        for h in ("dir1", "dir2")
    ]


def test_removal_on_failure_with_expire_nodest_conn_is_a_warning():  # 7
    errors, warnings = findings(both={"inhibit_on_failure": False})
    assert errors == []
    assert warnings == [message for h in ("dir1", "dir2") for message in (
        f"{h}: lvs_director_sysctls sets net.ipv4.vs.expire_quiescent_template=1, which acts only on real servers at "
        "weight 0, but no virtual server sets inhibit_on_failure; set inhibit_on_failure: true or drop the setting",
        f"{h}: {KEY}.inhibit_on_failure is false: a failed check (a false alarm too) removes the real server and, "
        "with net.ipv4.vs.expire_nodest_conn=1, resets its established sessions; set inhibit_on_failure: true "
        "(weight 0 keeps them), or set expire_nodest_conn to 0 in lvs_director_sysctls",
    )]


def test_inhibit_on_failure_is_the_default():  # 7
    config = lvs_director_resolve(settings("dir1"))
    assert config["virtual_servers"][0]["inhibit_on_failure"] is True


@pytest.mark.parametrize(("protocol", "check"), [("TCP", "TCP_CHECK"), ("UDP", "UDP_CHECK"), ("SCTP", "PING_CHECK")])
def test_a_service_without_a_check_gets_one_that_speaks_its_protocol(protocol, check):  # 2
    config = lvs_director_resolve(settings("dir1", virtual_servers=service(protocol=protocol)))
    assert {real["checks"][0]["type"] for real in config["virtual_servers"][0]["real_servers"]} == {check}


@pytest.mark.parametrize("check", ["UDP_CHECK", "DNS_CHECK", "PING_CHECK"])
def test_udp_checks_are_accepted_on_a_udp_service(check):  # 2
    assert findings(both={"virtual_servers": service(protocol="UDP", check={"type": check})}) == ([], [])


def test_persistence_gets_the_same_advice_as_ipvs_spread_only_with_clients_behind_nat():  # 15
    both = {"virtual_servers": service(persistence_timeout_s=300)}
    assert findings(both=both) == ([], [])
    errors, _warnings = findings(both={**both, "clients_behind_nat": True})
    assert errors[0] == (
        f"dir1: {KEY}.persistence_timeout_s is 300: every client behind one NAT address stays on one real server for "
        "that time; drop persistence, or narrow it with persistence_granularity only where sessions need it "
        "(lvs_director_clients_behind_nat is true)"
    )


def test_mh_is_flagged_like_sh():  # 15
    _errors, warnings = findings(both={"virtual_servers": service(lvs_sched="mh")})
    assert warnings[0] == (
        f"dir1: {KEY}.lvs_sched is mh (source hashing): clients behind one NAT address all land on one real server, "
        "and so does persistence_timeout_s; use wlc or lc, which spread connections, or add mh-port to "
        "scheduler_flags"
    )


def test_the_port_flag_spreads_clients_behind_nat_and_silences_the_advice():  # issue 28, defect 20
    both = {"virtual_servers": service(lvs_sched="sh", scheduler_flags=["sh-port", "sh-fallback"]),
            "clients_behind_nat": True}
    assert findings(both=both) == ([], [])


@pytest.mark.parametrize(("scheduler", "flags", "message"), [
    ("wlc", ["sh-port"], "has sh-port, which keepalived applies only to the sh scheduler, not wlc; drop it"),
    ("mh", ["sh-port"], "has sh-port, which keepalived applies only to the sh scheduler, not mh; use mh-port or "
                        "mh-fallback"),
    ("sh", ["sh-port", "sh-port"], "lists sh-port more than once; keep one"),
])
def test_a_flag_of_another_scheduler_or_a_repeated_flag_is_refused(scheduler, flags, message):
    # keepalived 2.2.7 check_parser.c: "sh-port only applies to sh scheduler - ignoring", which fails keepalived -t.
    errors, _warnings = findings(both={"virtual_servers": service(lvs_sched=scheduler, scheduler_flags=flags)})
    assert errors == [f"{host}: {KEY}.scheduler_flags {message}" for host in ("dir1", "dir2")]


def test_the_one_read_becomes_each_programs_facts_with_its_folders():  # 1
    from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_script_stats

    paths = ["/usr/local/sbin/chk", "/usr/local/sbin", "/", "/gone"]
    # lvs_director_script_stat_command's output: a line per path that exists, "x" where root may execute it, the
    # raw st_mode in hex (0x81ed: a regular file, 0755; 0x41ed: a folder, 0755), uid, gid and the path.
    read = {"rc": 0, "stdout": "x 81ed 1000 1000 /usr/local/sbin/chk\nx 41ed 0 0 /usr/local/sbin\nx 41ed 0 0 /"}
    facts = lvs_director_script_stats(read, paths)
    folder = {"exists": True, "executable": False, "uid": 0, "gid": 0, "mode": "0755"}
    # Folders come from / down; one that was not looked at (/usr, /usr/local here) is left out.
    assert facts["/usr/local/sbin/chk"] == {"exists": True, "executable": True, "uid": 1000, "gid": 1000,
                                            "mode": "0755", "folders": [{**folder, "path": "/"},
                                                                        {**folder, "path": "/usr/local/sbin"}]}
    assert facts["/gone"]["exists"] is False


def test_the_preflight_looks_at_each_program_it_does_not_deploy_and_at_every_folder_above_it():  # 1
    from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_script_lookups

    config = lvs_director_resolve(settings(
        "dir1", script_files=["/etc/keepalived/chk_vip"],
        vrrp_scripts=[{"name": "a", "script": "/etc/keepalived/chk_vip"}, {"name": "b", "script": "/usr/bin/true x"},
                      {"name": "c", "script": "/usr/local/sbin/chk"}]))
    # keepalived's check_security (lib/notify.c) looks at every folder from / down, so the preflight does too; for a
    # program the role deploys only at the folders (issue 28, defect 17).
    assert lvs_director_script_lookups(config) == ["/usr/bin/true", "/usr/local/sbin/chk", "/", "/etc",
                                                   "/etc/keepalived", "/usr", "/usr/bin", "/usr/local",
                                                   "/usr/local/sbin"]


def test_the_same_http_check_with_another_path_on_a_peer_is_refused():  # 20
    http = {"type": "HTTP_GET", "url_path": "/healthz", "status_code": "200"}
    errors, _warnings = findings(dir1={"virtual_servers": service(check=http)},
                                 dir2={"virtual_servers": service(check={**http, "url_path": "/"})})
    assert len(errors) == 1
    assert "check (dir1: HTTP_GET (status_code 200, url_path /healthz); dir2: HTTP_GET (status_code 200))" in errors[0]


def test_a_sync_group_with_other_instances_on_a_peer_is_refused():  # 20
    instances = [{"name": "VI_4", "virtual_router_id": 51, "virtual_ipaddresses": [VIP]},
                 {"name": "VI_6", "virtual_router_id": 52, "virtual_ipaddresses": ["fd00::100"]},
                 {"name": "VI_X", "virtual_router_id": 53, "virtual_ipaddresses": ["198.18.0.101"]}]
    errors, _warnings = findings(both={"vrrp_instances": instances},
                                 dir1={"vrrp_sync_groups": [{"name": "G", "instances": ["VI_4", "VI_6"]}]},
                                 dir2={"vrrp_sync_groups": [{"name": "G", "instances": ["VI_4", "VI_X"]}]})
    assert errors == [
        "lvs_director_vrrp_sync_groups[G] holds other instances on each director (dir1: VI_4, VI_6; dir2: VI_4, VI_X); "
        "keepalived moves a group's instances together, so a failover would leave VIPs behind: list the same "
        "instances everywhere (group_vars/lvs_directors)"
    ]


def test_a_real_server_drained_on_one_director_only_is_refused():  # 20
    # lvs_director_drained_real_servers comes from each director's own record (playbooks/lvs_drain.yml): a failover
    # to the director that lacks it would send new connections to the drained server at full weight.
    errors, _warnings = findings(dir1={"drained_real_servers": ["198.18.0.22"]})
    assert errors == [
        f"lvs_director_virtual_servers[{VIP}:80/TCP] differs between the directors that can hold {VIP} (dir1, dir2): "
        "real_servers (dir1: ['198.18.0.21:80 weight 3 TCP_CHECK', '198.18.0.22:80 weight 1 drained TCP_CHECK']; "
        "dir2: ['198.18.0.21:80 weight 3 TCP_CHECK', '198.18.0.22:80 weight 1 TCP_CHECK']); a failover would change "
        "the service: define it once for all of them (group_vars/lvs_directors)"
    ]
    assert findings(both={"drained_real_servers": ["198.18.0.22"]}) == ([], [])


@pytest.mark.parametrize(("backup_weight", "warned"), [(60, True), (50, False), (-60, False)])
def test_positive_script_weights_that_lift_a_backup_above_the_master_are_a_warning(backup_weight, warned):  # 20
    # dir1 150 MASTER, dir2 100 BACKUP; dir2's script, while it succeeds, adds its weight (keepalived.conf(5)).
    tracked = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "track_scripts": ["chk"]}]
    errors, warnings = findings(
        both={"vrrp_instances": tracked},
        dir1={"vrrp_scripts": [{"name": "chk", "script": "/bin/true"}]},
        dir2={"vrrp_scripts": [{"name": "chk", "script": "/bin/true", "weight": backup_weight}]},
    )
    assert errors == []
    lifted = [w for w in warnings if "takes the VIP while all is well" in w]
    assert lifted == ([
        f"dir2: with every track script succeeding, dir2's priority for VRID 51 (IPv4) is {100 + backup_weight} "
        f"(positive script weights on 100), above the intended master dir1's 150, so dir2 takes the VIP while all is "
        "well; lower the positive weights or the priority"
    ] if warned else [])
