"""Every command that changes state, in every script the Windows roles ship or render, carries -Confirm:$false and
-ErrorAction Stop.

Why each call and not a preference: $ConfirmPreference / $ErrorActionPreference set in a module's body or at a
script's scope do not reach the functions of another module. NetLbfo, NetTCPIP, DnsClient, SmbShare, NetAdapter and
ScheduledTasks are CDXML modules; their functions read their own module's and the global scope's preferences
(about_Preference_Variables, about_Scopes). DSC Community's NetworkingDsc passes both on every NetLbfo call for that
reason.

The scripts walked (tree-sitter-powershell syntax trees, no PowerShell runs here):
- shipped: every .ps1 module and .psm1 module_utils under plugins/;
- rendered: the rollback scripts the planner writes for the management-path fixtures, one rollback script holding
  every step kind, and the commands each apply module is sent (the apply modules splat them, ``& $command
  @parameters``, so the walk reads them rendered as PowerShell lines by ``render_command``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_ps1_parse import parse_errors
from ps1_calls import advanced_functions, calls

from ansible_collections.hpc.balance.plugins.module_utils import _wincommand
from ansible_collections.hpc.balance.plugins.module_utils._wincommand import (
    SMB_COMMANDS,
    TEAM_COMMANDS,
    commands_for,
    render_command,
)
from ansible_collections.hpc.balance.plugins.module_utils._winrollback import render_rollback_script
from ansible_collections.hpc.balance.plugins.module_utils._winteam import plan
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import TeamDesired
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import parse_host_state

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "windows"
SHIPPED = sorted((ROOT / "plugins" / "modules").glob("*.ps1")) + sorted(
    (ROOT / "plugins" / "module_utils").glob("*.psm1")
)
HPCWIN = ROOT / "plugins" / "module_utils" / "HpcWin.psm1"

# Approved verbs (Get-Verb) whose commands change the system. Not here: Get/Test/Wait/Write/Out/Join/Split
# (read, wait or write to a stream), Invoke/Export/Import (run or load code; what they run is walked itself).
STATE_CHANGING_VERBS = {
    "add", "clear", "copy", "disable", "dismount", "enable", "grant", "initialize", "install", "mount", "move", "new",
    "register", "remove", "rename", "reset", "restart", "restore", "resume", "revoke", "set", "start", "stop",
    "suspend", "uninstall", "unregister", "update",
}  # fmt: skip

# A state-changing verb, but the command changes nothing on the host.
NOT_A_CHANGE = {
    "start-sleep": "waits; changes nothing",
    "new-scheduledtaskaction": "builds a task action object in memory (Learn: 'Creates a scheduled task action')",
    "new-scheduledtasktrigger": "builds a trigger object in memory (Learn: 'Creates a scheduled task trigger object')",
    "new-scheduledtaskprincipal": "builds a principal object in memory (Learn: 'Creates an object that contains a "
    "scheduled task principal')",
    "new-scheduledtasksettingsset": "builds a settings object in memory (Learn: 'Creates a new scheduled task "
    "settings object')",
}

# State-changing commands that cannot take -Confirm: their Learn syntax lists no -WhatIf/-Confirm (they still get
# -ErrorAction Stop, a common parameter every cmdlet takes).
NO_CONFIRM = {
    "register-scheduledtask": "learn.microsoft.com/powershell/module/scheduledtasks/register-scheduledtask: syntax "
    "[-Force] ... [-CimSession] [-ThrottleLimit] [-AsJob] [<CommonParameters>], no -WhatIf/-Confirm",
    "update-smbmultichannelconnection": "learn.microsoft.com/powershell/module/smbshare/"
    "update-smbmultichannelconnection: syntax [[-ServerName]] [-CimSession] [-ThrottleLimit] [-AsJob] "
    "[<CommonParameters>], no -WhatIf/-Confirm",
}
NO_CONFIRM_AND_NOT_A_CHANGE = set(NO_CONFIRM) | set(NOT_A_CHANGE)


# ---------------------------------------------------------------------------------------------------- the walk
def missing_confirm_or_stop(source: str, functions: dict | None = None) -> list[str]:
    """'line: command: what is missing' for every state-changing call without -Confirm:$false / -ErrorAction Stop."""
    functions = advanced_functions(source) if functions is None else functions
    problems = []
    for line, name, arguments in calls(source):
        lower = name.lower()
        if lower.split("-", 1)[0] not in STATE_CHANGING_VERBS or lower in NOT_A_CHANGE:
            continue
        confirm = arguments.get("-confirm")
        if lower not in NO_CONFIRM and confirm != ("$false", True):
            problems.append(f"{line}: {name}: no -Confirm:$false")
        error_action = arguments.get("-erroraction")
        if error_action is None or (error_action[0] or "").lower() != "stop":
            problems.append(f"{line}: {name}: no -ErrorAction Stop")
        if lower in functions and not functions[lower]:
            problems.append(f"{line}: {name}: is called with -Confirm but does not declare SupportsShouldProcess")
    return problems


# ---------------------------------------------------------------------------------------------------- the scripts
def _state(name):
    return parse_host_state(json.loads((FIXTURES / f"nic_team_gather_{name}.json").read_text()))


def _desired(**args):
    return TeamDesired.from_args(dict({"name": "Storage", "members": ["NIC1", "NIC2"]}, **args))


# The management-path changes whose plans arm a rollback (as in test__winrollback.py's cases).
ROLLBACK_CASES = {
    "team_the_winrm_nic": ("winrm_on_member", dict(team_nic_ip={"source": "members"})),
    "team_mgmt_with_force": ("no_team", dict(members=["NIC1", "MGMT"], force=True)),
    "remove_the_management_switch": ("set_switch_management_vnic", dict(name="SETswitch", kind="set", state="absent")),
    "retag_the_management_team": ("winrm_on_member", dict(vlan_id=0)),
    "member_out_of_the_management_switch": (
        "set_switch_management_vnic",
        dict(name="SETswitch", kind="set", members=["NIC3"], load_balancing_algorithm="HyperVPort"),
    ),
}

# One change of every kind the apply modules run; tied to the modules' allow-lists below.
EVERY_CHANGE = [
    {"action": "new_team", "team": "T", "members": ["A", "B"], "teaming_mode": "Lacp",
     "load_balancing_algorithm": "Dynamic", "lacp_timer": "Slow", "team_nic_name": "T"},
    {"action": "remove_team", "team": "T"},
    {"action": "rename_team", "team": "T", "new_name": "U"},
    {"action": "set_team", "team": "T", "teaming_mode": "Static"},
    {"action": "add_member", "team": "T", "member": "A", "administrative_mode": "Active"},
    {"action": "remove_member", "team": "T", "member": "A"},
    {"action": "set_member_mode", "team": "T", "member": "A", "administrative_mode": "Standby"},
    {"action": "rename_team_nic", "team_nic": "T", "new_name": "U"},
    {"action": "rename_team_nic", "team": "T", "primary": True, "team_nic": "T - VLAN 5", "new_name": "U"},
    {"action": "set_team_nic_vlan", "team_nic": "T", "vlan_id": 5},
    {"action": "set_team_nic_default", "team_nic": "T - VLAN 5"},
    {"action": "add_team_nic", "team": "T", "vlan_id": 5, "team_nic": "T - VLAN 5"},
    {"action": "remove_team_nic", "team": "T", "vlan_id": 5},
    {"action": "wait_adapter", "interface": "T"},
    {"action": "set_ip", "interface": "T", "address": "10.0.0.9", "prefix_length": 24, "gateway": "10.0.0.1",
     "dns_servers": ["10.0.0.2"]},
    {"action": "set_ip_dhcp", "interface": "T"},
    {"action": "set_ip_options", "interface": "T", "interface_metric": 50, "address": "10.0.0.9",
     "skip_as_source": True, "register_in_dns": False},
    {"action": "new_set_switch", "switch": "S", "members": ["A"], "allow_management_os": False},
    {"action": "set_set_team", "switch": "S", "members": ["A", "B"], "load_balancing_algorithm": "Dynamic"},
    {"action": "set_vm_switch", "switch": "S", "allow_management_os": True},
    {"action": "remove_set_switch", "switch": "S"},
    {"action": "add_host_vnic", "switch": "S", "vnic": "V"},
    {"action": "set_host_vnic_vlan", "vnic": "V", "vlan_id": 0},
    {"action": "set_host_vnic_vlan", "vnic": "V", "vlan_id": 130},
    {"action": "set_rdma", "adapter": "vEthernet (V)", "enabled": True},
    {"action": "set_rdma", "adapter": "vEthernet (V)", "enabled": False},
    {"action": "arm_rollback", "task_name": "t", "script": "# x", "timeout_s": 300},
    {"action": "disarm_rollback", "task_name": "t"},
    {"action": "set_server_multichannel", "enable": True},
    {"action": "set_client_multichannel", "enable": False},
    {"action": "add_constraint", "server_name": "fs01", "interfaces": ["A"]},
    {"action": "remove_constraint", "server_name": "fs01", "interfaces": ["A"]},
    {"action": "update_connections"},
]  # fmt: skip
ROLLBACK_STEP_KINDS = [c for c in EVERY_CHANGE if c["action"] not in ("arm_rollback", "disarm_rollback")] + [
    {"action": "restore_ip", "interface": "T", "dhcp": False, "addresses": ["10.0.0.9/24", "10.0.0.10/24"],
     "gateway": "10.0.0.1", "dns_servers": ["10.0.0.2"], "ipv6_addresses": ["2001:db8::9/64"],
     "ipv6_gateway": "2001:db8::1", "ipv6_dns_servers": ["2001:db8::53"]},
]  # fmt: skip


def _apply_payload_script() -> str:
    return "\n".join(render_command(command) for change in EVERY_CHANGE for command in commands_for(change)) + "\n"


def _rendered_rollback_scripts() -> dict:
    scripts = {"every_step_kind": render_rollback_script("hpc.balance rollback t", ROLLBACK_STEP_KINDS)}
    for case, (fixture, args) in sorted(ROLLBACK_CASES.items()):
        result = plan(_desired(**dict(args, allow_management_change=True)), _state(fixture))
        assert result.changes and result.changes[0]["action"] == "arm_rollback", case
        scripts[case] = result.changes[0]["script"]
    return scripts


# ---------------------------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("path", SHIPPED, ids=[path.name for path in SHIPPED])
def test_every_state_changing_call_in_the_shipped_scripts_passes_confirm_false_and_stop(path):
    source = path.read_text()
    assert parse_errors(source.encode("utf-8")) == []
    assert missing_confirm_or_stop(source) == []


@pytest.mark.parametrize("case", ["every_step_kind", *sorted(ROLLBACK_CASES)])
def test_every_state_changing_call_in_the_rendered_rollback_scripts_passes_confirm_false_and_stop(case):
    script = _rendered_rollback_scripts()[case]
    assert parse_errors(script.encode("utf-8")) == []
    assert missing_confirm_or_stop(script) == []


def test_every_command_the_apply_modules_are_sent_passes_confirm_false_and_stop():
    script = _apply_payload_script()
    assert parse_errors(script.encode("utf-8")) == []
    # The collection's own functions run from HpcWin.psm1: they must take -Confirm (SupportsShouldProcess).
    assert missing_confirm_or_stop(script, advanced_functions(HPCWIN.read_text())) == []


def test_the_walk_covers_every_command_the_apply_modules_allow():
    rendered = {command["command"] for change in EVERY_CHANGE for command in commands_for(change)}
    assert rendered == set(TEAM_COMMANDS) | set(SMB_COMMANDS)


def test_the_commands_exempt_from_confirm_are_the_documented_ones():
    assert {name.lower() for name in _wincommand.NO_CONFIRM} <= set(NO_CONFIRM)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("Remove-NetLbfoTeam -Name:'T'", "1: Remove-NetLbfoTeam: no -Confirm:$false"),
        ("Remove-NetLbfoTeam -Name:'T' -Confirm:$false", "1: Remove-NetLbfoTeam: no -ErrorAction Stop"),
        ("Set-NetLbfoTeam -Name T -Confirm $false -ErrorAction Stop", "1: Set-NetLbfoTeam: no -Confirm:$false"),
        (
            "Unregister-ScheduledTask -TaskName t -Confirm:$false -ErrorAction SilentlyContinue",
            "1: Unregister-ScheduledTask: no -ErrorAction Stop",
        ),
        ("Get-X | Remove-NetRoute -ErrorAction Stop", "1: Remove-NetRoute: no -Confirm:$false"),
        ("$a = (New-Item -Path x -ErrorAction Stop)", "1: New-Item: no -Confirm:$false"),
    ],
)
def test_the_walk_finds_a_call_without_confirm_or_stop(line, problem):
    assert problem in missing_confirm_or_stop(line + "\n")


@pytest.mark.parametrize(
    "line",
    [
        "Remove-NetLbfoTeam -Name:'T' -Confirm:$false -ErrorAction:'Stop'",
        "Get-X | Remove-NetRoute -Confirm:$false -ErrorAction Stop",
        "Register-ScheduledTask @task -Force -ErrorAction Stop | Out-Null",
        "Update-SmbMultichannelConnection -ErrorAction:'Stop'",
        "Get-NetAdapter -Name x -ErrorAction SilentlyContinue",
        "Start-Sleep -Seconds 2",
    ],
)
def test_the_walk_accepts_confirm_false_and_stop_and_leaves_reads_alone(line):
    assert missing_confirm_or_stop(line + "\n") == []


def test_a_function_called_with_confirm_must_declare_supports_should_process():
    script = (
        "Function Clear-Thing {\n    param(\n        [string] $Name\n    )\n\n    $Name\n}\n"
        "Clear-Thing -Name x -Confirm:$false -ErrorAction Stop\n"
    )
    assert missing_confirm_or_stop(script) == [
        "8: Clear-Thing: is called with -Confirm but does not declare SupportsShouldProcess"
    ]
