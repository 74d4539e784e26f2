"""The classes of bad input the preflight refuses: string booleans, address collisions, numbers out of range, address
families, and vrrp_sync_group. Each mistake is tested on a correct pair (dir1 MASTER 150, dir2 BACKUP 100), so a test
fails both when its message changes and when the mistake stops being the only finding.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from lvs_director_pair import VIP, VIP6, pair_settings

from ansible_collections.hpc.balance.plugins.filter.lvs_director import (
    lvs_director_problems,
    lvs_director_resolve,
    lvs_director_script_paths,
)

KEY = f"lvs_director_virtual_servers[{VIP}:80]"


def settings(host, **overrides):
    return pair_settings(host, **{"advert_int_s": 1, **overrides})


def findings(both=None, dir1=None, dir2=None):
    configs = [lvs_director_resolve(settings("dir1", **{**(both or {}), **(dir1 or {})})),
               lvs_director_resolve(settings("dir2", **{**(both or {}), **(dir2 or {})}))]
    return lvs_director_problems(configs)


def errors(**kwargs):
    return [entry["message"] for entry in findings(**kwargs)["errors"]]


def service(real_servers=None, **fields):
    reals = real_servers or [{"address": "198.18.0.21"}, {"address": "198.18.0.22"}]
    return [{"address": VIP, "port": 80, "real_servers": reals, **fields}]


def dual_stack(v6_state=None):
    """VI_4 and VI_6 share VRID 51, one per family, in one sync group."""
    v6 = {"name": "VI_6", "virtual_router_id": 51, "virtual_ipaddresses": [VIP6]}
    if v6_state:
        v6["state"] = v6_state
    instances = [{"name": "VI_4", "virtual_router_id": 51, "virtual_ipaddresses": [VIP]}, v6]
    groups = [{"name": "G_LVS", "instances": ["VI_4", "VI_6"]}]
    return {"vrrp_instances": instances, "vrrp_sync_groups": groups}


def test_the_pair_of_these_tests_has_no_problem():
    assert findings() == {"errors": [], "warnings": []}


# ------------------------------------------------------------------------------------------------ string booleans


@pytest.mark.parametrize("value", ["false", "no", "0", "off", "n", "f", "False"])
def test_a_false_string_from_extra_vars_or_ini_reads_as_false(value):
    resolved = lvs_director_resolve(settings(
        "dir1", vrrp_only=value, clients_behind_nat=value, inhibit_on_failure=value, ipvs_available=value,
        vrrp_instances=[{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "nopreempt": value}],
        virtual_servers=service(sorry_server_inhibit=value, alpha=value, check={"type": "UDP_CHECK",
                                                                                "require_reply": value}),
    ))
    server = resolved["virtual_servers"][0]
    assert [resolved["vrrp_only"], resolved["clients_behind_nat"], resolved["ipvs_available"],
            resolved["vrrp_instances"][0]["nopreempt"], server["inhibit_on_failure"], server["sorry_server_inhibit"],
            server["alpha"], server["checks"][0]["require_reply"]] == [False] * 8


@pytest.mark.parametrize("value", ["true", "yes", "1", "on"])
def test_a_true_string_reads_as_true(value):
    assert lvs_director_resolve(settings("dir1", vrrp_only=value))["vrrp_only"] is True


def test_unset_booleans_keep_their_defaults():
    resolved = lvs_director_resolve(settings("dir1", vrrp_only=None))
    assert (resolved["vrrp_only"], resolved["ipvs_available"]) == (False, True)
    assert resolved["virtual_servers"][0]["inhibit_on_failure"] is True


@pytest.mark.parametrize(("overrides", "message"), [
    ({"vrrp_only": "maybe"},
     "lvs_director_resolve: lvs_director_vrrp_only is 'maybe', which is not a boolean: set it to true or false "
     "(yes/no, on/off, 1/0 read the same)"),
    ({"vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                          "nopreempt": "sometimes"}]},
     "lvs_director_resolve: lvs_director_vrrp_instances[VI_LVS].nopreempt is 'sometimes', which is not a boolean: "
     "set it to true or false (yes/no, on/off, 1/0 read the same)"),
    ({"virtual_servers": service(alpha="yes please")},
     f"lvs_director_resolve: {KEY}.alpha is 'yes please', which is not a boolean: set it to true or false "
     "(yes/no, on/off, 1/0 read the same)"),
])
def test_a_value_that_is_no_boolean_is_refused_naming_variable_and_value(overrides, message):
    with pytest.raises(AnsibleFilterError) as raised:
        lvs_director_resolve(settings("dir1", **overrides))
    assert str(raised.value) == message


def test_nopreempt_false_as_a_string_no_longer_trips_the_master_check():
    instances = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "nopreempt": "false"}]
    assert errors(both={"vrrp_instances": instances}) == []


# ------------------------------------------------------------------------------------------------ address collisions


def test_a_vip_that_is_the_directors_own_address_is_refused():
    own = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": ["198.18.0.11"]}]
    assert errors(both={"vrrp_instances": own, "virtual_servers": []}) == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].virtual_ipaddresses has 198.18.0.11, which is this host's own "
        "address, so a failover would take it from this host; use a free address as the VIP"
    ]


def test_a_vip_that_is_also_a_real_servers_address_is_refused():
    reals = [{"address": VIP}, {"address": "198.18.0.22"}]
    assert errors(both={"virtual_servers": service(real_servers=reals)}) == [
        f"{VIP} is a VIP of lvs_director_vrrp_instances[VI_LVS] and also a real server of "
        f"lvs_director_virtual_servers[{VIP}:80]; a real server needs an address of its own: use the real server's "
        "own address there, or another VIP"
    ]


def test_one_vip_in_two_instances_of_one_host_is_refused():
    instances = [{"name": "VI_A", "virtual_router_id": 51, "virtual_ipaddresses": [VIP]},
                 {"name": "VI_B", "virtual_router_id": 52, "virtual_ipaddresses": [f"{VIP}/24"]}]
    assert errors(both={"vrrp_instances": instances}) == [
        f"{VIP} is a VIP of more than one VRRP instance (VI_A on dir1, dir2; VI_B on dir1, dir2), so the instances "
        "fight over it; keep each VIP in one instance (peers share it under one instance name)"
    ]


def test_one_vip_under_two_instance_names_across_hosts_is_refused():
    renamed = [{"name": "VI_OTHER", "virtual_router_id": 51, "virtual_ipaddresses": [VIP]}]
    assert errors(dir2={"vrrp_instances": renamed}) == [
        f"{VIP} is a VIP of more than one VRRP instance (VI_LVS on dir1; VI_OTHER on dir2), so the instances fight "
        "over it; keep each VIP in one instance (peers share it under one instance name)"
    ]


# ------------------------------------------------------------------------------------------------ numbers in range


@pytest.mark.parametrize(("servers", "message"), [
    (service(port=70000, real_servers=[{"address": "198.18.0.21"}]),
     "dir1: lvs_director_virtual_servers[198.18.0.100:70000].port is 70000; use a port from 1 to 65535"),
    (service(real_servers=[{"address": "198.18.0.21", "weight": 65536}]),
     f"dir1: {KEY}.real_servers[198.18.0.21].weight is 65536; use 0 to 65535 (0 takes it out of rotation)"),
    (service(real_servers=[{"address": "198.18.0.21", "weight": -1}]),
     f"dir1: {KEY}.real_servers[198.18.0.21].weight is -1; use 0 to 65535 (0 takes it out of rotation)"),
    (service(real_servers=[{"address": "198.18.0.21", "check": {"connect_port": 0}}]),
     f"dir1: {KEY}.real_servers[198.18.0.21].check.connect_port is 0; use a port from 1 to 65535"),
    (service(real_servers=[{"address": "198.18.0.21"}], delay_loop_s=-1),
     f"dir1: {KEY}.delay_loop_s is -1; use a positive number of seconds"),
    (service(real_servers=[{"address": "198.18.0.21", "check": {"connect_timeout_s": -3}}]),
     f"dir1: {KEY}.real_servers[198.18.0.21].check.connect_timeout_s is -3; use a positive number of seconds"),
    (service(real_servers=[{"address": "198.18.0.21", "check": {"retry": -1}}]),
     f"dir1: {KEY}.real_servers[198.18.0.21].check.retry is -1; use 0 or more retries"),
    (service(real_servers=[{"address": "198.18.0.21", "check": {"delay_before_retry_s": -2}}]),
     f"dir1: {KEY}.real_servers[198.18.0.21].check.delay_before_retry_s is -2; use 0 or more seconds"),
    (service(real_servers=[{"address": "198.18.0.21"}], persistence_timeout_s=-300),
     f"dir1: {KEY}.persistence_timeout_s is -300; use 0 (off) or more seconds"),
    (service(real_servers=[{"address": "198.18.0.21"}], quorum=-1, quorum_down="/bin/true"),
     f"dir1: {KEY}.quorum is -1; keepalived replaces a quorum below 1 with 1: use 1 or more"),
])
def test_a_number_keepalived_or_ipvs_would_refuse_is_named(servers, message):
    assert errors(dir1={"virtual_servers": servers}) == [message]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("weight", 254, "dir1: lvs_director_vrrp_scripts[chk].weight is 254; keepalived takes -253 to 253"),
    ("fall", 0, "dir1: lvs_director_vrrp_scripts[chk].fall is 0; use 1 or more"),
    ("rise", -1, "dir1: lvs_director_vrrp_scripts[chk].rise is -1; use 1 or more"),
])
def test_a_vrrp_script_number_out_of_range_is_named(field, value, message):
    scripts = [{"name": "chk", "script": "/bin/true", field: value}]
    assert errors(dir1={"vrrp_scripts": scripts}) == [message]


def test_a_preempt_delay_beyond_1000_seconds_is_named():
    instances = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "preempt_delay_s": 1001}]
    assert errors(both={"state": "BACKUP", "vrrp_instances": instances}) == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].preempt_delay_s is 1001; keepalived takes 0 to 1000 seconds",
        "dir2: lvs_director_vrrp_instances[VI_LVS].preempt_delay_s is 1001; keepalived takes 0 to 1000 seconds",
    ]


# ------------------------------------------------------------------------------------------------ address families


def test_each_instance_carries_its_family():
    resolved = lvs_director_resolve(settings("dir1", **dual_stack()))
    assert [instance["family"] for instance in resolved["vrrp_instances"]] == [4, 6]


def test_an_ipv4_and_an_ipv6_instance_may_share_a_vrid():
    assert findings(both=dual_stack()) == {"errors": [], "warnings": []}


def test_two_masters_of_one_vrid_and_family_are_named_with_the_family():
    assert errors(both={"vrrp_instances": [{"name": "VI_6", "virtual_router_id": 51,
                                            "virtual_ipaddresses": [VIP6]}], "virtual_servers": []},
                  dir2={"state": "MASTER"}) == [
        "VRID 51 (IPv6): dir1, dir2 all have state MASTER; keep state MASTER on one director and set "
        "lvs_director_state: BACKUP (and a lower lvs_director_priority) on the others",
    ]


def test_two_instances_of_one_vrid_family_and_interface_on_one_host_are_refused():
    instances = [{"name": "VI_A", "virtual_router_id": 51, "virtual_ipaddresses": [VIP]},
                 {"name": "VI_B", "virtual_router_id": 51, "virtual_ipaddresses": ["198.18.0.101"]}]
    assert errors(dir1={"vrrp_instances": instances}, dir2={"vrrp_instances": instances[:1]})[0] == (
        "dir1: lvs_director_vrrp_instances VI_A and VI_B all use VRID 51 for IPv4 on eth0, which keepalived refuses; "
        "give each its own VRID (an IPv4 and an IPv6 instance may share one)"
    )


def test_an_instance_mixing_ipv4_and_ipv6_vips_is_refused():
    mixed = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP, VIP6]}]
    assert errors(both={"vrrp_instances": mixed}) == [
        f"{host}: lvs_director_vrrp_instances[VI_LVS].virtual_ipaddresses mixes IPv4 and IPv6 ({VIP}/32, {VIP6}/128), "
        "so keepalived keeps the family of the first and the other VIPs stay up on every node (keepalived issue "
        "2146); use one instance per family (they may share the VRID) and put both in one "
        "lvs_director_vrrp_sync_groups entry"
        for host in ("dir1", "dir2")
    ]


def test_a_virtual_server_with_a_real_server_of_the_other_family_is_refused():
    reals = [{"address": "198.18.0.21"}, {"address": "2001:db8::21"}]
    assert errors(dir1={"virtual_servers": service(real_servers=reals)}) == [
        f"dir1: {KEY} is IPv4 but 2001:db8::21 is not, and DR cannot cross address families (keepalived skips such a "
        "real server); use IPv4 addresses for its real servers and sorry server"
    ]


@pytest.mark.parametrize(("fields", "message"), [
    ({"unicast_src_ip": "2001:db8::11", "unicast_peers": ["198.18.0.12"]},
     "dir1: lvs_director_vrrp_instances[VI_LVS].unicast_src_ip 2001:db8::11 is IPv6 but the instance's VIPs are "
     "IPv4; use this host's IPv4 address"),
    ({"unicast_src_ip": "198.18.0.11", "unicast_peers": ["2001:db8::12"]},
     "dir1: lvs_director_vrrp_instances[VI_LVS].unicast_peers has 2001:db8::12, not IPv4 like the instance's VIPs; "
     "list the peers' IPv4 addresses"),
])
def test_unicast_addresses_of_the_other_family_are_refused(fields, message):
    instances = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], **fields}]
    peer = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "unicast_src_ip": "198.18.0.12",
             "unicast_peers": ["198.18.0.11"]}]
    assert errors(dir1={"vrrp_instances": instances}, dir2={"vrrp_instances": peer}) == [message]


# ------------------------------------------------------------------------------------------------ vrrp_sync_group


def test_a_sync_group_is_resolved_with_its_notify_scripts():
    group = {"name": "G_LVS", "instances": ["VI_4", "VI_6"], "notify_master": "/usr/local/sbin/up master"}
    resolved = lvs_director_resolve(settings("dir1", **{**dual_stack(), "vrrp_sync_groups": [group]}))
    assert resolved["vrrp_sync_groups"] == [{"name": "G_LVS", "instances": ["VI_4", "VI_6"], "notify": None,
                                             "notify_master": "/usr/local/sbin/up master", "notify_backup": None,
                                             "notify_fault": None, "notify_stop": None}]


def test_a_sync_groups_notify_script_is_looked_at_like_the_others():
    group = {"name": "G_LVS", "instances": ["VI_4", "VI_6"], "notify_fault": "/usr/local/sbin/fault now"}
    resolved = lvs_director_resolve(settings("dir1", **{**dual_stack(), "vrrp_sync_groups": [group]}))
    assert {"path": "/usr/local/sbin/fault", "key": "lvs_director_vrrp_sync_groups[G_LVS].notify_fault"} in (
        lvs_director_script_paths(resolved)
    )


def test_a_sync_group_naming_an_instance_that_does_not_exist_is_refused():
    both = dual_stack()
    both["vrrp_sync_groups"][0]["instances"] = ["VI_4", "VI_6", "VI_GONE"]
    assert errors(both=both)[0] == (
        "dir1: lvs_director_vrrp_sync_groups[G_LVS].instances names 'VI_GONE', which lvs_director_vrrp_instances does "
        "not define; define it there or remove it from the group"
    )


def test_an_instance_in_two_sync_groups_is_refused():
    both = dual_stack()
    both["vrrp_sync_groups"].append({"name": "G_TWO", "instances": ["VI_6", "VI_4"]})
    assert errors(both=both)[0] == (
        "dir1: lvs_director_vrrp_instances[VI_4] is in more than one sync group (G_LVS, G_TWO), and keepalived allows "
        "one; keep it in one group"
    )


def test_a_sync_group_whose_members_disagree_on_state_is_refused():
    assert errors(both=dual_stack(), dir1=dual_stack(v6_state="BACKUP")) == [
        "dir1: lvs_director_vrrp_sync_groups[G_LVS] has members in different states (VI_4 MASTER, VI_6 BACKUP), but "
        "a sync group changes state as one; give its instances one state"
    ]


def test_a_sync_group_of_one_instance_is_refused_as_keepalived_config_test_fails_on_it():
    both = dual_stack()
    both["vrrp_sync_groups"][0]["instances"] = ["VI_4"]
    assert errors(both=both) == [
        f"{host}: lvs_director_vrrp_sync_groups[G_LVS] has 1 instance(s), and keepalived's config test fails on a "
        "sync group of fewer than two (\"Sync group G_LVS has only 1 virtual router(s)\"); list the instances that "
        "must move together, or drop the group"
        for host in ("dir1", "dir2")
    ]


def test_a_sync_group_notify_script_with_a_double_quote_is_refused():
    both = dual_stack()
    both["vrrp_sync_groups"][0]["notify"] = '/bin/echo "x"'
    assert errors(dir1=both, dir2=dual_stack()) == [
        "dir1: lvs_director_vrrp_sync_groups[G_LVS].notify is '/bin/echo \"x\"', which holds a double quote, a "
        "backslash or a line break that keepalived cannot read inside a quoted value; use a wrapper script without "
        "them"
    ]


def test_a_weighted_track_script_in_a_sync_group_is_refused_as_keepalived_config_test_fails_on_it():
    both = dual_stack()
    both["vrrp_instances"][0]["track_scripts"] = ["chk"]
    both["vrrp_scripts"] = [{"name": "chk", "script": "/bin/true", "weight": -60}]
    assert errors(both=both) == [
        f"{host}: lvs_director_vrrp_sync_groups[G_LVS] has VI_4, which tracks the weighted script(s) chk; keepalived "
        "ignores weights in a sync group and its config test fails (\"ignoring tracked script ... with weights due "
        "to SYNC group\"); drop the weight (a failing script then faults the whole group)"
        for host in ("dir1", "dir2")
    ]
