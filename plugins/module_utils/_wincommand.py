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
IPV4_DEFAULT_ROUTE = "0.0.0.0/0"


def _cmd(command: str, **parameters: object) -> dict:
    return {"command": command, "parameters": {k: v for k, v in parameters.items() if v is not None}}


def _lbfo(change: dict) -> list[dict]:
    action = change["action"]
    if action == "new_team":
        return [
            _cmd(
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
        return [_cmd("Remove-NetLbfoTeam", Name=change["team"])]
    if action == "rename_team":
        return [_cmd("Rename-NetLbfoTeam", Name=change["team"], NewName=change["new_name"])]
    if action == "set_team":
        return [
            _cmd(
                "Set-NetLbfoTeam",
                Name=change["team"],
                TeamingMode=change.get("teaming_mode"),
                LoadBalancingAlgorithm=change.get("load_balancing_algorithm"),
                LacpTimer=change.get("lacp_timer"),
            )
        ]
    if action == "add_member":
        return [
            _cmd(
                "Add-NetLbfoTeamMember",
                Name=change["member"],
                Team=change["team"],
                AdministrativeMode=change["administrative_mode"],
            )
        ]
    if action == "remove_member":
        return [_cmd("Remove-NetLbfoTeamMember", Name=change["member"], Team=change["team"])]
    if action == "set_member_mode":
        return [
            _cmd(
                "Set-NetLbfoTeamMember",
                Name=change["member"],
                Team=change["team"],
                AdministrativeMode=change["administrative_mode"],
            )
        ]
    if action == "rename_team_nic":
        return [_cmd("Rename-NetAdapter", Name=change["team_nic"], NewName=change["new_name"])]
    if action == "set_team_nic_vlan":
        return [_cmd("Set-NetLbfoTeamNic", Name=change["team_nic"], VlanID=int(change["vlan_id"]))]
    if action == "set_team_nic_default":
        # Untagging is -Default; -VlanID 0 is not the documented way back to Default mode.
        return [_cmd("Set-NetLbfoTeamNic", Name=change["team_nic"], Default=True)]
    if action == "add_team_nic":
        return [_cmd("Add-NetLbfoTeamNic", Team=change["team"], VlanID=int(change["vlan_id"]), Name=change["team_nic"])]
    if action == "remove_team_nic":
        return [_cmd("Remove-NetLbfoTeamNic", Team=change["team"], VlanID=int(change["vlan_id"]))]
    return []


def _ip(change: dict) -> list[dict]:
    action = change["action"]
    alias = change.get("interface")
    if action == "wait_adapter":
        return [_cmd("Wait-HpcNetAdapter", Name=alias, TimeoutSeconds=WAIT_ADAPTER_TIMEOUT_S)]
    clear = [
        _cmd(
            "Remove-NetRoute",
            InterfaceAlias=alias,
            DestinationPrefix=IPV4_DEFAULT_ROUTE,
            Confirm=False,
            ErrorAction="SilentlyContinue",
        ),
        _cmd(
            "Remove-NetIPAddress",
            InterfaceAlias=alias,
            AddressFamily="IPv4",
            Confirm=False,
            ErrorAction="SilentlyContinue",
        ),
    ]
    if action == "set_ip":
        steps = [_cmd("Set-NetIPInterface", InterfaceAlias=alias, AddressFamily="IPv4", Dhcp="Disabled"), *clear]
        steps.append(
            _cmd(
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
                _cmd("Set-DnsClientServerAddress", InterfaceAlias=alias, ServerAddresses=list(change["dns_servers"]))
            )
        return steps
    if action == "set_ip_dhcp":
        return [
            *clear,
            _cmd("Set-NetIPInterface", InterfaceAlias=alias, AddressFamily="IPv4", Dhcp="Enabled"),
            _cmd("Set-DnsClientServerAddress", InterfaceAlias=alias, ResetServerAddresses=True),
        ]
    return []


def _hyperv(change: dict) -> list[dict]:
    action = change["action"]
    if action == "new_set_switch":
        return [
            _cmd(
                "New-VMSwitch",
                Name=change["switch"],
                NetAdapterName=list(change["members"]),
                EnableEmbeddedTeaming=True,
                AllowManagementOS=bool(change.get("allow_management_os")),
            )
        ]
    if action == "set_set_team":
        return [
            _cmd(
                "Set-VMSwitchTeam",
                Name=change["switch"],
                NetAdapterName=list(change["members"]) if change.get("members") else None,
                LoadBalancingAlgorithm=change.get("load_balancing_algorithm"),
            )
        ]
    if action == "set_vm_switch":
        return [_cmd("Set-VMSwitch", Name=change["switch"], AllowManagementOS=bool(change["allow_management_os"]))]
    if action == "remove_set_switch":
        return [_cmd("Remove-VMSwitch", Name=change["switch"], Force=True)]
    if action == "add_host_vnic":
        return [_cmd("Add-VMNetworkAdapter", ManagementOS=True, SwitchName=change["switch"], Name=change["vnic"])]
    if action == "set_host_vnic_vlan":
        if int(change["vlan_id"]):
            return [
                _cmd(
                    "Set-VMNetworkAdapterVlan",
                    ManagementOS=True,
                    VMNetworkAdapterName=change["vnic"],
                    Access=True,
                    VlanId=int(change["vlan_id"]),
                )
            ]
        return [_cmd("Set-VMNetworkAdapterVlan", ManagementOS=True, VMNetworkAdapterName=change["vnic"], Untagged=True)]
    if action == "set_rdma":
        command = "Enable-NetAdapterRdma" if change["enabled"] else "Disable-NetAdapterRdma"
        return [_cmd(command, Name=change["adapter"])]
    return []


def _smb(change: dict) -> list[dict]:
    action = change["action"]
    if action == "set_server_multichannel":
        return [_cmd("Set-SmbServerConfiguration", EnableMultiChannel=bool(change["enable"]), Force=True)]
    if action == "set_client_multichannel":
        return [_cmd("Set-SmbClientConfiguration", EnableMultiChannel=bool(change["enable"]), Force=True)]
    if action == "add_constraint":
        return [
            _cmd(
                "New-SmbMultichannelConstraint",
                ServerName=change["server_name"],
                InterfaceAlias=list(change["interfaces"]),
                Force=True,
            )
        ]
    if action == "remove_constraint":
        return [
            _cmd(
                "Remove-SmbMultichannelConstraint",
                ServerName=change["server_name"],
                InterfaceAlias=list(change["interfaces"]),
                Force=True,
            )
        ]
    if action == "update_connections":
        return [_cmd("Update-SmbMultichannelConnection", ServerName=change.get("server_name"))]
    return []


def _rollback(change: dict) -> list[dict]:
    if change["action"] == "arm_rollback":
        return [
            _cmd(
                "Register-HpcRollback",
                TaskName=change["task_name"],
                Script=change["script"],
                TimeoutSeconds=int(change["timeout_s"]),
            )
        ]
    if change["action"] == "disarm_rollback":
        return [_cmd("Unregister-HpcRollback", TaskName=change["task_name"])]
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
    "Disable-NetAdapterRdma",
    "Enable-NetAdapterRdma",
    "New-NetIPAddress",
    "New-NetLbfoTeam",
    "New-VMSwitch",
    "Register-HpcRollback",
    "Remove-NetIPAddress",
    "Remove-NetLbfoTeam",
    "Remove-NetLbfoTeamMember",
    "Remove-NetLbfoTeamNic",
    "Remove-NetRoute",
    "Remove-VMSwitch",
    "Rename-NetAdapter",
    "Rename-NetLbfoTeam",
    "Set-DnsClientServerAddress",
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
