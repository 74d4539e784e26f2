"""lvs_director_resolve fills in every default; lvs_director_problems names each mistake of the issue, alone.

Each mistake is tested on a pair of otherwise correct directors (dir1 MASTER 150, dir2 BACKUP 100), so a test fails
both when its message changes and when the mistake stops being the only finding.
"""

from __future__ import annotations

import copy

import pytest
from ansible.errors import AnsibleFilterError
from lvs_director_pair import VIP, pair_settings, weighted_service

from ansible_collections.hpc.balance.plugins.filter.lvs_director import (
    lvs_director_problems,
    lvs_director_resolve,
)


def settings(host, **overrides):
    """Role variables of one director of a correct pair (dir1 MASTER, dir2 BACKUP), VRRPv3 with 0.1 s adverts."""
    return pair_settings(host, **{"vrrp_version": 3, "advert_int_s": 0.1, "virtual_servers": weighted_service(
        lvs_sched="wrr"), **overrides})


def problems(dir1=None, dir2=None, failed_hosts=None):
    configs = [lvs_director_resolve(settings("dir1", **(dir1 or {}))),
               lvs_director_resolve(settings("dir2", **(dir2 or {})))]
    return lvs_director_problems(configs, failed_hosts=failed_hosts)


def errors(**kwargs):
    return [entry["message"] for entry in problems(**kwargs)["errors"]]


def instance(**fields):
    return [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], **fields}]


def server(**fields):
    base = {"address": VIP, "port": 80, "real_servers": [{"address": "198.18.0.21"}, {"address": "198.18.0.22"}]}
    base.update(fields)
    return [base]


# ------------------------------------------------------------------------------------------------ resolve


def test_resolve_fills_instance_defaults_from_host_settings():
    resolved = lvs_director_resolve(settings("dir1"))
    (vi,) = resolved["vrrp_instances"]
    assert vi["interface"] == "eth0"
    assert vi["state"] == "MASTER"
    assert vi["priority"] == 150
    assert vi["advert_int_s"] == 0.1
    assert vi["virtual_ipaddresses"] == ["198.18.0.100/32"]
    assert vi["auth_pass"] is None
    assert vi["unicast_peers"] is None


def test_resolve_lets_an_instance_override_the_host_settings():
    resolved = lvs_director_resolve(settings("dir1", vrrp_instances=instance(priority="200", state="backup")))
    assert resolved["vrrp_instances"][0]["priority"] == 200
    assert resolved["vrrp_instances"][0]["state"] == "BACKUP"


def test_resolve_renders_whole_numbers_without_a_fraction():
    resolved = lvs_director_resolve(settings("dir1", advert_int_s="1.0"))
    assert resolved["vrrp_instances"][0]["advert_int_s"] == 1
    assert isinstance(resolved["vrrp_instances"][0]["advert_int_s"], int)


def test_resolve_gives_real_servers_the_service_port_and_check():
    resolved = lvs_director_resolve(settings("dir1", virtual_servers=server(check={"type": "HTTP_GET", "retry": 5})))
    real = resolved["virtual_servers"][0]["real_servers"][0]
    assert real["port"] == 80
    assert real["weight"] == 1
    assert real["checks"][0]["type"] == "HTTP_GET"
    assert real["checks"][0]["retry"] == 5
    assert real["checks"][0]["connect_timeout_s"] == 3


def test_weights_from_measured_capacity_win_over_the_configured_ones_and_keep_them_in_view():
    resolved = lvs_director_resolve(settings("dir1", real_server_weights={"198.18.0.22": "33"}))
    reals = resolved["virtual_servers"][0]["real_servers"]
    assert [(real["weight"], real["configured_weight"]) for real in reals] == [(3, 3), (33, 1)]


def test_a_measured_weight_outside_what_ipvsadm_takes_is_refused_in_preflight():
    assert errors(dir1={"real_server_weights": {"198.18.0.22": 70000}},
                  dir2={"real_server_weights": {"198.18.0.22": 70000}}) == [
        "dir1: lvs_director_virtual_servers[198.18.0.100:80].real_servers[198.18.0.22].weight is 70000; use 0 to "
        "65535 (0 takes it out of rotation)",
        "dir2: lvs_director_virtual_servers[198.18.0.100:80].real_servers[198.18.0.22].weight is 70000; use 0 to "
        "65535 (0 takes it out of rotation)",
    ]


