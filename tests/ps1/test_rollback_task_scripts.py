"""The PowerShell that arms, disarms and renames on a Windows host (HpcWin.psm1 and the rendered rollback script),
read from its tree-sitter-powershell syntax tree: no PowerShell runs here, so each test pins the calls the
behaviour rests on, and cites the Microsoft Learn page that documents it.
"""

from __future__ import annotations

import re
from pathlib import Path

from check_ps1_parse import parser
from ps1_calls import calls

from ansible_collections.hpc.balance.plugins.module_utils._winrollback import (
    ROLLBACK_MAY_HAVE_FIRED,
    render_rollback_script,
)

ROOT = Path(__file__).resolve().parents[2]
HPCWIN = (ROOT / "plugins" / "module_utils" / "HpcWin.psm1").read_text()
GATHER = (ROOT / "plugins" / "modules" / "win_nic_team_gather.ps1").read_text()
ROLLBACK = render_rollback_script(
    "hpc.balance rollback lbfo T",
    [{"action": "rename_team_nic", "team": "T", "primary": True, "team_nic": "T - VLAN 5", "new_name": "U"}],
)


def function(source: str, name: str) -> str:
    """The text of one function the script defines."""
    stack = [parser().parse(source.encode("utf-8")).root_node]
    while stack:
        node = stack.pop()
        if node.type == "function_statement":
            found = next(child for child in node.children if child.type == "function_name")
            if found.text.decode("utf-8").lower() == name.lower():
                return node.text.decode("utf-8")
        stack.extend(node.children)
    raise AssertionError(f"no function {name}")


def called(source: str) -> list[tuple[str, dict]]:
    """(command, arguments) in the order the script calls them."""
    return [(name, arguments) for _line, name, arguments in calls(source)]


def order(source: str, *names: str) -> list[int]:
    commands = [name.lower() for name, _arguments in called(source)]
    return [commands.index(name.lower()) for name in names]


# ---------------------------------------------------------------------------------------------------- arming
def test_registering_refuses_a_rollback_task_that_is_already_armed():
    """Register-ScheduledTask -Force "overwrites an existing task" (learn.microsoft.com/powershell/module/
    scheduledtasks/register-scheduledtask): a task left armed by an earlier failure, which restores the state
    recorded then, would be silently replaced. The function looks first and throws, naming the task and the command
    that clears it."""
    body = function(HPCWIN, "Register-HpcRollback")
    register = [arguments for name, arguments in called(body) if name == "Register-ScheduledTask"]
    assert register and all("-force" not in arguments for arguments in register)
    assert order(body, "Get-ScheduledTask", "Register-ScheduledTask") == sorted(
        order(body, "Get-ScheduledTask", "Register-ScheduledTask")
    )
    assert "is already registered" in body
    assert "Unregister-ScheduledTask -TaskName ''{0}'' -Confirm:$false" in body


def test_the_rollback_task_runs_after_a_trigger_missed_during_a_reboot():
    """New-ScheduledTaskSettingsSet -StartWhenAvailable (learn.microsoft.com/powershell/module/scheduledtasks/
    new-scheduledtasksettingsset): "Task Scheduler can start the task at any time after its scheduled time has
    passed"; without it (TaskSettings.StartWhenAvailable, learn.microsoft.com/windows/win32/taskschd/
    tasksettings-startwhenavailable, default False) a one-shot trigger missed while the host was down never runs."""
    body = function(HPCWIN, "Register-HpcRollback")
    settings = [arguments for name, arguments in called(body) if name == "New-ScheduledTaskSettingsSet"]
    assert settings and "-startwhenavailable" in settings[0]
    assert re.search(r"^\s*Settings = \$settings$", body, re.MULTILINE)  # in the task splatted to Register


# ---------------------------------------------------------------------------------------------------- disarming
def test_the_disarm_fails_when_the_task_is_gone_runs_or_has_run():
    """Get-ScheduledTask reports State (Ready, Running, Queued, Disabled) and Get-ScheduledTaskInfo LastRunTime and
    LastTaskResult (learn.microsoft.com/powershell/module/scheduledtasks/get-scheduledtaskinfo); a task that has
    not run has LastTaskResult SCHED_S_TASK_HAS_NOT_RUN, 0x00041303 (learn.microsoft.com/windows/win32/taskschd/
    task-scheduler-error-and-success-constants). Disable-ScheduledTask first, so the trigger cannot fire between the
    check and Unregister-ScheduledTask, which must fail loudly (-ErrorAction Stop, never SilentlyContinue)."""
    body = function(HPCWIN, "Unregister-HpcRollback")
    names = [name for name, _arguments in called(body)]
    assert "Get-ScheduledTaskInfo" in names
    assert order(body, "Disable-ScheduledTask", "Get-ScheduledTaskInfo", "Unregister-ScheduledTask") == sorted(
        order(body, "Disable-ScheduledTask", "Get-ScheduledTaskInfo", "Unregister-ScheduledTask")
    )
    unregister = [arguments for name, arguments in called(body) if name == "Unregister-ScheduledTask"]
    assert unregister == [
        {"-taskname": ("$TaskName", False), "-confirm": ("$false", True), "-erroraction": ("Stop", False)}
    ]
    assert body.count("throw (") >= 3  # gone; running or queued; has run
    assert "$script:TaskHasNotRun" in body and "$script:TaskHasNotRun = 267011" in HPCWIN  # 0x00041303
    assert f"$script:RollbackMayHaveFired = '{ROLLBACK_MAY_HAVE_FIRED}'" in HPCWIN


