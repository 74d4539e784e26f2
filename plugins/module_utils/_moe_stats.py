# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tokens-per-expert records: the moe_balance JSONL schema, ``Expert 3 received 4320 tokens`` log lines, per-layer
grading.

Why here and not in moe_balance: targets are audited without torch, and plugins never import moe_balance, so the
reader of the schema lives on its own. docs/moe-stats-schema.md is the contract both sides follow. Bad lines are
counted and skipped, never fatal: one torn line at the end of a file still being written must not hide the rest.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from ansible_collections.hpc.balance.plugins.module_utils._spread import summarize

SCHEMA = "moe_balance.tokens_per_expert/1"
REQUIRED_KEYS = ("schema", "step", "layer", "tokens_per_expert", "top_k", "num_tokens")
MAX_EXAMPLES = 5
DEFAULT_MAX_OVER_MEAN_LIMIT = 2.0
DEFAULT_CV_LIMIT = 0.5

LOG_LINE = re.compile(r"\bexpert\s+(\d+)\s+received\s+(\d+)\s+tokens?\b", re.IGNORECASE)
LOG_LAYER = re.compile(r"\blayer[\s=:#]*(\d+)", re.IGNORECASE)
LOG_MENTION = re.compile(r"\bexpert\b.*\breceived\b", re.IGNORECASE)


