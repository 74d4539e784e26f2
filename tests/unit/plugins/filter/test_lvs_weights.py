"""lvs_weights: weights in proportion to measured capacity, kept when the shares would barely move.

The oracle is wrr's own rule (ip_vs_wrr.c): each real server gets new connections in proportion to its weight, so the
shares a set of weights gives are weight / sum of weights; the figures below are worked out from that by hand. The
cycle test replays ip_vs_wrr_schedule's loop (current weight stepped down by the gcd from the largest weight; a server
is picked while its weight is at least the current weight) to show why the smallest weights within the tolerance are
proposed.
"""

from __future__ import annotations

import math
from functools import reduce

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_weights import lvs_weights


def test_a_server_with_a_third_of_the_throughput_gets_a_third_of_the_weight():
    plan = lvs_weights({"urs1": 900e6, "urs2": 300e6}, current={"urs1": 1, "urs2": 1})
    assert plan["weights"] == {"urs1": 3, "urs2": 1}
    assert plan["before"] == {"urs1": 50.0, "urs2": 50.0}
    assert plan["after"] == {"urs1": 75.0, "urs2": 25.0}
    assert (plan["changed"], plan["change_percent"]) == (True, 25.0)


def test_a_noisy_remeasurement_keeps_the_weights():
    plan = lvs_weights({"urs1": 910e6, "urs2": 290e6}, current={"urs1": 100, "urs2": 33})
    assert plan["changed"] is False
    assert plan["weights"] == {"urs1": 100, "urs2": 33}
    assert plan["proposed"] == {"urs1": 3, "urs2": 1}  # 75.0/25.0 against 75.8/24.2 measured: within 1 point
    assert plan["reason"] == "the shares would move by 0.2 points at most (not more than 5): kept"


@pytest.mark.parametrize(("capacities", "weights"), [
    ({"a": 4, "b": 4}, {"a": 1, "b": 1}),
    ({"a": 100, "b": 19}, {"a": 5, "b": 1}),  # 83.3/16.7 against 84.0/16.0; 4:1 would be 80/20
    ({"a": 520, "b": 480}, {"a": 9, "b": 8}),  # 52.9/47.1 against 52.0/48.0; 8:7 would be 1.3 points off
    ({"a": 16, "b": 4, "c": 1}, {"a": 16, "b": 4, "c": 1}),  # 15:4:1 gives c 5.0 % against 4.8 %, b 20 % against 19
    ({"a": 1000, "b": 1}, {"a": 90, "b": 1}),  # never 0: a tiny server still serves; drain it to stop it
])
def test_the_smallest_weights_within_one_point_of_the_capacity_shares(capacities, weights):
    # The rounding is under test here, not the guard against a bad measurement (1000:1 passes it only when raised).
    assert lvs_weights(capacities, min_change_percent=0, max_capacity_ratio=1000)["proposed"] == weights


@pytest.mark.parametrize(("capacities", "weights"), [
    ({"a": 4, "b": 4}, {"a": 100, "b": 100}),
    ({"a": 16, "b": 4, "c": 1}, {"a": 100, "b": 25, "c": 6}),
    ({"a": 1000, "b": 1}, {"a": 100, "b": 1}),
])
def test_a_tolerance_of_zero_gives_the_largest_capacity_max_weight(capacities, weights):
    plan = lvs_weights(capacities, min_change_percent=0, share_tolerance_percent=0, max_capacity_ratio=1000)
    assert plan["proposed"] == weights


def test_max_weight_caps_the_weights_when_no_smaller_ones_are_within_the_tolerance():
    # 89.8/10.2 needs 9:1 for 1 point; at most 5 the filter gives 5:1.
    assert lvs_weights({"a": 1000, "b": 114}, max_weight=5, min_change_percent=0)["proposed"] == {"a": 5, "b": 1}


