# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The "commit confirmed" rollback of a change on the management path: its steps, and the script that runs them.

Before such a change the apply module registers a one-shot scheduled task (Register-ScheduledTask, running as
SYSTEM, New-ScheduledTaskTrigger -Once -At now + rollback_timeout_s) that runs the script rendered here. Once the
controller has reconnected after the change, it unregisters the task (Unregister-ScheduledTask). If the controller
never comes back, the task restores the recorded team and IP configuration and then unregisters itself.

The steps are ordinary planned changes: the planner's own change list from the modelled state after the change back
to the recorded one (a SET switch with its host vNICs, their access VLAN and RDMA), followed by the recorded IP
configuration, both families, of every interface the change altered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._wincommand import (
    cmdlet,
    commands_for,
    ps_literal,
    render_command,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import HostState, IpConfig

LOG_PATH = r"hpc.balance\rollback.log"  # under $env:ProgramData, in the folder HpcWin.psm1 protects

# What HpcWin.psm1's Unregister-HpcRollback says (in its error) when the task is gone, runs or has run: the rollback
# may have restored the recorded state over the change, so the disarm is not a success.
ROLLBACK_MAY_HAVE_FIRED = "the rollback may have fired"


def ip_restore_steps(recorded: HostState, restored: HostState) -> list[dict]:
    """wait_adapter + restore_ip for each recorded interface whose IP configuration (either family) the change left
    different once the team steps have run: only interfaces the change altered, never one it left alone.

    Restore-HpcIPConfiguration compares again on the host when it runs and changes nothing on an interface that
    already has the recorded configuration: after a change that failed half-way, a NIC the change never reached is
    not re-addressed."""
    steps = []
    for name, config in sorted(recorded.ip_configs.items()):
        now = restored.ip_configs.get(name)
        if name not in restored.adapters or (now is not None and now.settings == config.settings):
            continue
        steps.append({"action": "wait_adapter", "interface": name})
        steps.append(restore_ip_step(config))
    return steps


def restore_ip_step(config: IpConfig) -> dict:
    """Every static address of both families with its prefix, the default gateways (0.0.0.0/0, ::/0) and the DNS
    servers of one recorded interface (IPv4 by DHCP when it was). Addresses as 'address/prefix'."""
    step: dict = {"action": "restore_ip", "interface": config.interface, "dhcp": config.dhcp}
    if not config.dhcp:
        step["addresses"] = [f"{address}/{prefix}" for address, prefix in config.static_addresses]
        if config.gateway:
            step["gateway"] = config.gateway
        step["dns_servers"] = list(config.dns_servers)
    step["ipv6_addresses"] = [f"{address}/{prefix}" for address, prefix in config.static_ipv6_addresses]
    if config.ipv6_gateway:
        step["ipv6_gateway"] = config.ipv6_gateway
    step["ipv6_dns_servers"] = list(config.ipv6_dns_servers)
    return step


def rollback_steps(
    recorded_desired: Any,
    recorded: HostState,
    predicted: HostState,
    plan_changes: Callable[[Any, HostState], list[dict]],
) -> list[dict]:
    """Changes that take the host from `predicted` (after the change) back to `recorded` (before it)."""
    team_steps = plan_changes(recorded_desired, predicted)
    restored = model.apply(predicted, team_steps)
    return team_steps + ip_restore_steps(recorded, restored)


_HEADER = r"""# Rollback armed by hpc.balance win_nic_team_apply for {task}.
# It restores the team and IP configuration recorded before the change, then unregisters its own task.
# The controller unregisters the task first when it reconnects in time; then this never runs.
# Every command that changes state carries -Confirm:$false and -ErrorAction Stop: the preferences below do not reach
# the functions of the NetLbfo, NetTCPIP, DnsClient and ScheduledTasks modules, which read their own module's.
$ErrorActionPreference = 'Stop'
$log = Join-Path -Path $env:ProgramData -ChildPath {log}

Function Write-RollbackLog {{
    param(
        [Parameter(Mandatory = $true)] [string] $Message
    )

    try {{
        Add-Content -Path $log -Value ('{{0:o}} {{1}}' -f (Get-Date), $Message) -Confirm:$false -ErrorAction Stop
    }}
    catch {{
        # A log line that cannot be written must not stop the restore.
        Write-Verbose -Message ('rollback log not written: {{0}}' -f $_.Exception.Message)
    }}
}}

Function Invoke-RollbackStep {{
    param(
        [Parameter(Mandatory = $true)] [string] $Description,
        [Parameter(Mandatory = $true)] [scriptblock] $Step
    )

    try {{
        & $Step | Out-Null
        Write-RollbackLog -Message ('ok: {{0}}' -f $Description)
    }}
    catch {{
        Write-RollbackLog -Message ('failed: {{0}}: {{1}}' -f $Description, $_.Exception.Message)
    }}
}}

Function Wait-HpcNetAdapter {{
    param(
        [Parameter(Mandatory = $true)] [string] $Name,
        [Parameter(Mandatory = $true)] [int] $TimeoutSeconds
    )

    $deadline = (Get-Date).AddSeconds($TimeoutSeconds)
    while ($null -eq (Get-NetAdapter -Name $Name -ErrorAction SilentlyContinue)) {{
        if ((Get-Date) -gt $deadline) {{
            throw ('adapter {{0}} did not appear within {{1}} s' -f $Name, $TimeoutSeconds)
        }}
        Start-Sleep -Seconds 2
    }}
}}

Function Rename-HpcPrimaryTeamNic {{
    # As in HpcWin.psm1: the team's primary team NIC as the host reports it now, not by a predicted name.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $Team,
        [Parameter(Mandatory = $true)] [string] $NewName
    )

    $primary = @(Get-NetLbfoTeamNic -Team $Team -ErrorAction Stop | Where-Object {{ $_.Primary }})
    if ($primary.Count -ne 1) {{
        throw ('team {{0}} has {{1}} primary team NICs, expected one' -f $Team, $primary.Count)
    }}
    $current = $primary[0].Name
    if ($current -ne $NewName -and $PSCmdlet.ShouldProcess($current, "rename the primary team NIC of $Team")) {{
        Rename-NetAdapter -Name $current -NewName $NewName -Confirm:$false -ErrorAction Stop
    }}
}}

Function Clear-HpcIPv4Address {{
    # As in HpcWin.psm1: the IPv4 default route and addresses, each removed only where there is one.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $InterfaceAlias
    )

    if ($PSCmdlet.ShouldProcess($InterfaceAlias, 'remove the IPv4 default route and addresses')) {{
        $default = '0.0.0.0/0'
        $routes = @(Get-NetRoute -InterfaceAlias $InterfaceAlias -DestinationPrefix $default -ErrorAction Ignore)
        foreach ($route in $routes) {{
            $route | Remove-NetRoute -Confirm:$false -ErrorAction Stop
        }}
        $addresses = @(Get-NetIPAddress -InterfaceAlias $InterfaceAlias -AddressFamily IPv4 -ErrorAction Ignore)
        foreach ($address in $addresses) {{
            $address | Remove-NetIPAddress -Confirm:$false -ErrorAction Stop
        }}
    }}
}}

"""

# Functions of the rollback script only (no format fields): the IP restore, and the switch removal of HpcWin.psm1.
_RESTORE_FUNCTIONS = r"""
Function Remove-HpcVMSwitch {
    # As in HpcWin.psm1: only when no virtual machine is connected to the switch.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $Name
    )

    $attached = @(Get-VMNetworkAdapter -VMName * -ErrorAction Stop | Where-Object { $_.SwitchName -eq $Name })
    if ($attached.Count -gt 0) {
        $vms = @($attached | ForEach-Object { $_.VMName } | Sort-Object -Unique) -join ', '
        throw ('virtual machines {0} are connected to switch {1}' -f $vms, $Name)
    }
    if ($PSCmdlet.ShouldProcess($Name, 'remove the Hyper-V switch')) {
        Remove-VMSwitch -Name $Name -Force -Confirm:$false -ErrorAction Stop
    }
}

Function Clear-HpcIPv6Address {
    # The IPv6 default route and the manual (static) IPv6 addresses; link-local and autoconfigured ones stay.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $InterfaceAlias
    )

    if ($PSCmdlet.ShouldProcess($InterfaceAlias, 'remove the IPv6 default route and static addresses')) {
        $routes = @(Get-NetRoute -InterfaceAlias $InterfaceAlias -DestinationPrefix '::/0' -ErrorAction Ignore)
        foreach ($route in $routes) {
            $route | Remove-NetRoute -Confirm:$false -ErrorAction Stop
        }
        $manual = @{ InterfaceAlias = $InterfaceAlias; AddressFamily = 'IPv6'; ErrorAction = 'Ignore' }
        $found = Get-NetIPAddress @manual -PrefixOrigin Manual
        foreach ($address in @($found)) {
            $address | Remove-NetIPAddress -Confirm:$false -ErrorAction Stop
        }
    }
}

Function Get-HpcIPFamilyState {
    # One family's configuration as text to compare: DHCP, static addresses ('address/prefix', sorted), the
    # default gateway and the DNS servers (in their order).
    param(
        [Parameter(Mandatory = $true)] [string] $InterfaceAlias,
        [Parameter(Mandatory = $true)] [ValidateSet('IPv4', 'IPv6')] [string] $AddressFamily
    )

    $default = if ($AddressFamily -eq 'IPv4') { '0.0.0.0/0' } else { '::/0' }
    $family = @{ InterfaceAlias = $InterfaceAlias; AddressFamily = $AddressFamily; ErrorAction = 'Ignore' }
    $addresses = @(
        Get-NetIPAddress @family -PrefixOrigin Manual | ForEach-Object { '{0}/{1}' -f $_.IPAddress, $_.PrefixLength }
    )
    $gateways = @(Get-NetRoute -InterfaceAlias $InterfaceAlias -DestinationPrefix $default -ErrorAction Ignore)
    $dns = Get-DnsClientServerAddress @family
    @{
        Dhcp = [string](Get-NetIPInterface @family).Dhcp
        Addresses = (@($addresses | Sort-Object) -join ',')
        Gateway = (@($gateways | ForEach-Object { $_.NextHop }) | Select-Object -First 1)
        Dns = (@($dns | ForEach-Object { $_.ServerAddresses }) -join ',')
    }
}

Function Add-HpcIPAddress {
    # The recorded static addresses ('address/prefix'), then the default gateway as a route.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $InterfaceAlias,
        [Parameter(Mandatory = $true)] [ValidateSet('IPv4', 'IPv6')] [string] $AddressFamily,
        [string[]] $Address = @(),
        [string] $Gateway = ''
    )

    if ($PSCmdlet.ShouldProcess($InterfaceAlias, "add the recorded $AddressFamily addresses")) {
        foreach ($entry in $Address) {
            $ip, $prefix = $entry -split '/'
            $new = @{
                InterfaceAlias = $InterfaceAlias
                AddressFamily = $AddressFamily
                IPAddress = $ip
                PrefixLength = [int]$prefix
            }
            New-NetIPAddress @new -Confirm:$false -ErrorAction Stop | Out-Null
        }
        if ($Gateway) {
            $default = if ($AddressFamily -eq 'IPv4') { '0.0.0.0/0' } else { '::/0' }
            $route = @{ InterfaceAlias = $InterfaceAlias; DestinationPrefix = $default; NextHop = $Gateway }
            New-NetRoute @route -Confirm:$false -ErrorAction Stop | Out-Null
        }
    }
}

Function Restore-HpcIPConfiguration {
    # The recorded IP configuration of one interface, both families (an address, gateway or DNS server with a ':' is
    # IPv6). It reads the interface first and changes only the family that differs: after a change that stopped
    # half-way, an interface it never reached stays untouched.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $InterfaceAlias,
        [bool] $Dhcp = $false,
        [string[]] $Address = @(),
        [string[]] $Gateway = @(),
        [string[]] $DnsServer = @()
    )

    $wanted = @{}
    foreach ($family in @('IPv4', 'IPv6')) {
        $isSix = $family -eq 'IPv6'
        $pick = { param($list) @($list | Where-Object { ($_ -like '*:*') -eq $isSix }) }
        $wanted[$family] = @{
            Addresses = (@(& $pick $Address | Sort-Object) -join ',')
            Gateway = [string](@(& $pick $Gateway) | Select-Object -First 1)
            Dns = (@(& $pick $DnsServer) -join ',')
            AddressList = @(& $pick $Address)
        }
    }
    $now = @{
        IPv4 = Get-HpcIPFamilyState -InterfaceAlias $InterfaceAlias -AddressFamily IPv4
        IPv6 = Get-HpcIPFamilyState -InterfaceAlias $InterfaceAlias -AddressFamily IPv6
    }
    $same = @{}
    foreach ($family in @('IPv4', 'IPv6')) {
        $same[$family] = $now[$family].Addresses -eq $wanted[$family].Addresses -and
            [string]$now[$family].Gateway -eq $wanted[$family].Gateway
    }
    if ($Dhcp) {
        $same['IPv4'] = $now['IPv4'].Dhcp -eq 'Enabled'
    }
    elseif ($now['IPv4'].Dhcp -eq 'Enabled') {
        $same['IPv4'] = $false
    }
    $sameDns = $now['IPv6'].Dns -eq $wanted['IPv6'].Dns -and ($Dhcp -or $now['IPv4'].Dns -eq $wanted['IPv4'].Dns)
    if ($same['IPv4'] -and $same['IPv6'] -and $sameDns) {
        Write-RollbackLog -Message ('unchanged, left alone: {0}' -f $InterfaceAlias)
        return
    }
    if (-not $PSCmdlet.ShouldProcess($InterfaceAlias, 'restore the recorded IP configuration')) {
        return
    }
    if (-not $same['IPv4']) {
        Clear-HpcIPv4Address -InterfaceAlias $InterfaceAlias -Confirm:$false -ErrorAction Stop
        $dhcpState = if ($Dhcp) { 'Enabled' } else { 'Disabled' }
        $interface = @{ InterfaceAlias = $InterfaceAlias; AddressFamily = 'IPv4'; Dhcp = $dhcpState }
        Set-NetIPInterface @interface -Confirm:$false -ErrorAction Stop
        if (-not $Dhcp) {
            $add = @{ InterfaceAlias = $InterfaceAlias; AddressFamily = 'IPv4'; Address = $wanted['IPv4'].AddressList }
            Add-HpcIPAddress @add -Gateway $wanted['IPv4'].Gateway -Confirm:$false -ErrorAction Stop
        }
    }
    if (-not $same['IPv6']) {
        Clear-HpcIPv6Address -InterfaceAlias $InterfaceAlias -Confirm:$false -ErrorAction Stop
        $add = @{ InterfaceAlias = $InterfaceAlias; AddressFamily = 'IPv6'; Address = $wanted['IPv6'].AddressList }
        Add-HpcIPAddress @add -Gateway $wanted['IPv6'].Gateway -Confirm:$false -ErrorAction Stop
    }
    if (-not $sameDns) {
        if ($DnsServer.Count -gt 0) {
            $dns = @{ InterfaceAlias = $InterfaceAlias; ServerAddresses = $DnsServer }
            Set-DnsClientServerAddress @dns -Confirm:$false -ErrorAction Stop
        }
        else {
            $dns = @{ InterfaceAlias = $InterfaceAlias; ResetServerAddresses = $true }
            Set-DnsClientServerAddress @dns -Confirm:$false -ErrorAction Stop
        }
    }
}
"""

_FOOTER = r"""Invoke-RollbackStep -Description 'unregister the rollback task' -Step {{
    {unregister}
}}
Write-RollbackLog -Message 'rollback finished'
"""


def render_rollback_script(task_name: str, steps: list[dict]) -> str:
    """The PowerShell the rollback task runs: every step's commands, each step logged and allowed to fail alone."""
    lines = [
        _HEADER.format(
            task=task_name.replace("\n", " "),
            log=ps_literal(LOG_PATH),
        ),
        _RESTORE_FUNCTIONS,
        "Write-RollbackLog -Message {}".format(ps_literal(f"rollback of {task_name} started: {len(steps)} step(s)")),
    ]
    for step in steps:
        description = " ".join(str(v) for k, v in step.items() if k in ("action", "team", "switch", "interface"))
        lines.append(f"Invoke-RollbackStep -Description {ps_literal(description)} -Step {{")
        lines += [f"    {render_command(command)}" for command in commands_for(step)]
        lines.append("}")
    unregister = render_command(cmdlet("Unregister-ScheduledTask", TaskName=task_name))
    lines.append(_FOOTER.format(unregister=unregister))
    return "\n".join(lines)