def test_weights_that_are_not_a_mapping_are_refused():
    with pytest.raises(AnsibleFilterError, match="lvs_director_real_server_weights must map real server addresses"):
        lvs_director_resolve(settings("dir1", real_server_weights=[33]))


def test_resolve_keeps_a_real_server_check_of_its_own():
    reals = [{"address": "198.18.0.21", "check": {"type": "MISC_CHECK", "misc_path": "/bin/true"}}]
    resolved = lvs_director_resolve(settings("dir1", virtual_servers=server(real_servers=reals)))
    assert resolved["virtual_servers"][0]["real_servers"][0]["checks"][0]["type"] == "MISC_CHECK"


def test_resolve_does_not_change_its_input():
    given = settings("dir1")
    before = copy.deepcopy(given)
    lvs_director_resolve(given)
    assert given == before


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"priority": "high"}, "lvs_director_vrrp_instances[VI_LVS].priority must be a number, got 'high'"),
        ({"vrrp_instances": instance(virtual_router_id=5.5)},
         "lvs_director_vrrp_instances[VI_LVS].virtual_router_id must be a whole number, got 5.5"),
        ({"vrrp_instances": instance(virtual_ipaddresses=["vip1"])},
         "lvs_director_vrrp_instances[VI_LVS].virtual_ipaddresses 'vip1' is not an IP address"),
        ({"vrrp_instances": [{"virtual_router_id": 51}]}, "lvs_director_vrrp_instances[0] needs at least name"),
    ],
)
def test_resolve_names_the_value_it_cannot_read(overrides, message):
    with pytest.raises(AnsibleFilterError, match=r"^lvs_director_resolve: ") as error:
        lvs_director_resolve(settings("dir1", **overrides))
    assert message in str(error.value)


# ------------------------------------------------------------------------------------------------ problems


def test_a_correct_pair_has_no_problem():
    assert problems() == {"errors": [], "warnings": []}


