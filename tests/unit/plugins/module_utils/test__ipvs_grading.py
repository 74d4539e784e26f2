"""_ipvs_grading: each IPVS scheduler is held to the split the kernel's scheduler makes, not always to the weights.

Every row names the kernel source its expectation follows (net/netfilter/ipvs/ in Linux): rr and lc only test
whether a weight is above 0, fo sends everything to the first real server with the highest weight, ovf and dh make no
share of the connections at all, and the weighted schedulers split by weight.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._ipvs_grading import (
    connections_in,
    expected_split,
    report_service,
    service_metric,
    summary_line,
    too_few_to_judge,
    weights_set_no_shares,
)

ADDRESSES = ("198.18.0.11", "198.18.0.12", "198.18.0.13")


def service(scheduler: str, weights: list[int], conns: list[int] | None = None, active: list[int] | None = None,
            rates: list[float] | None = None) -> dict[str, Any]:
    """One virtual service as the _ipvs parsers return it, with real servers in the table's order."""
    servers = []
    for index, weight in enumerate(weights):
        servers.append({
            "address": ADDRESSES[index], "port": 80, "family": "ipv4", "forward": "Route", "weight": weight,
            "active_conns": active[index] if active else 0, "inactive_conns": 0,
            "conns": conns[index] if conns else None, "in_packets": None, "out_packets": None, "in_bytes": None,
            "out_bytes": None, "conns_rate": rates[index] if rates else None,
        })
    return {"protocol": "TCP", "address": "198.100.0.100", "port": 80, "fwmark": None, "family": "ipv4",
            "scheduler": scheduler, "flags": [], "persistent": False, "persistence_timeout_s": None,
            "persistence_netmask": None, "persistence_engine": None, "one_packet_scheduling": False, "conns": None,
            "in_packets": None, "out_packets": None, "in_bytes": None, "out_bytes": None, "real_servers": servers}


def grade(scheduler: str, weights: list[int], metric: str = "conns", threshold_percent: float = 15.0,
          window_s: float = 0.0, **loads: Any) -> dict[str, Any]:
    options = {"metric": metric, "has_counters": True, "window_s": window_s, "threshold_percent": threshold_percent,
               "names": {}}
    warnings: list[str] = []  # sh without its port flag warns about NAT'd clients; not what these tests look at
    return report_service(service(scheduler, weights, **loads), options, warnings.append)


# (kernel source, scheduler, weights, connections scheduled to each real server, expected shares, verdict)
VERDICTS = [
    pytest.param("ip_vs_rr.c", "rr", [3, 1], [500, 500], [0.5, 0.5], True,
                 id="rr 3:1 with equal connections is balanced"),
    pytest.param("ip_vs_rr.c", "rr", [3, 1], [750, 250], [0.5, 0.5], False,
                 id="rr 3:1 split by the weights is NOT balanced"),
    pytest.param("ip_vs_rr.c", "rr", [2, 1, 0], [500, 500, 0], [0.5, 0.5, 0.0], True,
                 id="rr with a weight-0 server expects 0 there"),
    pytest.param("ip_vs_wrr.c", "wrr", [3, 1], [750, 250], [0.75, 0.25], True,
                 id="wrr 3:1 is still graded by the weights"),
    pytest.param("ip_vs_wrr.c", "wrr", [3, 1], [500, 500], [0.75, 0.25], False,
                 id="wrr 3:1 with equal connections is NOT balanced"),
    pytest.param("ip_vs_sh.c", "sh", [3, 1], [750, 250], [0.75, 0.25], True,
                 id="sh fills its hash buckets by weight, so it is graded by the weights"),
    pytest.param("ip_vs_fo.c", "fo", [3, 1], [1000, 0], [1.0, 0.0], True,
                 id="fo with every connection on the highest weight is balanced"),
    pytest.param("ip_vs_fo.c", "fo", [3, 1], [500, 500], [1.0, 0.0], False,
                 id="fo with the connections spread evenly is NOT balanced"),
    pytest.param("ip_vs_fo.c", "fo", [3, 1], [750, 250], [1.0, 0.0], False,
                 id="fo split by the weights is NOT balanced"),
    pytest.param("ip_vs_fo.c", "fo", [2, 2, 1], [1000, 0, 0], [1.0, 0.0, 0.0], True,
                 id="fo with equal highest weights expects the first of them in the table"),
    pytest.param("ip_vs_fo.c", "fo", [2, 2], [0, 1000], [1.0, 0.0], False,
                 id="fo with the second of equal highest weights taking everything is NOT balanced"),
    pytest.param("ip_vs_fo.c", "fo", [0, 1, 3], [0, 0, 1000], [0.0, 0.0, 1.0], True,
                 id="fo expects the highest weight wherever it stands in the table"),
    pytest.param("ip_vs_ovf.c", "ovf", [3, 1], [500, 500], [None, None], None,
                 id="ovf is not graded"),
    pytest.param("ip_vs_dh.c", "dh", [3, 1], [1000, 0], [None, None], None,
                 id="dh is not graded"),
]


