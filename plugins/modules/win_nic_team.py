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
    mix link speeds or card models and drivers (unless O(force)), carry different jumbo packet sizes
    (C(*JumboPacket), finding C(member_mtu_mismatch)), when a vendor teaming tool (Intel ANS, Broadcom BASP, QLogic
    QLASP, HPE NCU) is installed, or when a Hyper-V switch sits (or would sit, O(for_vswitch)) on an LBFO team, in
    which case it offers SET instead. It reports the PCIe link of every member and warns when a card
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
  lacp_timer:
    description:
      - LACP timer of an LBFO team in C(Lacp) mode (C(New-NetLbfoTeam)/C(Set-NetLbfoTeam) C(-LacpTimer)). Unset
        leaves it as it is (Windows makes C(Fast)).
      - Windows Server 2016 (build 14393) or later; refused on Windows Server 2012 and 2012 R2, whose NetLbfo
        cmdlets have no C(-LacpTimer).
    type: str
    choices: [Fast, Slow]
  standby_member:
    description:
      - One member to keep on standby. Windows allows a standby member in C(SwitchIndependent) mode only; with
        C(Static) or C(Lacp) every member is active, so the combination is refused.
      - It carries no traffic, and its failed link stays unnoticed until an active
        member fails, so the module warns about it.
    type: str
  team_nic_name:
    description:
      - Name of the primary team NIC. Unset keeps the current name (the team name for a new team).
    type: str
  vlan_id:
    description:
      - VLAN of the primary team NIC; C(0) is the untagged Default mode (C(Set-NetLbfoTeamNic -Default)). Unset leaves
        it as it is.
      - Tagging renames the primary team NIC to C(<team> - VLAN <id>); with O(team_nic_name) the module tags first
        and renames after, so the name lasts.
    type: int
  vlan_team_nics:
    description:
      - Additional team NICs, one per VLAN (C(Add-NetLbfoTeamNic)); unset leaves them as they are, a list (even
        empty) removes the ones not listed (C(Remove-NetLbfoTeamNic)).
    type: list
    elements: dict
    suboptions:
      vlan_id:
        description: VLAN of the team NIC, 1-4094, not the primary team NIC's.
        type: int
        required: true
      name:
        description: Its name; unset gives Windows' default C(<team> - VLAN <id>).
        type: str
  team_nic_ip:
    description:
      - IPv4 configuration of the primary team NIC. A new team NIC starts on DHCP, and the members lose theirs.
      - C(source=members) moves the static address, gateway and DNS servers that one member carries now onto the team
        NIC in the same apply run; C(source=static) sets O(team_nic_ip.address); C(source=dhcp) enables DHCP.
    type: dict
    suboptions:
      source:
        description: Where the configuration comes from.
        type: str
        choices: [static, dhcp, members]
        default: static
      address:
        description: IPv4 address (C(source=static)).
        type: str
      prefix_length:
        description: Prefix length (C(source=static)).
        type: int
      gateway:
        description:
          - Default gateway. Refused while another interface has one, unless O(allow_second_default_gateway); a
            storage network needs none.
        type: str
      dns_servers:
        description: DNS server addresses.
        type: list
        elements: str
        default: []
      interface_metric:
        description:
          - IPv4 interface metric of the team NIC (C(Set-NetIPInterface -InterfaceMetric), automatic metric off).
            With automatic metrics the faster team gets the lower metric and its default gateway wins; set it above
            the management interface's. Unset leaves the metric as it is.
        type: int
      skip_as_source:
        description:
          - Keep the team NIC's static address out of source address selection (C(Set-NetIPAddress -SkipAsSource)),
            so that new outbound connections do not leave from it. Unset leaves it as it is.
        type: bool
      register_in_dns:
        description:
          - Whether the team NIC registers its address in DNS (C(Set-DnsClient -RegisterThisConnectionsAddress)); a
            storage NIC should not (C(false)). Unset leaves it as it is.
        type: bool
  rename_from:
    description:
      - Rename the LBFO team from this name to O(name) (C(Rename-NetLbfoTeam)) when O(name) does not exist yet.
    type: str
  allow_management_os:
    description:
      - SET only. Whether the management OS shares the switch (C(New-VMSwitch)/C(Set-VMSwitch -AllowManagementOS)).
        Unset leaves an existing switch as it is and creates a new one without it. O(host_vnics) imply C(true).
    type: bool
  host_vnics:
    description:
      - SET only. Host (management OS) vNICs on the switch (C(Add-VMNetworkAdapter -ManagementOS)), with an access
        VLAN (C(Set-VMNetworkAdapterVlan)) and RDMA (C(Enable-NetAdapterRdma) on C(vEthernet (<name>))), e.g. for
        SMB Direct. vNICs not listed are left alone.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: vNIC name; Windows shows the adapter as C(vEthernet (<name>)).
        type: str
        required: true
      vlan_id:
        description: Access VLAN; C(0) untagged.
        type: int
        default: 0
      rdma:
        description: RDMA on the vNIC; unset leaves it as it is.
        type: bool
  state:
    description:
      - C(present) creates or converges the team; C(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  force:
    description:
      - Team members with different link speeds, vendors, models or driver versions anyway (reported as warnings).
      - Never overrides the vendor-teaming-tool, jumbo-packet-size or Hyper-V refusals.
    type: bool
    default: false
  for_vswitch:
    description:
      - The team is meant to carry a Hyper-V switch. LBFO is then refused and SET offered.
    type: bool
    default: false
  allow_second_default_gateway:
    description:
      - Run a plan that adds a default gateway while another interface has one, with a warning; otherwise it is
        refused (C(second_default_gateway)). Prefer no gateway on a storage team, or set
        O(team_nic_ip.interface_metric), O(team_nic_ip.skip_as_source) and O(team_nic_ip.register_in_dns).
    type: bool
    default: false
  allow_management_change:
    description:
      - A change that touches the NIC carrying the management address (C(ansible_host), or the local IPv4 or IPv6
        address of the established connections on the port the connection plugin uses), or its team or Hyper-V
        switch, can cut the controller off. It is refused unless this is C(true).
      - When no interface carries a management address (NAT, a proxy, a forwarded port, a name that resolves
        elsewhere) every change is refused (C(management_unknown)), whatever this option says.
      - With C(true) the change runs behind a rollback, like a switch's "commit confirmed". Before the change the
        apply module registers a one-shot scheduled task (as SYSTEM, StartWhenAvailable) that restores the recorded
        team (with a SET switch's host vNICs, their VLAN and RDMA) and the IP configuration of both families after
        O(rollback_timeout_s); its script lives in a folder under C(%ProgramData%)
        that only SYSTEM and Administrators can write. A task left armed by an earlier run is never replaced; the
        change is refused, naming it. Once the controller has reconnected, it disables, checks and unregisters the
        task; a task that is gone, runs or has run fails the task with C(rollback.may_have_fired).
    type: bool
    default: false
  rollback_timeout_s:
    description: Seconds after which the armed rollback restores the recorded state unless the controller has
      reconnected and disarmed it; at least 60, and more than one disarm attempt over the connection (its read
      timeout, 30 s by default, plus 10 s), or the change is refused before anything is armed.
    type: int
    default: 300
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

- name: Team the NIC that carries the management address, behind a timed rollback
  hpc.balance.win_nic_team:
    name: Storage
    members: [NIC1, NIC2]
    team_nic_ip:
      source: members
    allow_management_change: true
    rollback_timeout_s: 300

- name: SET switch with two RDMA host vNICs for SMB Direct
  hpc.balance.win_nic_team:
    name: SETswitch
    kind: set
    members: [NIC3, NIC4]
    allow_management_os: true
    host_vnics:
      - {name: SMB1, vlan_id: 12, rdma: true}
      - {name: SMB2, vlan_id: 12, rdma: true}

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
            "parameters": {"Name": "Storage", "TeamingMode": "Lacp", "Confirm": false, "ErrorAction": "Stop"}}]
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
rollback:
  description: The rollback of a change on the management path; C(disarmed) false means the host restores the
    recorded state itself when the task fires.
  returned: when a change on the management path ran
  type: dict
  sample: {"armed": true, "disarmed": true, "task_name": "hpc.balance rollback lbfo Storage",
           "reconnected_after_s": 12.5}
waited_s:
  description: Seconds spent waiting for the team to come up.
  returned: unless preflight_only or check mode
  type: float
  sample: 42.5
"""
