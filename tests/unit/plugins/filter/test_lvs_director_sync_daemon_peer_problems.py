"""What lvs_director_sync_daemon_peer_problems finds across directors: sync daemons that cannot talk (the kernel's
rules in net/netfilter/ipvs/ip_vs_sync.c) and a director without the sync daemon beside peers that run it."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_director_firewall import (
    lvs_director_sync_daemon_peer_problems,
)

SYNC = {"interface": "eth0", "instance": "VI_LVS"}


def config(host, vrid=51, name="VI_LVS", **changes):
    """The keys of a resolved config (lvs_director_resolve) the check reads: instances, sysctls, vrrp_only."""
    resolved = {"host": host, "vrrp_only": False, "sysctls": {},
                "vrrp_instances": [{"name": name, "virtual_router_id": vrid}]}
    resolved.update(changes)
    return resolved


def pair(first, second, configs=None):
    """The check for dir1 and dir2 with these lvs_director_sync_daemon values (None: off)."""
    return lvs_director_sync_daemon_peer_problems(
        [{"host": "dir1", "sync_daemon": first}, {"host": "dir2", "sync_daemon": second}],
        [config("dir1"), config("dir2")] if configs is None else configs)


def messages(findings):
    return [finding["message"] for finding in findings]


@pytest.mark.parametrize(("first", "second"), [
    (None, None),
    (SYNC, SYNC),
    ({**SYNC, "sync_id": 51, "port": 8848, "group": "224.0.0.81", "maxlen_bytes": 1472},
     {**SYNC, "sync_id": 51, "port": 8848, "group": "224.0.0.81", "maxlen_bytes": 1472}),
    # Interfaces are each host's own NIC names, ttl only has to reach the other host.
    (SYNC, {**SYNC, "interface": "ens3", "ttl": 2}),
    # An unset sync_id is the instance's VRID (keepalived.conf(5)), here 51.
    (SYNC, {**SYNC, "sync_id": 51}),
    # Defaults written out are the defaults.
    (SYNC, {**SYNC, "port": 8848, "group": "224.0.0.81"}),
])
def test_sync_daemons_that_can_talk_have_no_problems(first, second):
    assert pair(first, second) == []


@pytest.mark.parametrize(("key", "value", "listing", "why"), [
    ("sync_id", 52, "dir1=unset (the VRID 51 of VI_LVS), dir2=52",
     "a backup ignores a sync message with another syncid (ip_vs_sync.c, ip_vs_process_message)"),
    ("port", 8849, "dir1=8848 (the default), dir2=8849",
     "a backup listens on its own port and a master sends to its own (ip_vs_sync.c, get_mcast_sockaddr)"),
    ("group", "224.0.0.82", "dir1=224.0.0.81 (the default), dir2=224.0.0.82",
     "a backup joins its own group and a master sends to its own (ip_vs_sync.c, make_receive_sock and "
     "make_send_sock)"),
    ("maxlen_bytes", 1400, "dir1=unset (the interface MTU less the IP and UDP headers), dir2=1400",
     "a backup reads into a buffer of its own maxlen and drops a longer datagram as a bogus size (ip_vs_sync.c, "
     "sync_thread_backup and ip_vs_process_message)"),
])
def test_each_setting_the_kernel_needs_alike_is_an_error_naming_each_hosts_value(key, value, listing, why):
    assert pair(SYNC, {**SYNC, key: value}) == [{"hosts": ["dir1", "dir2"], "message": (
        f"lvs_director_sync_daemon.{key} differs between the directors dir1, dir2 ({listing}): {why}, so connections "
        "are synced one way at most and a failover resets them; set one value in group_vars/lvs_directors")}]


def test_daemons_following_different_instances_of_one_pair_are_an_error():
    configs = [config("dir1", vrrp_instances=[{"name": "VI_A", "virtual_router_id": 51},
                                              {"name": "VI_B", "virtual_router_id": 52}]),
               config("dir2", vrrp_instances=[{"name": "VI_A", "virtual_router_id": 51},
                                              {"name": "VI_B", "virtual_router_id": 52}])]
    found = messages(pair({**SYNC, "instance": "VI_A"}, {**SYNC, "instance": "VI_B"}, configs))
    assert found[0].startswith("lvs_director_sync_daemon.instance differs between the directors dir1, dir2 "
                               "(dir1=VI_A, dir2=VI_B): keepalived runs the master daemon where that instance is "
                               "MASTER")
    # Both unset sync_ids follow their instance's VRID, 51 and 52: that differs too.
    assert "dir1=unset (the VRID 51 of VI_A), dir2=unset (the VRID 52 of VI_B)" in found[1]


def test_a_director_without_the_sync_daemon_beside_a_peer_with_it_is_an_error():
    assert pair(SYNC, None) == [{"hosts": ["dir1", "dir2"], "message": (
        "dir2: lvs_director_sync_daemon is null (off), but its VRRP peer dir1 runs the IPVS sync daemon: it sends no "
        "connection entries as master and keeps none as backup, so every failover to or from it resets the "
        "established connections; set lvs_director_sync_daemon once in group_vars/lvs_directors for all of them, or "
        "null on all of them")}]


def test_directors_of_another_vrrp_pair_are_not_compared():
    web2 = {**SYNC, "instance": "VI_WEB", "sync_id": 7}
    directors = [{"host": "dir1", "sync_daemon": SYNC}, {"host": "dir2", "sync_daemon": SYNC},
                 {"host": "web1", "sync_daemon": None}, {"host": "web2", "sync_daemon": web2}]
    configs = [config("dir1"), config("dir2"), config("web1", vrid=60, name="VI_WEB"),
               config("web2", vrid=60, name="VI_WEB")]
    assert [finding["hosts"] for finding in lvs_director_sync_daemon_peer_problems(directors, configs)] == [
        ["web1", "web2"]]


def test_a_vrrp_only_director_is_not_asked_for_the_sync_daemon():
    assert pair(SYNC, None, [config("dir1"), config("dir2", vrrp_only=True)]) == []


def test_without_configs_every_director_is_compared_with_every_other():
    found = lvs_director_sync_daemon_peer_problems([{"host": "dir1", "sync_daemon": SYNC},
                                                    {"host": "dir2", "sync_daemon": None}])
    assert messages(found)[0].startswith("dir2: lvs_director_sync_daemon is null (off), but dir1 runs the IPVS sync")
    assert "dir1=unset (the VRID of VI_LVS), dir2=51" in messages(
        lvs_director_sync_daemon_peer_problems([{"host": "dir1", "sync_daemon": SYNC},
                                                {"host": "dir2", "sync_daemon": {**SYNC, "sync_id": 51}}]))[0]


def test_a_different_number_of_sync_threads_is_an_error():
    configs = [config("dir1"), config("dir2", sysctls={"net.ipv4.vs.sync_ports": 2})]
    assert messages(pair(SYNC, SYNC, configs)) == [
        "lvs_director_sysctls net.ipv4.vs.sync_ports differs between the directors dir1, dir2 (dir1=1, dir2=2, 1 when "
        "unset), but each sync thread uses port + its number (ip_vs_sync.c get_mcast_sockaddr), so a master with more "
        "threads sends to ports no backup listens on; set one value in group_vars/lvs_directors (lvs_director_sysctls)"]


def test_a_group_written_two_ways_is_one_group():
    assert pair({**SYNC, "group": "ff02::81"}, {**SYNC, "group": "FF02:0:0:0:0:0:0:81"}) == []


def test_a_list_of_something_else_is_refused():
    with pytest.raises(AnsibleFilterError, match="expects a list of {host, sync_daemon}"):
        lvs_director_sync_daemon_peer_problems([{"sync_daemon": SYNC}])
