# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's history: earlier report.json documents, kept as ``report-NNNNNN.json`` (run number, oldest first).

Each document carries one number per layer (``metrics``: the worst deviation from the weights, the share of the
expected bandwidth reached, the worst layer's max/mean). The trend is that number over the kept runs; "what
changed" compares this run with the one before. The event source in extensions/eda reads the same files.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

HISTORY_NAME = re.compile(r"^report-(\d{6,})\.json$")
LAYER_NAMES = (("network", "Network"), ("host_link", "Host link"), ("compute", "Compute"))


def history_files(directory: str) -> list[tuple[int, str]]:
    """(run number, path) of every kept report, oldest first; an absent directory holds none."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = HISTORY_NAME.match(name)
        if match:
            found.append((int(match.group(1)), os.path.join(directory, name)))
    return sorted(found)


def read_history(directory: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(documents oldest first, warnings for files that are not report JSON and were left out)."""
    documents, warnings = [], []
    for run, path in history_files(directory):
        try:
            with open(path) as handle:
                document = json.load(handle)
        except (OSError, ValueError) as exc:
            warnings.append(f"history file {path} was left out: {exc}; delete it if it is not a report")
            continue
        if not isinstance(document, dict) or not isinstance(document.get("metrics"), dict):
            warnings.append(f"history file {path} was left out: it has no 'metrics'; delete it if it is not a report")
            continue
        document.setdefault("run", run)
        documents.append(document)
    return documents, warnings


def next_run(directory: str) -> int:
    files = history_files(directory)
    return files[-1][0] + 1 if files else 1


def history_path(directory: str, run: int) -> str:
    return os.path.join(directory, f"report-{run:06d}.json")


def to_prune(directory: str, keep: int, adding: int = 1) -> list[str]:
    """Paths to delete so that ``keep`` reports remain once ``adding`` new ones are written (oldest go first)."""
    files = history_files(directory)
    excess = len(files) + adding - keep
    return [path for _run, path in files[:max(excess, 0)]]


def _value(document: dict[str, Any], layer: str) -> float | None:
    metric = (document.get("metrics") or {}).get(layer) or {}
    return metric.get("value")


def _format(metric: dict[str, Any], value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric.get("unit") == "%":
        return f"{value:.1f} %"
    return f"{value:.2f}"


def changes(previous: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """Plain lines: verdicts and per-layer numbers that differ from the previous run."""
    if previous is None:
        return ["first run in the history: nothing to compare with"]
    lines = []
    for layer, _title in LAYER_NAMES:
        before = (previous.get("verdicts") or {}).get(layer)
        after = (current.get("verdicts") or {}).get(layer)
        metric = (current.get("metrics") or {}).get(layer) or {}
        old, new = _value(previous, layer), _value(current, layer)
        parts = []
        if before != after:
            parts.append(f"verdict {before} -> {after}")
        if old != new and (old is None or new is None or abs(new - old) >= 0.005 * max(abs(old), 1e-12)):
            delta = "" if old is None or new is None else f" ({new - old:+.2f})"
            parts.append(f"{metric.get('name', 'value')} {_format(metric, old)} -> {_format(metric, new)}{delta}")
        if parts:
            lines.append(f"{layer}: " + "; ".join(parts))
    return lines or ["nothing changed since the previous run"]


def history_section(history: list[dict[str, Any]], document: dict[str, Any]) -> dict[str, Any]:
    """The report section with one trend chart per layer over the kept runs plus this one, and what changed."""
    runs = list(history) + [document]
    labels = [f"#{run.get('run')}" if run.get("run") is not None else f"#{index + 1}" for index, run in enumerate(runs)]
    blocks: list[dict[str, Any]] = []
    rows = []
    for layer, title in LAYER_NAMES:
        metric = (document.get("metrics") or {}).get(layer) or {}
        values = [_value(run, layer) for run in runs]
        known = [value for value in values if value is not None]
        if not known:
            continue
        unit = "" if metric.get("unit") != "%" else "%"
        blocks.append({"kind": "trend", "title": f"{title}: {metric.get('name')}", "values": values, "labels": labels,
                       "unit": unit, "limit": metric.get("limit")})
        rows.append([title, metric.get("name"), len(known), _format(metric, min(known)), _format(metric, max(known)),
                     _format(metric, known[-1])])
    if rows:
        blocks.append({"kind": "table", "header": ["layer", "measure", "runs", "lowest", "highest", "this run"],
                       "rows": rows})
    else:
        blocks.append({"kind": "note", "text": "no layer has a number to follow yet"})
    found = changes(history[-1] if history else None, document)
    blocks.append({"kind": "findings", "title": "Since the previous run", "items": found})
    return {"layer": "history", "heading": f"Trend over the last {len(runs)} runs", "verdict": None, "reason": None,
            "blocks": blocks, "changes": found}
