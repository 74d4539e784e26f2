"""Removing a real server from the config is refused while the live IPVS table shows it serving.

On a reload keepalived deletes a real server the new config no longer lists (keepalived ipwrapper.c,
``clear_service_rs``), even with ``inhibit_on_failure``, and with ``net.ipv4.vs.expire_nodest_conn=1`` the kernel
expires its connections at once. The live table is the text of /proc/net/ip_vs in the kernel's layout
(net/netfilter/ipvs/ip_vs_ctl.c ``ip_vs_info_seq_show``: hex address:port, Forward, Weight, ActiveConn, InActConn),
the same layout as tests/unit/plugins/module_utils/fixtures/proc_ip_vs_dr.txt. C6120064 is 198.18.0.100, C6120099
is 198.18.0.153, C612009A is 198.18.0.154; 0050 is port 80.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_resolve
from ansible_collections.hpc.balance.plugins.filter.lvs_pool import lvs_removal_problems

HEAD = ("IP Virtual Server version 1.2.1 (size=4096)\n"
        "Prot LocalAddress:Port Scheduler Flags\n"
        "  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n"
        "TCP  C6120064:0050 wrr  \n")


def live(urs2_weight, urs2_active):
    return (HEAD + "  -> C6120099:0050      Route   3      4          10        \n"
            f"  -> C612009A:0050      Route   {urs2_weight:<6} {urs2_active:<10} 0         \n")


def config(*addresses):
    return lvs_director_resolve({
        "host": "udir1", "interface": "vec0", "vrrp_only": False,
        "vrrp_instances": [{"name": "VI", "virtual_router_id": 51, "virtual_ipaddresses": ["198.18.0.100"]}],
        "virtual_servers": [{"address": "198.18.0.100", "port": 80, "lvs_sched": "wrr",
                             "real_servers": [{"address": address} for address in addresses]}],
    })


def test_keeping_every_real_server_is_fine():
    assert lvs_removal_problems(live(1, 2), config("198.18.0.153", "198.18.0.154")) == []


def test_removing_a_serving_real_server_is_refused_until_it_is_drained():
    assert [entry["message"] for entry in lvs_removal_problems(live(1, 2), config("198.18.0.153"))] == [
        "udir1: lvs_director_virtual_servers[198.18.0.100:80] no longer lists 198.18.0.154, which IPVS shows serving "
        "(weight 1, 2 active connection(s)): a reload deletes it and its connections are reset (with "
        "expire_nodest_conn=1 at once); drain it first (playbooks/lvs_drain.yml -e lvs_drain_real_server=198.18.0.154 "
        "-e lvs_drain_action=drain), then remove it"
    ]


@pytest.mark.parametrize(("weight", "active", "refused"), [(0, 0, False), (0, 3, True), (2, 0, True)],
                         ids=["drained and idle", "drained with sessions left", "serving without sessions"])
def test_only_a_drained_idle_real_server_may_be_removed(weight, active, refused):
    assert bool(lvs_removal_problems(live(weight, active), config("198.18.0.153"))) is refused


def test_the_finding_stops_the_director_whose_table_it_is():
    assert [entry["hosts"] for entry in lvs_removal_problems(live(1, 2), config("198.18.0.153"))] == [["udir1"]]


def test_a_service_the_config_does_not_list_is_left_alone():
    other = live(1, 2).replace("C6120064:0050", "C6120065:0050")
    assert lvs_removal_problems(other, config("198.18.0.153")) == []


def test_no_table_to_read_finds_nothing():
    assert lvs_removal_problems("", config("198.18.0.153")) == []


def test_a_table_that_cannot_be_read_is_an_error():
    with pytest.raises(AnsibleFilterError, match="/proc/net/ip_vs could not be read"):
        lvs_removal_problems("garbage\n", config("198.18.0.153"))