@pytest.mark.parametrize(("source", "scheduler", "weights", "conns", "shares", "balanced"), VERDICTS)
def test_each_scheduler_is_held_to_the_split_its_kernel_scheduler_makes(source, scheduler, weights, conns, shares,
                                                                        balanced):
    report = grade(scheduler, weights, conns=conns)
    assert [server["expected_share"] for server in report["real_servers"]] == shares, source
    assert report["balanced"] is balanced, source
    assert (report["not_graded"] is not None) is (balanced is None), source


# (kernel source, scheduler, weights, active connections, expected shares, verdict): lc is graded on what it balances
# now, 256 x active + inactive connections (ip_vs_dest_conn_overhead, include/net/ip_vs.h).
LC_VERDICTS = [
    pytest.param("ip_vs_lc.c", "lc", [3, 1], [10, 10], [0.5, 0.5], True,
                 id="lc 3:1 with equal connections is balanced"),
    pytest.param("ip_vs_lc.c", "lc", [3, 1], [15, 5], [0.5, 0.5], False,
                 id="lc 3:1 holding connections by the weights is NOT balanced"),
    pytest.param("ip_vs_lc.c", "lc", [3, 1, 0], [10, 10, 4], [0.5, 0.5, 0.0], True,
                 id="lc with a weight-0 server expects 0 there and leaves its leftovers out"),
    pytest.param("ip_vs_wlc.c", "wlc", [3, 1], [15, 5], [0.75, 0.25], True,
                 id="wlc 3:1 is still graded by the weights"),
]


@pytest.mark.parametrize(("source", "scheduler", "weights", "active", "shares", "balanced"), LC_VERDICTS)
def test_least_connection_schedulers_are_held_to_their_split_of_the_connections_now(
        source, scheduler, weights, active, shares, balanced):
    report = grade(scheduler, weights, metric="auto", active=active)
    assert report["metric"] == "conn_overhead", source
    assert [server["expected_share"] for server in report["real_servers"]] == shares, source
    assert report["balanced"] is balanced, source


def test_a_weight_0_server_has_no_deviation_of_its_own_under_rr():
    # ip_vs_rr.c skips a real server with weight 0: its leftovers shift no one's share.
    report = grade("rr", [2, 1, 0], conns=[500, 500, 40])
    assert [server["deviation_percent"] for server in report["real_servers"]] == [0.0, 0.0, None]
    assert report["findings"] == ["198.18.0.13 has weight 0 but 40 connections: it was quiesced after they were "
                                  "scheduled"]


