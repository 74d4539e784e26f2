#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tokens_per_expert
short_description: Grade how evenly a Mixture-of-Experts model routes tokens to its experts
version_added: 0.1.0
description:
  - Reads the tokens-per-expert records that the C(moe_balance) package writes (JSON Lines, schema
    C(moe_balance.tokens_per_expert/1)), or a training log with lines like C(Expert 3 received 4320 tokens), or runs
    C(PYTHON -m moe_balance smoke --json) and grades the records it prints.
  - Per layer and overall it reports max/mean tokens per expert (above 2 means imbalance by default), the coefficient
    of variation with its grade (below 0.1 excellent, 0.1 to 0.3 good, 0.3 to 0.5 fair, 0.5 and above severe), the
    idle experts and the share of tokens taken by hot experts, and gives a C(balanced) verdict.
  - Malformed lines are counted, skipped and reported, never fatal.
  - Read-only; it never imports torch or moe_balance itself, so any host can be audited.
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.attributes
attributes:
  check_mode:
    support: full
    details: The module only reads (the smoke test is read-only too); it behaves the same in check mode.
options:
  path:
    description:
      - A JSON Lines file of tokens-per-expert records, or a log file with C(Expert N received M tokens) lines.
      - Exactly one of O(path) and O(python) is required.
    type: path
  python:
    description:
      - A Python interpreter that has C(moe_balance) installed; the module runs
        C(PYTHON -m moe_balance smoke --json) and grades the C(records) it prints.
      - Exactly one of O(path) and O(python) is required.
    type: path
  format:
    description:
      - How to read O(path). C(auto) picks C(jsonl) when the first non-blank line starts with C({), else C(log).
    type: str
    choices: [auto, jsonl, log]
    default: auto
  window:
    description:
      - Which records count. C(last) takes the latest step of each layer (summed over ranks); C(all) sums every step.
      - A log has no steps, so everything in it counts.
    type: str
    choices: [last, all]
    default: last
  run:
    description:
      - Only use records whose C(run) field equals this value.
    type: str
  num_experts:
    description:
      - For logs, the number of experts per layer, so that experts never mentioned count as idle. Without it the
        highest expert index seen decides.
    type: int
  max_over_mean_limit:
    description:
      - A layer is imbalanced when its busiest expert gets more than this many times the mean. Experts above it
        are the hot experts.
    type: float
    default: 2.0
  cv_limit:
    description:
      - A layer is imbalanced when its coefficient of variation is at or above this value (0.5 is where the
        grade becomes severe).
    type: float
    default: 0.5
  timeout_s:
    description:
      - With O(python), seconds after which the smoke test is stopped (coreutils C(timeout) on the target) and the
        task fails with a diagnostic. A first Triton compile on a GPU can take minutes.
    type: int
    default: 900
notes:
  - The record schema is documented in docs/moe-stats-schema.md of the collection.
seealso:
  - module: hpc.balance.ipvs_spread
  - module: hpc.balance.iperf3_throughput
"""

EXAMPLES = r"""
- name: Grade the latest step of a training run
  hpc.balance.tokens_per_expert:
    path: /var/log/train/tokens_per_expert.jsonl
  register: experts

- name: Grade a plain training log with 64 experts per layer, stricter limits
  hpc.balance.tokens_per_expert:
    path: /var/log/train/stdout.log
    format: log
    num_experts: 64
    max_over_mean_limit: 1.5
    cv_limit: 0.3

- name: Run the package's smoke test on a GPU node and grade its records
  hpc.balance.tokens_per_expert:
    python: /opt/moe/venv/bin/python
  register: smoke
  failed_when: smoke.balanced is false
"""

RETURN = r"""
source:
  description: C(file) or C(smoke).
  returned: always
  type: str
  sample: file
path:
  description: The file that was read (null for the smoke test).
  returned: always
  type: str
  sample: /var/log/train/tokens_per_expert.jsonl
format:
  description: How the input was read, C(jsonl), C(log) or C(smoke).
  returned: always
  type: str
  sample: jsonl
window:
  description: The window used, C(last) or C(all).
  returned: always
  type: str
  sample: last
max_over_mean_limit:
  description: The max/mean limit used.
  returned: always
  type: float
  sample: 2.0
cv_limit:
  description: The CV limit used.
  returned: always
  type: float
  sample: 0.5
records_read:
  description: Valid records read (for logs, one per layer).
  returned: always
  type: int
  sample: 96
records_used:
  description: Valid records that matched O(run) and were graded (all steps, before the window picks its steps).
  returned: always
  type: int
  sample: 96
malformed_lines:
  description: Lines (or smoke records) that were skipped because they do not follow the schema.
  returned: always
  type: int
  sample: 1
malformed_examples:
  description: The first few skipped lines with their 1-based line number and the reason.
  returned: always
  type: list
  elements: dict
  sample: [{"line": 97, "reason": "not JSON (Unterminated string starting at: line 1 column 80 (char 79))"}]
ignored_lines:
  description: Log lines that say nothing about experts (always 0 for JSON Lines).
  returned: always
  type: int
  sample: 0
inconsistent_records:
  description: Used records whose counts do not add up to num_tokens x top_k (still graded; see the schema notes).
  returned: always
  type: int
  sample: 0
runs:
  description: The distinct C(run) values seen in valid records (null for records without one).
  returned: always
  type: list
  elements: str
  sample: ["pretrain-7b-0412"]
balanced:
  description: True when every layer is within both limits, false when one is not, null when nothing was routed.
  returned: always
  type: bool
  sample: false
overall:
  description: The worst layer decides.
  returned: always
  type: dict
  contains:
    layers:
      description: Number of layers graded.
      returned: always
      type: int
      sample: 4
    worst_layer:
      description: The layer with the highest max/mean.
      returned: always
      type: int
      sample: 2
    max_over_mean:
      description: The highest max/mean over the layers.
      returned: always
      type: float
      sample: 2.31
    cv:
      description: The highest coefficient of variation over the layers.
      returned: always
      type: float
      sample: 0.62
    cv_grade:
      description: Grade of that CV, C(excellent), C(good), C(fair) or C(severe).
      returned: always
      type: str
      sample: severe
    idle_experts:
      description: Idle experts summed over the layers.
      returned: always
      type: int
      sample: 1
    balanced:
      description: Same as the top-level C(balanced).
      returned: always
      type: bool
      sample: false
layers:
  description: One entry per layer, sorted by layer.
  returned: always
  type: list
  elements: dict
  contains:
    layer:
      description: Layer index.
      returned: always
      type: int
      sample: 0
    num_experts:
      description: Experts in the layer.
      returned: always
      type: int
      sample: 8
    top_k:
      description: Experts per token.
      returned: always
      type: int
      sample: 2
    records:
      description: Records summed for this layer.
      returned: always
      type: int
      sample: 2
    steps:
      description: Distinct steps in the window.
      returned: always
      type: int
      sample: 1
    step_first:
      description: First step in the window.
      returned: always
      type: int
      sample: 1200
    step_last:
      description: Last step in the window.
      returned: always
      type: int
      sample: 1200
    ranks:
      description: Ranks that contributed records.
      returned: always
      type: list
      elements: int
      sample: [0, 1]
    num_tokens:
      description: Tokens in the window before top-k expansion, summed over the records.
      returned: always
      type: int
      sample: 8192
    dropped_tokens:
      description: Assignments dropped by capacity limits, summed over the records (0 when not reported).
      returned: always
      type: int
      sample: 0
    tokens_per_expert:
      description: Summed tokens per expert.
      returned: always
      type: list
      elements: int
      sample: [2048, 2100, 1990, 2010, 2050, 1980, 2150, 2056]
    total_tokens:
      description: Sum of tokens_per_expert.
      returned: always
      type: int
      sample: 16384
    mean_tokens_per_expert:
      description: Mean tokens per expert.
      returned: always
      type: float
      sample: 2048.0
    max_tokens_per_expert:
      description: Tokens of the busiest expert.
      returned: always
      type: int
      sample: 2150
    max_over_mean:
      description: Busiest expert over the mean (1.0 is perfect).
      returned: always
      type: float
      sample: 1.05
    min_over_max:
      description: Least busy expert over the busiest.
      returned: always
      type: float
      sample: 0.92
    cv:
      description: Population coefficient of variation of the tokens per expert.
      returned: always
      type: float
      sample: 0.025
    cv_grade:
      description: C(excellent), C(good), C(fair) or C(severe).
      returned: always
      type: str
      sample: excellent
    idle_experts:
      description: Indexes of experts that received no tokens.
      returned: always
      type: list
      elements: int
      sample: []
    idle_share:
      description: Fraction of experts that received no tokens.
      returned: always
      type: float
      sample: 0.0
    hot_experts:
      description: Indexes of experts above max_over_mean_limit x the mean.
      returned: always
      type: list
      elements: int
      sample: []
    hot_share:
      description: Fraction of the tokens that went to the hot experts.
      returned: always
      type: float
      sample: 0.0
    balanced:
      description: The verdict for the layer (null when nothing was routed).
      returned: always
      type: bool
      sample: true
    findings:
      description: Plain-words observations.
      returned: always
      type: list
      elements: str
      sample: []
summary:
  description: Plain lines, one per layer and one overall.
  returned: always
  type: list
  elements: str
  sample: ["layer 0: max/mean 1.05, CV 0.025 (excellent), 0 idle of 8 - balanced"]
smoke:
  description: What the smoke test printed besides its records (null when O(path) was read).
  returned: always
  type: dict
  contains:
    ok:
      description: The smoke test's own verdict.
      returned: success
      type: bool
      sample: true
    version:
      description: moe_balance version.
      returned: success
      type: str
      sample: 0.1.0
    device:
      description: The device the smoke test ran on, as the package describes it.
      returned: success
      type: dict
      sample: {"device": "cuda:0", "torch": "2.13.0", "cuda_available": true, "kernel_backend": "triton"}
    checks:
      description: The smoke test's checks, as printed.
      returned: success
      type: list
      elements: raw
      sample: [{"name": "known_answers", "ok": true, "detail": {"max_abs_error": 4.4e-16}}]
    timings_s:
      description: The smoke test's timings in seconds, as printed.
      returned: success
      type: dict
      sample: {"known_answers": 0.0777, "total": 21.54}
    devices:
      description: One summary per device the smoke test ran on (every GPU by default), with its failed checks.
      returned: success
      type: list
      elements: dict
      sample: [{"device": "cuda:0", "ok": true, "name": "NVIDIA H200", "capability": "9.0", "memory_mib": 143771,
                "failed_checks": [], "seconds": 3.2}]
    runtime:
      description: What the result depends on - torch, its CUDA, cuDNN and NCCL, the driver, the GPU models.
      returned: success
      type: dict
      sample: {"torch": "2.13.0", "cuda": "13.0", "cudnn": 92000, "nccl": "2.29.7", "driver": "580.65.06",
               "device_count": 1, "gpus": ["NVIDIA H200"]}
"""

import json
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.balance.plugins.module_utils._moe_stats import (
    LayerAccumulator,
    detect_format,
    grade,
    is_consistent,
    parse_jsonl,
    parse_log,
    parse_records,
)

MAX_RUNS_LISTED = 20


class _Sink:
    """Filters by run, counts inconsistent records and feeds the per-layer accumulator."""

    def __init__(self, accumulator: LayerAccumulator, run: str | None) -> None:
        self.accumulator = accumulator
        self.run = run
        self.runs: list[Any] = []
        self.used = 0
        self.inconsistent = 0

    def add(self, record: dict[str, Any]) -> None:
        run = record.get("run")
        if run not in self.runs and len(self.runs) < MAX_RUNS_LISTED:
            self.runs.append(run)
        if self.run is not None and run != self.run:
            return
        self.used += 1
        if not is_consistent(record):
            self.inconsistent += 1
        self.accumulator.add(record)


def _smoke_document(out: str) -> dict[str, Any] | None:
    """The smoke report: the whole stdout, or else its last line that parses as a JSON object."""
    for candidate in [out] + [line for line in reversed(out.splitlines()) if line.lstrip().startswith("{")]:
        try:
            document = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(document, dict):
            return document
    return None


def _run_smoke(module: AnsibleModule, python: str, timeout_s: int) -> dict[str, Any]:
    """Run the package's smoke test. It exits non-zero when a check fails but still prints its report.

    It runs under coreutils ``timeout`` (rc 124 when it fired), so a hung GPU or compile ends the task with a reason.
    """
    command = [python, "-m", "moe_balance", "smoke", "--json"]
    timeout = module.get_bin_path("timeout")
    if timeout is None:
        module.warn("coreutils timeout was not found on the target: the smoke test runs without a time limit")
    limit = [timeout, "-k", "10", str(timeout_s)] if timeout else []
    rc, out, err = module.run_command(limit + command)
    if limit and rc in (124, 137):
        module.fail_json(msg=f"{' '.join(command)} did not finish within timeout_s={timeout_s} s and was stopped: a "
                             f"first Triton compile, a GPU held by another process or a hung driver; raise timeout_s "
                             f"or free the GPU. stderr: {err.strip()[-2000:]}", rc=rc, stdout=out, stderr=err,
                         cmd=command)
    document = _smoke_document(out)
    if document is None:
        module.fail_json(msg=f"{' '.join(command)} printed no JSON object (rc {rc}): {(err or out).strip()[-2000:]}",
                         rc=rc, stdout=out, stderr=err, cmd=command)
    if not isinstance(document.get("records"), list):
        module.fail_json(msg="the smoke report has no 'records' list; moe_balance and this collection disagree on "
                             "the schema (see docs/moe-stats-schema.md)", rc=rc, stdout=out, cmd=command)
    return document


def _summary(layers: list[dict[str, Any]], overall: dict[str, Any], limits: tuple[float, float]) -> list[str]:
    lines = []
    for layer in layers:
        verdict = {True: "balanced", False: "IMBALANCED", None: "nothing routed"}[layer["balanced"]]
        if layer["max_over_mean"] is None:
            lines.append(f"layer {layer['layer']}: {verdict}")
            continue
        lines.append(
            f"layer {layer['layer']}: max/mean {layer['max_over_mean']:.2f}, CV {layer['cv']:.3f} "
            f"({layer['cv_grade']}), {len(layer['idle_experts'])} idle of {layer['num_experts']} - {verdict}"
        )
    if overall["balanced"] is not None:
        verdict = "balanced" if overall["balanced"] else "IMBALANCED"
        lines.append(
            f"overall: worst max/mean {overall['max_over_mean']:.2f} (layer {overall['worst_layer']}, limit "
            f"{limits[0]:.2f}), worst CV {overall['cv']:.3f} ({overall['cv_grade']}, limit {limits[1]:.2f}) - "
            f"{verdict}"
        )
    return lines


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            python=dict(type="path"),
            format=dict(type="str", default="auto", choices=["auto", "jsonl", "log"]),
            window=dict(type="str", default="last", choices=["last", "all"]),
            run=dict(type="str"),
            num_experts=dict(type="int"),
            max_over_mean_limit=dict(type="float", default=2.0),
            cv_limit=dict(type="float", default=0.5),
            timeout_s=dict(type="int", default=900),
        ),
        mutually_exclusive=[("path", "python")],
        required_one_of=[("path", "python")],
        supports_check_mode=True,
    )
    params = module.params
    if params["max_over_mean_limit"] < 1:
        module.fail_json(msg=f"max_over_mean_limit is {params['max_over_mean_limit']:g}: max/mean is never below 1, "
                             f"give a limit >= 1 such as 2")
    if params["cv_limit"] <= 0:
        module.fail_json(msg=f"cv_limit is {params['cv_limit']:g}: give a positive limit such as 0.5")
    if params["timeout_s"] < 1:
        module.fail_json(
            msg=f"timeout_s is {params['timeout_s']}: give the seconds the smoke test may take, such as 900"
        )
    if params["num_experts"] is not None and params["num_experts"] < 1:
        module.fail_json(msg=f"num_experts is {params['num_experts']}: give the number of experts per layer (>= 1)")

    accumulator = LayerAccumulator(params["window"])
    sink = _Sink(accumulator, params["run"])
    smoke = None
    path = params["path"]
    if path is not None:
        if not os.path.isfile(path):
            module.fail_json(msg=f"path {path} does not exist or is not a file; point it at the JSONL stats or the "
                                 "training log")
        data_format = params["format"]
        with open(path, errors="replace") as handle:
            if data_format == "auto":
                first = [line for line in (handle.readline() for dummy in range(64)) if line.strip()][:1]
                data_format = detect_format(first)
                handle.seek(0)
            if data_format == "jsonl":
                report = parse_jsonl(handle, sink=sink)
            else:
                report = parse_log(handle, num_experts=params["num_experts"], sink=sink)
        source = "file"
    else:
        document = _run_smoke(module, params["python"], params["timeout_s"])
        report = parse_records(document["records"], sink=sink)
        smoke = {
            key: document.get(key) for key in ("ok", "version", "device", "checks", "timings_s", "devices", "runtime")
        }
        data_format = "smoke"
        source = "smoke"

    limits = (params["max_over_mean_limit"], params["cv_limit"])
    layers, overall = grade(accumulator.layers(), *limits)
    if params["run"] is not None and not sink.used:
        module.warn(f"no record has run={params['run']!r}; runs seen: {', '.join(map(str, sink.runs))}")
    elif params["run"] is None and len(sink.runs) > 1:
        module.warn(f"records of {len(sink.runs)} runs are mixed ({', '.join(map(str, sink.runs))}); set run to grade "
                    f"one of them")
    if sink.inconsistent:
        module.warn(f"{sink.inconsistent} records have counts that do not add up to num_tokens x top_k")
    if report.malformed_lines:
        example = report.malformed_examples[0]
        module.warn(f"{report.malformed_lines} malformed lines were skipped; the first: line {example['line']}: "
                    f"{example['reason']}")

    result = dict(
        changed=False,
        source=source,
        path=path,
        format=data_format,
        window=params["window"],
        max_over_mean_limit=limits[0],
        cv_limit=limits[1],
        records_read=report.valid_records,
        records_used=sink.used,
        malformed_lines=report.malformed_lines,
        malformed_examples=report.malformed_examples,
        ignored_lines=report.ignored_lines,
        inconsistent_records=sink.inconsistent,
        runs=sink.runs,
        balanced=overall["balanced"],
        overall=overall,
        layers=layers,
        summary=_summary(layers, overall, limits),
        smoke=smoke,
    )
    if smoke is not None and smoke["ok"] is not True:
        failed = [check.get("name") for check in smoke["checks"] or []
                  if isinstance(check, dict) and check.get("ok") is False]
        named = ", ".join(map(str, failed)) or "none named"
        module.fail_json(msg=f"moe_balance smoke reported ok={smoke['ok']}; failed checks: {named}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
