"""lvs_realserver_preflight / lvs_director_preflight false (as playbooks/lvs.yml sets them after its own preflight
play): run on their own, with no preflight earlier in the run, each role stops at its first task and changes
nothing. Local connection; the roles' real work runs in the lvs-netns and lvs-uml molecule scenarios."""

from __future__ import annotations

import sys

import pytest
from playbook_run import run_playbook

ROLES = {
    "lvs_realserver": "lvs_realserver_vips: [198.18.0.100]",
    "lvs_director": "lvs_director_vrrp_only: true",
}


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_role_stops_before_any_change_when_its_preflight_is_off_and_never_ran(tmp_path, role):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"all:\n  hosts:\n    lab: {{ansible_connection: local, ansible_python_interpreter: "
                         f"{sys.executable}}}\n")
    playbook = tmp_path / "play.yml"
    playbook.write_text(f"""
- name: {role} with its preflight off and none earlier in the run
  hosts: all
  gather_facts: false
  roles:
    - role: hpc.balance.{role}
      {role}_preflight: false
      {ROLES[role]}
""")
    result = run_playbook(playbook, inventory, timeout_s=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"lab: {role}_preflight is false, but the preflight did not run earlier in this run" in " ".join(
        result.stdout.split())
    assert "changed=0" in result.stdout
    # The assert is the role's first task after the argument check: nothing else ran.
    assert "ok=1 " in " ".join(result.stdout.split()) and "failed=1" in result.stdout
