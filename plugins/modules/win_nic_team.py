# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin plugins/action/win_nic_team.py on the controller, which
# runs hpc.balance.win_nic_team_gather and hpc.balance.win_nic_team_apply on the Windows host.

DOCUMENTATION = r"""
---
module: win_nic_team
short_description: Team network adapters with Windows NIC Teaming (LBFO) or Switch Embedded Teaming, safely
version_added: "0.1.0"
description:
  - Creates, converges or removes a Windows NIC team (NetLbfo, Windows Server 2012 and later), or a Hyper-V switch
    with Switch Embedded Teaming (SET).
  - Before any change it checks the host and refuses to proceed when the members do not exist, belong elsewhere,
    mix link speeds or card models and drivers (unless O(force)), when a vendor teaming tool (Intel ANS, Broadcom
    BASP, QLogic QLASP, HPE NCU) is installed, or when a Hyper-V switch sits (or would sit, O(for_vswitch)) on an
    LBFO team, in which case it offers SET instead. It reports the PCIe link of every member and warns when a card
    cannot carry its ports' nominal rate.
  - Converges by the smallest change (add or remove members, C(Set-NetLbfoTeam) for mode and algorithm) rather than
    re-creating the team, then waits, bounded by O(wait_timeout_s), until the team is C(Up) and every non-standby
    member is C(Active), and reports the real members and their state.
  - The decisions are made on the controller (module_utils C(_winteam)); the host only runs
    M(hpc.balance.win_nic_team_gather) and M(hpc.balance.win_nic_team_apply).
author:
  - hpc.balance maintainers (@hpc-balance)
options:
  name:
    description:
      - Name of the LBFO team, or of the SET switch when O(kind=set).
    type: str
    required: true
  members:
    description:
      - Adapter names (C(Get-NetAdapter) C(Name)) that make up the team, standby member included.
      - Required to be non-empty when O(state=present).
    type: list
    elements: str
    default: []
  kind:
    description:
      - C(lbfo) for Windows NIC Teaming, C(set) for a Hyper-V switch with Switch Embedded Teaming.
    type: str
    choices: [lbfo, set]
    default: lbfo
  teaming_mode:
    description:
      - LBFO teaming mode. C(Lacp) and C(Static) need a matching port channel on the switch. SET supports only
        C(SwitchIndependent).
    type: str
    choices: [Static, SwitchIndependent, Lacp]
    default: SwitchIndependent
  load_balancing_algorithm:
    description:
      - How outbound flows are spread over the members. Any one flow stays on one member. SET supports C(HyperVPort)
        and C(Dynamic).
    type: str
    choices: [TransportPorts, IPAddresses, MacAddresses, HyperVPort, Dynamic]
    default: Dynamic
  standby_member:
    description:
      - One member to keep on standby. It carries no traffic, and its failed link stays unnoticed until an active
        member fails, so the module warns about it.
    type: str
  team_nic_name:
    description:
      - Name of the primary team NIC. Unset keeps the current name (the team name for a new team).
    type: str
  vlan_id:
    description:
      - VLAN of the primary team NIC; C(0) is the untagged default. Unset leaves it as it is.
    type: int
  state:
    description:
      - C(present) creates or converges the team; C(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  force:
    description:
      - Team members with different link speeds, vendors, models or driver versions anyway (reported as warnings).
      - Never overrides the vendor-teaming-tool or Hyper-V refusals.
    type: bool
    default: false
  for_vswitch:
    description:
      - The team is meant to carry a Hyper-V switch. LBFO is then refused and SET offered.
    type: bool
    default: false
  preflight_only:
    description:
      - Only gather and check; report the findings and the planned changes, change nothing.
    type: bool
    default: false
  wait_timeout_s:
    description:
      - Seconds to wait after a change for the team to come up. LACP negotiation can take one to two minutes.
    type: int
    default: 180
  wait_delay_s:
    description:
      - Seconds between two checks while waiting.
    type: int
    default: 5
extends_documentation_fragment:
  - hpc.balance.windows.planner
attributes:
  diff_mode:
    description: Returns the team before and after (members, standby, mode, algorithm, team NIC, VLAN).
  platform:
    platforms: windows
    support: full
    description: Runs on Windows Server 2012 and later over WinRM (or any connection with a PowerShell shell).
seealso:
  - module: hpc.balance.win_nic_team_gather
  - module: hpc.balance.win_nic_team_apply
  - module: hpc.balance.win_smb_multichannel
"""

EXAMPLES = r"""
- name: Team two 10G ports for the storage network
  hpc.balance.win_nic_team:
    name: Storage
    members: [NIC1, NIC2]
    teaming_mode: Lacp
    load_balancing_algorithm: Dynamic
    vlan_id: 120

- name: A Hyper-V host gets Switch Embedded Teaming instead
  hpc.balance.win_nic_team:
    name: vSwitch-Storage
    kind: set
    members: [NIC1, NIC2]
    load_balancing_algorithm: HyperVPort

- name: Only check the host
  hpc.balance.win_nic_team:
    name: Storage
    members: [NIC1, NIC2]
    preflight_only: true
  register: team_preflight
"""

RETURN = r"""
findings:
  description: Preflight findings; C(refuse) ones stop the run before anything changes.
  returned: always
  type: list
  elements: dict
  sample: [{"severity": "refuse", "code": "mixed_link_speeds", "message": "members have mixed link speeds ..."}]
changes:
  description: The planned change list, in order (empty when nothing needs to change or something was refused).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set_team", "team": "Storage", "teaming_mode": "Lacp"}]
applied:
  description: What the apply module ran (or, in check mode, would run).
  returned: when changes were planned
  type: list
  elements: dict
  sample: [{"action": "set_team", "command": "Set-NetLbfoTeam",
            "parameters": {"Name": "Storage", "TeamingMode": "Lacp"}}]
pcie:
  description: PCIe link per member, its usable rate and what the card's ports in this team need.
  returned: when state is present
  type: list
  elements: dict
  sample: [{"name": "NIC1", "link": "x8 at 8.0 GT/s", "max_link": "x8 at 8.0 GT/s",
            "usable_bits_per_second": 63015384615,
            "ports_sharing_link": ["NIC1", "NIC2"], "needed_bits_per_second": 20000000000}]
verdict:
  description: Health of the team after the run; on failure the message names the member at fault.
  returned: unless preflight_only or check mode
  type: dict
  sample: {"ok": false, "status": "Degraded",
           "message": "team 'Storage' is Degraded: member 'NIC2' is Failed (PhysicalMediaDisconnected)",
           "members": [{"name": "NIC2", "administrative_mode": "Active", "operational_status": "Failed",
                        "failure_reason": "PhysicalMediaDisconnected", "transmit_link_speed_bits_per_second": 0}]}
waited_s:
  description: Seconds spent waiting for the team to come up.
  returned: unless preflight_only or check mode
  type: float
  sample: 42.5
"""
