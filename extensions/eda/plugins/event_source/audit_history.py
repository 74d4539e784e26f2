# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Event source for ansible-rulebook: the audit's history of report.json files, one event per new report.

Event shape (``event.audit``): ``run``, ``path``, ``verdicts``, ``metrics``, ``imbalanced_layers``, ``streak``
(per layer), ``alarm`` (layers whose streak reached ``checks`` with this report).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

DOCUMENTATION = r'''
---
short_description: Watch the hpc.balance audit history and raise an alarm when an imbalance persists
description:
  - Reads the C(report-NNNNNN.json) files that playbooks/audit.yml keeps (hpc_balance_audit_history_dir, default
    <report dir>/history), oldest first, and puts one event per report on the queue.
  - Each event counts, per layer, how many reports in a row judged the layer C(imbalanced) (C(streak)), and lists in
    C(alarm) the layers whose streak has just reached O(checks). A one-off spike never reaches it, a balanced report
    resets it, and a persistent skew raises the alarm once (again only after the layer was balanced in between).
options:
  path:
    description: The history folder.
    type: str
    required: true
  checks:
    description: Reports in a row that must judge a layer imbalanced before the alarm (the N in "persists for N").
    type: int
    default: 3
  interval_s:
    description: Seconds between two looks at the folder.
    type: float
    default: 60
  layers:
    description: Layers to watch.
    type: list
    elements: str
    default: [network, host_link, compute]
  from_start:
    description: Read the reports already in the folder on start (false - only reports written afterwards).
    type: bool
    default: true
  once:
    description: Read what is in the folder, emit its events, and stop (for tests and one-shot runs).
    type: bool
    default: false
'''

EXAMPLES = r'''
- name: Rebalance when an imbalance persists
  hosts: gpu_nodes
  sources:
    - hpc.balance.audit_history:
        path: /srv/audit/history
        checks: 3
        interval_s: 300
  rules:
    - name: Compute imbalance for 3 audits in a row
      condition: event.audit.alarm is defined and event.audit.alarm contains "compute"
      action:
        run_playbook:
          name: hpc.balance.rebalance
'''

HISTORY_NAME = re.compile(r"^report-(\d{6,})\.json$")
LAYERS = ("network", "host_link", "compute")


def history_files(path: str) -> list[tuple[int, str]]:
    """(run number, file) of every report in the folder, oldest first; none for a missing folder."""
    if not os.path.isdir(path):
        return []
    found = [(int(match.group(1)), os.path.join(path, name))
             for name in os.listdir(path) if (match := HISTORY_NAME.match(name))]
    return sorted(found)


class Watcher:
    """Per-layer streaks of imbalanced reports; ``see`` turns one report into one event."""

    def __init__(self, checks: int, layers: list[str]) -> None:
        if checks < 1:
            raise ValueError(f"checks is {checks}: give the number of reports in a row, at least 1")
        unknown = sorted(set(layers) - set(LAYERS))
        if unknown:
            raise ValueError(f"layers {unknown} are not audit layers: use some of {', '.join(LAYERS)}")
        self.checks = checks
        self.layers = list(layers)
        self.streak = dict.fromkeys(self.layers, 0)
        self.last_run = 0

    def see(self, run: int, path: str, report: dict[str, Any]) -> dict[str, Any]:
        verdicts = report.get("verdicts") or {}
        imbalanced = [layer for layer in self.layers if verdicts.get(layer) == "imbalanced"]
        alarm = []
        for layer in self.layers:
            if layer in imbalanced:
                self.streak[layer] += 1
                if self.streak[layer] == self.checks:
                    alarm.append(layer)
            elif verdicts.get(layer) == "balanced":
                self.streak[layer] = 0
            # Any other verdict (skipped, error, unknown) judges nothing: the streak neither grows nor resets.
        self.last_run = run
        return {"audit": {"run": run, "path": path, "verdicts": verdicts, "metrics": report.get("metrics") or {},
                          "imbalanced_layers": imbalanced, "streak": dict(self.streak), "alarm": alarm}}


def read_report(path: str) -> dict[str, Any] | None:
    """The report, or None for a file that is not (yet) complete JSON - it is read again on the next look."""
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def new_events(watcher: Watcher, path: str) -> list[dict[str, Any]]:
    events = []
    for run, file in history_files(path):
        if run <= watcher.last_run:
            continue
        report = read_report(file)
        if report is None:
            break  # keep the order: wait for this report to be complete
        events.append(watcher.see(run, file, report))
    return events


async def main(queue: asyncio.Queue, args: dict[str, Any]) -> None:
    path = args.get("path")
    if not path:
        raise ValueError("path is not set: give the audit history folder (hpc_balance_audit_history_dir, default "
                         "<report dir>/history)")
    watcher = Watcher(int(args.get("checks", 3)), list(args.get("layers") or LAYERS))
    interval_s = float(args.get("interval_s", 60))
    if not args.get("from_start", True):
        files = history_files(path)
        watcher.last_run = files[-1][0] if files else 0
    while True:
        for event in new_events(watcher, path):
            await queue.put(event)
        if args.get("once", False):
            return
        await asyncio.sleep(interval_s)


if __name__ == "__main__":
    # Print the events of a history folder: python audit_history.py FOLDER [CHECKS]

    class _PrintQueue:
        async def put(self, event: dict[str, Any]) -> None:
            print(json.dumps(event))

    import sys

    asyncio.run(main(_PrintQueue(), {"path": sys.argv[1], "checks": int(sys.argv[2]) if len(sys.argv) > 2 else 3,
                                     "once": True}))
