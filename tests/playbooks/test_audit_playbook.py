"""playbooks/audit.yml for real, every host on this machine (local connection): a director that runs VRRP only is a
stated skip, the host link is graded against the path's own single-stream ceiling (real iperf3 over loopback), and
three runs leave a history of three reports with a trend."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "audit.yml"
JSONL = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "moe_tokens_per_expert.jsonl"
# CI installs iperf3 (make setup); there a missing binary is a failure, not a skip.
needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None and not os.environ.get("CI"),
                                  reason="iperf3 is not installed")


def inventory(tmp_path, port):
    local = f"ansible_connection: local, ansible_python_interpreter: {sys.executable}"
    text = f"""
all:
  vars: {{hpc_balance_audit_iperf3_port: {port}, hpc_balance_audit_iperf3_duration_s: 1,
          hpc_balance_audit_iperf3_parallel: 4}}
  children:
    lvs_directors:
      hosts:
        dir1: {{ansible_host: 127.0.0.1, lvs_director_vrrp_only: true, {local}}}
    lvs_realservers:
      hosts:
        rs1: {{ansible_host: 127.0.0.1, {local}}}
    lvs_clients:
      hosts:
        client1: {{ansible_host: 127.0.0.1, {local}}}
    gpu_nodes:
      hosts:
        gpu1: {{ansible_host: 127.0.0.1, hpc_balance_audit_moe_stats_path: {JSONL}, {local}}}
"""
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def run_audit(tmp_path, *extra):
    result = run_playbook(PLAYBOOK, inventory(tmp_path, 52331), "-e", f"hpc_balance_report_dir={tmp_path / 'report'}",
                          *extra, timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((tmp_path / "report" / "report.json").read_text())


@needs_iperf3
def test_audit_states_its_skips_and_reasons_and_keeps_three_runs(tmp_path):
    for _run in range(3):
        report = run_audit(tmp_path, "-e", "hpc_balance_audit_history_count=3")
    assert report["verdicts"]["network"] == "skipped"
    assert report["reasons"]["network"] == "VRRP only: this kernel has no IPVS"
    assert report["summary"][1] == "  dir1: skipped: VRRP only: this kernel has no IPVS"
    link = report["results"]["iperf3_throughput"]["client1"]
    assert link["expected_source"] == "single-stream ceiling", link
    assert link["single_stream_ceiling_bits_per_second"] > 0
    assert report["verdicts"]["host_link"] in ("balanced", "imbalanced")
    assert "single-stream ceiling" in report["reasons"]["host_link"]
    assert report["verdicts"]["compute"] == "imbalanced"
    history = sorted(path.name for path in (tmp_path / "report" / "history").iterdir())
    assert history == ["report-000001.json", "report-000002.json", "report-000003.json"]
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Trend over the last 3 runs" in page
    assert "Host link layer (Linux client to real-server streams)" in page
