"""playbooks/rebalance.yml, network part, for virtual services whose scheduler does not split by weight: rr gives every
real server with a weight above 0 an equal turn (ip_vs_rr.c), so new weights from unequal capacities would give it no
new shares. The plan says so, shows no shares it would not get, and changes nothing (local connection, no IPVS)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "rebalance.yml"
LOCAL = f"ansible_connection: local, ansible_python_interpreter: {sys.executable}"


def results(run, name):
    return [host for play in run["plays"] for item in play["tasks"] if item["task"]["name"] == name
            for host in item["hosts"].values()]


def test_an_rr_only_director_keeps_its_weights_and_says_why(tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"""
all:
  children:
    lvs_realservers:
      hosts:
        rs1: {{ansible_host: 198.18.0.21, {LOCAL}}}
        rs2: {{ansible_host: 198.18.0.22, {LOCAL}}}
    lvs_directors:
      hosts:
        dir1:
          ansible_host: 198.18.0.11
          ansible_connection: local
          ansible_python_interpreter: {sys.executable}
          lvs_director_virtual_servers:
            - address: 198.18.0.100
              port: 7
              protocol: UDP
              lvs_sched: rr
              real_servers: [{{address: 198.18.0.21}}, {{address: 198.18.0.22}}]
""")
    result = run_playbook(PLAYBOOK, inventory, "--tags", "network",
                          "-e", "hpc_balance_rebalance_lvs_capacity_source=given",
                          "-e", '{"hpc_balance_rebalance_lvs_capacity": {"rs1": 900, "rs2": 300}}',
                          timeout_s=300, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    assert result.returncode == 0, result.stdout + result.stderr
    run = json.loads(result.stdout)
    assert results(run, "Say what the plan does")[0]["msg"] == (
        "network: no virtual service splits new connections by weight, so new weights would give no new shares: kept")
    skipped = results(run, "Say which virtual services the weights set no shares for")[0]["results"]
    notes = [item["msg"] for item in skipped]
    assert notes == ["network: UDP 198.18.0.100:7 (rr) skipped: rr takes the real servers with a weight above 0 in "
                     "turn, whatever the weight (ip_vs_rr.c), so new weights give it no new shares"]
    assert results(run, "Show each real server's capacity, share and weight, before and after")[0].get("skipped")
    assert results(run, "Apply the weights through the lvs_director role (config and reload)")[0].get("skipped") is True
    assert run["stats"]["dir1"]["changed"] == 0
