"""Print two audit reports' verdicts side by side and fail where a layer's verdict differs.

The same audit run by the execution environment and by the checkout's own controller must judge the lab the same
way. Verdicts (audit_report's ``verdicts``: balanced, imbalanced, skipped, ...) are compared; the numbers behind
them (``metrics``, for example the streams' share of the single-stream ceiling) are measured anew by each run, so
they are shown, not compared.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys


def metric_text(report: dict, layer: str) -> str:
    metric = (report.get("metrics") or {}).get(layer)
    if not metric or metric.get("value") is None:
        return ""
    value = metric["value"]
    shown = f"{value:.3g}" if isinstance(value, float) else str(value)
    return f"{metric['name']} {shown} {metric.get('unit') or ''}".strip()


def compare(left: dict, right: dict) -> tuple[list[tuple[str, str, str, str, str]], list[str]]:
    """Rows (layer, left verdict, right verdict, left metric, right metric) and the layers whose verdicts differ."""
    layers = list(dict.fromkeys([*left["verdicts"], *right["verdicts"]]))
    rows = []
    differ = []
    for layer in layers:
        a, b = left["verdicts"].get(layer, "(absent)"), right["verdicts"].get(layer, "(absent)")
        rows.append((layer, a, b, metric_text(left, layer), metric_text(right, layer)))
        if a != b:
            differ.append(layer)
    return rows, differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("left", type=pathlib.Path, help="report.json of the first run")
    parser.add_argument("right", type=pathlib.Path, help="report.json of the second run")
    parser.add_argument("--names", nargs=2, default=("outside", "inside"), metavar=("LEFT", "RIGHT"))
    args = parser.parse_args(argv)
    left, right = (json.loads(path.read_text()) for path in (args.left, args.right))
    rows, differ = compare(left, right)
    header = ("layer", *(f"{name} verdict" for name in args.names), *(f"{name} metric" for name in args.names))
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for name, report in zip(args.names, (left, right), strict=True):
        print(f"== {name}")
        print("\n".join(report.get("summary") or []))
    if differ:
        print(f"compare_verdicts: the verdicts differ on {', '.join(differ)}", file=sys.stderr)
        return 1
    print(f"compare_verdicts: the same verdict on all {len(rows)} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
