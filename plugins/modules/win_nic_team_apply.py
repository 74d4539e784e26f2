# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is win_nic_team_apply.ps1 beside this file.

DOCUMENTATION = r"""
---
module: win_nic_team_apply
short_description: Run a given, ordered list of NIC-team changes on a Windows host
version_added: "0.1.0"
description:
  - Runs, in order, the NetLbfo, NetAdapter, NetTCPIP, DnsClient and Hyper-V cmdlets (and the collection's own
    functions) that make each NIC-team change, with the parameters given, and stops at the first failure, reporting
    the change that failed and the commands already run.
  - The only commands it runs (O(changes[].commands[].command)) are C(Add-NetLbfoTeamMember), C(Add-NetLbfoTeamNic),
    C(Add-VMNetworkAdapter), C(Clear-HpcIPv4Address), C(Disable-NetAdapterRdma), C(Enable-NetAdapterRdma),
    C(New-NetIPAddress), C(New-NetLbfoTeam), C(New-VMSwitch), C(Register-HpcRollback), C(Remove-NetLbfoTeam),
    C(Remove-NetLbfoTeamMember), C(Remove-NetLbfoTeamNic), C(Remove-HpcVMSwitch), C(Rename-HpcPrimaryTeamNic),
    C(Rename-NetAdapter), C(Rename-NetLbfoTeam), C(Set-DnsClient), C(Set-DnsClientServerAddress), C(Set-NetIPAddress),
    C(Set-NetIPInterface), C(Set-NetLbfoTeam), C(Set-NetLbfoTeamMember), C(Set-NetLbfoTeamNic),
    C(Set-VMNetworkAdapterVlan), C(Set-VMSwitch), C(Set-VMSwitchTeam), C(Unregister-HpcRollback),
    C(Wait-HpcNetAdapter).
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.windows.apply
attributes:
  platform:
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
