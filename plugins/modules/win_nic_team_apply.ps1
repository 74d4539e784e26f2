#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Runs a given, ordered list of NIC-team changes: each change carries the cmdlets and parameters that make it,
# rendered and checked on the controller by hpc.balance.win_nic_team (module_utils _wincommand). Only the cmdlets listed in
# $commands run. In check mode it reports the commands it would run and runs none.

#AnsibleRequires -CSharpUtil Ansible.Basic
#AnsibleRequires -PowerShell ansible_collections.hpc.balance.plugins.module_utils.HpcWin

# The cmdlets (and collection functions) this module may run: the choices of changes[].commands[].command.
$commands = @(
    'Add-NetLbfoTeamMember',
    'Add-NetLbfoTeamNic',
    'Add-VMNetworkAdapter',
    'Clear-HpcIPv4Address',
    'Disable-NetAdapterRdma',
    'Enable-NetAdapterRdma',
    'New-NetIPAddress',
    'New-NetLbfoTeam',
    'New-VMSwitch',
    'Register-HpcRollback',
    'Remove-NetLbfoTeam',
    'Remove-NetLbfoTeamMember',
    'Remove-NetLbfoTeamNic',
    'Remove-HpcVMSwitch',
    'Rename-HpcPrimaryTeamNic',
    'Rename-NetAdapter',
    'Rename-NetLbfoTeam',
    'Set-DnsClient',
    'Set-DnsClientServerAddress',
    'Set-NetIPAddress',
    'Set-NetIPInterface',
    'Set-NetLbfoTeam',
    'Set-NetLbfoTeamMember',
    'Set-NetLbfoTeamNic',
    'Set-VMNetworkAdapterVlan',
    'Set-VMSwitch',
    'Set-VMSwitchTeam',
    'Unregister-HpcRollback',
    'Wait-HpcNetAdapter'
)
$spec = Get-HpcChangeListSpec -Command $commands
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)

# Every command that changes state arrives with -Confirm:$false and -ErrorAction Stop (hpc.balance _wincommand):
# a preference set here would not reach the NetLbfo, NetTCPIP or Hyper-V functions, which read their own module's.

Invoke-ChangeList -Module $module
$module.ExitJson()
