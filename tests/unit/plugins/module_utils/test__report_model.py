"""The report's document model: verdicts with reasons (a VRRP-only director is a stated skip, the host link says
what it was graded against), the section names, and a heatmap plus the worst layers at scale."""

from __future__ import annotations

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._report_model import (
    NO_BANDWIDTH_REASON,
    build_document,
    worst_layers,
)

VRRP_ONLY = {"changed": False, "skipped": True, "skip_reason": "VRRP only: this kernel has no IPVS"}


def params(**reporters):
    base = {"title": "audit", "timestamp": None, "max_bars": 64, "worst_layers": 4, "heatmap_min_layers": 5,
            "windows_storage_hosts": [], "ipvs_spread": {}, "iperf3_throughput": {}, "tokens_per_expert": {}}
    base.update(reporters)
    return base


def link_result(received, **extra):
    result = {"changed": False, "num_streams": 8, "received_bits_per_second": received, "streams": [],
              "summary": f"8 streams: {received}", "findings": []}
    result.update(extra)
    return result


def moe_result(layers, experts, hot_layer=None):
    graded = []
    for layer in range(layers):
        tokens = [100] * experts
        if layer == hot_layer:
            tokens[3] = 100 * experts
        mean = sum(tokens) / experts
        graded.append({"layer": layer, "num_experts": experts, "tokens_per_expert": tokens,
                       "mean_tokens_per_expert": mean, "max_over_mean": max(tokens) / mean, "cv": 0.0,
                       "cv_grade": "excellent", "balanced": layer != hot_layer, "hot_experts": [], "idle_experts": [],
                       "findings": [f"finding of layer {layer}"], "step_first": 1, "step_last": 1})
    worst = max(graded, key=lambda layer: layer["max_over_mean"])
    return {"changed": False, "layers": graded, "balanced": hot_layer is None, "max_over_mean_limit": 2.0,
            "overall": {"max_over_mean": worst["max_over_mean"], "worst_layer": worst["layer"]}}


def test_vrrp_only_directors_read_as_a_stated_skip_not_an_error():
    document = build_document(params(ipvs_spread={"dir1": VRRP_ONLY, "dir2": VRRP_ONLY}))
    assert document["verdicts"]["network"] == "skipped"
    assert document["reasons"]["network"] == "VRRP only: this kernel has no IPVS"
    assert document["summary"][:3] == ["network: skipped - VRRP only: this kernel has no IPVS",
                                       "  dir1: skipped: VRRP only: this kernel has no IPVS",
                                       "  dir2: skipped: VRRP only: this kernel has no IPVS"]


def test_host_link_graded_against_the_single_stream_ceiling_says_so():
    result = link_result(9.6e9, utilisation_percent=96.0, reaches_expected=True, team_bits_per_second=10e9,
                         expected_source="single-stream ceiling", single_stream_ceiling_bits_per_second=10e9)
    document = build_document(params(iperf3_throughput={"client1": result}))
    assert document["verdicts"]["host_link"] == "balanced"
    assert document["reasons"]["host_link"] == (
        "client1: 8 streams carried 9.6 Gbit/s, 96.0 % of this path's single-stream ceiling 10 Gbit/s, measured just "
        "before with 1 stream")


def test_host_link_graded_against_a_given_link_speed_names_it():
    result = link_result(18.8e9, utilisation_percent=94.0, reaches_expected=True, team_bits_per_second=20e9,
                         expected_source="link speed", expected_link_bits_per_second=10_000_000_000, member_count=2)
    reason = build_document(params(iperf3_throughput={"client1": result}))["reasons"]["host_link"]
    assert reason == "client1: 8 streams carried 18.8 Gbit/s, 94.0 % of the expected 20 Gbit/s (2 x 10 Gbit/s)"


def link_bars(result):
    blocks = build_document(params(iperf3_throughput={"client1": result}))["sections"][1]["blocks"]
    return next(block for block in blocks if block["kind"] == "bars")


