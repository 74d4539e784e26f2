"""playbooks/gpu.yml rolls out in batches: one host first, and a failure stops the hosts that have not started.

The real ansible-playbook runs gpu.yml against five local hosts whose settings the role refuses in its first step
(a relative gpu_moe_venv), so nothing on this machine changes. Ansible's documentation of play keywords: with
``serial`` a list, the batches take those sizes in turn; ``max_fail_percentage: 0`` aborts the play when any host of
a batch fails, so the later batches never start.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "gpu.yml"
HOSTS = [f"gpu{n}" for n in range(1, 6)]


def write_inventory(tmp_path, bad_hosts):
    lines = ["[gpu_nodes]"]
    for host in HOSTS:
        venv = "relative/venv" if host in bad_hosts else "/opt/moe_balance/venv"
        lines.append(f"{host} ansible_connection=local ansible_python_interpreter={sys.executable} gpu_moe_venv={venv}")
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("\n".join(lines) + "\n")
    return inventory


def hosts_that_ran(output, task):
    """The hosts with a result line under every header of that role task."""
    parts = [part.split("TASK [")[0] for part in output.split(f"TASK [hpc.balance.gpu_moe : {task}]")[1:]]
    return sorted(
        {host for part in parts for host in re.findall(r"^(?:ok|fatal|changed|skipping): \[(\w+)\]", part, re.M)}
    )


def test_the_first_host_fails_alone_and_the_others_never_start(tmp_path):
    result = run_playbook(PLAYBOOK, write_inventory(tmp_path, bad_hosts=set(HOSTS)), timeout_s=300)
    assert result.returncode != 0
    assert "gpu_moe_venv is 'relative/venv': give an absolute path" in result.stdout
    assert hosts_that_ran(result.stdout, "Stop on problems in the settings") == ["gpu1"], result.stdout[-3000:]


def test_the_batch_size_comes_from_extra_vars(tmp_path):
    result = run_playbook(
        PLAYBOOK, write_inventory(tmp_path, bad_hosts=set(HOSTS)), "-e", '{"gpu_moe_serial": [2]}', timeout_s=300
    )
    assert result.returncode != 0
    assert hosts_that_ran(result.stdout, "Stop on problems in the settings") == ["gpu1", "gpu2"], result.stdout[-3000:]
