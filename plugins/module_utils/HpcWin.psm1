# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# What the hpc.balance Windows modules share: records from cmdlet output, the change loop of the apply modules,
# and the steps that are functions rather than one cmdlet (wait for an adapter, arm and disarm the rollback task).
# Loaded with: #AnsibleRequires -PowerShell ansible_collections.hpc.balance.plugins.module_utils.HpcWin

Function ConvertTo-Record {
    # One cmdlet output object -> hashtable of the named properties; .NET enums become their names.
    param(
        [Parameter(Mandatory = $true)] $InputObject,
        [Parameter(Mandatory = $true)] [string[]] $Property
    )

    $record = @{}
    foreach ($name in $Property) {
        $value = $InputObject.$name
        if ($value -is [System.Enum]) {
            $value = $value.ToString()
        }
        $record[$name] = $value
    }
    $record
}

Function Test-Command {
    param(
        [Parameter(Mandatory = $true)] [string] $Name
    )

    $null -ne (Get-Command -Name $Name -ErrorAction SilentlyContinue)
}

Function Get-Record {
    # Records of one cmdlet's output, or none when the cmdlet is missing (a feature not installed).
    param(
        [Parameter(Mandatory = $true)] [string] $Command,
        [Parameter(Mandatory = $true)] [string[]] $Property,
        [System.Collections.IDictionary] $Parameters = @{}
    )

    if (-not (Test-Command -Name $Command)) {
        return , @()
    }
    , @(& $Command @Parameters | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $Property })
}

Function Invoke-ChangeList {
    # Runs each change's commands in order (as the controller rendered them); in check mode runs none.
    # A failed command fails the module, with the changes applied so far.
    param(
        [Parameter(Mandatory = $true)] $Module
    )

    $applied = [System.Collections.Generic.List[Object]]@()
    foreach ($change in $Module.Params.changes) {
        foreach ($step in $change.commands) {
            $parameters = $step.parameters
            if ($null -eq $parameters) {
                $parameters = @{}
            }
            if (-not $Module.CheckMode) {
                try {
                    & $step.command @parameters | Out-Null
                }
                catch {
                    $Module.Result.applied = $applied
                    $Module.FailJson("$($step.command) failed for change '$($change.action)': $($_.Exception.Message)", $_)
                }
            }
            $applied.Add(@{ action = $change.action; command = $step.command; parameters = $parameters })
        }
    }
    $Module.Result.applied = $applied
    $Module.Result.changed = $applied.Count -gt 0
}

Function Wait-HpcNetAdapter {
    # A new team NIC or host vNIC appears a moment after the cmdlet that makes it returns.
    param(
        [Parameter(Mandatory = $true)] [string] $Name,
        [Parameter(Mandatory = $true)] [int] $TimeoutSeconds
    )

    $deadline = (Get-Date).AddSeconds($TimeoutSeconds)
    while ($null -eq (Get-NetAdapter -Name $Name -ErrorAction SilentlyContinue)) {
        if ((Get-Date) -gt $deadline) {
            throw ('adapter {0} did not appear within {1} s' -f $Name, $TimeoutSeconds)
        }
        Start-Sleep -Seconds 2
    }
}

Function Get-RollbackPath {
    param(
        [Parameter(Mandatory = $true)] [string] $TaskName
    )

    $folder = Join-Path -Path $env:ProgramData -ChildPath 'hpc.balance'
    $file = ($TaskName -replace '[^A-Za-z0-9_.-]', '_') + '.ps1'
    Join-Path -Path $folder -ChildPath $file
}

Function Clear-HpcIPv4Address {
    # The interface's IPv4 default route and addresses, each removed only where there is one: a remove cmdlet with
    # -ErrorAction Stop fails when it finds nothing, and SilentlyContinue would hide a real failure.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $InterfaceAlias
    )

    if ($PSCmdlet.ShouldProcess($InterfaceAlias, 'remove the IPv4 default route and addresses')) {
        $default = '0.0.0.0/0'
        $routes = @(Get-NetRoute -InterfaceAlias $InterfaceAlias -DestinationPrefix $default -ErrorAction Ignore)
        foreach ($route in $routes) {
            $route | Remove-NetRoute -Confirm:$false -ErrorAction Stop
        }
        $addresses = @(Get-NetIPAddress -InterfaceAlias $InterfaceAlias -AddressFamily IPv4 -ErrorAction Ignore)
        foreach ($address in $addresses) {
            $address | Remove-NetIPAddress -Confirm:$false -ErrorAction Stop
        }
    }
}

Function Register-HpcRollback {
    # Arms the rollback: a one-shot task, as SYSTEM, that runs the rendered script TimeoutSeconds from now.
    # New-ScheduledTaskAction/-Trigger/-Principal only build objects in memory and take no -Confirm; neither does
    # Register-ScheduledTask (its Learn syntax has no -WhatIf/-Confirm).
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $TaskName,
        [Parameter(Mandatory = $true)] [string] $Script,
        [Parameter(Mandatory = $true)] [int] $TimeoutSeconds
    )

    if ($PSCmdlet.ShouldProcess($TaskName, 'register the rollback task')) {
        $path = Get-RollbackPath -TaskName $TaskName
        $folder = Split-Path -Path $path -Parent
        New-Item -ItemType Directory -Path $folder -Force -Confirm:$false -ErrorAction Stop | Out-Null
        Set-Content -LiteralPath $path -Value $Script -Encoding UTF8 -Confirm:$false -ErrorAction Stop
        $argument = '-NoProfile -NonInteractive -ExecutionPolicy Bypass -File "{0}"' -f $path
        $action = New-ScheduledTaskAction -Execute 'powershell.exe' -Argument $argument -ErrorAction Stop
        $trigger = New-ScheduledTaskTrigger -Once -At ((Get-Date).AddSeconds($TimeoutSeconds)) -ErrorAction Stop
        $principal = New-ScheduledTaskPrincipal -UserId 'SYSTEM' -LogonType ServiceAccount -RunLevel Highest -ErrorAction Stop
        $task = @{
            TaskName = $TaskName
            Action = $action
            Trigger = $trigger
            Principal = $principal
        }
        Register-ScheduledTask @task -Force -ErrorAction Stop | Out-Null
    }
}

Function Unregister-HpcRollback {
    # Disarms the rollback once the controller is back: the task and its script go. A task already gone (it ran
    # and unregistered itself) is not an error; a task that cannot be unregistered is.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $TaskName
    )

    if ($PSCmdlet.ShouldProcess($TaskName, 'unregister the rollback task')) {
        if ($null -ne (Get-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue)) {
            Unregister-ScheduledTask -TaskName $TaskName -Confirm:$false -ErrorAction Stop
        }
        $path = Get-RollbackPath -TaskName $TaskName
        if (Test-Path -LiteralPath $path) {
            Remove-Item -LiteralPath $path -Force -Confirm:$false -ErrorAction Stop
        }
    }
}

$exportMembers = @{
    Function = @(
        'ConvertTo-Record', 'Test-Command', 'Get-Record', 'Invoke-ChangeList', 'Wait-HpcNetAdapter',
        'Clear-HpcIPv4Address', 'Register-HpcRollback', 'Unregister-HpcRollback'
    )
}
Export-ModuleMember @exportMembers