def test_host_link_streams_are_drawn_against_their_share_of_the_ceiling_not_the_whole_ceiling():
    # The ceiling is what one stream carried alone on the path, an aggregate: 8 streams that together reach 96 % of
    # it each carry 1.2 Gbit/s, and read as near their 1.25 Gbit/s share, not as "far below 10 Gbit/s".
    streams = [{"received_bits_per_second": 1.2e9} for _stream in range(8)]
    result = link_result(9.6e9, utilisation_percent=96.0, reaches_expected=True, team_bits_per_second=10e9,
                         expected_source="single-stream ceiling", single_stream_ceiling_bits_per_second=10e9,
                         streams=streams)
    bars = link_bars(result)
    assert bars["values"] == [1.2e9] * 8
    assert bars["references"] == [
        (1.2e9, "mean per stream", "ref"),
        (1.25e9, "per-stream share of the 10 Gbit/s ceiling", "lim"),
    ]


def test_host_link_streams_keep_one_member_link_as_their_limit():
    # One TCP flow is hashed onto one member of the team, so one link's speed is a limit of each stream.
    streams = [{"received_bits_per_second": 2.35e9} for _stream in range(8)]
    result = link_result(18.8e9, utilisation_percent=94.0, reaches_expected=True, team_bits_per_second=20e9,
                         expected_source="link speed", expected_link_bits_per_second=10_000_000_000, member_count=2,
                         streams=streams)
    assert link_bars(result)["references"][1] == (10e9, "one member link", "lim")


def test_host_link_without_an_expected_bandwidth_says_how_to_give_one():
    document = build_document(params(iperf3_throughput={"client1": link_result(9.6e9, reaches_expected=None)}))
    assert document["verdicts"]["host_link"] == "unknown"
    assert document["reasons"]["host_link"].endswith(NO_BANDWIDTH_REASON)


@pytest.mark.parametrize(("windows", "heading"), [
    ([], "Host link layer (Linux client to real-server streams)"),
    (["stor1", "stor2"], "Host link layer (Linux client to real-server streams; Windows NIC team on stor1, stor2)"),
])
def test_host_link_section_names_what_it_measures(windows, heading):
    document = build_document(params(windows_storage_hosts=windows))
    assert document["sections"][1]["heading"] == heading


def test_many_layers_get_one_heatmap_and_bars_for_the_worst_layers_only():
    document = build_document(params(tokens_per_expert={"gpu1": moe_result(58, 256, hot_layer=41)}))
    blocks = document["sections"][2]["blocks"]
    kinds = [block["kind"] for block in blocks]
    assert kinds.count("heatmap") == 1 and kinds.count("bars") == 4
    first_bars = next(block for block in blocks if block["kind"] == "bars")
    assert first_bars["labels"][0] == "expert 0" and first_bars["ticks"][0] == "0"
    headings = [block["text"] for block in blocks if block["kind"] == "heading"]
    assert headings[1].startswith("gpu1 - layer 41: max/mean 128.25")
    table = next(block for block in blocks if block["kind"] == "table")
    assert len(table["rows"]) == 58


def test_few_layers_keep_one_bar_chart_each():
    blocks = build_document(params(tokens_per_expert={"gpu1": moe_result(2, 8)}))["sections"][2]["blocks"]
    assert [block["kind"] for block in blocks].count("bars") == 2
    assert "heatmap" not in [block["kind"] for block in blocks]


def test_worst_layers_are_ranked_by_max_over_mean_then_layer_number():
    layers = [{"layer": 0, "max_over_mean": 1.5}, {"layer": 1, "max_over_mean": 3.0},
              {"layer": 2, "max_over_mean": 1.5}]
    assert [layer["layer"] for layer in worst_layers(layers, 2)] == [1, 0]


def test_compute_limit_defaults_to_the_named_default_when_the_result_has_none():
    result = moe_result(1, 4, hot_layer=0)
    del result["max_over_mean_limit"]
    assert build_document(params(tokens_per_expert={"gpu1": result}))["metrics"]["compute"]["limit"] == 2.0
