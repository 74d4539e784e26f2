#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: audit_report
short_description: Write the balance audit of all three layers as Markdown, HTML with bar charts, and JSON
version_added: 0.1.0
description:
  - Takes the registered results of M(hpc.balance.ipvs_spread), M(hpc.balance.iperf3_throughput) and
    M(hpc.balance.tokens_per_expert), keyed by host, and writes C(report.md), C(report.html) and C(report.json)
    into O(dest).
  - The HTML page is self-contained (inline CSS and SVG, no scripts, nothing fetched) with small bar charts of the
    load per real server, the throughput per stream and the tokens per expert. With O(heatmap_min_layers) or more
    MoE layers on a host, the tokens per expert are drawn as one layers x experts heatmap (colour = tokens / the
    layer's mean), then bars for the O(worst_layers) worst layers only. Axis labels are spaced so that none overlaps.
  - Each layer gets a verdict and, where there is one, a reason in words, for example the skip reason of a director
    that runs VRRP only, or the bandwidth the host-link streams were graded against.
  - With O(history_dir), each run's C(report.json) is also kept there as C(report-NNNNNN.json), up to
    O(history_count) runs; the report then shows each layer's number over the kept runs (worst deviation from the
    weights, share of the expected bandwidth, worst layer max/mean) and what changed since the previous run.
  - Meant to run once on the controller; delegate the task to C(localhost) and set C(run_once).
  - Files are only rewritten when their content changes; leave O(timestamp) unset for a report that is stable
    between runs.
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written or deleted; C(changed) tells whether the files would change.
options:
  dest:
    description:
      - Directory to write the three files into; created when missing.
    type: path
    required: true
  title:
    description:
      - Title of the report.
    type: str
    default: hpc.balance audit
  timestamp:
    description:
      - Text shown as the time of the audit, for example C({{ now(utc=true).isoformat() }}). Omitted when unset.
    type: str
  ipvs_spread:
    description:
      - Results of M(hpc.balance.ipvs_spread) keyed by host name. Failed or skipped results are shown as such.
    type: dict
    default: {}
  iperf3_throughput:
    description:
      - Results of M(hpc.balance.iperf3_throughput) in C(client) mode keyed by host name.
    type: dict
    default: {}
  tokens_per_expert:
    description:
      - Results of M(hpc.balance.tokens_per_expert) keyed by host name.
    type: dict
    default: {}
  max_bars:
    description:
      - Most bars per chart of real servers or streams; with more members the chart shows the busiest and the least
        busy half each.
    type: int
    default: 64
  worst_layers:
    description:
      - With the heatmap, how many of the worst MoE layers (highest max/mean) also get a bar chart.
    type: int
    default: 4
  heatmap_min_layers:
    description:
      - From this many MoE layers on one host, draw a layers x experts heatmap and bars for the worst layers only;
        below it, one bar chart per layer.
    type: int
    default: 5
  windows_storage_hosts:
    description:
      - The hosts of the C(windows_storage) group. The host-link section names the Windows NIC team only when this
        is not empty; otherwise it says it measures Linux client to real-server streams.
    type: list
    elements: str
    default: []
  history_dir:
    description:
      - Directory that keeps one C(report-NNNNNN.json) per run (created when missing). Unset, no history is kept
        and the report shows no trend.
    type: path
  history_count:
    description:
      - How many runs O(history_dir) keeps, this one included; the oldest are deleted first.
    type: int
    default: 10
seealso:
  - module: hpc.balance.ipvs_spread
  - module: hpc.balance.iperf3_throughput
  - module: hpc.balance.tokens_per_expert
