"""site.yml against broken inventories: it must stop before touching any host, with a message naming the fix.

These run the real ansible-playbook; every host in these inventories is unreachable on purpose, so a run that got
past the inventory check would fail differently (UNREACHABLE) and the assertions on the message would not hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "site.yml"


def run_site(tmp_path, inventory_text, *extra_args):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(inventory_text)
    return run_playbook(PLAYBOOK, inventory, *extra_args)


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
    assert "Gather facts from every Linux host" not in result.stdout


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
    assert "Gather facts from every Linux host" not in result.stdout


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