# ---------------------------------------------------------------------------------------------------- the folder
def test_the_rollback_script_is_written_only_into_a_folder_for_system_and_administrators():
    """The script runs as SYSTEM from %ProgramData%, where an ordinary user may create a folder (and then owns it).
    ObjectSecurity.SetAccessRuleProtection(isProtected: true, preserveInheritance: false) (learn.microsoft.com/dotnet/
    api/system.security.accesscontrol.objectsecurity.setaccessruleprotection) drops inherited entries; the only
    entries are S-1-5-18 (SYSTEM) and S-1-5-32-544 (Administrators) (learn.microsoft.com/windows/win32/secauthz/
    well-known-sids); the owner is checked with Get-Acl before Set-Acl (learn.microsoft.com/powershell/module/
    microsoft.powershell.security/set-acl) and before anything is written."""
    folder = function(HPCWIN, "Initialize-HpcRollbackFolder")
    assert "$security.SetAccessRuleProtection($true, $false)" in folder
    assert set(re.findall(r"S-1-[0-9-]+", folder)) == {"S-1-5-18", "S-1-5-32-544"}
    assert "[System.IO.Directory]::CreateDirectory($Path, $security)" in folder  # made with the protected list
    assert "GetOwner(" in folder and "ReparsePoint" in folder
    get_acl, set_acl = order(folder, "Get-Acl", "Set-Acl")
    assert get_acl < set_acl
    owner_check = folder.index("GetOwner(")
    assert folder.index("throw", owner_check) < folder.index("Set-Acl")
    register = function(HPCWIN, "Register-HpcRollback")
    assert order(register, "Initialize-HpcRollbackFolder", "Set-Content") == sorted(
        order(register, "Initialize-HpcRollbackFolder", "Set-Content")
    )
    assert "New-Item" not in [name for name, _arguments in called(register)]  # no folder with inherited rights


# ---------------------------------------------------------------------------------------------------- renaming
def test_the_primary_team_nic_is_found_on_the_host_when_it_is_renamed():
    """Get-NetLbfoTeamNic -Team (learn.microsoft.com/powershell/module/netlbfo/get-netlbfoteamnic) lists the team's
    NICs; MSFT_NetLbfoTeamNic's Primary property marks the primary one. Rename-NetAdapter
    (learn.microsoft.com/powershell/module/netadapter/rename-netadapter) then renames it by the name found."""
    for source in (HPCWIN, ROLLBACK):
        body = function(source, "Rename-HpcPrimaryTeamNic")
        get = [arguments for name, arguments in called(body) if name == "Get-NetLbfoTeamNic"]
        assert get and get[0]["-team"] == ("$Team", False)
        assert "Where-Object { $_.Primary }" in body
        rename = [arguments for name, arguments in called(body) if name == "Rename-NetAdapter"]
        assert rename and rename[0]["-name"] == ("$current", False)
    assert "Rename-HpcPrimaryTeamNic -Team:'T' -NewName:'U'" in ROLLBACK


# ---------------------------------------------------------------------------------------------------- the gather
def test_the_gather_reads_ipv6_addresses_and_the_connections_on_the_given_ports():
    """Get-NetIPAddress -AddressFamily IPv6 (learn.microsoft.com/powershell/module/nettcpip/get-netipaddress) and
    Get-NetTCPConnection -LocalPort (learn.microsoft.com/powershell/module/nettcpip/get-nettcpconnection) with the
    ports the controller passes, not a fixed 5985/5986."""
    assert "AddressFamily = 'IPv6'" in GATHER
    assert "LocalPort = $connectionPorts" in GATHER
    assert "LocalPort = @(5985, 5986)" not in GATHER


def test_the_gather_reads_the_jumbo_packet_size_of_every_adapter():
    """Get-NetAdapterAdvancedProperty -RegistryKeyword (learn.microsoft.com/powershell/module/netadapter/
    get-netadapteradvancedproperty): "Individual advanced properties can also be selected either by DisplayName or
    RegistryKeyword parameters"; "The standardized keywords have a RegistryKeyword name that begins with an
    asterisk". *JumboPacket is "The size, in bytes, of the largest supported Jumbo Packet (an Ethernet frame that is
    greater than 1514 bytes) that the hardware can support" (learn.microsoft.com/windows-hardware/drivers/network/
    keywords-that-can-be-edited). Its value is RegistryValue; a driver without the keyword gives no record."""
    reads = [
        arguments
        for name, arguments in called(GATHER)
        if name == "Get-Record" and arguments.get("-command", (None,))[0] == "Get-NetAdapterAdvancedProperty"
    ]
    assert len(reads) == 1
    assert "RegistryKeyword = '*JumboPacket'" in reads[0]["-parameters"][0]
    assert "ErrorAction = 'SilentlyContinue'" in reads[0]["-parameters"][0]
    assert {"'Name'", "'RegistryKeyword'", "'RegistryValue'"} <= {
        word.strip() for word in reads[0]["-property"][0].strip("@()").split(",")
    }
    assert "$module.Result.jumbo_packets = Get-Record -Command 'Get-NetAdapterAdvancedProperty'" in GATHER


