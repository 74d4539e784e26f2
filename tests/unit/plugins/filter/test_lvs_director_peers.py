"""Peers of one VRRP instance must hear each other: what keepalived -t passes and a pair then splits on.

keepalived.conf(5), vrrp_instance: with ``unicast_peer`` an instance sends its adverts to each listed address only,
instead of the multicast group (224.0.0.18 / ff02::12, RFC 5798 section 5.1.1.2). So a peer missing from the list
never hears this director, an instance in unicast on one director and multicast on another hears neither way, and
each side then takes MASTER: both hold the VIP. Each test starts from the correct pair (dir1 MASTER, dir2 BACKUP) and
expects exactly the one finding its change causes.
"""

from __future__ import annotations

from lvs_director_pair import VIP, pair_settings

from ansible_collections.hpc.balance.plugins.filter.lvs_director import (
    lvs_director_problems,
    lvs_director_resolve,
)

ADDRESSES = {"dir1": ["198.18.0.11", "fd00::11"], "dir2": ["198.18.0.12", "fd00::12"]}


def instance(**fields):
    return [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], **fields}]


def errors(dir1=None, dir2=None, known_addresses=True):
    configs = []
    for host, overrides in (("dir1", dir1), ("dir2", dir2)):
        addresses = {"host_addresses": ADDRESSES[host] + [VIP]} if known_addresses else {}
        configs.append(lvs_director_resolve(pair_settings(host, **{"advert_int_s": 1, **addresses,
                                                                   **(overrides or {})})))
    return [entry["message"] for entry in lvs_director_problems(configs)["errors"]]


def test_unicast_peers_that_name_each_other_pass():
    assert errors(dir1={"vrrp_instances": instance(unicast_peers=["198.18.0.12"])},
                  dir2={"vrrp_instances": instance(unicast_peers=["198.18.0.11"])}) == []


def test_a_peer_list_missing_the_other_director_is_refused():
    assert errors(dir1={"vrrp_instances": instance(unicast_peers=["198.18.0.13"])},
                  dir2={"vrrp_instances": instance(unicast_peers=["198.18.0.11"])}) == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].unicast_peers (198.18.0.13) does not name dir2 (its addresses: "
        "198.18.0.12), so dir1 never sends it adverts and dir2 holds the VIP too (split brain); add dir2's address "
        "(its unicast_src_ip, or the address it sends from)"
    ]


def test_a_peer_list_is_matched_against_the_other_directors_unicast_src_ip():
    assert errors(dir1={"vrrp_instances": instance(unicast_peers=["198.18.0.12"])},
                  dir2={"vrrp_instances": instance(unicast_src_ip="198.18.0.52", unicast_peers=["198.18.0.11"])}) == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].unicast_peers (198.18.0.12) does not name dir2 (its addresses: "
        "198.18.0.52), so dir1 never sends it adverts and dir2 holds the VIP too (split brain); add dir2's address "
        "(its unicast_src_ip, or the address it sends from)"
    ]


def test_unicast_on_one_director_and_multicast_on_the_other_is_refused():
    assert errors(dir1={"vrrp_instances": instance(unicast_peers=["198.18.0.12"])}) == [
        "lvs_director_vrrp_instances[VI_LVS] uses unicast on dir1 and multicast on dir2: neither hears the other's "
        "adverts, so both hold the VIP (split brain); give every director unicast_peers naming the others, or drop "
        "unicast_src_ip and unicast_peers on all of them"
    ]


def test_different_vip_sets_for_one_instance_are_refused():
    assert errors(dir2={"vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51,
                                            "virtual_ipaddresses": [VIP, "198.18.0.101"]}]}) == [
        "lvs_director_vrrp_instances[VI_LVS].virtual_ipaddresses differs between peers (dir1: 198.18.0.100; dir2: "
        "198.18.0.100, 198.18.0.101), so a failover moves other addresses than the master held; use one list on "
        "every director (group_vars/lvs_directors)"
    ]


def test_peer_lists_are_not_judged_when_the_hosts_addresses_are_unknown():
    assert errors(dir1={"vrrp_instances": instance(unicast_peers=["198.18.0.13"])},
                  dir2={"vrrp_instances": instance(unicast_peers=["198.18.0.11"])}, known_addresses=False) == []


def test_a_run_that_leaves_a_director_of_the_inventory_out_stops_every_director_of_the_run():
    configs = [lvs_director_resolve(pair_settings("dir1", advert_int_s=1))]
    findings = lvs_director_problems(configs, left_out_hosts=["dir2"])["errors"]
    assert findings == [{"hosts": ["dir1"], "message": (
        "dir2 is in lvs_directors but not in this run (--limit), so the checks across directors (peers, VIPs, unicast "
        "lists, virtual servers) cannot see it and a mismatch would split the pair; run on every director, or set "
        "lvs_director_allow_partial_run: true when the others are gone for good")}]
