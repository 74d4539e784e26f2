"""playbooks/audit.yml with one GPU node that cannot be reached: the report is still written and names that host as
failed, next to the real result of the host that answered (local connection, the shared JSONL fixture)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "audit.yml"
JSONL = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "moe_tokens_per_expert.jsonl"


def test_an_unreachable_gpu_node_is_a_failed_line_in_the_report_not_a_missing_report(tmp_path):
    local = f"ansible_connection: local, ansible_python_interpreter: {sys.executable}"
    # Port 9 on loopback: nothing listens, so ssh is refused at once (unreachable, no timeout to wait for).
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"""
all:
  children:
    gpu_nodes:
      hosts:
        gpu1: {{ansible_host: 127.0.0.1, hpc_balance_audit_moe_stats_path: {JSONL}, {local}}}
        gpu2: {{ansible_host: 127.0.0.1, ansible_port: 9, ansible_connection: ssh}}
""")
    result = run_playbook(PLAYBOOK, inventory, "-e", f"hpc_balance_report_dir={tmp_path / 'report'}", timeout_s=180)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "UNREACHABLE" in result.stdout
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    experts = report["results"]["tokens_per_expert"]
    assert experts["gpu2"]["failed"] is True
    assert "unreachable" in experts["gpu2"]["msg"]
    assert experts["gpu1"]["failed"] is False and experts["gpu1"]["balanced"] is False
    assert report["verdicts"]["compute"] == "imbalanced"
    assert any(line.startswith("  gpu2: reporter failed: no result") for line in report["summary"]), report["summary"]
