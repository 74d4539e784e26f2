"""lvs_weights: weights in proportion to measured capacity, kept when the shares would barely move.

The oracle is wrr's own rule (ip_vs_wrr.c): each real server gets new connections in proportion to its weight, so the
shares a set of weights gives are weight / sum of weights; the figures below are worked out from that by hand.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_weights import lvs_weights


def test_a_server_with_a_third_of_the_throughput_gets_a_third_of_the_weight():
    plan = lvs_weights({"urs1": 900e6, "urs2": 300e6}, current={"urs1": 1, "urs2": 1})
    assert plan["weights"] == {"urs1": 100, "urs2": 33}
    assert plan["before"] == {"urs1": 50.0, "urs2": 50.0}
    assert plan["after"] == {"urs1": 75.2, "urs2": 24.8}
    assert (plan["changed"], plan["change_percent"]) == (True, 25.2)


def test_a_noisy_remeasurement_keeps_the_weights():
    plan = lvs_weights({"urs1": 910e6, "urs2": 290e6}, current={"urs1": 100, "urs2": 33})
    assert plan["changed"] is False
    assert plan["weights"] == {"urs1": 100, "urs2": 33}
    assert plan["proposed"] == {"urs1": 100, "urs2": 32}
    assert plan["reason"] == "the shares would move by 0.6 points at most (not more than 5): kept"


@pytest.mark.parametrize(("capacities", "weights"), [
    ({"a": 4, "b": 4}, {"a": 100, "b": 100}),
    ({"a": 16, "b": 4, "c": 1}, {"a": 100, "b": 25, "c": 6}),
    ({"a": 1000, "b": 1}, {"a": 100, "b": 1}),  # never 0: a tiny server still serves; drain it to stop it
])
def test_weights_scale_so_the_largest_capacity_gets_max_weight(capacities, weights):
    assert lvs_weights(capacities, min_change_percent=0)["proposed"] == weights


def test_servers_without_a_current_weight_count_as_weight_one():
    plan = lvs_weights({"a": 3, "b": 1})
    assert plan["before"] == {"a": 50.0, "b": 50.0}


@pytest.mark.parametrize(("capacities", "message"), [
    ({}, "lvs_weights: no capacity was measured; give {real server: capacity}"),
    ({"urs1": "fast"}, "lvs_weights: the capacity of urs1 is 'fast', not a number; measure it again or give it by "
                       "hand (hpc_balance_rebalance_lvs_capacity)"),
    ({"urs1": 0}, "lvs_weights: the capacity of urs1 is 0; a serving real server needs a capacity above 0 (drain a "
                  "server that cannot serve with playbooks/lvs_drain.yml instead)"),
])
def test_capacities_that_cannot_give_weights_are_refused(capacities, message):
    with pytest.raises(AnsibleFilterError) as error:
        lvs_weights(capacities)
    assert str(error.value) == message


def test_max_weight_outside_what_ipvsadm_takes_is_refused():
    with pytest.raises(AnsibleFilterError, match="max_weight is 70000; use 1 to 65535"):
        lvs_weights({"a": 1}, max_weight=70000)
