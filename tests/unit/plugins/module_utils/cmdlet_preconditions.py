"""What must hold on the host before each state-changing cmdlet the NIC-team planner emits can succeed, as Microsoft's
pages say it, and a small host that follows each command's documented effect: the oracle of
test_windows_cmdlet_preconditions.py.

Written from the cmdlets' pages, not from the planner's model (plugins/module_utils/_winteam_model.py), so that a
mistake the model shares with the planner still fails. Each row names the page, quotes the page's own sentence
(``quote``) and says in our words what we read from it (``reading``). The host simulated here holds only what the
rows need: adapters, LBFO teams with their members and team interfaces, Hyper-V switches and host vNICs, the build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import HostState, host_vnic_adapter_name

LEARN = "https://learn.microsoft.com/powershell/module/"
NIC_TEAMING = "https://learn.microsoft.com/windows-server/networking/technologies/nic-teaming/nic-teaming"
SET_PAGE = (
    "https://learn.microsoft.com/windows-server/virtualization/hyper-v-virtual-switch/rdma-and-switch-embedded-teaming"
)
# Windows Server 2016 is build 14393, Windows Server 2022 build 20348
# (learn.microsoft.com/windows/release-health/windows-server-release-info).
WINDOWS_SERVER_2016_BUILD = 14393
WINDOWS_SERVER_2022_BUILD = 20348


# ---------------------------------------------------------------------------------------------------- the host
@dataclass
class LbfoTeam:
    mode: str
    members: dict  # adapter name -> administrative mode (Active / Standby)
    nics: dict  # team interface name -> (VLAN id, primary)


@dataclass
class Switch:
    embedded_teaming: bool
    adapters: set  # names of the adapters the switch is bound to
    vms: int = 0  # virtual machines with an adapter on it


@dataclass
class Host:
    build: int | None
    adapters: set  # every interface name: physical, team interfaces, host vNICs ("vEthernet (<name>)")
    teams: dict = field(default_factory=dict)  # name -> LbfoTeam
    switches: dict = field(default_factory=dict)  # name -> Switch
    host_vnics: dict = field(default_factory=dict)  # vNIC name -> switch name

    @classmethod
    def from_state(cls, state: HostState) -> Host:
        """The part of a gathered state the rows need, read from the parsed gather (not from the model)."""
        teams = {}
        for name, team in state.teams.items():
            members = {m: state.members[m].administrative_mode for m in team.members if m in state.members}
            nics = {nic.name: (nic.vlan_id, nic.primary) for nic in state.team_nics if nic.team == name}
            teams[name] = LbfoTeam(team.teaming_mode, members, nics)
        switches = {
            switch.name: Switch(
                switch.embedded_teaming,
                {state.adapter_name_for_description(d) for d in switch.adapter_descriptions},
                len(state.vms_on_switch(switch.name)),
            )
            for switch in state.vm_switches
        }
        vnics = {vnic.name: vnic.switch_name for vnic in state.host_vnics}
        adapters = set(state.adapters) | {host_vnic_adapter_name(name) for name in vnics}
        return cls(state.os_build, adapters, teams, switches, vnics)

    def team_of(self, adapter: str) -> str | None:
        return next((name for name, team in self.teams.items() if adapter in team.members), None)

    def team_nic(self, name: str) -> tuple[str, int, bool] | None:
        """(team, VLAN id, primary) of a team interface."""
        for team_name, team in self.teams.items():
            if name in team.nics:
                vlan, primary = team.nics[name]
                return team_name, vlan, primary
        return None

    def bound_to_switch(self, adapter: str) -> str | None:
        return next((name for name, switch in self.switches.items() if adapter in switch.adapters), None)


# ---------------------------------------------------------------------------------------------------- the rows
Check = Callable[[Host, dict], "str | None"]  # (host before the command, its parameters) -> what is wrong, or None


@dataclass(frozen=True)
class Precondition:
    cmdlet: str
    name: str
    page: str
    quote: str  # the page's own words
    reading: str  # what we read from it, in our words
    broken: Check


def _team_named(key: str) -> Check:
    def check(host: Host, params: dict) -> str | None:
        return None if params[key] in host.teams else f"no NIC team {params[key]!r}"

    return check


def _new_name_free(host: Host, params: dict) -> str | None:
    return f"a NIC team {params['NewName']!r} exists" if params["NewName"] in host.teams else None


def _new_team_name_free(host: Host, params: dict) -> str | None:
    return f"a NIC team {params['Name']!r} exists" if params["Name"] in host.teams else None


def _members_free(host: Host, params: dict) -> str | None:
    for name in params["TeamMembers"]:
        if name not in host.adapters:
            return f"no adapter {name!r}"
        if host.team_of(name):
            return f"{name!r} is already a member of team {host.team_of(name)!r}"
    return None


def _no_host_vnic_member(host: Host, params: dict) -> str | None:
    names = params.get("TeamMembers") or [params.get("Name")]
    vnics = [name for name in names if name in {host_vnic_adapter_name(v) for v in host.host_vnics}]
    return f"host vNIC {vnics[0]!r} in a NIC team" if vnics else None


def _one_to_32_members(host: Host, params: dict) -> str | None:
    count = len(params["TeamMembers"])
    return None if 1 <= count <= 32 else f"{count} members"


def _lacp_timer_build(host: Host, params: dict) -> str | None:
    if "LacpTimer" not in params:
        return None
    if host.build is None or host.build < WINDOWS_SERVER_2016_BUILD:
        return f"-LacpTimer on build {host.build}"
    return None


def _adapter_new_to_teams(host: Host, params: dict) -> str | None:
    if params["Name"] not in host.adapters:
        return f"no adapter {params['Name']!r}"
    team = host.team_of(params["Name"])
    return f"{params['Name']!r} is already a member of team {team!r}" if team else None


def _one_standby(host: Host, params: dict) -> str | None:
    if params.get("AdministrativeMode") != "Standby":
        return None
    team = host.teams[params["Team"]]
    others = [m for m, mode in team.members.items() if mode == "Standby" and m != params["Name"]]
    return f"team {params['Team']!r} already has standby member {others[0]!r}" if others else None


def _member_of_team(host: Host, params: dict) -> str | None:
    team = host.teams.get(params["Team"])
    if team is None or params["Name"] not in team.members:
        return f"{params['Name']!r} is not a member of team {params['Team']!r}"
    return None


def _not_last_member(host: Host, params: dict) -> str | None:
    team = host.teams.get(params["Team"])
    if team is not None and set(team.members) == {params["Name"]}:
        return f"{params['Name']!r} is the last member of team {params['Team']!r}"
    return None


def _team_nic_named(host: Host, params: dict) -> str | None:
    return None if host.team_nic(params["Name"]) else f"no team interface {params['Name']!r}"


def _default_only_primary(host: Host, params: dict) -> str | None:
    found = host.team_nic(params["Name"])
    if params.get("Default") and found is not None and not found[2]:
        return f"{params['Name']!r} is not the team interface made with the team"
    return None


def _vlan_in_range(host: Host, params: dict) -> str | None:
    vlan = params.get("VlanID")
    return None if vlan is None or 0 <= int(vlan) < 4095 else f"VlanID {vlan}"


def _team_vlans_not_under_switch(host: Host, params: dict) -> str | None:
    if "VlanID" not in params:
        return None
    found = host.team_nic(params["Name"]) if "Name" in params and "Team" not in params else None
    team = params.get("Team") or (found[0] if found else None)
    if team is None:
        return None
    for nic in host.teams.get(team, LbfoTeam("", {}, {})).nics:
        switch = host.bound_to_switch(nic)
        if switch:
            return f"team {team!r} is bound to Hyper-V switch {switch!r} through {nic!r}: tag there, not on the team"
    return None


def _added_team_nic(host: Host, params: dict) -> str | None:
    team = host.teams.get(params["Team"])
    if team is None:
        return f"no NIC team {params['Team']!r}"
    for vlan, primary in team.nics.values():
        if vlan == int(params["VlanID"]) and not primary:
            return None
    return f"team {params['Team']!r} has no added team interface on VLAN {params['VlanID']}"


def _adapter_named(key: str) -> Check:
    def check(host: Host, params: dict) -> str | None:
        return None if params[key] in host.adapters else f"no adapter {params[key]!r}"

    return check


def _adapter_new_name_free(host: Host, params: dict) -> str | None:
    return f"an adapter named {params['NewName']!r} exists" if params["NewName"] in host.adapters else None


def _no_lbfo_nic_under_switch(host: Host, params: dict) -> str | None:
    if host.build is None or host.build < WINDOWS_SERVER_2022_BUILD:
        return None
    nics = [name for name in params["NetAdapterName"] if host.team_nic(name)]
    return f"LBFO team interface {nics[0]!r} under a switch on build {host.build}" if nics else None


def _one_to_eight_set_members(host: Host, params: dict) -> str | None:
    names = params.get("NetAdapterName")
    if names is None or not params.get("EnableEmbeddedTeaming", True):
        return None
    return None if 1 <= len(names) <= 8 else f"{len(names)} SET members"


def _switch_adapters_exist(host: Host, params: dict) -> str | None:
    return next((f"no adapter {name!r}" for name in params["NetAdapterName"] if name not in host.adapters), None)


def _set_switch_named(host: Host, params: dict) -> str | None:
    switch = host.switches.get(params["Name"])
    if switch is None or not switch.embedded_teaming:
        return f"no switch with embedded teaming named {params['Name']!r}"
    return None


def _set_algorithm(host: Host, params: dict) -> str | None:
    algorithm = params.get("LoadBalancingAlgorithm")
    return None if algorithm in (None, "HyperVPort", "Dynamic") else f"SET load balancing {algorithm!r}"


def _switch_named(key: str) -> Check:
    def check(host: Host, params: dict) -> str | None:
        return None if params[key] in host.switches else f"no Hyper-V switch {params[key]!r}"

    return check


def _host_vnic_named(host: Host, params: dict) -> str | None:
    name = params["VMNetworkAdapterName"]
    return None if name in host.host_vnics else f"no host vNIC {name!r}"


def _interface_exists(host: Host, params: dict) -> str | None:
    alias = params["InterfaceAlias"]
    return None if alias in host.adapters else f"no interface {alias!r}"


PRECONDITIONS = (
    # ------------------------------------------------------------------------------------------------ NetLbfo
    Precondition(
        "New-NetLbfoTeam",
        "team_name_is_new",
        LEARN + "netlbfo/new-netlbfoteam",
        "Specifies the name of the new NIC team.",
        "No NIC team of that name exists yet.",
        _new_team_name_free,
    ),
    Precondition(
        "New-NetLbfoTeam",
        "members_are_adapters_in_no_team",
        LEARN + "netlbfo/new-netlbfoteam",
        "Specifies the names of the network adapters that are members of the new team.",
        "Each member names an existing adapter that is not yet a member of a team (a team member record has one Team).",
        _members_free,
    ),
    Precondition(
        "New-NetLbfoTeam",
        "no_host_vnic_in_a_team",
        NIC_TEAMING,
        "Teaming of vNICs inside of the host partition is not supported in any configuration.",
        "A host vNIC (vEthernet) is never a team member.",
        _no_host_vnic_member,
    ),
    Precondition(
        "New-NetLbfoTeam",
        "one_to_32_members",
        NIC_TEAMING,
        "NIC Teaming allows you to group between one and 32 physical Ethernet network adapters",
        "A new team has 1 to 32 members.",
        _one_to_32_members,
    ),
    Precondition(
        "New-NetLbfoTeam",
        "lacp_timer_from_windows_server_2016",
        "https://learn.microsoft.com/previous-versions/windows/powershell-scripting/jj130847(v=wps.620)",
        "[[-LoadBalancingAlgorithm] <LBAlgos> ] [-AsJob]",
        "The Windows Server 2012 syntax ends its team settings at -LoadBalancingAlgorithm: -LacpTimer is listed from "
        "the Windows Server 2016 pages (build 14393) on, so a host below that build, or of unknown build, gets none.",
        _lacp_timer_build,
    ),
    Precondition(
        "Set-NetLbfoTeam",
        "team_exists",
        LEARN + "netlbfo/set-netlbfoteam",
        "The Set-NetLbfoTeam cmdlet sets the TeamingMode or LoadBalancingAlgorithm parameter on the specified NIC "
        "team.",
        "The team named by -Name exists.",
        _team_named("Name"),
    ),
    Precondition(
        "Set-NetLbfoTeam",
        "lacp_timer_from_windows_server_2016",
        "https://learn.microsoft.com/previous-versions/windows/powershell-scripting/jj130844(v=wps.620)",
        "[-LoadBalancingAlgorithm <LBAlgos> ] [-PassThru] [-TeamingMode <TeamingModes> ]",
        "The Windows Server 2012 syntax has no -LacpTimer; the Windows Server 2016 pages (build 14393) add it.",
        _lacp_timer_build,
    ),
    Precondition(
        "Remove-NetLbfoTeam",
        "team_exists",
        LEARN + "netlbfo/remove-netlbfoteam",
        "The Remove-NetLbfoTeam cmdlet removes the specified NIC team from the host.",
        "The team named by -Name exists.",
        _team_named("Name"),
    ),
    Precondition(
        "Rename-NetLbfoTeam",
        "team_exists",
        LEARN + "netlbfo/rename-netlbfoteam",
        "The Rename-NetLbfoTeam cmdlet renames the specified NIC team to the specified new name.",
        "The team named by -Name exists.",
        _team_named("Name"),
    ),
    Precondition(
        "Rename-NetLbfoTeam",
        "new_name_is_free",
        LEARN + "netlbfo/rename-netlbfoteam",
        "Specifies the new name of the NIC team.",
        "No other team has the new name yet.",
        _new_name_free,
    ),
    Precondition(
        "Add-NetLbfoTeamMember",
        "team_exists",
        LEARN + "netlbfo/add-netlbfoteammember",
        "The Add-NetLbfoTeamMember cmdlet adds a new network adapter as a member to the specified team.",
        "The team named by -Team exists.",
        _team_named("Team"),
    ),
    Precondition(
        "Add-NetLbfoTeamMember",
        "adapter_is_in_no_team",
        LEARN + "netlbfo/add-netlbfoteammember",
        "The Add-NetLbfoTeamMember cmdlet adds a new network adapter as a member to the specified team.",
        "The adapter exists and is a new member: it is not a member of this or another team.",
        _adapter_new_to_teams,
    ),
    Precondition(
        "Add-NetLbfoTeamMember",
        "at_most_one_standby",
        LEARN + "netlbfo/add-netlbfoteammember",
        "At most one member in a team can be in Standby mode.",
        "Adding a Standby member needs a team without one.",
        _one_standby,
    ),
    Precondition(
        "Remove-NetLbfoTeamMember",
        "adapter_is_a_member",
        LEARN + "netlbfo/remove-netlbfoteammember",
        "The Remove-NetLbfoTeamMember cmdlet removes one or more network adapters from the specified NIC team.",
        "The adapter is a member of the team named by -Team.",
        _member_of_team,
    ),
    Precondition(
        "Remove-NetLbfoTeamMember",
        "not_the_last_member",
        LEARN + "netlbfo/remove-netlbfoteammember",
        "In order to remove the last team member of a team, you must remove the team by using the Remove-NetLbfoTeam "
        "cmdlet.",
        "The team keeps at least one other member.",
        _not_last_member,
    ),
    Precondition(
        "Set-NetLbfoTeamMember",
        "adapter_is_a_member",
        LEARN + "netlbfo/set-netlbfoteammember",
        "The Set-NetLbfoTeamMember cmdlet sets the role of a specified network adapter (team member) in the NIC team.",
        "The adapter is a member of the team named by -Team.",
        _member_of_team,
    ),
    Precondition(
        "Set-NetLbfoTeamMember",
        "at_most_one_standby",
        LEARN + "netlbfo/set-netlbfoteammember",
        "At most one member in a team can be in Standby mode.",
        "Setting a member Standby needs a team whose other members are all Active.",
        _one_standby,
    ),
    Precondition(
        "Set-NetLbfoTeamNic",
        "team_interface_exists",
        LEARN + "netlbfo/set-netlbfoteamnic",
        "The Set-NetLbfoTeamNic cmdlet sets the optional values on a team interface.",
        "A team interface of that name exists when the command runs (names change with tagging and renames).",
        _team_nic_named,
    ),
    Precondition(
        "Set-NetLbfoTeamNic",
        "default_mode_only_for_the_primary",
        LEARN + "netlbfo/set-netlbfoteamnic",
        "Only the team interface that was created when the team was created can be set to Default mode.",
        "-Default names the primary team interface.",
        _default_only_primary,
    ),
    Precondition(
        "Set-NetLbfoTeamNic",
        "no_team_vlan_under_a_hyperv_switch",
        NIC_TEAMING,
        "When a team connects to a Hyper-V Virtual Switch, all VLAN segregation must be done in the Hyper-V Virtual "
        "Switch rather than in NIC Teaming.",
        "No VLAN is set on a team interface of a team that a Hyper-V switch is bound to.",
        _team_vlans_not_under_switch,
    ),
    Precondition(
        "Add-NetLbfoTeamNic",
        "team_exists",
        LEARN + "netlbfo/add-netlbfoteamnic",
        "The Add-NetLbfoTeamNic cmdlet adds a new team interface to the specified NIC team.",
        "The team named by -Team exists.",
        _team_named("Team"),
    ),
    Precondition(
        "Add-NetLbfoTeamNic",
        "vlan_id_in_range",
        LEARN + "netlbfo/add-netlbfoteamnic",
        "VlanID values must meet the criteria 0 ≤ VlanID < 4095.",
        "-VlanID is 0 to 4094.",
        _vlan_in_range,
    ),
    Precondition(
        "Add-NetLbfoTeamNic",
        "no_team_vlan_under_a_hyperv_switch",
        NIC_TEAMING,
        "When a team connects to a Hyper-V Virtual Switch, all VLAN segregation must be done in the Hyper-V Virtual "
        "Switch rather than in NIC Teaming.",
        "No VLAN team interface is added to a team that a Hyper-V switch is bound to.",
        _team_vlans_not_under_switch,
    ),
    Precondition(
        "Remove-NetLbfoTeamNic",
        "only_an_added_team_interface",
        LEARN + "netlbfo/remove-netlbfoteamnic",
        "This cmdlet does not remove the team interface created when the team was created.",
        "The team has an added (not the primary) team interface on that VLAN.",
        _added_team_nic,
    ),
    # ------------------------------------------------------------------------------------------------ NetAdapter
    Precondition(
        "Rename-NetAdapter",
        "adapter_exists",
        LEARN + "netadapter/rename-netadapter",
        "The Rename-NetAdapter cmdlet renames a network adapter.",
        "An adapter named by -Name exists when the command runs.",
        _adapter_named("Name"),
    ),
    Precondition(
        "Rename-NetAdapter",
        "new_name_is_free",
        LEARN + "netadapter/rename-netadapter",
        "Only the name, or interface alias, can be changed and not the interface description.",
        "The name is the interface alias, which names one interface: no other adapter has the new name.",
        _adapter_new_name_free,
    ),
    Precondition(
        "Enable-NetAdapterRdma",
        "adapter_exists",
        LEARN + "netadapter/enable-netadapterrdma",
        "The Enable-NetAdapterRdma cmdlet enables remote direct memory access (RDMA) on the network adapter.",
        "The adapter named by -Name exists (a host vNIC once Add-VMNetworkAdapter has made it).",
        _adapter_named("Name"),
    ),
    Precondition(
        "Disable-NetAdapterRdma",
        "adapter_exists",
        LEARN + "netadapter/disable-netadapterrdma",
        "The Disable-NetAdapterRdma cmdlet disables remote direct memory access (RDMA) on the network adapter.",
        "The adapter named by -Name exists.",
        _adapter_named("Name"),
    ),
    # ------------------------------------------------------------------------------------------------ NetTCPIP
    *(
        Precondition(
            command,
            "interface_exists",
            LEARN + "nettcpip/set-netipinterface",
            "The NetIPInterface object is automatically created by the computer and thus the NetIPInterface object "
            "has no New or Remove verbs.",
            "The IP interface named by -InterfaceAlias is Windows' own, made with its adapter: the adapter exists "
            "when the command runs (after the team interface appears, not before).",
            _interface_exists,
        )
        for command in (
            "Set-NetIPInterface",
            "New-NetIPAddress",
            "Set-NetIPAddress",
            "Set-DnsClientServerAddress",
            "Set-DnsClient",
        )
    ),
    # ------------------------------------------------------------------------------------------------ Hyper-V
    Precondition(
        "New-VMSwitch",
        "no_lbfo_team_interface_from_windows_server_2022",
        "https://github.com/microsoft/Convert-LBFO2SET (README, by Microsoft)",
        "with Windows Server 2022, and newer, no longer allowing an LBFO NIC to be attached to a Hyper-V vmSwitch",
        "From build 20348 on, -NetAdapterName names no LBFO team interface.",
        _no_lbfo_nic_under_switch,
    ),
    Precondition(
        "New-VMSwitch",
        "set_has_one_to_eight_members",
        SET_PAGE,
        "SET supports between one and eight network adapters in a team.",
        "A switch with embedded teaming is made with 1 to 8 adapters.",
        _one_to_eight_set_members,
    ),
    Precondition(
        "New-VMSwitch",
        "set_members_are_adapters",
        SET_PAGE,
        "When you create a SET team, you must specify up to eight identical network adapters that are bound to the "
        "Hyper-V Virtual Switch as SET team member adapters.",
        "Each -NetAdapterName names an existing adapter.",
        _switch_adapters_exist,
    ),
    Precondition(
        "Set-VMSwitchTeam",
        "set_switch_exists",
        SET_PAGE,
        "You must create a SET team at the same time that you create the Hyper-V Virtual Switch by using the "
        "New-VMSwitch Windows PowerShell command.",
        "A switch with embedded teaming named by -Name exists (the team is the switch's).",
        _set_switch_named,
    ),
    Precondition(
        "Set-VMSwitchTeam",
        "set_has_one_to_eight_members",
        SET_PAGE,
        "SET supports between one and eight network adapters in a team.",
        "A new member list has 1 to 8 adapters.",
        _one_to_eight_set_members,
    ),
    Precondition(
        "Set-VMSwitchTeam",
        "set_balances_by_hyperv_port_or_dynamic",
        SET_PAGE,
        "This option takes one of two possible values: HyperVPort or Dynamic.",
        "-LoadBalancingAlgorithm is HyperVPort or Dynamic.",
        _set_algorithm,
    ),
    Precondition(
        "Set-VMSwitch",
        "switch_exists",
        LEARN + "hyper-v/set-vmswitch",
        "The Set-VMSwitch cmdlet configures a virtual switch.",
        "The switch named by -Name exists.",
        _switch_named("Name"),
    ),
    Precondition(
        "Add-VMNetworkAdapter",
        "switch_exists",
        LEARN + "hyper-v/add-vmnetworkadapter",
        "If the switch name is not unique, then the operation fails.",
        "-SwitchName names exactly one existing switch.",
        _switch_named("SwitchName"),
    ),
    Precondition(
        "Set-VMNetworkAdapterVlan",
        "host_vnic_exists",
        LEARN + "hyper-v/set-vmnetworkadaptervlan",
        "The Set-VMNetworkAdapterVlan cmdlet configures virtual LAN settings for the traffic through a virtual network "
        "adapter.",
        "The host vNIC named by -VMNetworkAdapterName exists.",
        _host_vnic_named,
    ),
)

# The collection's own functions (plugins/module_utils/HpcWin.psm1 and the rollback script): no Learn page of their
# own. The walk simulates their effect; what they check they check on the host when they run.
COLLECTION_FUNCTIONS = {
    "Clear-HpcIPv4Address": "removes the interface's IPv4 addresses and default route where there are some",
    "Wait-HpcNetAdapter": "waits for the adapter to appear and come up",
    "Rename-HpcPrimaryTeamNic": "Get-NetLbfoTeamNic -Team, the Primary one, then Rename-NetAdapter",
    "Remove-HpcVMSwitch": "Remove-VMSwitch, refused while a VM is connected",
    "Register-HpcRollback": "registers the rollback scheduled task",
    "Unregister-HpcRollback": "unregisters it, failing when it has fired",
    "Restore-HpcIPConfiguration": "restores a recorded IP configuration where it differs",
}


# ---------------------------------------------------------------------------------------------------- the effects
def _rename_team(host: Host, params: dict) -> None:
    old, new = params["Name"], params["NewName"]
    team = host.teams.pop(old)
    host.teams[new] = team
    # Rename-NetLbfoTeam "Also updates the team interface names accordingly, if they use default values."
    # (learn.microsoft.com/powershell/module/netlbfo/rename-netlbfoteam): the primary named like the team, an
    # interface named '<team> - VLAN <id>'.
    renamed = {}
    for name, (vlan, primary) in team.nics.items():
        default = old if primary and not vlan else f"{old} - VLAN {vlan}"
        renamed[name] = (new if primary and not vlan else f"{new} - VLAN {vlan}") if name == default else name
    team.nics = {renamed[name]: value for name, value in team.nics.items()}
    for name, new_name in renamed.items():
        _rename_adapter(host, name, new_name)


def _rename_adapter(host: Host, old: str, new: str) -> None:
    if old == new:
        return
    host.adapters.discard(old)
    host.adapters.add(new)
    for team in host.teams.values():
        if old in team.nics:
            team.nics[new] = team.nics.pop(old)
    for switch in host.switches.values():
        if old in switch.adapters:
            switch.adapters = (switch.adapters - {old}) | {new}


def _new_team(host: Host, params: dict) -> None:
    nic = params.get("TeamNicName") or params["Name"]
    host.teams[params["Name"]] = LbfoTeam(
        params.get("TeamingMode", "SwitchIndependent"), dict.fromkeys(params["TeamMembers"], "Active"), {nic: (0, True)}
    )
    host.adapters.add(nic)


def _remove_team(host: Host, params: dict) -> None:
    team = host.teams.pop(params["Name"])
    host.adapters -= set(team.nics)


def _set_team(host: Host, params: dict) -> None:
    if "TeamingMode" in params:
        host.teams[params["Name"]].mode = params["TeamingMode"]


def _add_member(host: Host, params: dict) -> None:
    host.teams[params["Team"]].members[params["Name"]] = params.get("AdministrativeMode", "Active")


def _remove_member(host: Host, params: dict) -> None:
    host.teams[params["Team"]].members.pop(params["Name"])


def _set_member(host: Host, params: dict) -> None:
    host.teams[params["Team"]].members[params["Name"]] = params["AdministrativeMode"]


def _set_team_nic(host: Host, params: dict) -> None:
    team_name, _vlan, primary = host.team_nic(params["Name"])
    team = host.teams[team_name]
    vlan = 0 if params.get("Default") else int(params["VlanID"])
    team.nics[params["Name"]] = (vlan, primary)
    if primary:
        # The page's second example: tagging "Team1" with VLAN 5 makes "Team1 - VLAN 5", -Default makes it "Team1".
        _rename_adapter(host, params["Name"], f"{team_name} - VLAN {vlan}" if vlan else team_name)


def _add_team_nic(host: Host, params: dict) -> None:
    name = params.get("Name") or f"{params['Team']} - VLAN {params['VlanID']}"
    host.teams[params["Team"]].nics[name] = (int(params["VlanID"]), False)
    host.adapters.add(name)


def _remove_team_nic(host: Host, params: dict) -> None:
    team = host.teams[params["Team"]]
    name = next(n for n, (vlan, primary) in team.nics.items() if vlan == int(params["VlanID"]) and not primary)
    team.nics.pop(name)
    host.adapters.discard(name)


def _rename_primary(host: Host, params: dict) -> None:
    team = host.teams[params["Team"]]
    primary = next(name for name, (_vlan, is_primary) in team.nics.items() if is_primary)
    _rename_adapter(host, primary, params["NewName"])


def _host_vnic(host: Host, switch: str, name: str) -> None:
    host.host_vnics[name] = switch
    host.adapters.add(host_vnic_adapter_name(name))


def _new_switch(host: Host, params: dict) -> None:
    host.switches[params["Name"]] = Switch(bool(params.get("EnableEmbeddedTeaming")), set(params["NetAdapterName"]))
    if params.get("AllowManagementOS"):
        _host_vnic(host, params["Name"], params["Name"])  # the management vNIC is named after the switch


def _set_switch_team(host: Host, params: dict) -> None:
    if params.get("NetAdapterName"):
        host.switches[params["Name"]].adapters = set(params["NetAdapterName"])


def _set_switch(host: Host, params: dict) -> None:
    if params["AllowManagementOS"]:
        _host_vnic(host, params["Name"], params["Name"])
    else:
        host.host_vnics = {k: v for k, v in host.host_vnics.items() if not (k == params["Name"] and v == k)}
        host.adapters.discard(host_vnic_adapter_name(params["Name"]))


def _remove_switch(host: Host, params: dict) -> None:
    host.switches.pop(params["Name"])
    gone = [name for name, switch in host.host_vnics.items() if switch == params["Name"]]
    for name in gone:
        host.host_vnics.pop(name)
        host.adapters.discard(host_vnic_adapter_name(name))


EFFECTS: dict[str, Callable[[Host, dict], None]] = {
    "New-NetLbfoTeam": _new_team,
    "Remove-NetLbfoTeam": _remove_team,
    "Rename-NetLbfoTeam": _rename_team,
    "Set-NetLbfoTeam": _set_team,
    "Add-NetLbfoTeamMember": _add_member,
    "Remove-NetLbfoTeamMember": _remove_member,
    "Set-NetLbfoTeamMember": _set_member,
    "Set-NetLbfoTeamNic": _set_team_nic,
    "Add-NetLbfoTeamNic": _add_team_nic,
    "Remove-NetLbfoTeamNic": _remove_team_nic,
    "Rename-NetAdapter": lambda host, params: _rename_adapter(host, params["Name"], params["NewName"]),
    "Rename-HpcPrimaryTeamNic": _rename_primary,
    "New-VMSwitch": _new_switch,
    "Set-VMSwitchTeam": _set_switch_team,
    "Set-VMSwitch": _set_switch,
    "Remove-HpcVMSwitch": _remove_switch,
    "Add-VMNetworkAdapter": lambda host, params: _host_vnic(host, params["SwitchName"], params["Name"]),
}

# What the collection functions need before they run, in the host's terms (they have no Learn page).
COLLECTION_CHECKS: dict[str, Check] = {
    "Clear-HpcIPv4Address": _interface_exists,
    "Rename-HpcPrimaryTeamNic": _team_named("Team"),
    "Remove-HpcVMSwitch": _switch_named("Name"),
}


def broken_preconditions(host: Host, command: dict) -> list[str]:
    """'<cmdlet> <row>: <what is wrong>' for each documented precondition the command breaks on this host."""
    name, params = command["command"], command["parameters"]
    found = [
        f"{name} {row.name}: {problem}"
        for row in PRECONDITIONS
        if row.cmdlet == name and (problem := row.broken(host, params))
    ]
    if name in COLLECTION_CHECKS and (problem := COLLECTION_CHECKS[name](host, params)):
        found.append(f"{name}: {problem}")
    return found


def run(host: Host, command: dict) -> None:
    """The command's documented effect on the simulated host (none for the commands that touch only IP settings)."""
    effect = EFFECTS.get(command["command"])
    if effect is not None:
        effect(host, command["parameters"])