def test_the_finding_of_an_unbalanced_rr_service_names_its_equal_share():
    # ip_vs_rr.c: 750 / 250 on weights 3:1 is 50 % off the equal share rr gives.
    report = grade("rr", [3, 1], conns=[750, 250])
    assert report["findings"] == ["198.18.0.11 got 75.0 % of the conns where rr's equal share is 50.0 % (+50.0 %, "
                                  "limit 15 %)"]
    assert summary_line(report, 15.0) == (
        "TCP 198.100.0.100:80 (rr): NOT balanced, 2 real servers, split 198.18.0.11 750 / 198.18.0.12 250 of 1000 "
        "connections, worst deviation 50.0 % (limit 15 %), CV 0.500; graded connections scheduled since the counters "
        "were zeroed (cumulative: outages and earlier weights count) against equal shares for the real servers with "
        "a weight above 0 (rr ignores the weights beyond that, ip_vs_rr.c)")


def test_the_finding_of_an_fo_service_spread_evenly_names_the_server_that_should_take_everything():
    # ip_vs_fo.c: the first real server with the highest weight takes every new connection.
    report = grade("fo", [3, 1], conns=[500, 500])
    assert report["expected_split"] == ("all new connections on 198.18.0.11, the first with the highest weight "
                                        "(ip_vs_fo.c)")
    assert report["findings"] == ["198.18.0.11 got 50.0 % of the conns where fo sends it 100.0 % (-50.0 %, limit "
                                  "15 %)"]


def test_an_ovf_service_says_why_it_is_not_graded_and_still_shows_its_split():
    # ip_vs_ovf.c: the highest weight until its active connections exceed its weight, then the next.
    report = grade("ovf", [3, 1], metric="auto", active=[4, 1])
    assert (report["metric"], report["balanced"], report["max_abs_deviation_percent"]) == ("active_conns", None, None)
    assert report["not_graded"].endswith("so its split follows the concurrency, not a share (ip_vs_ovf.c)")
    assert report["findings"] == [f"not graded: {report['not_graded']}"]
    assert summary_line(report, 15.0) == (
        f"TCP 198.100.0.100:80 (ovf): not graded, 2 real servers, split 198.18.0.11 4 / 198.18.0.12 1 of 5 active "
        f"connections; {report['not_graded']}")


@pytest.mark.parametrize(("scheduler", "source"), [
    ("rr", "ip_vs_rr.c"), ("lc", "ip_vs_lc.c"), ("dh", "ip_vs_dh.c"), ("fo", "ip_vs_fo.c"), ("ovf", "ip_vs_ovf.c"),
])
def test_schedulers_that_do_not_split_by_weight_say_why_with_their_kernel_source(scheduler, source):
    assert weights_set_no_shares(scheduler).endswith(f"({source})")


@pytest.mark.parametrize("scheduler", ["wrr", "wlc", "sed", "nq", "lblc", "lblcr", "sh", "mh", "twos"])
def test_weighted_schedulers_take_new_weights_as_shares(scheduler):
    # ip_vs_wrr.c, ip_vs_wlc.c, ip_vs_sed.c, ip_vs_nq.c, ip_vs_lblc.c, ip_vs_lblcr.c, ip_vs_sh.c and ip_vs_mh.c
    # (buckets filled by weight), ip_vs_twos.c (a random pick by weight).
    assert weights_set_no_shares(scheduler) is None
    assert expected_split(scheduler, [3, 1]).shares == [0.75, 0.25]


def test_an_fo_service_with_every_weight_0_expects_nothing():
    # ip_vs_fo.c starts from weight 0 and only takes a real server above it: none is available.
    split = expected_split("fo", [0, 0])
    assert (split.shares, split.expected) == ([None, None], None)


@pytest.mark.parametrize(("metric", "total", "window_s", "connections"), [
    pytest.param("conns_rate", 7.5, 2.0, 15, id="a rate counts the new connections during the window"),
    pytest.param("conns", 15, 0.0, 15, id="cumulative connections count themselves"),
    pytest.param("current_conns", 15, 0.0, 15, id="current connections count themselves"),
    pytest.param("conn_overhead", 3840, 0.0, None, id="weighted overhead is no count of connections"),
    pytest.param("in_bytes", 10**9, 0.0, None, id="bytes are no count of connections"),
])
def test_one_helper_counts_the_connections_a_load_stands_for(metric, total, window_s, connections):
    assert connections_in(metric, total, window_s) == connections


