"""The writer's and the reader's checks of a ``moe_balance.tokens_per_expert/1`` record refuse the same records.

Two validators exist because plugins never import moe_balance and moe_balance never imports ansible
(docs/moe-stats-schema.md is the contract): ``moe_balance.metrics.validate_record`` guards what training writes,
``_moe_stats.validate_record`` what the tokens_per_expert module reads. Their messages differ; what they accept must
not, or a job writes lines the audit skips. The same records go to both, field by field of the schema's table.
metrics.py is loaded from its file (it needs neither torch nor the installed package).
"""

from __future__ import annotations

import copy
import importlib.util
import math
import pathlib

import pytest

from ansible_collections.hpc.balance.plugins.module_utils import _moe_stats

ROOT = pathlib.Path(__file__).resolve().parents[4]
METRICS_PATH = ROOT / "packages" / "moe_balance" / "src" / "moe_balance" / "metrics.py"


def load_metrics():
    spec = importlib.util.spec_from_file_location("moe_balance_metrics_under_test", METRICS_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


metrics = load_metrics()

# The example record of docs/moe-stats-schema.md.
VALID = {"schema": "moe_balance.tokens_per_expert/1", "step": 1200, "layer": 3,
         "tokens_per_expert": [2048, 2100, 1990, 2010, 2050, 1980, 2150, 2056], "top_k": 2, "num_tokens": 8192,
         "rank": 0, "world_size": 8, "dropped_tokens": 0, "time_unix_s": 1712916000.5, "run": "pretrain-0412"}


class _Missing:
    """The field left out of the record; a stable repr, so the test ids are the same in every pytest-xdist worker."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()
# (field, value) per row of the schema's table: values at and past each bound, wrong types, booleans as ints.
CASES = [
    ("schema", "moe_balance.tokens_per_expert/2"), ("schema", None), ("schema", MISSING),
    ("step", -1), ("step", 0), ("step", 1.0), ("step", True), ("step", "1"), ("step", MISSING),
    ("layer", -1), ("layer", 0), ("layer", 2.5), ("layer", False), ("layer", MISSING),
    ("tokens_per_expert", []), ("tokens_per_expert", [0]), ("tokens_per_expert", [1, -1]),
    ("tokens_per_expert", [1, 2.0]), ("tokens_per_expert", [1, True]), ("tokens_per_expert", "1,2"),
    ("tokens_per_expert", {"0": 1}), ("tokens_per_expert", MISSING),
    ("top_k", 0), ("top_k", 1), ("top_k", 8), ("top_k", 9), ("top_k", 2.0), ("top_k", True), ("top_k", MISSING),
    ("num_tokens", -1), ("num_tokens", 0), ("num_tokens", 8192.0), ("num_tokens", MISSING),
    ("rank", -1), ("rank", 7), ("rank", 8), ("rank", 1.0), ("rank", True), ("rank", MISSING),
    ("world_size", 0), ("world_size", 1), ("world_size", 2.0), ("world_size", True), ("world_size", MISSING),
    ("dropped_tokens", -1), ("dropped_tokens", 0), ("dropped_tokens", 0.5), ("dropped_tokens", MISSING),
    ("time_unix_s", -0.5), ("time_unix_s", 0), ("time_unix_s", 1712916000), ("time_unix_s", "now"),
    ("time_unix_s", True), ("time_unix_s", MISSING),
    ("run", 7), ("run", ""), ("run", None), ("run", MISSING),
    ("comment", "a key the schema does not name"),
]


def with_field(field, value):
    record = copy.deepcopy(VALID)
    if value is MISSING:
        record.pop(field, None)
    else:
        record[field] = value
    if field == "world_size" and value == 1:
        record["rank"] = 0
    return record


def refuses(validate, record):
    try:
        validate(copy.deepcopy(record))
    except ValueError:
        return True
    return False


def test_the_example_record_passes_both():
    assert not refuses(metrics.validate_record, VALID)
    assert not refuses(_moe_stats.validate_record, VALID)


@pytest.mark.parametrize(("field", "value"), CASES, ids=[f"{field}={value!r}" for field, value in CASES])
def test_writer_and_reader_refuse_the_same_records(field, value):
    record = with_field(field, value)
    writer = refuses(metrics.validate_record, record)
    reader = refuses(_moe_stats.validate_record, record)
    assert writer == reader, f"{field}={value!r}: the writer {'refuses' if writer else 'accepts'} it, " \
                             f"the reader {'refuses' if reader else 'accepts'} it"


def test_not_json_objects_are_refused_by_both():
    for record in ([], "record", 3, None):
        assert refuses(metrics.validate_record, record) and refuses(_moe_stats.validate_record, record)


def test_the_cases_cover_every_field_of_the_schema():
    fields = {field for field, _value in CASES}
    assert set(metrics.REQUIRED_KEYS) | set(metrics.OPTIONAL_KEYS) <= fields
    assert metrics.REQUIRED_KEYS == _moe_stats.REQUIRED_KEYS and metrics.SCHEMA == _moe_stats.SCHEMA


def test_an_infinite_time_is_agreed_on():
    record = with_field("time_unix_s", math.inf)
    assert refuses(metrics.validate_record, record) == refuses(_moe_stats.validate_record, record)
