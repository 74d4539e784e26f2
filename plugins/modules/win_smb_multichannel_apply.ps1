#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Runs a given, ordered list of SMB Multichannel changes (computed on the controller by
# hpc.balance.win_smb_multichannel). In check mode it reports the commands it would run and runs none.

#AnsibleRequires -CSharpUtil Ansible.Basic

$spec = @{
    options = @{
        changes = @{
            type = 'list'
            elements = 'dict'
            required = $true
            options = @{
                action = @{
                    type = 'str'
                    required = $true
                    choices = @('set_server_multichannel', 'set_client_multichannel', 'add_constraint', 'remove_constraint')
                }
                enable = @{ type = 'bool' }
                server_name = @{ type = 'str' }
                interfaces = @{ type = 'list'; elements = 'str' }
            }
        }
    }
    supports_check_mode = $true
}
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)

Function Get-ChangeCommand {
    # One change (a dict from the controller) -> the cmdlet and the parameters it is run with.
    param(
        [Parameter(Mandatory = $true)] [System.Collections.IDictionary] $Change
    )

    $parameters = [ordered]@{}
    switch ($Change.action) {
        'set_server_multichannel' {
            $command = 'Set-SmbServerConfiguration'
            $parameters.EnableMultiChannel = [bool]$Change.enable
        }
        'set_client_multichannel' {
            $command = 'Set-SmbClientConfiguration'
            $parameters.EnableMultiChannel = [bool]$Change.enable
        }
        'add_constraint' {
            $command = 'New-SmbMultichannelConstraint'
            $parameters.ServerName = $Change.server_name
            $parameters.InterfaceAlias = [string[]]$Change.interfaces
        }
        'remove_constraint' {
            $command = 'Remove-SmbMultichannelConstraint'
            $parameters.ServerName = $Change.server_name
            $parameters.InterfaceAlias = [string[]]$Change.interfaces
        }
    }
    $parameters.Force = $true
    @{ command = $command; parameters = $parameters }
}

$applied = [System.Collections.Generic.List[Object]]@()
foreach ($change in $module.Params.changes) {
    $step = Get-ChangeCommand -Change $change
    $parameters = $step.parameters
    if (-not $module.CheckMode) {
        try {
            & $step.command @parameters | Out-Null
        }
        catch {
            $module.Result.applied = $applied
            $module.FailJson("$($step.command) failed for change '$($change.action)': $($_.Exception.Message)", $_)
        }
    }
    $applied.Add(@{ action = $change.action; command = $step.command; parameters = $parameters })
}

$module.Result.applied = $applied
$module.Result.changed = $applied.Count -gt 0
$module.ExitJson()
