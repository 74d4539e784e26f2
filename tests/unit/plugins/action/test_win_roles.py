"""The two Windows roles: defaults, argument specs and the module options their tasks pass agree."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.hpc.balance.plugins.action import win_nic_team, win_smb_multichannel

ROOT = Path(__file__).resolve().parents[4]
ROLES = {"win_nic_team": win_nic_team, "win_smb_multichannel": win_smb_multichannel}
NOT_FROM_ROLE = {"preflight_only", "verify_share", "min_channels", "settle_s", "wait_timeout_s", "wait_delay_s"}


def load(role, path):
    return yaml.safe_load((ROOT / "roles" / role / path).read_text())


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_default_is_in_the_argument_spec_with_the_same_default(role):
    defaults = load(role, "defaults/main.yml")
    options = load(role, "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    for name, option in options.items():
        if "default" in option:
            assert option["default"] == defaults[name], name


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_converge_task_passes_every_option_the_role_manages(role):
    tasks = load(role, "tasks/main.yml")
    passed = set()
    for task in tasks:
        passed |= set(task.get(f"hpc.balance.{role}") or {})
    assert set(ROLES[role].ARGUMENT_SPEC) - passed <= NOT_FROM_ROLE | {"preflight_only"}


def test_the_share_check_becomes_the_shares_account_with_runas():
    [verify] = [
        t for t in load("win_smb_multichannel", "tasks/main.yml") if t.get("name") == "Verify the share's channels"
    ]
    assert verify["become_method"] == "ansible.builtin.runas"
    assert verify["become"] == "{{ win_smb_multichannel_verify_become }}"


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_readme_says_plainly_that_no_windows_host_has_run_the_role_and_what_a_first_run_checks(role):
    text = (ROOT / "roles" / role / "README.md").read_text()
    tested = text.index("## What was tested where")
    assert "**No Windows host has run this role" in text[tested:]
    first_run = text.index("### First run on a Windows host: what to check", tested)
    assert "\n1. Check mode first" in text[first_run:]
