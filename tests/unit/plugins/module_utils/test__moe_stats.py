"""Tokens-per-expert records: schema checks with exact reasons, malformed JSONL lines counted and skipped, log lines,
windows per layer (streaming == reference), and the grading of balanced and imbalanced layers."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
from moe_stats_reference import reference_aggregate

from ansible_collections.hpc.balance.plugins.module_utils._moe_stats import (
    SCHEMA,
    RecordError,
    aggregate,
    detect_format,
    grade,
    is_consistent,
    parse_jsonl,
    parse_log,
    parse_records,
    validate_record,
)

FIXTURES = Path(__file__).parent / "fixtures"
VALID = {"schema": SCHEMA, "step": 3, "layer": 1, "tokens_per_expert": [3, 1, 0, 4], "top_k": 2, "num_tokens": 4}


def lines(name):
    return (FIXTURES / name).read_text().splitlines(keepends=True)


def changed(**fields):
    record = copy.deepcopy(VALID)
    for key, value in fields.items():
        if value is KeyError:
            del record[key]
        else:
            record[key] = value
    return record


RECORD_ERRORS = [
    ("not_an_object", [1, 2], "not a JSON object but list"),
    ("missing_top_k", changed(top_k=KeyError), "missing required key 'top_k'"),
    ("missing_schema", changed(schema=KeyError), "missing required key 'schema'"),
    ("old_schema", changed(schema="moe_balance.tokens_per_expert/0"),
     "schema is \"moe_balance.tokens_per_expert/0\", expected 'moe_balance.tokens_per_expert/1'"),
    ("negative_step", changed(step=-1), "step is -1: must be an integer >= 0"),
    ("bool_layer", changed(layer=True), "layer is true: must be an integer >= 0"),
    ("float_step", changed(step=3.0), "step is 3.0: must be an integer >= 0"),
    ("top_k_zero", changed(top_k=0), "top_k is 0: must be an integer >= 1"),
    ("top_k_above_experts", changed(top_k=5), "top_k is 5 but there are only 4 experts"),
    ("empty_counts", changed(tokens_per_expert=[]),
     "tokens_per_expert must be a non-empty list of integers, got []"),
    ("counts_not_a_list", changed(tokens_per_expert="3,1"),
     "tokens_per_expert must be a non-empty list of integers, got \"3,1\""),
    ("negative_count", changed(tokens_per_expert=[3, -1, 0, 4]),
     "tokens_per_expert[1] is -1: counts must be integers >= 0"),
    ("float_count", changed(tokens_per_expert=[3, 1.5, 0, 4]),
     "tokens_per_expert[1] is 1.5: counts must be integers >= 0"),
    ("rank_outside_world", changed(rank=2, world_size=2), "rank is 2 but world_size is 2: rank must be < world_size"),
    ("negative_dropped", changed(dropped_tokens=-3), "dropped_tokens is -3: must be an integer >= 0"),
    ("time_as_text", changed(time_unix_s="now"),
     "time_unix_s is \"now\": must be a number >= 0 (seconds since 1970)"),
    ("run_as_number", changed(run=7), "run is 7: must be a string"),
]


@pytest.mark.parametrize(("record", "reason"), [case[1:] for case in RECORD_ERRORS],
                         ids=[case[0] for case in RECORD_ERRORS])
def test_schema_violations_name_the_field(record, reason):
    with pytest.raises(RecordError) as error:
        validate_record(record)
    assert str(error.value) == reason


@pytest.mark.parametrize("record", [
    VALID,
    changed(rank=1, world_size=2, dropped_tokens=0, time_unix_s=1712900000.5, run="r1"),
    changed(extra_field_from_a_newer_writer={"a": 1}),
    changed(num_tokens=0, tokens_per_expert=[0, 0, 0, 0]),
])
def test_valid_records_pass(record):
    assert validate_record(record) is record


@pytest.mark.parametrize(("record", "consistent"), [
    (VALID, True),
    (changed(num_tokens=5), False),
])
def test_consistency_is_counts_equal_tokens_times_top_k(record, consistent):
    assert is_consistent(record) is consistent


def test_jsonl_fixture_counts_and_skips_malformed_lines():
    report = parse_jsonl(lines("moe_tokens_per_expert.jsonl"))
    assert report.valid_records == 8
    assert report.malformed_lines == 4
    assert report.malformed_examples == [
        {"line": 5, "reason": "schema is \"moe_balance.tokens_per_expert/0\", expected "
                              "'moe_balance.tokens_per_expert/1'"},
        {"line": 11, "reason": "not JSON (Expecting value: line 1 column 1 (char 0))"},
        {"line": 12, "reason": "layer 1 has 8 experts in earlier records but 3 here"},
        {"line": 13, "reason": "not JSON (Unterminated string starting at: line 1 column 60 (char 59))"},
    ]


def test_only_the_first_five_examples_are_kept():
    report = parse_jsonl(["{oops\n"] * 9)
    assert (report.malformed_lines, len(report.malformed_examples)) == (9, 5)


WINDOW_CASES = [
    ("last", [
        {"layer": 0, "num_experts": 8, "top_k": 2, "records": 2, "steps": 1, "step_first": 200, "step_last": 200,
         "ranks": [0, 1], "num_tokens": 1024, "dropped_tokens": 0,
         "tokens_per_expert": [254, 258, 257, 255, 255, 257, 256, 256]},
        {"layer": 1, "num_experts": 8, "top_k": 2, "records": 2, "steps": 1, "step_first": 200, "step_last": 200,
         "ranks": [0, 1], "num_tokens": 1024, "dropped_tokens": 24,
         "tokens_per_expert": [780, 320, 240, 220, 200, 160, 128, 0]},
    ]),
    ("all", [
        {"layer": 0, "num_experts": 8, "top_k": 2, "records": 4, "steps": 2, "step_first": 100, "step_last": 200,
         "ranks": [0, 1], "num_tokens": 2048, "dropped_tokens": 0,
         "tokens_per_expert": [511, 513, 513, 512, 510, 513, 510, 514]},
        {"layer": 1, "num_experts": 8, "top_k": 2, "records": 4, "steps": 2, "step_first": 100, "step_last": 200,
         "ranks": [0, 1], "num_tokens": 2048, "dropped_tokens": 24,
         "tokens_per_expert": [1170, 630, 520, 480, 440, 380, 328, 148]},
    ]),
]


@pytest.mark.parametrize(("window", "expected"), WINDOW_CASES, ids=[case[0] for case in WINDOW_CASES])
def test_window_per_layer(window, expected):
    records = parse_jsonl(lines("moe_tokens_per_expert.jsonl")).records
    assert aggregate(records, window) == expected


def test_streaming_window_matches_the_reference_on_shuffled_records():
    rng = random.Random(5)
    records = []
    for step in range(6):
        for layer in range(3):
            for rank in range(4):
                counts = [rng.randrange(0, 50) for _i in range(6)]
                records.append({"schema": SCHEMA, "step": step, "layer": layer, "rank": rank, "top_k": 1,
                                "num_tokens": sum(counts), "tokens_per_expert": counts})
    for _i in range(20):
        rng.shuffle(records)
        for window in ("last", "all"):
            assert aggregate(records, window) == reference_aggregate(records, window)


def test_unknown_window_is_refused():
    with pytest.raises(ValueError, match="window is 'first': use 'last' or 'all'"):
        aggregate([], "first")


def test_grading_of_a_balanced_and_an_imbalanced_layer():
    layers, overall = grade(aggregate(parse_jsonl(lines("moe_tokens_per_expert.jsonl")).records, "last"))
    balanced, skewed = layers
    assert (balanced["balanced"], balanced["cv_grade"], balanced["idle_experts"], balanced["hot_experts"]) == (
        True, "excellent", [], [])
    assert balanced["max_over_mean"] == pytest.approx(258 / 256)
    assert skewed["max_over_mean"] == pytest.approx(780 / 256)
    assert skewed["cv"] == pytest.approx(46812**0.5 / 256)
    assert (skewed["cv_grade"], skewed["idle_experts"], skewed["idle_share"], skewed["hot_experts"]) == (
        "severe", [7], 0.125, [0])
    assert skewed["hot_share"] == pytest.approx(780 / 2048)
    assert skewed["findings"] == [
        "layer 1: the busiest expert got 3.05 x the mean (limit 2.00)",
        "layer 1: CV 0.845 (severe) is at or above the limit 0.50",
        "layer 1: 1 of 8 experts received no tokens",
    ]
    assert overall == {"layers": 2, "worst_layer": 1, "max_over_mean": pytest.approx(780 / 256),
                       "cv": pytest.approx(46812**0.5 / 256), "cv_grade": "severe", "idle_experts": 1,
                       "balanced": False}


def test_looser_limits_accept_the_skewed_layer():
    layers, overall = grade(aggregate(parse_jsonl(lines("moe_tokens_per_expert.jsonl")).records), 3.5, 0.9)
    assert [layer["balanced"] for layer in layers] == [True, True]
    assert layers[1]["hot_experts"] == []  # hot means above the max/mean limit
    assert overall["balanced"] is True


def test_a_layer_that_routed_nothing_cannot_be_judged():
    layers, overall = grade(aggregate([changed(num_tokens=0, tokens_per_expert=[0, 0, 0, 0])]))
    assert (layers[0]["balanced"], layers[0]["findings"]) == (None, ["layer 1 routed no tokens in the window"])
    assert (overall["balanced"], overall["idle_experts"]) == (None, 4)


def test_log_lines_per_layer_with_idle_experts():
    report = parse_log(lines("moe_train.log"), num_experts=4)
    assert [record["tokens_per_expert"] for record in report.records] == [
        [4320, 4100, 3980, 4000], [12000, 2100, 2300, 0]]
    assert [record["layer"] for record in report.records] == [0, 1]
    assert (report.malformed_lines, report.ignored_lines) == (1, 2)
    assert report.malformed_examples == [{"line": 9, "reason": "mentions an expert receiving tokens but does not "
                                                               "read 'Expert N received M tokens': '2024-04-12 "
                                                               "10:00:02 WARN layer 1: Expert 3 received ??? tokens'"}]


@pytest.mark.parametrize(("text", "layer", "tokens"), [
    ("Expert 3 received 4320 tokens", 0, [0, 0, 0, 4320]),
    ("[rank0] EXPERT 1 received 7 token", 0, [0, 7]),
    ("moe layer=5 expert 0 received 12 tokens", 5, [12]),
])
def test_log_line_shapes(text, layer, tokens):
    report = parse_log([text])
    assert [(record["layer"], record["tokens_per_expert"]) for record in report.records] == [(layer, tokens)]


def test_log_expert_outside_num_experts_is_malformed():
    report = parse_log(["Expert 9 received 1 tokens"], num_experts=8)
    assert report.malformed_examples == [{"line": 1, "reason": "expert 9 is out of range for num_experts=8"}]


@pytest.mark.parametrize(("head", "kind"), [
    (["\n", '{"schema": "x"}\n'], "jsonl"),
    (["2024-04-12 INFO start\n"], "log"),
    ([], "jsonl"),
])
def test_format_detection(head, kind):
    assert detect_format(head) == kind


def test_smoke_records_are_checked_like_lines():
    report = parse_records([VALID, changed(step=-1)])
    assert report.valid_records == 1
    assert report.malformed_examples == [{"line": 2, "reason": "step is -1: must be an integer >= 0"}]
