# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is win_nic_team_apply.ps1 beside this file.

DOCUMENTATION = r"""
---
module: win_nic_team_apply
short_description: Run a given, ordered list of NIC-team changes on a Windows host
version_added: "0.1.0"
description:
  - Runs one NetLbfo or Hyper-V cmdlet per change, in order, and stops at the first failure, reporting the change
    that failed and those already applied.
  - The list is computed on the controller by M(hpc.balance.win_nic_team); use that module rather than this one.
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
        description:
          - What to do. C(new_team) C(New-NetLbfoTeam), C(remove_team) C(Remove-NetLbfoTeam), C(set_team)
            C(Set-NetLbfoTeam), C(add_member) C(Add-NetLbfoTeamMember), C(remove_member) C(Remove-NetLbfoTeamMember),
            C(set_member_mode) C(Set-NetLbfoTeamMember), C(rename_team_nic) C(Rename-NetAdapter), C(set_team_nic_vlan)
            C(Set-NetLbfoTeamNic), C(new_set_switch) C(New-VMSwitch -EnableEmbeddedTeaming), C(set_set_team)
            C(Set-VMSwitchTeam), C(remove_set_switch) C(Remove-VMSwitch).
        type: str
        required: true
        choices: [new_team, remove_team, set_team, add_member, remove_member, set_member_mode, rename_team_nic,
                  set_team_nic_vlan, new_set_switch, set_set_team, remove_set_switch]
      team:
        description: LBFO team name.
        type: str
      member:
        description: Member adapter name.
        type: str
      members:
        description: Member adapter names (new team, SET switch).
        type: list
        elements: str
      teaming_mode:
        description: LBFO teaming mode.
        type: str
        choices: [Static, SwitchIndependent, Lacp]
      load_balancing_algorithm:
        description: Load-balancing algorithm.
        type: str
        choices: [TransportPorts, IPAddresses, MacAddresses, HyperVPort, Dynamic]
      administrative_mode:
        description: Member role.
        type: str
        choices: [Active, Standby]
      team_nic:
        description: Current team NIC name.
        type: str
      team_nic_name:
        description: Team NIC name of a new team.
        type: str
      new_name:
        description: New team NIC name.
        type: str
      vlan_id:
        description: Team NIC VLAN, C(0) for untagged.
        type: int
      switch:
        description: SET switch name.
        type: str
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
        team: Storage
        teaming_mode: Lacp
"""

RETURN = r"""
applied:
  description: Each change as run (or, in check mode, as it would be run).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "add_member", "command": "Add-NetLbfoTeamMember",
            "parameters": {"Name": "NIC3", "Team": "Storage", "AdministrativeMode": "Active"}}]
"""
