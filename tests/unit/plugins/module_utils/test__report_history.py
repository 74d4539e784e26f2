"""The audit history: report-NNNNNN.json files oldest first, pruning to a count, the trend section over the kept
runs, and plain lines for what changed since the previous run."""

from __future__ import annotations

import json

from ansible_collections.hpc.balance.plugins.module_utils._report_history import (
    changes,
    history_files,
    history_section,
    next_run,
    read_history,
    to_prune,
)


def run(number, compute, verdict="imbalanced"):
    return {"run": number, "verdicts": {"network": "skipped", "host_link": "balanced", "compute": verdict},
            "metrics": {"network": {"name": "worst deviation from the weights", "unit": "%", "value": None},
                        "host_link": {"name": "share of the expected bandwidth reached", "unit": "%", "value": 96.0},
                        "compute": {"name": "worst layer max/mean", "unit": "x mean", "value": compute,
                                    "limit": 2.0}}}


def test_files_are_read_oldest_first_and_strangers_are_left_out(tmp_path):
    for number in (2, 10, 1):
        (tmp_path / f"report-{number:06d}.json").write_text(json.dumps(run(number, 1.0 + number)))
    (tmp_path / "report-000011.json").write_text("{not json")
    (tmp_path / "notes.txt").write_text("x")
    documents, warnings = read_history(str(tmp_path))
    assert [document["run"] for document in documents] == [1, 2, 10]
    assert len(warnings) == 1 and "report-000011.json was left out" in warnings[0]
    assert next_run(str(tmp_path)) == 12


def test_pruning_keeps_the_newest_runs(tmp_path):
    for number in range(1, 6):
        (tmp_path / f"report-{number:06d}.json").write_text("{}")
    assert [path.rsplit("/", 1)[1] for path in to_prune(str(tmp_path), keep=3)] == [
        "report-000001.json", "report-000002.json", "report-000003.json"]
    assert to_prune(str(tmp_path / "absent"), keep=3) == [] and history_files(str(tmp_path / "absent")) == []


def test_changes_name_the_verdict_and_the_number_that_moved():
    assert changes(run(1, 2.4), run(2, 1.02, "balanced")) == [
        "compute: verdict imbalanced -> balanced; worst layer max/mean 2.40 -> 1.02 (-1.38)"]
    assert changes(run(1, 1.02, "balanced"), run(2, 1.02, "balanced")) == ["nothing changed since the previous run"]
    assert changes(None, run(1, 2.4)) == ["first run in the history: nothing to compare with"]


def test_three_runs_make_one_trend_per_measured_layer():
    section = history_section([run(1, 2.4), run(2, 1.6)], run(3, 1.02, "balanced"))
    trends = [block for block in section["blocks"] if block["kind"] == "trend"]
    assert [block["title"] for block in trends] == ["Host link: share of the expected bandwidth reached",
                                                    "Compute: worst layer max/mean"]
    assert trends[1]["values"] == [2.4, 1.6, 1.02] and trends[1]["labels"] == ["#1", "#2", "#3"]
    assert section["heading"] == "Trend over the last 3 runs"
    table = next(block for block in section["blocks"] if block["kind"] == "table")
    assert table["rows"][1] == ["Compute", "worst layer max/mean", 3, "1.02", "2.40", "1.02"]