# ---------------------------------------------------------------------------------------------------- restoring
def restore_script() -> str:
    return render_rollback_script(
        "hpc.balance rollback set S",
        [{"action": "restore_ip", "interface": "vEthernet (S)", "dhcp": False, "addresses": ["10.0.1.21/24"]}],
    )


def test_the_ip_restore_reads_the_interface_first_and_leaves_one_with_the_recorded_configuration_alone():
    """After a change that stopped half-way the rollback still runs every step; an interface the change never
    reached already has the recorded configuration. Get-NetIPAddress -PrefixOrigin Manual, Get-NetRoute
    -DestinationPrefix, Get-DnsClientServerAddress and Get-NetIPInterface (learn.microsoft.com/powershell/module/
    nettcpip, .../dnsclient) read it before anything is removed, and the function returns when they match."""
    script = restore_script()
    body = function(script, "Restore-HpcIPConfiguration")
    names = [name.lower() for name, _arguments in called(body)]
    first_change = min(
        names.index(name) for name in ("clear-hpcipv4address", "clear-hpcipv6address", "set-netipinterface")
    )
    assert names.index("get-hpcipfamilystate") < first_change
    unchanged = body.index("unchanged, left alone")
    assert body.index("return", unchanged) < body.index("Clear-HpcIPv4Address")
    reads = [name for name, _arguments in called(function(script, "Get-HpcIPFamilyState"))]
    assert {"Get-NetIPAddress", "Get-NetRoute", "Get-DnsClientServerAddress", "Get-NetIPInterface"} <= set(reads)


def test_the_ip_restore_adds_every_address_and_the_gateway_of_each_family():
    """New-NetIPAddress per recorded address, then New-NetRoute 0.0.0.0/0 or ::/0 to the gateway
    (learn.microsoft.com/powershell/module/nettcpip/new-netipaddress, .../new-netroute); only manual IPv6 addresses
    are removed first (-PrefixOrigin Manual), so link-local ones stay."""
    script = restore_script()
    add = function(script, "Add-HpcIPAddress")
    assert "foreach ($entry in $Address)" in add
    assert [name for name, _arguments in called(add)].count("New-NetRoute") == 1
    clear6 = function(script, "Clear-HpcIPv6Address")
    get = [arguments for name, arguments in called(clear6) if name == "Get-NetIPAddress"]
    assert get and get[0]["-prefixorigin"] == ("Manual", False)


def test_the_switch_removal_refuses_while_a_virtual_machine_is_connected():
    """Get-VMNetworkAdapter -VMName * (learn.microsoft.com/powershell/module/hyper-v/get-vmnetworkadapter) before
    Remove-VMSwitch -Force, which removes without asking (learn.microsoft.com/powershell/module/hyper-v/
    remove-vmswitch)."""
    switch_rollback = render_rollback_script(
        "hpc.balance rollback set S", [{"action": "remove_set_switch", "switch": "S"}]
    )
    for source in (HPCWIN, switch_rollback):
        body = function(source, "Remove-HpcVMSwitch")
        get = [arguments for name, arguments in called(body) if name == "Get-VMNetworkAdapter"]
        assert get and get[0]["-vmname"] == ("*", False)
        assert order(body, "Get-VMNetworkAdapter", "Remove-VMSwitch") == sorted(
            order(body, "Get-VMNetworkAdapter", "Remove-VMSwitch")
        )
        assert body.index("throw") < body.index("Remove-VMSwitch -Name")
    assert "Remove-HpcVMSwitch -Name:'S'" in switch_rollback


def test_the_gather_reads_what_the_rollback_restores_and_the_vms_on_each_switch():
    """Get-NetRoute -DestinationPrefix takes several prefixes (learn.microsoft.com/powershell/module/nettcpip/
    get-netroute): the default routes of both families; Get-DnsClientServerAddress without -AddressFamily gives one
    record per family (learn.microsoft.com/powershell/module/dnsclient/get-dnsclientserveraddress);
    Get-VMNetworkAdapter -VMName * lists the VMs' adapters with their SwitchName."""
    assert "DestinationPrefix = @('0.0.0.0/0', '::/0')" in GATHER
    assert "Get-Record -Command 'Get-DnsClientServerAddress' -Property" in GATHER
    assert "-Parameters @{ VMName = '*' }" in GATHER and "'VMName', 'Name', 'SwitchName'" in GATHER
