# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One planned change -> the cmdlets (and parameters) that make it, for the apply modules and the rollback script.

The mapping lives here, in Python, so that it is tested: the apply modules splat the parameters they are given into
the named cmdlet (``& $command @parameters``) and accept only the cmdlets listed in ALLOWED_COMMANDS (their argument
spec's choices). The same rendering writes the rollback script as text.

Each row follows the cmdlet's Learn page (learn.microsoft.com/powershell/module/<module>/<cmdlet>): NetLbfo,
NetAdapter, NetTCPIP, DnsClient, Hyper-V, SmbShare, ScheduledTasks.
"""

from __future__ import annotations

WAIT_ADAPTER_TIMEOUT_S = 60

# Verbs of the commands that change state. Each such command is given -Confirm:$false and -ErrorAction Stop itself:
# $ConfirmPreference / $ErrorActionPreference set by a module or a script do not reach the functions of another
# module (NetLbfo, NetTCPIP, DnsClient, SmbShare, ScheduledTasks are CDXML modules), which read only their own
# module's and the global scope's preferences (about_Preference_Variables; NetworkingDsc passes both on every call).
STATE_CHANGING_VERBS = frozenset(
    {
        "Add",
        "Clear",
        "Disable",
        "Enable",
        "New",
        "Register",
        "Remove",
        "Rename",
        "Reset",
        "Restart",
        "Restore",
        "Set",
        "Start",
        "Stop",
        "Unregister",
        "Update",
    }
)
# State-changing cmdlets whose Learn syntax has no -WhatIf/-Confirm: they get -ErrorAction Stop only.
NO_CONFIRM = frozenset({"Register-ScheduledTask", "Update-SmbMultichannelConnection"})


def changes_state(command: str) -> bool:
    return command.split("-", 1)[0] in STATE_CHANGING_VERBS


def cmdlet(command: str, **parameters: object) -> dict:
    """One command; a state-changing one carries -Confirm:$false (where it takes it) and -ErrorAction Stop."""
    arguments = {k: v for k, v in parameters.items() if v is not None}
    if changes_state(command):
        if command not in NO_CONFIRM:
            arguments["Confirm"] = False
        arguments["ErrorAction"] = "Stop"
    return {"command": command, "parameters": arguments}


def _lbfo(change: dict) -> list[dict]:
    action = change["action"]
    if action == "new_team":
        return [
            cmdlet(
                "New-NetLbfoTeam",
                Name=change["team"],
                TeamMembers=list(change["members"]),
                TeamingMode=change["teaming_mode"],
                LoadBalancingAlgorithm=change["load_balancing_algorithm"],
                LacpTimer=change.get("lacp_timer"),
                TeamNicName=change.get("team_nic_name"),
            )
        ]
    if action == "remove_team":
        return [cmdlet("Remove-NetLbfoTeam", Name=change["team"])]
    if action == "rename_team":
        return [cmdlet("Rename-NetLbfoTeam", Name=change["team"], NewName=change["new_name"])]
    if action == "set_team":
        return [
            cmdlet(
                "Set-NetLbfoTeam",
                Name=change["team"],
                TeamingMode=change.get("teaming_mode"),
                LoadBalancingAlgorithm=change.get("load_balancing_algorithm"),
                LacpTimer=change.get("lacp_timer"),
            )
        ]
    if action == "add_member":
        return [
            cmdlet(
                "Add-NetLbfoTeamMember",
                Name=change["member"],
                Team=change["team"],
                AdministrativeMode=change["administrative_mode"],
            )
        ]
    if action == "remove_member":
        return [cmdlet("Remove-NetLbfoTeamMember", Name=change["member"], Team=change["team"])]
    if action == "set_member_mode":
        return [
            cmdlet(
                "Set-NetLbfoTeamMember",
                Name=change["member"],
                Team=change["team"],
                AdministrativeMode=change["administrative_mode"],
            )
        ]
    if action == "rename_team_nic":
        if change.get("primary"):
            # The primary team NIC found on the host when the command runs (Get-NetLbfoTeamNic -Team, Primary), not
            # the name the plan predicts it has after tagging (HpcWin.psm1).
            return [cmdlet("Rename-HpcPrimaryTeamNic", Team=change["team"], NewName=change["new_name"])]
        return [cmdlet("Rename-NetAdapter", Name=change["team_nic"], NewName=change["new_name"])]
    if action == "set_team_nic_vlan":
        return [cmdlet("Set-NetLbfoTeamNic", Name=change["team_nic"], VlanID=int(change["vlan_id"]))]
    if action == "set_team_nic_default":
        # Untagging is -Default; -VlanID 0 is not the documented way back to Default mode.
        return [cmdlet("Set-NetLbfoTeamNic", Name=change["team_nic"], Default=True)]
    if action == "add_team_nic":
        return [
            cmdlet("Add-NetLbfoTeamNic", Team=change["team"], VlanID=int(change["vlan_id"]), Name=change["team_nic"])
        ]
    if action == "remove_team_nic":
        return [cmdlet("Remove-NetLbfoTeamNic", Team=change["team"], VlanID=int(change["vlan_id"]))]
    return []


def _ip(change: dict) -> list[dict]:
    action = change["action"]
    alias = change.get("interface")
    if action == "wait_adapter":
        return [cmdlet("Wait-HpcNetAdapter", Name=alias, TimeoutSeconds=WAIT_ADAPTER_TIMEOUT_S)]
    # The IPv4 default route and addresses of the interface, each removed only where there is one (HpcWin.psm1).
    clear = [cmdlet("Clear-HpcIPv4Address", InterfaceAlias=alias)]
    if action == "set_ip":
        steps = [cmdlet("Set-NetIPInterface", InterfaceAlias=alias, AddressFamily="IPv4", Dhcp="Disabled"), *clear]
        steps.append(
            cmdlet(
                "New-NetIPAddress",
                InterfaceAlias=alias,
                AddressFamily="IPv4",
                IPAddress=change["address"],
                PrefixLength=int(change["prefix_length"]),
                DefaultGateway=change.get("gateway"),
            )
        )
        if change.get("dns_servers"):
            steps.append(
                cmdlet("Set-DnsClientServerAddress", InterfaceAlias=alias, ServerAddresses=list(change["dns_servers"]))
            )
        return steps
    if action == "set_ip_dhcp":
        return [
            *clear,
            cmdlet("Set-NetIPInterface", InterfaceAlias=alias, AddressFamily="IPv4", Dhcp="Enabled"),
            cmdlet("Set-DnsClientServerAddress", InterfaceAlias=alias, ResetServerAddresses=True),
        ]
    if action == "set_ip_options":
        return _ip_options(change)
    if action == "restore_ip":
        # Rollback only (the function is defined in the rollback script, _winrollback): it compares first.
        return [
            cmdlet(
                "Restore-HpcIPConfiguration",
                InterfaceAlias=alias,
                Dhcp=bool(change.get("dhcp")),
                # Both families in one list each: the function tells IPv6 by its ':'.
                Address=[*(change.get("addresses") or []), *(change.get("ipv6_addresses") or [])],
                Gateway=[gateway for gateway in (change.get("gateway"), change.get("ipv6_gateway")) if gateway],
                DnsServer=[*(change.get("dns_servers") or []), *(change.get("ipv6_dns_servers") or [])],
            )
        ]
    return []


def _ip_options(change: dict) -> list[dict]:
    """Route metric (Set-NetIPInterface -InterfaceMetric; -AutomaticMetric Enabled for None), SkipAsSource
    (Set-NetIPAddress -SkipAsSource) and DNS registration (Set-DnsClient -RegisterThisConnectionsAddress), each
    only where the change names it (learn.microsoft.com/powershell/module/nettcpip/set-netipinterface,
    .../nettcpip/set-netipaddress, .../dnsclient/set-dnsclient)."""
    alias = change["interface"]
    steps = []
    if "interface_metric" in change:
        metric = change["interface_metric"]
        if metric is None:
            steps.append(
                cmdlet("Set-NetIPInterface", InterfaceAlias=alias, AddressFamily="IPv4", AutomaticMetric="Enabled")
            )
        else:
            steps.append(
                cmdlet(
                    "Set-NetIPInterface",
                    InterfaceAlias=alias,
                    AddressFamily="IPv4",
                    AutomaticMetric="Disabled",
                    InterfaceMetric=int(metric),
                )
            )
    if "skip_as_source" in change:
        steps.append(
            cmdlet(
                "Set-NetIPAddress",
                InterfaceAlias=alias,
                IPAddress=change["address"],
                SkipAsSource=bool(change["skip_as_source"]),
            )
        )
    if "register_in_dns" in change:
        steps.append(
            cmdlet(
                "Set-DnsClient", InterfaceAlias=alias, RegisterThisConnectionsAddress=bool(change["register_in_dns"])
            )
        )
    return steps


def _hyperv(change: dict) -> list[dict]:
    action = change["action"]
    if action == "new_set_switch":
        return [
            cmdlet(
                "New-VMSwitch",
                Name=change["switch"],
                NetAdapterName=list(change["members"]),
                EnableEmbeddedTeaming=True,
                AllowManagementOS=bool(change.get("allow_management_os")),
            )
        ]
    if action == "set_set_team":
        return [
            cmdlet(
                "Set-VMSwitchTeam",
                Name=change["switch"],
                NetAdapterName=list(change["members"]) if change.get("members") else None,
                LoadBalancingAlgorithm=change.get("load_balancing_algorithm"),
            )
        ]
    if action == "set_vm_switch":
        return [cmdlet("Set-VMSwitch", Name=change["switch"], AllowManagementOS=bool(change["allow_management_os"]))]
    if action == "remove_set_switch":
        # Refuses when a virtual machine is connected to the switch (HpcWin.psm1); Remove-VMSwitch -Force would not.
        return [cmdlet("Remove-HpcVMSwitch", Name=change["switch"])]
    if action == "add_host_vnic":
        return [cmdlet("Add-VMNetworkAdapter", ManagementOS=True, SwitchName=change["switch"], Name=change["vnic"])]
    if action == "set_host_vnic_vlan":
        if int(change["vlan_id"]):
            return [
                cmdlet(
                    "Set-VMNetworkAdapterVlan",
                    ManagementOS=True,
                    VMNetworkAdapterName=change["vnic"],
                    Access=True,
                    VlanId=int(change["vlan_id"]),
                )
            ]
        return [
            cmdlet("Set-VMNetworkAdapterVlan", ManagementOS=True, VMNetworkAdapterName=change["vnic"], Untagged=True)
        ]
    if action == "set_rdma":
        command = "Enable-NetAdapterRdma" if change["enabled"] else "Disable-NetAdapterRdma"
        return [cmdlet(command, Name=change["adapter"])]
    return []


def _smb(change: dict) -> list[dict]:
    action = change["action"]
    if action == "set_server_multichannel":
        return [cmdlet("Set-SmbServerConfiguration", EnableMultiChannel=bool(change["enable"]), Force=True)]
    if action == "set_client_multichannel":
        return [cmdlet("Set-SmbClientConfiguration", EnableMultiChannel=bool(change["enable"]), Force=True)]
    if action == "add_constraint":
        return [
            cmdlet(
                "New-SmbMultichannelConstraint",
                ServerName=change["server_name"],
                InterfaceAlias=list(change["interfaces"]),
                Force=True,
            )
        ]
    if action == "remove_constraint":
        return [
            cmdlet(
                "Remove-SmbMultichannelConstraint",
                ServerName=change["server_name"],
                InterfaceAlias=list(change["interfaces"]),
                Force=True,
            )
        ]
    if action == "update_connections":
        return [cmdlet("Update-SmbMultichannelConnection", ServerName=change.get("server_name"))]
    return []


def _rollback(change: dict) -> list[dict]:
    if change["action"] == "arm_rollback":
        return [
            cmdlet(
                "Register-HpcRollback",
                TaskName=change["task_name"],
                Script=change["script"],
                TimeoutSeconds=int(change["timeout_s"]),
            )
        ]
    if change["action"] == "disarm_rollback":
        return [cmdlet("Unregister-HpcRollback", TaskName=change["task_name"])]
    return []


def commands_for(change: dict) -> list[dict]:
    """[{'command': cmdlet, 'parameters': {...}}, ...] that make one planned change; ValueError for an unknown one."""
    for family in (_lbfo, _ip, _hyperv, _smb, _rollback):
        commands = family(change)
        if commands:
            return commands
    raise ValueError(f"no command for change {change.get('action')!r}")


def with_commands(changes: list[dict]) -> list[dict]:
    """The apply module's payload: each change with the commands that make it."""
    return [{"action": change["action"], "commands": commands_for(change)} for change in changes]


# Every cmdlet (or collection function) each apply module may run: its argument spec's choices.
SMB_COMMANDS = (
    "New-SmbMultichannelConstraint",
    "Remove-SmbMultichannelConstraint",
    "Set-SmbClientConfiguration",
    "Set-SmbServerConfiguration",
    "Update-SmbMultichannelConnection",
)
TEAM_COMMANDS = (
    "Add-NetLbfoTeamMember",
    "Add-NetLbfoTeamNic",
    "Add-VMNetworkAdapter",
    "Clear-HpcIPv4Address",
    "Disable-NetAdapterRdma",
    "Enable-NetAdapterRdma",
    "New-NetIPAddress",
    "New-NetLbfoTeam",
    "New-VMSwitch",
    "Register-HpcRollback",
    "Remove-NetLbfoTeam",
    "Remove-NetLbfoTeamMember",
    "Remove-NetLbfoTeamNic",
    "Remove-HpcVMSwitch",
    "Rename-HpcPrimaryTeamNic",
    "Rename-NetAdapter",
    "Rename-NetLbfoTeam",
    "Set-DnsClient",
    "Set-DnsClientServerAddress",
    "Set-NetIPAddress",
    "Set-NetIPInterface",
    "Set-NetLbfoTeam",
    "Set-NetLbfoTeamMember",
    "Set-NetLbfoTeamNic",
    "Set-VMNetworkAdapterVlan",
    "Set-VMSwitch",
    "Set-VMSwitchTeam",
    "Unregister-HpcRollback",
    "Wait-HpcNetAdapter",
)


# Functions only the rollback script defines and runs (_winrollback), never sent to an apply module.
ROLLBACK_ONLY_COMMANDS = ("Restore-HpcIPConfiguration",)


# ---------------------------------------------------------------------------------------------------- as text
def ps_literal(value: object) -> str:
    """A Python value as a PowerShell literal: 'single-quoted' strings, $true/$false, numbers, @(arrays)."""
    if value is None:
        return "$null"
    if isinstance(value, bool):
        return "$true" if value else "$false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "@({})".format(", ".join(ps_literal(item) for item in value))
    text = str(value)
    for quote in ("\u2018", "\u2019", "\u201a", "\u201b"):  # PowerShell treats these as single quotes too
        text = text.replace(quote, "'")
    return "'{}'".format(text.replace("'", "''"))


def render_command(command: dict) -> str:
    """One command as a PowerShell line with -Name:value arguments (switches as -Switch:$true)."""
    arguments = " ".join(f"-{name}:{ps_literal(value)}" for name, value in command["parameters"].items())
    return f"{command['command']} {arguments}".rstrip()
