"""Directors against their real servers: each DR real server is a host of lvs_realservers with the VIP on lo.

ipvs(7)/ipvsadm(8) "--gatewaying" (direct routing): the director forwards the packet unchanged except for the MAC
address, so it still carries the VIP as destination, and a real server accepts it only when the VIP is one of its own
addresses (LVS-DR HOWTO: the VIP on lo with arp_ignore/arp_announce). keepalived.conf(5): a checker's connect_ip
defaults to the real server's address, so its check passes either way. The pair below is the correct one of the
director tests (lvs_director_pair.py), with its two real servers 198.18.0.21 and 198.18.0.22.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from lvs_director_pair import REAL_SERVERS, VIP, pair_settings

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_resolve
from ansible_collections.hpc.balance.plugins.filter.lvs_pool import (
    lvs_pool_problems,
    lvs_pool_real_server_addresses,
    lvs_pool_real_servers,
    lvs_pool_values_by_address,
)

HOSTVARS = {
    "rs1": {"ansible_host": REAL_SERVERS[0], "lvs_realserver_vips": [VIP]},
    "rs2": {"ansible_host": REAL_SERVERS[1], "lvs_realserver_vips": [f"{VIP}/32", "fd00::100"]},
}


def configs(**overrides):
    return [lvs_director_resolve(pair_settings(host, **overrides)) for host in ("dir1", "dir2")]


def messages(hostvars, unmanaged=None, **overrides):
    entries = lvs_pool_real_servers(sorted(hostvars), hostvars)
    return [entry["message"] for entry in lvs_pool_problems(configs(**overrides), entries, unmanaged)]


def test_real_servers_that_are_managed_hosts_with_the_vip_pass():
    assert messages(HOSTVARS) == []


def test_a_real_server_that_is_no_host_of_lvs_realservers_is_refused_on_every_director():
    assert messages({"rs1": HOSTVARS["rs1"]}) == [
        f"{host}: lvs_director_virtual_servers[{VIP}:80].real_servers[198.18.0.22] is no host of lvs_realservers "
        "(none has that address; a host this run gathered no facts for is known only by its ansible_host and "
        f"lvs_realserver_service_addresses), so nothing puts {VIP} on its lo: in DR it drops every packet for {VIP} "
        "while keepalived's check of its own address passes; add it to lvs_realservers with lvs_realserver_vips "
        f"listing {VIP} (and lvs_realserver_service_addresses when its ansible_host is another address), or list it in "
        "lvs_director_unmanaged_real_servers if its VIP is kept by other means"
        for host in ("dir1", "dir2")
    ]


def test_a_real_server_whose_vips_lack_the_service_vip_is_refused():
    hostvars = {**HOSTVARS, "rs2": {"ansible_host": REAL_SERVERS[1], "lvs_realserver_vips": ["fd00::100"]}}
    assert messages(hostvars)[0] == (
        f"dir1: lvs_director_virtual_servers[{VIP}:80].real_servers[198.18.0.22] is rs2, whose lvs_realserver_vips "
        f"(fd00::100) lacks {VIP}: in DR it would drop every packet for {VIP} while keepalived's check passes; add "
        f"{VIP} to lvs_realserver_vips of rs2"
    )


def test_an_unmanaged_real_server_is_left_to_the_operator():
    assert messages({"rs1": HOSTVARS["rs1"]}, unmanaged=["198.18.0.22"]) == []


def test_a_real_server_is_found_by_a_gathered_address_when_ansible_host_is_a_management_address():
    hostvars = {**HOSTVARS, "rs2": {"ansible_host": "10.9.0.22", "lvs_realserver_vips": [VIP],
                                    "ansible_facts": {"all_ipv4_addresses": ["10.9.0.22", REAL_SERVERS[1]]}}}
    assert messages(hostvars) == []


def test_service_addresses_replace_ansible_host_and_the_facts():
    hostvars = {**HOSTVARS, "rs2": {"ansible_host": REAL_SERVERS[1], "lvs_realserver_vips": [VIP],
                                    "lvs_realserver_service_addresses": ["198.18.0.52"]}}
    assert len(messages(hostvars)) == 2


def test_addresses_are_compared_in_one_spelling():
    hostvars = {**HOSTVARS, "rs1": {"ansible_host": "fd00:0::21", "lvs_realserver_vips": ["fd00::100"]}}
    service = [{"address": "fd00::100", "port": 80, "real_servers": [{"address": "fd00::21"}]}]
    instances = [{"name": "VI_6", "virtual_router_id": 51, "virtual_ipaddresses": ["fd00::100"]}]
    assert messages(hostvars, virtual_servers=service, vrrp_instances=instances) == []


def test_the_addresses_a_host_is_listed_under_are_those_of_the_directors_services():
    entry = lvs_pool_real_servers(["rs2"], {"rs2": {"ansible_host": "10.9.0.22", "ansible_facts": {
        "all_ipv4_addresses": ["10.9.0.22", REAL_SERVERS[1]], "all_ipv6_addresses": []}}})[0]
    assert lvs_pool_real_server_addresses(entry, configs()) == [REAL_SERVERS[1]]


def test_a_vip_list_that_is_not_a_list_is_refused_with_the_host_named():
    with pytest.raises(AnsibleFilterError, match="rs1: lvs_realserver_vips must be a list"):
        lvs_pool_real_servers(["rs1"], {"rs1": {"lvs_realserver_vips": VIP}})


def test_values_per_host_are_keyed_by_the_addresses_the_directors_list():
    hostvars = {**HOSTVARS, "rs2": {"ansible_host": "10.9.0.22", "lvs_realserver_service_addresses": ["198.18.0.22"]}}
    entries = lvs_pool_real_servers(["rs1", "rs2"], hostvars)
    assert lvs_pool_values_by_address({"rs1": 8, "rs2": 4}, entries, configs()) == {"198.18.0.21": 8,
                                                                                    "198.18.0.22": 4}


def test_a_host_listed_under_none_of_its_addresses_is_refused_by_name():
    hostvars = {**HOSTVARS, "rs2": {"ansible_host": "10.9.0.22"}}
    entries = lvs_pool_real_servers(["rs1", "rs2"], hostvars)
    with pytest.raises(AnsibleFilterError, match=r"rs2 \(10\.9\.0\.22\): no virtual server lists this host"):
        lvs_pool_values_by_address({"rs1": 8, "rs2": 4}, entries, configs())