class RecordError(ValueError):
    """One record that does not follow the schema; the message says which field and why."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require_int(record: dict[str, Any], key: str, minimum: int) -> int:
    value = record[key]
    if not _is_int(value) or value < minimum:
        raise RecordError(f"{key} is {json.dumps(value)}: must be an integer >= {minimum}")
    return value


def validate_record(record: Any) -> dict[str, Any]:
    """Return the record if it follows the schema, else raise RecordError naming the first problem."""
    if not isinstance(record, dict):
        raise RecordError(f"not a JSON object but {type(record).__name__}")
    for key in REQUIRED_KEYS:
        if key not in record:
            raise RecordError(f"missing required key {key!r}")
    if record["schema"] != SCHEMA:
        raise RecordError(f"schema is {json.dumps(record['schema'])}, expected {SCHEMA!r}")
    _require_int(record, "step", 0)
    _require_int(record, "layer", 0)
    _require_int(record, "top_k", 1)
    _require_int(record, "num_tokens", 0)
    counts = record["tokens_per_expert"]
    if not isinstance(counts, list) or not counts:
        raise RecordError(f"tokens_per_expert must be a non-empty list of integers, got {json.dumps(counts)[:60]}")
    for index, count in enumerate(counts):
        if not _is_int(count) or count < 0:
            raise RecordError(f"tokens_per_expert[{index}] is {json.dumps(count)}: counts must be integers >= 0")
    if record["top_k"] > len(counts):
        raise RecordError(f"top_k is {record['top_k']} but there are only {len(counts)} experts")
    if "rank" in record:
        _require_int(record, "rank", 0)
    if "world_size" in record:
        _require_int(record, "world_size", 1)
        if "rank" in record and record["rank"] >= record["world_size"]:
            raise RecordError(
                f"rank is {record['rank']} but world_size is {record['world_size']}: rank must be < world_size"
            )
    if "dropped_tokens" in record:
        _require_int(record, "dropped_tokens", 0)
    if "time_unix_s" in record:
        value = record["time_unix_s"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise RecordError(f"time_unix_s is {json.dumps(value)}: must be a number >= 0 (seconds since 1970)")
    if "run" in record and not isinstance(record["run"], str):
        raise RecordError(f"run is {json.dumps(record['run'])}: must be a string")
    return record


def is_consistent(record: dict[str, Any]) -> bool:
    """True when the counts add up to num_tokens x top_k (every token routed to top_k experts, counted pre-drop)."""
    return sum(record["tokens_per_expert"]) == record["num_tokens"] * record["top_k"]


class ParseReport:
    """Where valid records go (a list, or any object with ``add(record)``) plus the count and first few examples of
    the lines that were skipped."""

    def __init__(self, sink: Any = None) -> None:
        self.records: list[dict[str, Any]] | None = [] if sink is None else None
        self._sink = sink
        self.valid_records = 0
        self.malformed_lines = 0
        self.malformed_examples: list[dict[str, Any]] = []
        self.ignored_lines = 0

    def skip(self, line_number: int, reason: str) -> None:
        self.malformed_lines += 1
        if len(self.malformed_examples) < MAX_EXAMPLES:
            self.malformed_examples.append({"line": line_number, "reason": reason})

    def keep(self, record: dict[str, Any]) -> None:
        self.valid_records += 1
        if self._sink is not None:
            self._sink.add(record)
        elif self.records is not None:
            self.records.append(record)


def _accept(report: ParseReport, experts_by_layer: dict[int, int], record: Any, line_number: int) -> None:
    try:
        validate_record(record)
    except RecordError as exc:
        report.skip(line_number, str(exc))
        return
    known = experts_by_layer.setdefault(record["layer"], len(record["tokens_per_expert"]))
    if known != len(record["tokens_per_expert"]):
        here = len(record["tokens_per_expert"])
        report.skip(line_number, f"layer {record['layer']} has {known} experts in earlier records but {here} here")
        return
    report.keep(record)


def parse_jsonl(lines: Iterable[str], sink: Any = None) -> ParseReport:
    """JSONL text lines -> ParseReport. Blank lines are ignored; every other bad line is counted and skipped."""
    report = ParseReport(sink)
    experts_by_layer: dict[int, int] = {}
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            report.skip(line_number, f"not JSON ({exc})")
            continue
        _accept(report, experts_by_layer, record, line_number)
    return report


def parse_records(records: Iterable[Any], sink: Any = None) -> ParseReport:
    """Already-decoded records (the smoke test's ``records``) -> ParseReport; 'line' numbers are 1-based indexes."""
    report = ParseReport(sink)
    experts_by_layer: dict[int, int] = {}
    for index, record in enumerate(records, start=1):
        _accept(report, experts_by_layer, record, index)
    return report


def parse_log(lines: Iterable[str], num_experts: int | None = None, default_layer: int = 0, sink: Any = None
              ) -> ParseReport:
    """``Expert 3 received 4320 tokens`` lines (optionally with ``layer 2`` on the line) -> ParseReport.

    Counts for one (layer, expert) add up; experts never mentioned count as idle up to ``num_experts``. The
    records produced carry step 0 and top_k 1 (a log has no windows), so the grading treats the log as one window.
    Lines mentioning an expert receiving something that cannot be read are malformed; other lines are ignored.
    """
    report = ParseReport(sink)
    counts_by_layer: dict[int, dict[int, int]] = {}
    for line_number, line in enumerate(lines, start=1):
        match = LOG_LINE.search(line)
        if not match:
            if LOG_MENTION.search(line):
                report.skip(line_number, "mentions an expert receiving tokens but does not read "
                                         f"'Expert N received M tokens': {line.strip()[:80]!r}")
            elif line.strip():
                report.ignored_lines += 1
            continue
        layer_match = LOG_LAYER.search(line)
        layer = int(layer_match.group(1)) if layer_match else default_layer
        expert = int(match.group(1))
        if num_experts is not None and expert >= num_experts:
            report.skip(line_number, f"expert {expert} is out of range for num_experts={num_experts}")
            continue
        layer_counts = counts_by_layer.setdefault(layer, {})
        layer_counts[expert] = layer_counts.get(expert, 0) + int(match.group(2))
    for layer in sorted(counts_by_layer):
        layer_counts = counts_by_layer[layer]
        size = num_experts if num_experts is not None else max(layer_counts) + 1
        tokens = [layer_counts.get(expert, 0) for expert in range(size)]
        report.keep({"schema": SCHEMA, "step": 0, "layer": layer, "tokens_per_expert": tokens, "top_k": 1,
                     "num_tokens": sum(tokens)})
    return report


def detect_format(lines: Iterable[str]) -> str:
    """'jsonl' when the first non-blank line starts with '{', else 'log'."""
    for line in lines:
        if line.strip():
            return "jsonl" if line.lstrip().startswith("{") else "log"
    return "jsonl"


class LayerAccumulator:
    """Per layer, the sum of the counts of the selected records: the latest step (``last``) or every step (``all``).

    Streaming, so a long training log needs memory for one window per layer, not for the whole file. Summing over
    ranks is right both for per-rank local counts (gives the global count) and for records that already hold
    all-reduced counts (every expert scaled by world_size, so every ratio is unchanged).
    """

    def __init__(self, window: str = "last") -> None:
        if window not in ("last", "all"):
            raise ValueError(f"window is {window!r}: use 'last' or 'all'")
        self.window = window
        self._layers: dict[int, dict[str, Any]] = {}

    def add(self, record: dict[str, Any]) -> None:
        state = self._layers.get(record["layer"])
        step = record["step"]
        if state is None or (self.window == "last" and step > state["step_last"]):
            state = {"tokens_per_expert": [0] * len(record["tokens_per_expert"]), "records": 0, "steps": set(),
                     "step_first": step, "step_last": step, "ranks": set(), "num_tokens": 0, "dropped_tokens": 0,
                     "top_k": record["top_k"]}
            self._layers[record["layer"]] = state
        elif self.window == "last" and step < state["step_last"]:
            return
        tokens = state["tokens_per_expert"]
        counts = record["tokens_per_expert"]
        for expert in range(len(tokens)):
            tokens[expert] += counts[expert]
        state["records"] += 1
        state["steps"].add(step)
        state["step_first"] = min(state["step_first"], step)
        state["step_last"] = max(state["step_last"], step)
        if "rank" in record:
            state["ranks"].add(record["rank"])
        state["num_tokens"] += record["num_tokens"]
        state["dropped_tokens"] += record.get("dropped_tokens", 0)
        state["top_k"] = record["top_k"]

    def layers(self) -> list[dict[str, Any]]:
        result = []
        for layer in sorted(self._layers):
            state = self._layers[layer]
            result.append({
                "layer": layer,
                "num_experts": len(state["tokens_per_expert"]),
                "top_k": state["top_k"],
                "records": state["records"],
                "steps": len(state["steps"]),
                "step_first": state["step_first"],
                "step_last": state["step_last"],
                "ranks": sorted(state["ranks"]),
                "num_tokens": state["num_tokens"],
                "dropped_tokens": state["dropped_tokens"],
                "tokens_per_expert": list(state["tokens_per_expert"]),
            })
        return result


def aggregate(records: Iterable[dict[str, Any]], window: str = "last") -> list[dict[str, Any]]:
    """Batch form of LayerAccumulator."""
    accumulator = LayerAccumulator(window)
    for record in records:
        accumulator.add(record)
    return accumulator.layers()


def grade(layers: Iterable[dict[str, Any]], max_over_mean_limit: float = DEFAULT_MAX_OVER_MEAN_LIMIT,
          cv_limit: float = DEFAULT_CV_LIMIT) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Add the balance statistics and a verdict to each aggregated layer; return (layers, overall).

    A layer is balanced when max/mean <= max_over_mean_limit and CV < cv_limit. Hot experts carry more than
    max_over_mean_limit x the mean, so they are exactly the experts that break the max/mean limit.
    """
    graded = []
    for layer in layers:
        stats = summarize(layer["tokens_per_expert"], hot_factor=max_over_mean_limit)
        findings = []
        number = layer["layer"]
        ratio = stats["max_over_mean"]
        cv = stats["cv"]
        if ratio is None:
            balanced = None
            findings.append(f"layer {number} routed no tokens in the window")
        else:
            balanced = ratio <= max_over_mean_limit and cv < cv_limit
            if ratio > max_over_mean_limit:
                findings.append(
                    f"layer {number}: the busiest expert got {ratio:.2f} x the mean (limit {max_over_mean_limit:.2f})"
                )
            if cv >= cv_limit:
                findings.append(
                    f"layer {number}: CV {cv:.3f} ({stats['cv_grade']}) is at or above the limit {cv_limit:.2f}"
                )
            if stats["idle_count"]:
                findings.append(f"layer {number}: {stats['idle_count']} of {stats['count']} experts received no tokens")
        entry = dict(layer)
        entry.update({
            "total_tokens": stats["total"],
            "mean_tokens_per_expert": stats["mean"],
            "max_tokens_per_expert": stats["max"],
            "max_over_mean": ratio,
            "min_over_max": stats["min_over_max"],
            "cv": cv,
            "cv_grade": stats["cv_grade"],
            "idle_experts": stats["idle_members"],
            "idle_share": stats["idle_share"],
            "hot_experts": stats["hot_members"],
            "hot_share": stats["hot_share"],
            "balanced": balanced,
            "findings": findings,
        })
        graded.append(entry)
    return graded, overall(graded)


def overall(graded: list[dict[str, Any]]) -> dict[str, Any]:
    """The worst layer decides: worst max/mean, worst CV (with its grade), all idle experts, all verdicts."""
    judged = [layer for layer in graded if layer["balanced"] is not None]
    if not judged:
        return {"layers": len(graded), "worst_layer": None, "max_over_mean": None, "cv": None, "cv_grade": None,
                "idle_experts": sum(len(layer["idle_experts"]) for layer in graded), "balanced": None}
    worst = max(judged, key=lambda layer: layer["max_over_mean"])
    worst_cv = max(judged, key=lambda layer: layer["cv"])
    return {
        "layers": len(graded),
        "worst_layer": worst["layer"],
        "max_over_mean": worst["max_over_mean"],
        "cv": worst_cv["cv"],
        "cv_grade": worst_cv["cv_grade"],
        "idle_experts": sum(len(layer["idle_experts"]) for layer in graded),
        "balanced": all(layer["balanced"] for layer in judged),
    }
