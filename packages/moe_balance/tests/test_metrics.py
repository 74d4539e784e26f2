"""Tokens-per-expert statistics and the JSONL record schema."""

from __future__ import annotations

import json
import math

import pytest
import torch

from moe_balance import SCHEMA, balance_stats, balance_stats_by_layer, grade_cv, make_record
from moe_balance.metrics import read_records, validate_record, write_records


def test_schema_string():
    assert SCHEMA == "moe_balance.tokens_per_expert/1"


def test_perfect_balance():
    stats = balance_stats(torch.tensor([5, 5, 5, 5]))
    assert stats["max_over_mean"] == 1.0 and stats["min_over_max"] == 1.0 and stats["cv"] == 0.0
    assert stats["grade"] == "excellent" and stats["idle_share"] == 0.0 and stats["hot_share"] == 0.0
    assert stats["entropy_normalized"] == pytest.approx(1.0)


def test_skewed_counts():
    stats = balance_stats([12, 4, 0, 0])  # mean 4
    assert stats["max_over_mean"] == 3.0 and stats["min_over_max"] == 0.0
    assert stats["cv"] == pytest.approx(math.sqrt((64 + 0 + 16 + 16) / 4) / 4)
    assert stats["grade"] == "severe" and stats["imbalanced"]
    assert stats["idle_share"] == 0.5 and stats["idle_experts"] == 2
    assert stats["hot_experts"] == 1 and stats["hot_share"] == 0.75  # 12 > 2 * mean holds 12 of 16


@pytest.mark.parametrize(
    ("cv", "grade"),
    [
        (0.0, "excellent"),
        (0.0999, "excellent"),
        (0.1, "good"),
        (0.2999, "good"),
        (0.3, "fair"),
        (0.4999, "fair"),
        (0.5, "severe"),
        (3.0, "severe"),
    ],
)
def test_cv_grade_boundaries(cv, grade):
    assert grade_cv(cv) == grade


def test_stats_accept_tensors_lists_and_numpy_alike():
    import numpy as np

    a = balance_stats(torch.tensor([1, 2, 3]))
    assert a == balance_stats([1, 2, 3]) == balance_stats(np.array([1, 2, 3]))


def test_zero_total_is_refused():
    with pytest.raises(ValueError, match="sums to 0 over 3 experts"):
        balance_stats([0, 0, 0])


def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match="non-negative finite counts"):
        balance_stats([1, -1])


def test_per_layer_and_overall():
    summary = balance_stats_by_layer([[4, 4], [6, 2]])
    assert summary["overall"]["max_over_mean"] == pytest.approx(10 / 8)
    assert summary["worst_layer"] == 1 and summary["worst_max_over_mean"] == 1.5
    assert summary["mean_max_over_mean"] == pytest.approx(1.25)


def test_make_record_has_exactly_the_schema_keys():
    record = make_record(step=3, layer=1, tokens_per_expert=torch.tensor([3, 5]), top_k=2, num_tokens=4, rank=0)
    assert record == {
        "schema": SCHEMA,
        "step": 3,
        "layer": 1,
        "tokens_per_expert": [3, 5],
        "top_k": 2,
        "num_tokens": 4,
        "rank": 0,
    }
    # bool is a subclass of int and must not pass.
    # pylint: disable-next=unidiomatic-typecheck
    assert all(type(c) is int for c in record["tokens_per_expert"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": "moe_balance.tokens_per_expert/2"}, "'schema' must be"),
        ({"step": -1}, "'step' must be an int >= 0"),
        ({"layer": 1.0}, "'layer' must be an int"),
        ({"top_k": 0}, "'top_k' must be an int >= 1"),
        ({"num_tokens": True}, "'num_tokens' must be an int"),
        ({"tokens_per_expert": [1, -2]}, "non-empty list of non-negative ints"),
        ({"tokens_per_expert": []}, "non-empty list"),
        ({"tokens_per_expert": [1.5]}, "non-negative ints"),
        ({"rank": "0"}, "'rank' must be int"),
        ({"time_unix_s": "now"}, "'time_unix_s' must be float"),
        ({"run": 5}, "'run' must be str"),
    ],
)
def test_invalid_records_name_the_key(change, message):
    record = {"schema": SCHEMA, "step": 0, "layer": 0, "tokens_per_expert": [1, 1], "top_k": 1, "num_tokens": 2}
    record.update(change)
    with pytest.raises(ValueError, match=message):
        validate_record(record)


def test_missing_keys_are_named():
    with pytest.raises(ValueError, match=r"missing required key\(s\) \['top_k', 'num_tokens'\]"):
        validate_record({"schema": SCHEMA, "step": 0, "layer": 0, "tokens_per_expert": [1]})


def test_unknown_optional_key_is_refused():
    with pytest.raises(ValueError, match="unknown record key"):
        make_record(step=0, layer=0, tokens_per_expert=[1], top_k=1, num_tokens=1, host="a")


def test_time_may_be_an_int():
    record = {
        "schema": SCHEMA,
        "step": 0,
        "layer": 0,
        "tokens_per_expert": [1],
        "top_k": 1,
        "num_tokens": 1,
        "time_unix_s": 1700000000,
    }
    assert validate_record(record) is record
    assert record["time_unix_s"] == 1700000000


def test_jsonl_round_trip_skips_and_counts_bad_lines(tmp_path):
    path = tmp_path / "sub" / "stats.jsonl"
    records = [make_record(step=s, layer=0, tokens_per_expert=[s, 1], top_k=1, num_tokens=s + 1) for s in range(3)]
    assert write_records(path, records[:2]) == 2
    write_records(path, records[2:])
    with open(path, "a") as handle:
        handle.write('not json\n{"schema": "other"}\n\n')
    read, skipped = read_records(path)
    assert read == records and skipped == 2
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["schema"] == SCHEMA
