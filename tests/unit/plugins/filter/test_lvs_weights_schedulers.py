"""lvs_weights with the virtual services it plans for: only a scheduler that splits new connections by weight gets new
shares from new weights.

rr, lc and dh only test whether a weight is above 0 (ip_vs_rr.c, ip_vs_lc.c, ip_vs_dh.c); fo and ovf read the weights
as an order (ip_vs_fo.c, ip_vs_ovf.c); wrr and wlc split by weight (ip_vs_wrr.c, ip_vs_wlc.c).
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_weights import lvs_weights

CAPACITIES = {"198.18.0.21": 900e6, "198.18.0.22": 300e6}
CURRENT = {"198.18.0.21": 1, "198.18.0.22": 1}


def virtual_server(port, scheduler=None, protocol="TCP", addresses=("198.18.0.21", "198.18.0.22")):
    server = {"address": "198.18.0.100", "port": port, "protocol": protocol,
              "real_servers": [{"address": address, "weight": 1} for address in addresses]}
    if scheduler is not None:
        server["lvs_sched"] = scheduler
    return server


@pytest.mark.parametrize("scheduler", ["rr", "lc", "dh", "fo", "ovf"])
def test_a_plan_for_services_that_do_not_split_by_weight_keeps_the_weights_and_says_why(scheduler):
    plan = lvs_weights(CAPACITIES, current=CURRENT, virtual_servers=[virtual_server(53, scheduler, "UDP")])
    assert (plan["changed"], plan["weights"], plan["splits_by_weight"]) == (False, CURRENT, False)
    assert plan["after"] == plan["before"] == {"198.18.0.21": 50.0, "198.18.0.22": 50.0}
    assert plan["reason"] == ("no virtual service splits new connections by weight, so new weights would give no new "
                              "shares: kept")
    (note,) = plan["skipped"]
    assert note.startswith(f"UDP 198.18.0.100:53 ({scheduler}) skipped: ")
    assert note.endswith(f"(ip_vs_{scheduler}.c), so new weights give it no new shares")


def test_an_rr_service_beside_a_wrr_one_is_named_as_skipped_and_the_wrr_one_rebalanced():
    plan = lvs_weights(CAPACITIES, current=CURRENT,
                       virtual_servers=[virtual_server(80, "wrr"), virtual_server(7, "rr", "UDP")])
    assert (plan["changed"], plan["weights"], plan["splits_by_weight"]) == (
        True, {"198.18.0.21": 3, "198.18.0.22": 1}, True)
    assert plan["skipped"] == ["UDP 198.18.0.100:7 (rr) skipped: rr takes the real servers with a weight above 0 in "
                               "turn, whatever the weight (ip_vs_rr.c), so new weights give it no new shares"]


def test_a_service_without_a_scheduler_is_the_roles_wlc_and_splits_by_weight():
    plan = lvs_weights(CAPACITIES, current=CURRENT, virtual_servers=[virtual_server(8080)])
    assert (plan["changed"], plan["skipped"], plan["splits_by_weight"]) == (True, [], True)


def test_without_virtual_services_every_service_is_taken_to_split_by_weight():
    for virtual_servers in (None, []):
        plan = lvs_weights(CAPACITIES, current=CURRENT, virtual_servers=virtual_servers)
        assert (plan["changed"], plan["skipped"], plan["splits_by_weight"]) == (True, [], True)


@pytest.mark.parametrize("scheduler", ["fo", "ovf"])
def test_new_weights_for_the_real_servers_of_an_fo_or_ovf_service_are_refused(scheduler):
    # The weights order fo's and ovf's real servers: 3:1 would make 198.18.0.21 the one that takes the connections.
    services = [virtual_server(80, "wrr"), virtual_server(443, scheduler)]
    with pytest.raises(AnsibleFilterError) as error:
        lvs_weights(CAPACITIES, current=CURRENT, virtual_servers=services)
    assert str(error.value).startswith(f"lvs_weights: TCP 198.18.0.100:443 uses {scheduler}, which reads the weights "
                                       f"as an order, not as shares (")
    assert str(error.value).endswith("the new weights of 198.18.0.21 would change which real server takes its "
                                     "connections. Give it real servers of its own or a weighted scheduler (wrr, "
                                     "wlc), or rebalance without a capacity source (none)")


def test_an_fo_service_on_other_real_servers_is_only_named_as_skipped():
    services = [virtual_server(80, "wrr"), virtual_server(443, "fo", addresses=("198.18.0.31", "198.18.0.32"))]
    plan = lvs_weights(CAPACITIES, current=CURRENT, virtual_servers=services)
    assert plan["changed"] is True
    assert [note.split(" skipped: ")[0] for note in plan["skipped"]] == ["TCP 198.18.0.100:443 (fo)"]


def test_an_fo_service_is_not_refused_when_the_weights_stay():
    services = [virtual_server(80, "wrr"), virtual_server(443, "fo")]
    plan = lvs_weights(CAPACITIES, current={"198.18.0.21": 3, "198.18.0.22": 1}, virtual_servers=services)
    assert (plan["changed"], plan["weights"]) == (False, {"198.18.0.21": 3, "198.18.0.22": 1})


def test_ipv6_services_are_named_with_brackets():
    services = [{"address": "2001:DB8::100", "port": 80, "lvs_sched": "rr", "real_servers": []},
                virtual_server(80, "wrr")]
    plan = lvs_weights(CAPACITIES, current=CURRENT, virtual_servers=services)
    assert plan["skipped"][0].startswith("TCP [2001:db8::100]:80 (rr) skipped: ")


def test_virtual_servers_that_are_not_a_list_of_services_are_refused():
    with pytest.raises(AnsibleFilterError, match="virtual_servers must be the list lvs_director_virtual_servers"):
        lvs_weights(CAPACITIES, virtual_servers={"address": "198.18.0.100"})