"""

EXAMPLES = r"""
- name: Write the audit on the controller
  hpc.balance.audit_report:
    dest: "{{ audit_dir }}"
    ipvs_spread: "{{ dict(directors | zip(directors | map('extract', hostvars, 'spread'))) }}"
    iperf3_throughput: "{{ {'client1': hostvars['client1'].team} }}"
    tokens_per_expert: "{{ dict(gpus | zip(gpus | map('extract', hostvars, 'experts'))) }}"
    windows_storage_hosts: "{{ groups['windows_storage'] | default([]) }}"
    history_dir: "{{ audit_dir }}/history"
    history_count: 30
  vars:
    directors: "{{ groups['lvs_directors'] }}"
    gpus: "{{ groups['gpu_nodes'] }}"
  delegate_to: localhost
  run_once: true
  register: audit

- name: Show the summary
  ansible.builtin.debug:
    msg: "{{ audit.summary + ['report: ' ~ audit.files.html] }}"
"""

RETURN = r"""
dest:
  description: The directory written to.
  returned: always
  type: str
  sample: /srv/audit/2024-04-12
files:
  description: Paths of the three files (also in check mode, where they are not written).
  returned: always
  type: dict
  contains:
    markdown:
      description: Path of the Markdown report.
      returned: always
      type: str
      sample: /srv/audit/2024-04-12/report.md
    html:
      description: Path of the HTML report.
      returned: always
      type: str
      sample: /srv/audit/2024-04-12/report.html
    json:
      description: Path of the JSON report.
      returned: always
      type: str
      sample: /srv/audit/2024-04-12/report.json
written:
  description: The files that were (or in check mode would be) rewritten.
  returned: always
  type: list
  elements: str
  sample: [/srv/audit/2024-04-12/report.html]
verdicts:
  description:
    - Per layer, C(balanced), C(imbalanced), C(unknown) (nothing to judge), C(error) (a reporter failed),
      C(skipped) (every host skipped it, for example a director that runs VRRP only) or C(not run).
  returned: always
  type: dict
  sample: {"network": "skipped", "host_link": "balanced", "compute": "not run"}
reasons:
  description: Per layer, why it got its verdict in one sentence (null where the host lines say it all).
  returned: always
  type: dict
  sample: {"network": "VRRP only: this kernel has no IPVS", "host_link": "client1: 8 streams carried 9.6 Gbit/s,
           96.0 % of this path's single-stream ceiling 10 Gbit/s, measured just before with 1 stream",
           "compute": null}
metrics:
  description: Per layer, the number it is followed by over runs, with C(name), C(unit), C(value) and C(limit).
  returned: always
  type: dict
  sample: {"compute": {"name": "worst layer max/mean", "unit": "x mean", "value": 1.31, "limit": 2.0}}
changes:
  description: What changed since the previous run in the history (only with O(history_dir)).
  returned: when history_dir is set
  type: list
  elements: str
  sample: ["compute: verdict imbalanced -> balanced; worst layer max/mean 2.41 -> 1.31 (-1.10)"]
history:
  description: The history kept in O(history_dir).
  returned: when history_dir is set
  type: dict
  contains:
    file:
      description: The copy of this run's report.json (also in check mode, where it is not written).
      returned: always
      type: str
      sample: /srv/audit/history/report-000003.json
    runs:
      description: Number of earlier runs the trend was drawn from.
      returned: always
      type: int
      sample: 2
    pruned:
      description: Older reports deleted (or, in check mode, that would be) to keep O(history_count).
      returned: always
      type: list
      elements: str
      sample: []
summary:
  description: Plain lines, one per layer (verdict and reason) and per host.
  returned: always
  type: list
  elements: str
  sample: ["network: skipped - VRRP only: this kernel has no IPVS",
           "  dir1: skipped: VRRP only: this kernel has no IPVS"]