def _wrr_order(weights: dict[str, int], count: int) -> list[str]:
    """The first `count` picks of ip_vs_wrr_schedule for these weights (servers in the given order)."""
    names = list(weights)
    step, top = reduce(math.gcd, weights.values()), max(weights.values())
    index, current, order = -1, 0, []
    while len(order) < count:
        index = (index + 1) % len(names)
        if index == 0:
            current -= step
            if current <= 0:
                current = top
        if weights[names[index]] >= current:
            order.append(names[index])
    return order


def test_small_weights_keep_any_window_of_wrr_picks_near_the_shares():
    """100 picks, starting anywhere in the cycle: at 100:19 b gets 9 to 19 of them (its share is 16.0), so an audit of
    a short sample can grade a correct pool as imbalanced; at 5:1, the filter's weights for the same capacities,
    b gets 16 or 17 (its share is 16.7)."""
    capacities = {"a": 100, "b": 19}
    for weights, fewest, most in (({"a": 100, "b": 19}, 9, 19), (lvs_weights(capacities)["proposed"], 16, 17)):
        order = _wrr_order(weights, 2 * sum(weights.values()) + 100)
        counts = [order[start:start + 100].count("b") for start in range(sum(weights.values()))]
        assert (min(counts), max(counts)) == (fewest, most), weights


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


@pytest.mark.parametrize("tolerance", [-1, 101, float("nan")])
def test_a_share_tolerance_outside_0_to_100_is_refused(tolerance):
    with pytest.raises(AnsibleFilterError, match="share_tolerance_percent is .*; use 0 to 100, e.g. 1"):
        lvs_weights({"a": 1}, share_tolerance_percent=tolerance)


def test_one_run_moves_no_share_further_than_the_step_and_the_next_run_goes_on():
    # 1:1 in use, capacities 9:1: urs1's share would go from 50 to 90 %, 40 points; at most 20 per run.
    first = lvs_weights({"urs1": 9, "urs2": 1}, current={"urs1": 1, "urs2": 1}, max_share_step_percent=20)
    assert first["changed"] and first["stepped"]
    assert first["after"] == {"urs1": 70.0, "urs2": 30.0} and first["weights"] == {"urs1": 7, "urs2": 3}
    assert "one run moves a share by at most 20 points, so a later run goes on" in first["reason"]
    second = lvs_weights({"urs1": 9, "urs2": 1}, current=first["weights"], max_share_step_percent=20)
    assert second["after"] == {"urs1": 90.0, "urs2": 10.0} and not second["stepped"]
    assert second["weights"] == {"urs1": 9, "urs2": 1}


def test_the_default_step_lets_a_three_to_one_pool_settle_in_one_run():
    plan = lvs_weights({"urs1": 900e6, "urs2": 300e6}, current={"urs1": 1, "urs2": 1})
    assert plan["changed"] and not plan["stepped"] and plan["weights"] == {"urs1": 3, "urs2": 1}


def test_capacities_too_far_apart_are_refused_as_a_bad_measurement():
    # A 10 Gbit/s server measured at 80 Mbit/s (an iperf3 test cut short) beside one at 9.4 Gbit/s.
    with pytest.raises(AnsibleFilterError) as caught:
        lvs_weights({"urs1": 9.4e9, "urs2": 8e7}, current={"urs1": 1, "urs2": 1})
    assert str(caught.value).startswith(
        "lvs_weights: urs2 measured 8e+07 and urs1 9.4e+09, 117.5 times as much (more than max_capacity_ratio 20)"
    )
    assert lvs_weights({"urs1": 9.4e9, "urs2": 8e7}, max_capacity_ratio=200)["changed"]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("max_share_step_percent", 0, "max_share_step_percent is 0; use more than 0 and at most 100"),
    ("max_share_step_percent", 101, "max_share_step_percent is 101; use more than 0 and at most 100"),
    ("max_capacity_ratio", 0.5, "max_capacity_ratio is 0.5; use 1 or more"),
])
def test_the_guards_own_settings_are_checked(option, value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        lvs_weights({"a": 1, "b": 1}, **{option: value})
