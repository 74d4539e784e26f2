"""``python -m moe_balance smoke|report``: JSON shape, exit codes, records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from moe_balance import cli, smoke
from moe_balance.metrics import SCHEMA, read_records, validate_record

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One real ``python -m moe_balance smoke --json --records-out`` in a fresh interpreter."""
    out = tmp_path_factory.mktemp("smoke") / "records.jsonl"
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "moe_balance", "smoke", "--json", "--records-out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return done, out


def test_smoke_prints_one_json_object_and_exits_zero(smoke_run):
    done, _records_out = smoke_run
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # the whole stdout is one object
    assert set(result) == {"ok", "version", "device", "checks", "timings_s", "records", "devices", "runtime"}
    assert result["ok"] is True and result["version"] == "0.1.0"
    names = [c["name"] for c in result["checks"]]
    assert names == [
        "known_answers",
        "fused_vs_reference",
        "fractions_sum_to_one",
        "analytic_gradients",
        "bias_balancing",
    ]
    assert all(set(c) == {"name", "ok", "detail"} and c["ok"] for c in result["checks"])
    assert result["timings_s"]["total"] < 60


def test_smoke_bias_balancing_goes_from_above_2_to_below_1_2(smoke_run):
    result = json.loads(smoke_run[0].stdout)
    detail = next(c for c in result["checks"] if c["name"] == "bias_balancing")["detail"]
    assert min(detail["max_over_mean_before"]) > 2.0 and max(detail["max_over_mean_after"]) < 1.2


def test_smoke_records_follow_the_schema_one_per_layer(smoke_run):
    done, path = smoke_run
    records = json.loads(done.stdout)["records"]
    assert [r["layer"] for r in records] == [0, 1, 2, 3]
    for record in records:
        assert validate_record(record)["schema"] == SCHEMA
        assert sum(record["tokens_per_expert"]) == record["num_tokens"] * record["top_k"]
    from_file, skipped = read_records(path)
    assert from_file == records and skipped == 0


def test_smoke_exits_non_zero_when_a_check_fails(monkeypatch, capsys):
    def broken(*_args):
        raise RuntimeError("kernel disagrees")

    monkeypatch.setattr(smoke, "check_fractions", broken)
    assert cli.main(["smoke", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    failed = [c for c in result["checks"] if not c["ok"]]
    assert result["ok"] is False and failed == [
        {"name": "fractions_sum_to_one", "ok": False, "detail": "RuntimeError: kernel disagrees"}
    ]


def test_smoke_text_output(capsys):
    assert cli.main(["smoke"]) == 0
    out = capsys.readouterr().out
    assert "known_answers" in out and out.strip().endswith("ok")


def test_report_summarises_the_latest_window_per_layer(tmp_path, capsys):
    from moe_balance.metrics import make_record, write_records

    path = tmp_path / "r.jsonl"
    write_records(
        path, [make_record(step=s, layer=0, tokens_per_expert=[10, s], top_k=1, num_tokens=10 + s) for s in (1, 10)]
    )
    path.open("a").write("garbage\n")
    assert cli.main(["report", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 2 and summary["skipped_lines"] == 1
    assert summary["layers"][0]["step"] == 10 and summary["layers"][0]["max_over_mean"] == 1.0


def test_report_on_a_missing_file(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "none.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
