"""site.yml against broken inventories: it must stop before touching any host, with a message naming the fix.

These run the real ansible-playbook; every host in these inventories is unreachable on purpose, so a run that got
past the inventory check would fail differently (UNREACHABLE) and the assertions on the message would not hold.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "site.yml"


def run_site(tmp_path, inventory_text, *extra_args):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(inventory_text)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    ansible_playbook = Path(sys.executable).with_name("ansible-playbook")
    return subprocess.run(
        [str(ansible_playbook), "-i", str(inventory), str(PLAYBOOK), *extra_args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )


def test_unknown_group_stops_the_run(tmp_path):
    result = run_site(tmp_path, """
all:
  children:
    lvs_direktors:
      hosts:
        dir1: {ansible_host: 198.18.0.250}
""")
    assert result.returncode == 2, result.stdout
    assert "unknown inventory group 'lvs_direktors'" in result.stdout
    assert "Gather facts from every host" not in result.stdout


def test_host_without_address_stops_the_run(tmp_path):
    result = run_site(tmp_path, """
all:
  children:
    lvs_realservers:
      hosts:
        rs-missing.invalid: {}
""")
    assert result.returncode == 2, result.stdout
    assert "host 'rs-missing.invalid' has no address" in result.stdout
    assert "Gather facts from every host" not in result.stdout


@pytest.mark.parametrize("required", ["gpu_nodes", "lvs_clients"])
def test_empty_required_group_stops_the_run(tmp_path, required):
    result = run_site(tmp_path, """
all:
  children:
    gpu_nodes:
      hosts: {}
""", "-e", f'{{"hpc_balance_required_groups": ["{required}"]}}')
    assert result.returncode == 2, result.stdout
    assert f"required group '{required}' has no hosts" in result.stdout
