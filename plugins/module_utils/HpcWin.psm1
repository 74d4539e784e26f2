# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# What the hpc.balance Windows modules share: records from cmdlet output, the argument spec and the change loop of
# the apply modules, and the steps that are functions rather than one cmdlet (wait for an adapter, arm and disarm the
# rollback task).
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

Function Get-HpcChangeListSpec {
    # The Ansible.Basic argument spec of an apply module: an ordered list of changes, each with the commands that
    # make it; a command must be one of $Command, the cmdlets (and collection functions) that module may run.
    param(
        [Parameter(Mandatory = $true)] [string[]] $Command
    )

    $spec = @{
        options = @{
            changes = @{
                type = 'list'
                elements = 'dict'
                required = $true
                options = @{
                    action = @{ type = 'str'; required = $true }
                    commands = @{
                        type = 'list'
                        elements = 'dict'
                        required = $true
                        options = @{
                            command = @{ type = 'str'; required = $true; choices = @($Command) }
                            parameters = @{ type = 'dict'; default = @{} }
                        }
                    }
                }
            }
        }
        supports_check_mode = $true
    }
    $spec
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

Function Rename-HpcPrimaryTeamNic {
    # Renames the team's primary team NIC as the host reports it now (Get-NetLbfoTeamNic -Team: the NIC whose
    # Primary is true), not by the name the controller expects it to have after tagging.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $Team,
        [Parameter(Mandatory = $true)] [string] $NewName
    )

    $primary = @(Get-NetLbfoTeamNic -Team $Team -ErrorAction Stop | Where-Object { $_.Primary })
    if ($primary.Count -ne 1) {
        throw ('team {0} has {1} primary team NICs, expected one: rename it by hand (Rename-NetAdapter)' -f $Team, $primary.Count)
    }
    $current = $primary[0].Name
    if ($current -ne $NewName -and $PSCmdlet.ShouldProcess($current, "rename the primary team NIC of $Team")) {
        Rename-NetAdapter -Name $current -NewName $NewName -Confirm:$false -ErrorAction Stop
    }
}

Function Remove-HpcVMSwitch {
    # Removes a Hyper-V switch only when no virtual machine is connected to it (Get-VMNetworkAdapter -VMName *):
    # Remove-VMSwitch -Force removes it without asking, and the VMs' adapters lose their network.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $Name
    )

    $attached = @(Get-VMNetworkAdapter -VMName * -ErrorAction Stop | Where-Object { $_.SwitchName -eq $Name })
    if ($attached.Count -gt 0) {
        $vms = @($attached | ForEach-Object { $_.VMName } | Sort-Object -Unique) -join ', '
        throw ('virtual machines {0} are connected to switch {1}: connect them to another switch first' -f $vms, $Name)
    }
    if ($PSCmdlet.ShouldProcess($Name, 'remove the Hyper-V switch')) {
        Remove-VMSwitch -Name $Name -Force -Confirm:$false -ErrorAction Stop
    }
}

Function Initialize-HpcRollbackFolder {
    # The folder of the rollback script, which runs as SYSTEM: SYSTEM and Administrators only, inheritance off.
    # %ProgramData% lets an ordinary user create a folder, which the user then owns: a folder found there must be
    # owned by SYSTEM or Administrators and be no link, or nothing is written into it.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $Path
    )

    $system = [System.Security.Principal.SecurityIdentifier]::new('S-1-5-18')
    $administrators = [System.Security.Principal.SecurityIdentifier]::new('S-1-5-32-544')
    $security = [System.Security.AccessControl.DirectorySecurity]::new()
    $security.SetAccessRuleProtection($true, $false)
    foreach ($sid in @($system, $administrators)) {
        $inheritance = 'ContainerInherit, ObjectInherit'
        $rule = [System.Security.AccessControl.FileSystemAccessRule]::new($sid, 'FullControl', $inheritance, 'None', 'Allow')
        $security.AddAccessRule($rule)
    }
    if ($PSCmdlet.ShouldProcess($Path, 'create the rollback folder for SYSTEM and Administrators only')) {
        # Made with the protected access list, or left as it is when it exists already (checked below).
        [System.IO.Directory]::CreateDirectory($Path, $security) | Out-Null
        $folder = Get-Item -LiteralPath $Path -Force -ErrorAction Stop
        if ($folder.Attributes -band [System.IO.FileAttributes]::ReparsePoint) {
            throw ('{0} is a link (reparse point): remove it; the rollback script is written only into a real folder' -f $Path)
        }
        $owner = (Get-Acl -LiteralPath $Path -ErrorAction Stop).GetOwner([System.Security.Principal.SecurityIdentifier])
        if ($owner -ne $system -and $owner -ne $administrators) {
            throw ('{0} is owned by {1}, not SYSTEM or Administrators: someone else made it; remove it and run again' -f $Path, $owner.Value)
        }
        Set-Acl -LiteralPath $Path -AclObject $security -Confirm:$false -ErrorAction Stop
    }
}