def test_too_few_to_judge_is_the_fewest_it_takes_to_see_the_expected_split():
    # 1 / (limit x smallest expected share): wrr 3:1 at 5 % takes 80; rr 3:1 (equal shares, ip_vs_rr.c) takes 40.
    assert [too_few_to_judge(count, [0.75, 0.25], 5.0) for count in (79, 80)] == [80, None]
    assert [too_few_to_judge(count, [0.5, 0.5], 5.0) for count in (39, 40)] == [40, None]
    assert too_few_to_judge(None, [0.5, 0.5], 5.0) is None
    assert too_few_to_judge(10, [0.5, 0.5], 0.0) is None  # a limit of 0: no count is enough, none is flagged


@pytest.mark.parametrize(("new", "thin"), [(79, True), (80, False)])
def test_the_thin_window_and_the_too_few_finding_draw_the_line_at_the_same_count(new, thin):
    # wrr 3:1 (ip_vs_wrr.c) at 5 %: 80 new connections during the window are the fewest to judge by.
    rates = [0.75 * new / 2.0, 0.25 * new / 2.0]
    auto = grade("wrr", [3, 1], metric="auto", threshold_percent=5.0, window_s=2.0, rates=rates,
                 conns=[3000, 1000])
    assert auto["metric"] == ("conns" if thin else "conns_rate")
    asked = grade("wrr", [3, 1], metric="conns_rate", threshold_percent=5.0, window_s=2.0, rates=rates)
    too_few = f"only {new} new connections during the 2 s window over 2 real servers: too few to judge the spread"
    assert (too_few in asked["findings"]) is thin
    counted = grade("wrr", [3, 1], metric="conns", threshold_percent=5.0, conns=[round(0.75 * new), new - round(
        0.75 * new)])
    assert any("too few to judge" in finding for finding in counted["findings"]) is thin


def test_an_rr_window_is_graded_against_equal_shares_whatever_the_weights():
    # ip_vs_rr.c: 50 new connections per second to each of two real servers weighted 3:1 is rr doing its job.
    report = grade("rr", [3, 1], metric="auto", window_s=2.0, rates=[50.0, 50.0], conns=[5000, 5000])
    assert (report["metric"], report["balanced"], report["max_abs_deviation_percent"]) == ("conns_rate", True, 0.0)


def test_a_thin_rr_window_is_judged_by_the_equal_split_not_by_the_weights():
    # ip_vs_rr.c: at 15 % two equal shares take 14 connections to see; weights 3:1 would have asked for 27.
    report = grade("rr", [3, 1], metric="auto", window_s=2.0, rates=[10.0, 10.0], conns=[5000, 5000])
    assert report["metric"] == "conns_rate"
    report = grade("rr", [3, 1], metric="auto", window_s=2.0, rates=[3.0, 3.0], conns=[5000, 5000])
    assert report["graded"] == ("connections scheduled since the counters were zeroed (12 new connections during the "
                                "2 s window, fewer than the 14 it takes to see this split within 15 %, so the "
                                "cumulative counters, which carry outages and earlier weights)")


@pytest.mark.parametrize(("scheduler", "metric"), [("ovf", "active_conns"), ("fo", "conns_rate"), ("rr", "conns_rate"),
                                                   ("lc", "conn_overhead"), ("dh", "conns_rate")])
def test_auto_picks_what_each_scheduler_decides_by(scheduler, metric):
    # ip_vs_ovf.c compares active connections with the weight; ip_vs_lc.c counts 256 x active + inactive.
    assert service_metric(scheduler, "auto", True, 2.0) == metric
