# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The "commit confirmed" rollback of a change on the management path: its steps, and the script that runs them.

Before such a change the apply module registers a one-shot scheduled task (Register-ScheduledTask, running as
SYSTEM, New-ScheduledTaskTrigger -Once -At now + rollback_timeout_s) that runs the script rendered here. Once the
controller has reconnected after the change, it unregisters the task (Unregister-ScheduledTask). If the controller
never comes back, the task restores the recorded team and IP configuration and then unregisters itself.

The steps are ordinary planned changes: the planner's own change list from the modelled state after the change back
to the recorded one, followed by the recorded IPv4 configuration of every interface the change altered.
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
    """set_ip / set_ip_dhcp for each recorded interface whose IPv4 configuration the change left different."""
    steps = []
    for name, config in sorted(recorded.ip_configs.items()):
        now = restored.ip_configs.get(name)
        if name not in restored.adapters or (now is not None and now.settings == config.settings):
            continue
        steps.append({"action": "wait_adapter", "interface": name})
        steps += _ip_step(config)
    return steps


def _ip_step(config: IpConfig) -> list[dict]:
    static = config.static_addresses
    if config.dhcp or not static:
        return [{"action": "set_ip_dhcp", "interface": config.interface}]
    address, prefix = static[0]
    step = {"action": "set_ip", "interface": config.interface, "address": address, "prefix_length": prefix}
    if config.gateway:
        step["gateway"] = config.gateway
    if config.dns_servers:
        step["dns_servers"] = list(config.dns_servers)
    return [step]


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
# It restores the team and IPv4 configuration recorded before the change, then unregisters its own task.
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

Write-RollbackLog -Message {start}
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
            start=ps_literal(f"rollback of {task_name} started: {len(steps)} step(s)"),
        )
    ]
    for step in steps:
        description = " ".join(str(v) for k, v in step.items() if k in ("action", "team", "switch", "interface"))
        lines.append(f"Invoke-RollbackStep -Description {ps_literal(description)} -Step {{")
        lines += [f"    {render_command(command)}" for command in commands_for(step)]
        lines.append("}")
    unregister = render_command(cmdlet("Unregister-ScheduledTask", TaskName=task_name))
    lines.append(_FOOTER.format(unregister=unregister))
    return "\n".join(lines)
