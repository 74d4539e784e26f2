# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is win_nic_team_apply.ps1 beside this file.

DOCUMENTATION = r"""
---
module: win_nic_team_apply
short_description: Run a given, ordered list of NIC-team changes on a Windows host
version_added: "0.1.0"
description:
  - Runs, in order, the cmdlets that make each change, with the parameters given, and stops at the first failure,
    reporting the change that failed and the commands already run.
  - The changes and their commands are computed and rendered on the controller by
    M(hpc.balance.win_nic_team)
    (module_utils C(_wincommand), where each change's cmdlet and parameters are unit-tested); use that module
    rather than this one.
    Only the cmdlets listed in O(changes[].commands[].command) can run.
author:
  - hpc.balance maintainers (@hpc-balance)
options:
  changes:
    description:
      - The changes to run, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      action:
        description: The planned change this step makes (for the record), e.g. C(set_team).
        type: str
        required: true
      commands:
        description: The commands that make the change, run in order.
        type: list
        elements: dict
        required: true
        suboptions:
          command:
            description: Cmdlet (or collection function) to run.
            type: str
            required: true
            choices:
              - Add-NetLbfoTeamMember
              - Add-NetLbfoTeamNic
              - Add-VMNetworkAdapter
              - Clear-HpcIPv4Address
              - Disable-NetAdapterRdma
              - Enable-NetAdapterRdma
              - New-NetIPAddress
              - New-NetLbfoTeam
              - New-VMSwitch
              - Register-HpcRollback
              - Remove-NetLbfoTeam
              - Remove-NetLbfoTeamMember
              - Remove-NetLbfoTeamNic
              - Remove-HpcVMSwitch
              - Rename-HpcPrimaryTeamNic
              - Rename-NetAdapter
              - Rename-NetLbfoTeam
              - Set-DnsClient
              - Set-DnsClientServerAddress
              - Set-NetIPAddress
              - Set-NetIPInterface
              - Set-NetLbfoTeam
              - Set-NetLbfoTeamMember
              - Set-NetLbfoTeamNic
              - Set-VMNetworkAdapterVlan
              - Set-VMSwitch
              - Set-VMSwitchTeam
              - Unregister-HpcRollback
              - Wait-HpcNetAdapter
          parameters:
            description: Its parameters, splatted (a switch is C(true)). A command that changes state carries
              C(Confirm=false) and C(ErrorAction=Stop) itself.
            type: dict
            default: {}
extends_documentation_fragment:
  - hpc.balance.windows.apply
attributes:
  check_mode:
    support: full
  diff_mode:
    description: M(hpc.balance.win_nic_team) returns the diff.
  platform:
    platforms: windows
    support: full
    description: Windows Server 2012 and later; SET changes need Hyper-V on Windows Server 2016 and later.
seealso:
  - module: hpc.balance.win_nic_team
"""

EXAMPLES = r"""
- name: Switch a team to LACP (normally planned by hpc.balance.win_nic_team)
  hpc.balance.win_nic_team_apply:
    changes:
      - action: set_team
        commands:
          - command: Set-NetLbfoTeam
            parameters:
              Name: Storage
              TeamingMode: Lacp
"""

RETURN = r"""
applied:
  description: Each command as run (or, in check mode, as it would be run), with the change it belongs to.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "add_member", "command": "Add-NetLbfoTeamMember",
            "parameters": {"Name": "NIC3", "Team": "Storage", "AdministrativeMode": "Active", "Confirm": false,
                           "ErrorAction": "Stop"}}]
"""