Function Register-HpcRollback {
    # Arms the rollback: a one-shot task, as SYSTEM, that runs the rendered script TimeoutSeconds from now.
    # New-ScheduledTaskAction/-Trigger/-Principal/-SettingsSet only build objects in memory and take no -Confirm;
    # neither does Register-ScheduledTask (its Learn syntax has no -WhatIf/-Confirm).
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $TaskName,
        [Parameter(Mandatory = $true)] [string] $Script,
        [Parameter(Mandatory = $true)] [int] $TimeoutSeconds
    )

    if ($PSCmdlet.ShouldProcess($TaskName, 'register the rollback task')) {
        # A task left armed by an earlier run that stopped half-way restores the state recorded then: never replace
        # it (Register-ScheduledTask -Force would), refuse and say how to clear it.
        $armed = Get-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue
        if ($null -ne $armed) {
            $clear = 'Unregister-ScheduledTask -TaskName ''{0}'' -Confirm:$false' -f $TaskName
            throw ((
                    'the rollback task {0} is already registered (state {1}): an earlier run armed it and did not ' +
                    'disarm it, and it restores the state recorded then. Check the host and the log ' +
                    '%ProgramData%\hpc.balance\rollback.log, then clear it with: {2}'
                ) -f $TaskName, $armed.State, $clear)
        }
        $path = Get-RollbackPath -TaskName $TaskName
        Initialize-HpcRollbackFolder -Path (Split-Path -Path $path -Parent) -Confirm:$false -ErrorAction Stop
        if (Test-Path -LiteralPath $path) {
            # A file from before the folder was protected keeps its own access list: write a new one.
            Remove-Item -LiteralPath $path -Force -Confirm:$false -ErrorAction Stop
        }
        Set-Content -LiteralPath $path -Value $Script -Encoding UTF8 -Confirm:$false -ErrorAction Stop
        $argument = '-NoProfile -NonInteractive -ExecutionPolicy Bypass -File "{0}"' -f $path
        $action = New-ScheduledTaskAction -Execute 'powershell.exe' -Argument $argument -ErrorAction Stop
        $trigger = New-ScheduledTaskTrigger -Once -At ((Get-Date).AddSeconds($TimeoutSeconds)) -ErrorAction Stop
        $principal = New-ScheduledTaskPrincipal -UserId 'SYSTEM' -LogonType ServiceAccount -RunLevel Highest -ErrorAction Stop
        # StartWhenAvailable: a trigger missed while the host was down (a reboot) runs as soon as it can.
        $settings = New-ScheduledTaskSettingsSet -StartWhenAvailable -ErrorAction Stop
        $task = @{
            TaskName = $TaskName
            Action = $action
            Trigger = $trigger
            Principal = $principal
            Settings = $settings
        }
        Register-ScheduledTask @task -ErrorAction Stop | Out-Null
    }
}

# SCHED_S_TASK_HAS_NOT_RUN (0x00041303), the LastTaskResult of a task that has not run yet.
$script:TaskHasNotRun = 267011
# The controller reads this phrase in a failed disarm (hpc.balance _winrollback.ROLLBACK_MAY_HAVE_FIRED).
$script:RollbackMayHaveFired = 'the rollback may have fired'

Function Unregister-HpcRollback {
    # Disarms the rollback once the controller is back. Disabled first, so that the trigger cannot fire between the
    # check and the unregister; a task that runs, has run or is gone is not disarmed: the rollback may have fired.
    [CmdletBinding(SupportsShouldProcess = $true)]
    param(
        [Parameter(Mandatory = $true)] [string] $TaskName
    )

    if ($PSCmdlet.ShouldProcess($TaskName, 'unregister the rollback task')) {
        $task = Get-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue
        if ($null -eq $task) {
            throw ('{0}: the task {1} is not registered; it ran and unregistered itself, or was removed' -f $script:RollbackMayHaveFired, $TaskName)
        }
        $running = @('Running', 'Queued')
        if ([string]$task.State -in $running) {
            throw ('{0}: the task {1} is {2}' -f $script:RollbackMayHaveFired, $TaskName, $task.State)
        }
        $task | Disable-ScheduledTask -Confirm:$false -ErrorAction Stop | Out-Null
        $state = [string](Get-ScheduledTask -TaskName $TaskName -ErrorAction Stop).State
        $info = Get-ScheduledTaskInfo -TaskName $TaskName -ErrorAction Stop
        if ($state -in $running -or $info.LastTaskResult -ne $script:TaskHasNotRun) {
            $format = '{0}: the task {1} is {2}, last run {3:o} with result 0x{4:X8}'
            throw ($format -f $script:RollbackMayHaveFired, $TaskName, $state, $info.LastRunTime, $info.LastTaskResult)
        }
        Unregister-ScheduledTask -TaskName $TaskName -Confirm:$false -ErrorAction Stop
        $path = Get-RollbackPath -TaskName $TaskName
        if (Test-Path -LiteralPath $path) {
            Remove-Item -LiteralPath $path -Force -Confirm:$false -ErrorAction Stop
        }
    }
}

$exportMembers = @{
    Function = @(
        'ConvertTo-Record', 'Test-Command', 'Get-Record', 'Get-HpcChangeListSpec', 'Invoke-ChangeList', 'Wait-HpcNetAdapter',
        'Clear-HpcIPv4Address', 'Rename-HpcPrimaryTeamNic', 'Remove-HpcVMSwitch', 'Initialize-HpcRollbackFolder', 'Register-HpcRollback',
        'Unregister-HpcRollback'
    )
}
Export-ModuleMember @exportMembers
