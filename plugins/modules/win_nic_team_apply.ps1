#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Runs a given, ordered list of NIC-team changes (computed on the controller by hpc.balance.win_nic_team).
# In check mode it reports the commands it would run and runs none.

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
                    choices = @(
                        'new_team', 'remove_team', 'set_team', 'add_member', 'remove_member', 'set_member_mode',
                        'rename_team_nic', 'set_team_nic_vlan', 'new_set_switch', 'set_set_team', 'remove_set_switch'
                    )
                }
                team = @{ type = 'str' }
                member = @{ type = 'str' }
                members = @{ type = 'list'; elements = 'str' }
                teaming_mode = @{ type = 'str'; choices = @('Static', 'SwitchIndependent', 'Lacp') }
                load_balancing_algorithm = @{
                    type = 'str'
                    choices = @('TransportPorts', 'IPAddresses', 'MacAddresses', 'HyperVPort', 'Dynamic')
                }
                administrative_mode = @{ type = 'str'; choices = @('Active', 'Standby') }
                team_nic = @{ type = 'str' }
                team_nic_name = @{ type = 'str' }
                new_name = @{ type = 'str' }
                vlan_id = @{ type = 'int' }
                switch = @{ type = 'str' }
            }
        }
    }
    supports_check_mode = $true
}
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)

# The NetLbfo cmdlets ask for confirmation; a WinRM session cannot answer.
$ConfirmPreference = 'None'

Function Get-ChangeCommand {
    # One change (a dict from the controller) -> the cmdlet and the parameters it is run with.
    param(
        [Parameter(Mandatory = $true)] [System.Collections.IDictionary] $Change
    )

    $parameters = [ordered]@{}
    switch ($Change.action) {
        'new_team' {
            $command = 'New-NetLbfoTeam'
            $parameters.Name = $Change.team
            $parameters.TeamMembers = [string[]]$Change.members
            $parameters.TeamingMode = $Change.teaming_mode
            $parameters.LoadBalancingAlgorithm = $Change.load_balancing_algorithm
            if ($Change.team_nic_name) {
                $parameters.TeamNicName = $Change.team_nic_name
            }
        }
        'remove_team' {
            $command = 'Remove-NetLbfoTeam'
            $parameters.Name = $Change.team
        }
        'set_team' {
            $command = 'Set-NetLbfoTeam'
            $parameters.Name = $Change.team
            if ($Change.teaming_mode) {
                $parameters.TeamingMode = $Change.teaming_mode
            }
            if ($Change.load_balancing_algorithm) {
                $parameters.LoadBalancingAlgorithm = $Change.load_balancing_algorithm
            }
        }
        'add_member' {
            $command = 'Add-NetLbfoTeamMember'
            $parameters.Name = $Change.member
            $parameters.Team = $Change.team
            $parameters.AdministrativeMode = $Change.administrative_mode
        }
        'remove_member' {
            $command = 'Remove-NetLbfoTeamMember'
            $parameters.Name = $Change.member
            $parameters.Team = $Change.team
        }
        'set_member_mode' {
            $command = 'Set-NetLbfoTeamMember'
            $parameters.Name = $Change.member
            $parameters.Team = $Change.team
            $parameters.AdministrativeMode = $Change.administrative_mode
        }
        'rename_team_nic' {
            $command = 'Rename-NetAdapter'
            $parameters.Name = $Change.team_nic
            $parameters.NewName = $Change.new_name
        }
        'set_team_nic_vlan' {
            $command = 'Set-NetLbfoTeamNic'
            $parameters.Name = $Change.team_nic
            $parameters.VlanID = $Change.vlan_id
        }
        'new_set_switch' {
            $command = 'New-VMSwitch'
            $parameters.Name = $Change.switch
            $parameters.NetAdapterName = [string[]]$Change.members
            $parameters.EnableEmbeddedTeaming = $true
            $parameters.AllowManagementOS = $true
        }
        'set_set_team' {
            $command = 'Set-VMSwitchTeam'
            $parameters.Name = $Change.switch
            if ($Change.members) {
                $parameters.NetAdapterName = [string[]]$Change.members
            }
            if ($Change.load_balancing_algorithm) {
                $parameters.LoadBalancingAlgorithm = $Change.load_balancing_algorithm
            }
        }
        'remove_set_switch' {
            $command = 'Remove-VMSwitch'
            $parameters.Name = $Change.switch
            $parameters.Force = $true
        }
    }
    @{ command = $command; parameters = $parameters }
}

$applied = [System.Collections.Generic.List[Object]]@()
foreach ($change in $module.Params.changes) {
    $step = Get-ChangeCommand -Change $change
    $parameters = $step.parameters
    $record = @{ action = $change.action; command = $step.command; parameters = $parameters }
    if (-not $module.CheckMode) {
        try {
            & $step.command @parameters | Out-Null
        }
        catch {
            $module.Result.applied = $applied
            $module.FailJson("$($step.command) failed for change '$($change.action)': $($_.Exception.Message)", $_)
        }
        # New-VMSwitch has no load-balancing parameter: the algorithm is set on the new SET team.
        if ($change.action -eq 'new_set_switch' -and $change.load_balancing_algorithm) {
            try {
                Set-VMSwitchTeam -Name $change.switch -LoadBalancingAlgorithm $change.load_balancing_algorithm
            }
            catch {
                $module.Result.applied = $applied
                $module.FailJson("Set-VMSwitchTeam failed after New-VMSwitch: $($_.Exception.Message)", $_)
            }
        }
    }
    $applied.Add($record)
}

$module.Result.applied = $applied
$module.Result.changed = $applied.Count -gt 0
$module.ExitJson()
