#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Runs a given, ordered list of SMB Multichannel changes: each change carries the cmdlets and parameters that make it,
# rendered and checked on the controller by hpc.balance.win_smb_multichannel (module_utils _wincommand). Only the cmdlets listed in
# $commands run. In check mode it reports the commands it would run and runs none.

#AnsibleRequires -CSharpUtil Ansible.Basic
#AnsibleRequires -PowerShell ansible_collections.hpc.balance.plugins.module_utils.HpcWin

# The cmdlets (and collection functions) this module may run: the choices of changes[].commands[].command.
$commands = @(
    'New-SmbMultichannelConstraint',
    'Remove-SmbMultichannelConstraint',
    'Set-SmbClientConfiguration',
    'Set-SmbServerConfiguration',
    'Update-SmbMultichannelConnection'
)
$spec = Get-HpcChangeListSpec -Command $commands
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)

# Every command that changes state arrives with -Confirm:$false and -ErrorAction Stop (hpc.balance _wincommand):
# a preference set here would not reach the SmbShare functions, which read their own module's.

Invoke-ChangeList -Module $module
$module.ExitJson()