@pytest.mark.parametrize(
    ("dir1", "dir2", "expected"),
    [
        pytest.param(
            {"vrrp_version": 2, "advert_int_s": 1, "vrrp_instances": instance(auth_pass="123456789")},
            {"vrrp_version": 2, "advert_int_s": 1, "vrrp_instances": instance(auth_pass="123456789")},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].auth_pass is 9 characters but keepalived uses only the first "
             "8; use a secret of at most 8 characters",
             "dir2: lvs_director_vrrp_instances[VI_LVS].auth_pass is 9 characters but keepalived uses only the first "
             "8; use a secret of at most 8 characters"],
            id="auth_pass over 8 characters",
        ),
        pytest.param(
            {"vrrp_instances": instance(auth_pass="secret1")},
            {"vrrp_instances": instance(auth_pass="secret1")},
            [f"{h}: lvs_director_vrrp_instances[VI_LVS].auth_pass is set with vrrp_version 3, which has no "
             "authentication; remove auth_pass or use vrrp_version 2" for h in ("dir1", "dir2")],
            id="authentication with VRRP v3",
        ),
        pytest.param(
            {}, {"state": "MASTER"},
            ["VRID 51 (IPv4): dir1, dir2 all have state MASTER; keep state MASTER on one director and set "
             "lvs_director_state: BACKUP (and a lower lvs_director_priority) on the others"],
            id="two intended masters for one VRID",
        ),
        pytest.param(
            {"vrrp_instances": instance(virtual_router_id=0)}, {"vrrp_instances": instance(virtual_router_id=0)},
            [f"{h}: lvs_director_vrrp_instances[VI_LVS].virtual_router_id is 0; use a VRID from 1 to 255, the same on "
             "every peer" for h in ("dir1", "dir2")],
            id="VRID outside 1-255",
        ),
        pytest.param(
            {"priority": 256}, {},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].priority is 256 (lvs_director_priority unless the instance "
             "sets it); use 1 to 255, highest on the intended master"],
            id="priority outside 1-255",
        ),
        pytest.param(
            {}, {"vrrp_instances": instance(virtual_router_id=52)},
            ["lvs_director_vrrp_instances[VI_LVS].virtual_router_id differs between peers (dir1=51, dir2=52); use one "
             "VRID for the instance on every director"],
            id="peers differ in VRID",
        ),
        pytest.param(
            {"vrrp_version": 2, "advert_int_s": 1, "vrrp_instances": instance(auth_pass="secretA")},
            {"vrrp_version": 2, "advert_int_s": 1, "vrrp_instances": instance(auth_pass="secretB")},
            ["lvs_director_vrrp_instances[VI_LVS].auth_pass differs between peers (dir1, dir2), so each ignores the "
             "other's adverts and every one holds the VIP; use one secret (one vault variable) on every director"],
            id="peers differ in secret",
        ),
        pytest.param(
            {"vrrp_instances": instance(unicast_src_ip="198.18.0.11", unicast_peers=[])},
            {"vrrp_instances": instance(unicast_src_ip="198.18.0.12", unicast_peers=["198.18.0.11"])},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].unicast_peers is empty while unicast is configured "
             "(unicast_src_ip or unicast_peers is set); list the other directors' addresses, or drop both keys for "
             "multicast"],
            id="unicast_peers empty",
        ),
        pytest.param(
            {"vrrp_instances": instance(unicast_peers=["198.18.0.11", "198.18.0.12"])},
            {"vrrp_instances": instance(unicast_peers=["198.18.0.11"])},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].unicast_peers contains this host's own address 198.18.0.11; "
             "list only the peers"],
            id="unicast_peers containing self",
        ),
        pytest.param(
            {"virtual_servers": server(real_servers=[{"address": "198.18.0.21", "port": 8080}])}, {},
            ["dir1: lvs_director_virtual_servers[198.18.0.100:80].real_servers[198.18.0.21].port is 8080 but DR "
             "cannot rewrite ports; use port 80"],
            id="DR real-server port differs from the virtual port",
        ),
        pytest.param(
            {"virtual_servers": server(real_servers=[{"address": "198.18.0.21"}, {"address": "198.18.0.21"}])}, {},
            ["dir1: lvs_director_virtual_servers[198.18.0.100:80].real_servers lists 198.18.0.21:80 more than once; "
             "keep one entry"],
            id="duplicate real servers",
        ),
        pytest.param(
            {"virtual_servers": server(real_servers=[])}, {},
            ["dir1: lvs_director_virtual_servers[198.18.0.100:80].real_servers is empty; list at least one real "
             "server"],
            id="virtual server without real servers",
        ),
        pytest.param(
            {"virtual_servers": server(quorum=3)}, {},
            ["dir1: lvs_director_virtual_servers[198.18.0.100:80].quorum is 3 but the real servers' weights add up to "
             "2, so the service could never be up; use a quorum of at most 2"],
            id="quorum above total weight",
        ),
        pytest.param(
            {"clients_behind_nat": True, "virtual_servers": server(lvs_sched="sh")}, {},
            ["dir1: lvs_director_virtual_servers[198.18.0.100:80].lvs_sched is sh (source hashing): clients behind one "
             "NAT address all land on one real server, and so does persistence_timeout_s; use wlc or lc, which spread "
             "connections, or add sh-port to scheduler_flags (lvs_director_clients_behind_nat is true)"],
            id="sh scheduler with clients behind NAT",
        ),
        pytest.param(
            {"vrrp_instances": instance(nopreempt=True)}, {"vrrp_instances": instance(nopreempt=True)},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].nopreempt is set with state MASTER, which keepalived does not "
             "honour; use state BACKUP on every peer of a nopreempt instance"],
            id="nopreempt with state MASTER",
        ),
        pytest.param(
            {"vrrp_instances": instance(preempt_delay_s=5)}, {"vrrp_instances": instance(preempt_delay_s=5)},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].preempt_delay_s is set with state MASTER, which keepalived "
             "ignores (and its config test fails); use state BACKUP on every peer of an instance with preempt_delay_s"],
            id="preempt_delay with state MASTER",
        ),
        pytest.param(
            {"state": "BACKUP", "vrrp_instances": instance(nopreempt=True, preempt_delay_s=5)}, {},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].preempt_delay_s is set with nopreempt, which never preempts; "
             "keep one of the two"],
            id="preempt_delay with nopreempt",
        ),
        pytest.param(
            {}, {"priority": 150},
            ["VRID 51 (IPv4): dir1 has state MASTER with priority 150 but dir2 (150) is not lower, so dir1 would not "
             "keep the VIP; give the master the highest lvs_director_priority"],
            id="intended master not the highest priority",
        ),
        pytest.param(
            {"vrrp_version": 2, "advert_int_s": 0.1}, {"vrrp_version": 2, "advert_int_s": 0.1},
            [f"{h}: lvs_director_vrrp_instances[VI_LVS].advert_int_s is 0.1 with vrrp_version 2, which counts whole "
             "seconds (1-255); use a whole number, or vrrp_version 3 for sub-second adverts" for h in ("dir1", "dir2")],
            id="sub-second adverts with VRRP v2",
        ),
        pytest.param(
            {}, {"interface": "vec0"},
            ["dir2: lvs_director_vrrp_instances[VI_LVS].interface is vec0, which this host does not have (eth0, lo); "
             "set lvs_director_interface (or the instance's interface) to the NIC that carries the VIPs"],
            id="interface the host does not have",
        ),
        pytest.param(
            {"vrrp_only": False, "ipvs_available": False}, {},
            ["dir1: this kernel has no IPVS (no /proc/net/ip_vs and modprobe cannot load ip_vs), so keepalived would "
             "exit a second after it starts; install the ip_vs module, or set lvs_director_vrrp_only: true to run "
             "VRRP only"],
            id="no IPVS without VRRP-only",
        ),
        pytest.param(
            {"vrrp_instances": instance(track_scripts=["chk_http"])}, {},
            ["dir1: lvs_director_vrrp_instances[VI_LVS].track_scripts names 'chk_http', which "
             "lvs_director_vrrp_scripts does not define; define it there or remove it"],
            id="track script not defined",
        ),
        pytest.param(
            {"virtual_servers": server(check={"type": "MISC_CHECK"})}, {},
            [f"dir1: lvs_director_virtual_servers[198.18.0.100:80].real_servers[198.18.0.2{n}].check is MISC_CHECK "
             "without misc_path; set misc_path to the check command" for n in (1, 2)],
            id="MISC_CHECK without misc_path",
        ),
    ],
)
def test_each_mistake_is_named_with_host_key_and_fix(dir1, dir2, expected):
    assert errors(dir1=dir1, dir2=dir2) == expected


