"""Each planned change -> the cmdlets the apply modules run, and the allow-lists in the modules' argument specs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._wincommand import (
    ROLLBACK_ONLY_COMMANDS,
    SMB_COMMANDS,
    TEAM_COMMANDS,
    commands_for,
    ps_literal,
    render_command,
    with_commands,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_model import STEPS

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests" / "ps1"))
from ps1_spec import module_spec  # noqa: E402

FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "windows"
SMB_ACTIONS = ("set_server_multichannel", "set_client_multichannel", "add_constraint", "remove_constraint")

EXAMPLES = {
    "new_team": {"team": "T", "members": ["A", "B"], "teaming_mode": "Lacp", "load_balancing_algorithm": "Dynamic"},
    "remove_team": {"team": "T"},
    "rename_team": {"team": "T", "new_name": "U"},
    "set_team": {"team": "T", "teaming_mode": "Static"},
    "add_member": {"team": "T", "member": "A", "administrative_mode": "Active"},
    "remove_member": {"team": "T", "member": "A"},
    "set_member_mode": {"team": "T", "member": "A", "administrative_mode": "Standby"},
    "rename_team_nic": {"team_nic": "T", "new_name": "U"},
    "set_team_nic_vlan": {"team_nic": "T", "vlan_id": 5},
    "set_team_nic_default": {"team_nic": "T - VLAN 5"},
    "add_team_nic": {"team": "T", "vlan_id": 5, "team_nic": "T - VLAN 5"},
    "remove_team_nic": {"team": "T", "vlan_id": 5},
    "set_ip": {"interface": "T", "address": "10.0.0.9", "prefix_length": 24},
    "set_ip_dhcp": {"interface": "T"},
    "set_ip_options": {"interface": "T", "interface_metric": 50, "address": "10.0.0.9", "skip_as_source": True},
    "restore_ip": {"interface": "T", "addresses": ["10.0.0.9/24"], "ipv6_addresses": ["2001:db8::9/64"]},
    "wait_adapter": {"interface": "T"},
    "new_set_switch": {"switch": "S", "members": ["A"], "allow_management_os": False},
    "set_set_team": {"switch": "S", "load_balancing_algorithm": "Dynamic"},
    "set_vm_switch": {"switch": "S", "allow_management_os": True},
    "remove_set_switch": {"switch": "S"},
    "add_host_vnic": {"switch": "S", "vnic": "V"},
    "set_host_vnic_vlan": {"vnic": "V", "vlan_id": 0},
    "set_rdma": {"adapter": "vEthernet (V)", "enabled": True},
    "arm_rollback": {"task_name": "t", "script": "# x", "timeout_s": 300},
    "disarm_rollback": {"task_name": "t"},
    "set_server_multichannel": {"enable": True},
    "set_client_multichannel": {"enable": False},
    "add_constraint": {"server_name": "fs01", "interfaces": ["A"]},
    "remove_constraint": {"server_name": "fs01", "interfaces": ["A"]},
    "update_connections": {},
}


def spec_choices(module):
    library = (ROOT / "plugins" / "module_utils" / "HpcWin.psm1").read_bytes()
    spec = module_spec((ROOT / "plugins" / "modules" / f"{module}.ps1").read_bytes(), library=library)
    return spec["options"]["changes"]["options"]["commands"]["options"]["command"]["choices"]


def test_every_modelled_step_and_smb_change_has_an_example():
    assert set(EXAMPLES) == set(STEPS) | set(SMB_ACTIONS) | {"update_connections"}


@pytest.mark.parametrize("action", sorted(EXAMPLES))
def test_every_change_renders_to_commands_its_apply_module_allows(action):
    commands = commands_for(dict(EXAMPLES[action], action=action))
    allowed = SMB_COMMANDS if action in SMB_ACTIONS + ("update_connections",) else TEAM_COMMANDS
    if action == "restore_ip":
        allowed = ROLLBACK_ONLY_COMMANDS  # run by the rollback script only, which defines it
    assert commands and all(command["command"] in allowed for command in commands)


@pytest.mark.parametrize(
    ("module", "allowed"), [("win_nic_team_apply", TEAM_COMMANDS), ("win_smb_multichannel_apply", SMB_COMMANDS)]
)
def test_the_apply_modules_allow_exactly_the_rendered_commands(module, allowed):
    assert spec_choices(module) == list(allowed)


def test_apply_modules_load_the_shared_powershell_module_utils():
    psm1 = (ROOT / "plugins" / "module_utils" / "HpcWin.psm1").read_text()
    for module in (
        "win_nic_team_apply",
        "win_nic_team_gather",
        "win_smb_multichannel_apply",
        "win_smb_multichannel_gather",
    ):
        text = (ROOT / "plugins" / "modules" / f"{module}.ps1").read_text()
        assert "#AnsibleRequires -PowerShell ansible_collections.hpc.balance.plugins.module_utils.HpcWin" in text
        assert "Function ConvertTo-Record" not in text  # defined once, in the module_utils
    functions = (
        "Get-HpcChangeListSpec",
        "Invoke-ChangeList",
        "Wait-HpcNetAdapter",
        "Clear-HpcIPv4Address",
        "Register-HpcRollback",
        "Unregister-HpcRollback",
    )
    for function in functions:
        assert f"Function {function}" in psm1 and f"'{function}'" in psm1


def test_unknown_change_is_an_error():
    with pytest.raises(ValueError, match="no command for change 'reboot'"):
        commands_for({"action": "reboot"})


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("it's", "'it''s'"),
        ("a\u2019b", "'a''b'"),
        (True, "$true"),
        (False, "$false"),
        (None, "$null"),
        (24, "24"),
        (["a", "b"], "@('a', 'b')"),
        ("$env:x `n", "'$env:x `n'"),
    ],
)
def test_ps_literal(value, literal):
    assert ps_literal(value) == literal


def test_render_command_writes_switches_as_true():
    assert render_command(commands_for({"action": "set_team_nic_default", "team_nic": "S - VLAN 5"})[0]) == (
        "Set-NetLbfoTeamNic -Name:'S - VLAN 5' -Default:$true -Confirm:$false -ErrorAction:'Stop'"
    )


def test_the_payload_carries_the_action_and_its_commands_only():
    assert with_commands([{"action": "remove_team", "team": "T"}]) == [
        {
            "action": "remove_team",
            "commands": [
                {"command": "Remove-NetLbfoTeam", "parameters": {"Name": "T", "Confirm": False, "ErrorAction": "Stop"}}
            ],
        }
    ]


def test_new_set_switch_never_hard_codes_allow_management_os():
    change = dict(EXAMPLES["new_set_switch"], action="new_set_switch")
    assert commands_for(change)[0]["parameters"]["AllowManagementOS"] is False


# ------------------------------------------------------------------------------------------------ fixtures cite docs
RECORD_KEYS_WITHOUT_SOURCE = {
    "changed",
    "lbfo_available",
    "hyperv_present",
    "_sources",
    "_allowed_by",
    "_refused_by_windows",
    "_note",
}


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda path: path.stem)
def test_every_fixture_cites_the_doc_of_each_record_list(path):
    data = json.loads(path.read_text())
    sources = data.get("_sources") or {}
    assert set(data) - RECORD_KEYS_WITHOUT_SOURCE - set(sources) == set()
    assert all(url.startswith(("https://learn.microsoft.com/", "the module's own")) for url in sources.values())