"""

import json
import os
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.hpc.balance.plugins.module_utils._report_history import (
    history_path,
    next_run,
    read_history,
    to_prune,
)
from ansible_collections.hpc.balance.plugins.module_utils._report_html import render_html
from ansible_collections.hpc.balance.plugins.module_utils._report_markdown import render_markdown
from ansible_collections.hpc.balance.plugins.module_utils._report_model import HEATMAP_MIN_LAYERS, build_document

# What report.json keeps of the document (the sections are layout, rebuilt from the results).
JSON_KEYS = ("title", "timestamp", "run", "verdicts", "reasons", "metrics", "summary", "changes", "results")


def render(params: dict[str, Any], history: list[dict[str, Any]] | None = None) -> tuple[str, str, str, dict[str, Any]]:
    """(markdown text, html text, json text, document) for the module parameters and the earlier runs."""
    document = build_document(params, history)
    kept = {key: document[key] for key in JSON_KEYS if key in document}
    return (render_markdown(document), render_html(document), json.dumps(kept, indent=1, sort_keys=True) + "\n",
            document)


def _write_if_changed(module: AnsibleModule, path: str, text: str) -> bool:
    data = to_bytes(text)
    if os.path.exists(path):
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False
    if module.check_mode:
        return True
    descriptor, temporary = tempfile.mkstemp(prefix=".report-", dir=os.path.dirname(path))
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)
    os.chmod(temporary, 0o644)
    module.atomic_move(temporary, path)
    return True


def _check(module: AnsibleModule, params: dict[str, Any]) -> None:
    for name, low in (("max_bars", 2), ("worst_layers", 1), ("heatmap_min_layers", 2), ("history_count", 1)):
        if params[name] < low:
            module.fail_json(msg=f"{name} is {params[name]}: give at least {low}")
    for name in ("dest", "history_dir"):
        path = params[name]
        if path and os.path.exists(path) and not os.path.isdir(path):
            module.fail_json(msg=f"{name} {path} exists and is not a directory; give a directory for the report files")


def _history(module: AnsibleModule, params: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, dict[str, Any]]:
    """(earlier documents, the history return value without 'file') for history_dir, or (None, {})."""
    directory = params["history_dir"]
    if not directory:
        return None, {}
    documents, warnings = read_history(directory)
    for warning in warnings:
        module.warn(warning)
    keep = params["history_count"] - 1
    documents = documents[-keep:] if keep else []
    params["run"] = next_run(directory)
    return documents, {"runs": len(documents), "pruned": to_prune(directory, params["history_count"])}


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            title=dict(type="str", default="hpc.balance audit"),
            timestamp=dict(type="str"),
            ipvs_spread=dict(type="dict", default={}),
            iperf3_throughput=dict(type="dict", default={}),
            tokens_per_expert=dict(type="dict", default={}, no_log=False),
            max_bars=dict(type="int", default=64),
            worst_layers=dict(type="int", default=4),
            heatmap_min_layers=dict(type="int", default=HEATMAP_MIN_LAYERS),
            windows_storage_hosts=dict(type="list", elements="str", default=[]),
            history_dir=dict(type="path"),
            history_count=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    _check(module, params)
    dest = params["dest"]
    history, kept = _history(module, params)
    markdown, page, document, parsed = render(params, history)
    files = {"markdown": os.path.join(dest, "report.md"), "html": os.path.join(dest, "report.html"),
             "json": os.path.join(dest, "report.json")}
    if not module.check_mode:
        for directory in (dest, params["history_dir"]):
            if directory and not os.path.isdir(directory):
                os.makedirs(directory, mode=0o755)
    written = [files[key] for key, text in (("markdown", markdown), ("html", page), ("json", document))
               if _write_if_changed(module, files[key], text)]
    extra: dict[str, Any] = {}
    if params["history_dir"]:
        kept["file"] = history_path(params["history_dir"], params["run"])
        written.append(kept["file"])
        if not module.check_mode:
            _write_if_changed(module, kept["file"], document)
            for path in kept["pruned"]:
                os.remove(path)
        extra = {"history": kept, "changes": parsed["changes"]}
    module.exit_json(changed=bool(written), dest=dest, files=files, written=written, verdicts=parsed["verdicts"],
                     reasons=parsed["reasons"], metrics=parsed["metrics"], summary=parsed["summary"], **extra)


if __name__ == "__main__":
    main()