def test_an_error_concerns_the_hosts_it_names():
    found = problems(dir2={"state": "MASTER"})["errors"]
    assert [entry["hosts"] for entry in found] == [["dir1", "dir2"]]
    found = problems(dir1={"vrrp_instances": instance(track_scripts=["chk_http"])})["errors"]
    assert [entry["hosts"] for entry in found] == [["dir1"]]


def test_sh_scheduler_alone_is_a_warning():
    found = problems(dir1={"virtual_servers": server(lvs_sched="sh")})
    assert found["errors"] == []
    assert [entry["message"] for entry in found["warnings"]] == [
        "dir1: lvs_director_virtual_servers[198.18.0.100:80].lvs_sched is sh (source hashing): clients behind one "
        "NAT address all land on one real server, and so does persistence_timeout_s; use wlc or lc, which spread "
        "connections, or add sh-port to scheduler_flags"
    ]


def test_a_virtual_server_on_an_address_no_instance_moves_is_a_warning():
    found = problems(dir1={"virtual_servers": server(address="198.18.0.101")})
    assert found["errors"] == []
    assert found["warnings"][0]["message"].startswith(
        "dir1: lvs_director_virtual_servers[198.18.0.101:80] has an address that no VRRP instance of this host moves"
    )


def test_a_host_that_failed_earlier_stops_every_director():
    assert errors(failed_hosts=["dir3"]) == [
        "dir3: failed or was unreachable earlier in this play, so the checks across directors cannot see its "
        "settings; fix it (see its error above) or leave it out with --limit"
    ]


def test_the_secret_never_appears_in_a_message():
    found = problems(
        dir1={"vrrp_version": 2, "advert_int_s": 1, "vrrp_instances": instance(auth_pass="topsecret9")},
        dir2={"vrrp_version": 2, "advert_int_s": 1, "vrrp_instances": instance(auth_pass="othersecret")},
    )
    assert found["errors"]
    assert not any("secret9" in e["message"] or "othersecret" in e["message"] for e in found["errors"])


def test_unknown_interfaces_skip_the_interface_check():
    assert errors(dir2={"interface": "vec0", "known_interfaces": None}) == []
