# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each apply step does to the recorded host state, as Windows documents it: HostState + changes -> HostState.

The planner uses it to plan a step against the state the earlier steps leave (a VLAN tag renames the primary team
NIC), to show the --diff 'after' side, and to compute the rollback of a change on the management path. The tests
use it to prove idempotence: for every recorded state and every kind of change, planning again on the modelled
result plans nothing. A step Windows refuses raises ForbiddenByWindows, so a plan that contains one fails the tests.

Sources (learn.microsoft.com/powershell/module/...): New-NetLbfoTeam, Set-NetLbfoTeam, Rename-NetLbfoTeam,
Add-/Remove-NetLbfoTeamMember, Set-NetLbfoTeamMember, Set-NetLbfoTeamNic (a tag renames the primary team interface,
-Default restores it), Add-/Remove-NetLbfoTeamNic (default name '<team> - VLAN <id>'), New-VMSwitch, Set-VMSwitch,
Set-VMSwitchTeam, Remove-VMSwitch, Add-VMNetworkAdapter, Set-VMNetworkAdapterVlan, Enable-/Disable-NetAdapterRdma,
New-NetIPAddress, Set-NetIPInterface; standby members: NIC Teaming settings (windows-server/networking/technologies/
nic-teaming/nic-teaming-settings). What is inferred rather than documented is marked NOTE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    Adapter,
    HostState,
    HostVnic,
    IpConfig,
    Team,
    TeamMember,
    TeamNic,
    VmSwitch,
    VmSwitchTeam,
    host_vnic_adapter_name,
)

MULTIPLEXOR = "Microsoft Network Adapter Multiplexor Driver"
HYPERV_VNIC = "Hyper-V Virtual Ethernet Adapter"


class ForbiddenByWindows(ValueError):
    """A step the cmdlet would refuse on a real host."""


def primary_name_after_vlan(team: str, vlan_id: int) -> str:
    """Set-NetLbfoTeamNic renames the primary team interface when it is tagged, and back when set to Default."""
    return team if not vlan_id else vlan_nic_default_name(team, vlan_id)


def vlan_nic_default_name(team: str, vlan_id: int) -> str:
    return f"{team} - VLAN {vlan_id}"


# ---------------------------------------------------------------------------------------------------- helpers
def _dhcp(state: HostState, interfaces: Iterable[str]) -> dict:
    configs = dict(state.ip_configs)
    for name in interfaces:
        configs[name] = IpConfig(interface=name, dhcp=True)
    return configs


def _unbind(configs: dict, interfaces: Iterable[str]) -> dict:
    """TCP/IP leaves a NIC that joins a team or a switch: its addresses go with the binding."""
    return {name: config for name, config in configs.items() if name not in set(interfaces)}


def _rename_key(mapping: dict, old: str, new: str, rebuild: Callable[[Any], Any]) -> dict:
    return {(new if key == old else key): (rebuild(value) if key == old else value) for key, value in mapping.items()}


def _team(state: HostState, name: str) -> Team:
    if name not in state.teams:
        raise ForbiddenByWindows(f"no team {name!r}")
    return state.teams[name]


def _virtual_adapter(name: str, description: str) -> Adapter:
    return Adapter(name, description, "Up", "Connected", None, "Microsoft", "", description, "", True, False)


def _multiplexor_description(state: HostState) -> str:
    taken = {adapter.description for adapter in state.adapters.values()}
    if MULTIPLEXOR not in taken:
        return MULTIPLEXOR
    number = 2
    while f"{MULTIPLEXOR} #{number}" in taken:
        number += 1
    return f"{MULTIPLEXOR} #{number}"


def _member(state: HostState, team: str, name: str, mode: str, teaming_mode: str) -> TeamMember:
    if name not in state.adapters:
        raise ForbiddenByWindows(f"no adapter {name!r}")
    if mode == "Standby" and teaming_mode != "SwitchIndependent":
        mode = "Active"  # Static and Lacp teams make every member active
    adapter = state.adapters[name]
    return TeamMember(name, team, adapter.description, mode, mode, "NoFailure", adapter.speed_bits_per_second)


def _check_one_standby(members: dict, team: str) -> None:
    standby = [m.name for m in members.values() if m.team == team and m.administrative_mode == "Standby"]
    active = [m.name for m in members.values() if m.team == team and m.administrative_mode == "Active"]
    if standby and not active:
        raise ForbiddenByWindows(f"team {team!r} would have no active member")


# ---------------------------------------------------------------------------------------------------- LBFO steps
def _new_team(state: HostState, change: dict) -> HostState:
    name, members = change["team"], list(change["members"])
    if name in state.teams:
        raise ForbiddenByWindows(f"team {name!r} exists")
    taken = [m for m in members if m in state.members]
    if taken:
        raise ForbiddenByWindows(f"{taken} already in a team")
    mode = change["teaming_mode"]
    nic_name = change.get("team_nic_name") or name
    team = Team(
        name,
        tuple(members),
        (nic_name,),
        mode,
        change["load_balancing_algorithm"],
        "Up",
        change.get("lacp_timer") or "Fast",
    )
    new_members = dict(state.members)
    for member in members:
        new_members[member] = _member(state, name, member, "Active", mode)
    adapters = dict(state.adapters)
    adapters[nic_name] = _virtual_adapter(nic_name, _multiplexor_description(state))
    configs = _dhcp(replace(state, ip_configs=_unbind(state.ip_configs, members)), [nic_name])
    return replace(
        state,
        teams={**state.teams, name: team},
        members=new_members,
        team_nics=(*state.team_nics, TeamNic(nic_name, name, 0, True, True)),
        adapters=adapters,
        ip_configs=configs,
    )


def _remove_team(state: HostState, change: dict) -> HostState:
    team = _team(state, change["team"])
    nics = [nic.name for nic in state.team_nics if nic.team == team.name]
    teams = {k: v for k, v in state.teams.items() if k != team.name}
    members = {k: v for k, v in state.members.items() if v.team != team.name}
    adapters = {k: v for k, v in state.adapters.items() if k not in nics}
    configs = _dhcp(replace(state, ip_configs=_unbind(state.ip_configs, nics)), team.members)
    return replace(
        state,
        teams=teams,
        members=members,
        team_nics=tuple(nic for nic in state.team_nics if nic.team != team.name),
        adapters=adapters,
        ip_configs=configs,
    )


def _default_team_nic_name(team: str, nic: TeamNic) -> str:
    return primary_name_after_vlan(team, nic.vlan_id) if nic.primary else vlan_nic_default_name(team, nic.vlan_id)


def _rename_team(state: HostState, change: dict) -> HostState:
    old, new = change["team"], change["new_name"]
    team = _team(state, old)
    if new in state.teams:
        raise ForbiddenByWindows(f"team {new!r} exists")
    teams = {(new if k == old else k): (replace(v, name=new) if k == old else v) for k, v in state.teams.items()}
    members = {k: (replace(v, team=new) if v.team == old else v) for k, v in state.members.items()}
    nics = tuple(replace(nic, team=new) if nic.team == old else nic for nic in state.team_nics)
    state = replace(state, teams=teams, members=members, team_nics=nics)
    # Rename-NetLbfoTeam "Also updates the team interface names accordingly, if they use default values."
    # (learn.microsoft.com/powershell/module/netlbfo/rename-netlbfoteam): the untagged primary named like the team,
    # a tagged one or an added one named '<team> - VLAN <id>'.
    for nic in [nic for nic in state.team_nics if nic.team == new]:
        if nic.name == _default_team_nic_name(old, nic):
            state = _rename_nic(state, nic.name, _default_team_nic_name(new, nic))
    del team
    return state


def _set_team(state: HostState, change: dict) -> HostState:
    team = _team(state, change["team"])
    team = replace(
        team,
        teaming_mode=change.get("teaming_mode") or team.teaming_mode,
        load_balancing_algorithm=change.get("load_balancing_algorithm") or team.load_balancing_algorithm,
        lacp_timer=change.get("lacp_timer") or team.lacp_timer,
    )
    if team.teaming_mode != "SwitchIndependent":
        # Set-NetLbfoTeam does not document what becomes of a standby member when the mode leaves SwitchIndependent
        # (the only mode with one): the plan sets it Active first (Set-NetLbfoTeamMember -AdministrativeMode Active).
        standby = [m.name for m in state.members.values() if m.team == team.name and m.administrative_mode == "Standby"]
        if standby:
            raise ForbiddenByWindows(
                f"team {team.name!r} switched to {team.teaming_mode} with standby member {standby[0]!r} still standby"
            )
    return replace(state, teams={**state.teams, team.name: team})


def _add_member(state: HostState, change: dict) -> HostState:
    team = _team(state, change["team"])
    name = change["member"]
    if name in state.members:
        raise ForbiddenByWindows(f"{name!r} already in team {state.members[name].team!r}")
    if change.get("administrative_mode") == "Standby" and team.teaming_mode != "SwitchIndependent":
        raise ForbiddenByWindows(f"standby member in a {team.teaming_mode} team")
    member = _member(state, team.name, name, change.get("administrative_mode") or "Active", team.teaming_mode)
    team = replace(team, members=(*team.members, name))
    return replace(
        state,
        teams={**state.teams, team.name: team},
        members={**state.members, name: member},
        ip_configs=_unbind(state.ip_configs, [name]),
    )


def _remove_member(state: HostState, change: dict) -> HostState:
    team = _team(state, change["team"])
    name = change["member"]
    if name not in team.members:
        raise ForbiddenByWindows(f"{name!r} is not in team {team.name!r}")
    if len(team.members) == 1:
        raise ForbiddenByWindows(f"the last member of team {team.name!r} cannot be removed: remove the team")
    team = replace(team, members=tuple(m for m in team.members if m != name))
    members = {k: v for k, v in state.members.items() if k != name}
    _check_one_standby(members, team.name)
    return replace(state, teams={**state.teams, team.name: team}, members=members, ip_configs=_dhcp(state, [name]))


def _set_member_mode(state: HostState, change: dict) -> HostState:
    team = _team(state, change["team"])
    name, mode = change["member"], change["administrative_mode"]
    if name not in team.members:
        raise ForbiddenByWindows(f"{name!r} is not in team {team.name!r}")
    if mode == "Standby":
        if team.teaming_mode != "SwitchIndependent":
            raise ForbiddenByWindows(f"standby member in a {team.teaming_mode} team")
        others = [m for m in team.members if m != name and state.members[m].administrative_mode == "Standby"]
        if others:
            raise ForbiddenByWindows(f"team {team.name!r} already has standby member {others[0]!r}")
    members = {**state.members, name: replace(state.members[name], administrative_mode=mode, operational_status=mode)}
    _check_one_standby(members, team.name)
    return replace(state, members=members)


def _rename_nic(state: HostState, old: str, new: str) -> HostState:
    if old == new:
        return state
    if new in state.adapters:
        raise ForbiddenByWindows(f"an adapter named {new!r} exists")
    nics = tuple(replace(nic, name=new) if nic.name == old else nic for nic in state.team_nics)
    teams = {
        k: replace(v, team_nics=tuple(new if n == old else n for n in v.team_nics)) for k, v in state.teams.items()
    }
    adapters = _rename_key(state.adapters, old, new, lambda a: replace(a, name=new))
    configs = _rename_key(state.ip_configs, old, new, lambda c: replace(c, interface=new))
    rdma = _rename_key(state.rdma_enabled, old, new, lambda v: v)
    return replace(state, team_nics=nics, teams=teams, adapters=adapters, ip_configs=configs, rdma_enabled=rdma)


def _team_nic(state: HostState, name: str) -> TeamNic:
    nic = next((n for n in state.team_nics if n.name == name), None)
    if nic is None:
        raise ForbiddenByWindows(f"no team interface {name!r}")
    return nic


def _rename_team_nic(state: HostState, change: dict) -> HostState:
    _team_nic(state, change["team_nic"])
    return _rename_nic(state, change["team_nic"], change["new_name"])


def _set_team_nic_vlan(state: HostState, change: dict) -> HostState:
    nic = _team_nic(state, change["team_nic"])
    vlan = int(change["vlan_id"])
    if not 1 <= vlan <= 4094:
        raise ForbiddenByWindows(f"VlanID {vlan}: untag with -Default")
    if any(n.team == nic.team and n.vlan_id == vlan and n.name != nic.name for n in state.team_nics):
        raise ForbiddenByWindows(f"team {nic.team!r} already has a team interface on VLAN {vlan}")
    state = replace(
        state,
        team_nics=tuple(replace(n, vlan_id=vlan, default=False) if n.name == nic.name else n for n in state.team_nics),
    )
    if nic.primary:
        state = _rename_nic(state, nic.name, primary_name_after_vlan(nic.team, vlan))
    return state


def _set_team_nic_default(state: HostState, change: dict) -> HostState:
    nic = _team_nic(state, change["team_nic"])
    if not nic.primary:
        raise ForbiddenByWindows("only the team interface made with the team can be set to Default mode")
    state = replace(
        state,
        team_nics=tuple(replace(n, vlan_id=0, default=True) if n.name == nic.name else n for n in state.team_nics),
    )
    return _rename_nic(state, nic.name, primary_name_after_vlan(nic.team, 0))


def _add_team_nic(state: HostState, change: dict) -> HostState:
    team = _team(state, change["team"])
    vlan = int(change["vlan_id"])
    if any(n.team == team.name and n.vlan_id == vlan for n in state.team_nics):
        raise ForbiddenByWindows(f"team {team.name!r} already has a team interface on VLAN {vlan}")
    name = change.get("team_nic") or vlan_nic_default_name(team.name, vlan)
    if name in state.adapters:
        raise ForbiddenByWindows(f"an adapter named {name!r} exists")
    adapters = {**state.adapters, name: _virtual_adapter(name, _multiplexor_description(state))}
    teams = {**state.teams, team.name: replace(team, team_nics=(*team.team_nics, name))}
    return replace(
        state,
        teams=teams,
        team_nics=(*state.team_nics, TeamNic(name, team.name, vlan, False, False)),
        adapters=adapters,
        ip_configs=_dhcp(state, [name]),
    )


def _remove_team_nic(state: HostState, change: dict) -> HostState:
    team = _team(state, change["team"])
    nic = next((n for n in state.team_nics if n.team == team.name and n.vlan_id == int(change["vlan_id"])), None)
    if nic is None or nic.primary:
        raise ForbiddenByWindows("Remove-NetLbfoTeamNic removes only an added team interface, never the primary one")
    teams = {**state.teams, team.name: replace(team, team_nics=tuple(n for n in team.team_nics if n != nic.name))}
    return replace(
        state,
        teams=teams,
        team_nics=tuple(n for n in state.team_nics if n.name != nic.name),
        adapters={k: v for k, v in state.adapters.items() if k != nic.name},
        ip_configs=_unbind(state.ip_configs, [nic.name]),
    )


# ---------------------------------------------------------------------------------------------------- IP steps
def _interface(state: HostState, name: str) -> None:
    if name not in state.adapters:
        raise ForbiddenByWindows(f"no interface {name!r}")


def _set_ip(state: HostState, change: dict) -> HostState:
    """Clear-HpcIPv4Address + New-NetIPAddress: the IPv4 part only; IPv6 and the interface's options stay."""
    _interface(state, change["interface"])
    base = state.ip_configs.get(change["interface"]) or IpConfig(change["interface"])
    config = replace(
        base,
        addresses=((change["address"], int(change["prefix_length"]), "Manual"),),
        dhcp=False,
        gateway=change.get("gateway"),
        dns_servers=tuple(change.get("dns_servers") or ()),
        skip_as_source=(),
    )
    return replace(state, ip_configs={**state.ip_configs, change["interface"]: config})


def _set_ip_dhcp(state: HostState, change: dict) -> HostState:
    _interface(state, change["interface"])
    base = state.ip_configs.get(change["interface"]) or IpConfig(change["interface"])
    config = replace(base, addresses=(), dhcp=True, gateway=None, dns_servers=(), skip_as_source=())
    return replace(state, ip_configs={**state.ip_configs, change["interface"]: config})


def _set_ip_options(state: HostState, change: dict) -> HostState:
    """Set-NetIPInterface -InterfaceMetric, Set-NetIPAddress -SkipAsSource, Set-DnsClient
    -RegisterThisConnectionsAddress: each only where the change names it."""
    _interface(state, change["interface"])
    config = state.ip_configs.get(change["interface"]) or IpConfig(change["interface"])
    if "interface_metric" in change:
        config = replace(config, interface_metric=change["interface_metric"])
    if "skip_as_source" in change:
        statics = {address for address, _prefix in config.static_addresses}
        if change["address"] not in statics:
            raise ForbiddenByWindows(f"no static address {change['address']!r} on {change['interface']!r}")
        flagged = set(config.skip_as_source) - {change["address"]}
        if change["skip_as_source"]:
            flagged.add(change["address"])
        config = replace(config, skip_as_source=tuple(sorted(flagged)))
    if "register_in_dns" in change:
        config = replace(config, register_in_dns=bool(change["register_in_dns"]))
    return replace(state, ip_configs={**state.ip_configs, change["interface"]: config})


def restored_ip_config(change: dict) -> IpConfig:
    """The IpConfig a restore_ip step writes (the one it was made from, see _winrollback.restore_ip_step)."""

    def split(entries: list) -> tuple:
        return tuple(sorted((text.rsplit("/", 1)[0], int(text.rsplit("/", 1)[1]), "Manual") for text in entries))

    return IpConfig(
        interface=change["interface"],
        addresses=() if change.get("dhcp") else split(change.get("addresses") or []),
        dhcp=bool(change.get("dhcp")),
        gateway=None if change.get("dhcp") else change.get("gateway"),
        dns_servers=() if change.get("dhcp") else tuple(change.get("dns_servers") or ()),
        ipv6_addresses=split(change.get("ipv6_addresses") or []),
        ipv6_gateway=change.get("ipv6_gateway"),
        ipv6_dns_servers=tuple(change.get("ipv6_dns_servers") or ()),
    )


def _restore_ip(state: HostState, change: dict) -> HostState:
    """Restore-HpcIPConfiguration: the recorded static addresses of both families, gateways and DNS servers."""
    _interface(state, change["interface"])
    base = state.ip_configs.get(change["interface"]) or IpConfig(change["interface"])
    new = restored_ip_config(change)
    config = replace(
        base,
        addresses=new.addresses,
        dhcp=new.dhcp,
        gateway=new.gateway,
        dns_servers=new.dns_servers,
        ipv6_addresses=new.ipv6_addresses,
        ipv6_gateway=new.ipv6_gateway,
        ipv6_dns_servers=new.ipv6_dns_servers,
    )
    return replace(state, ip_configs={**state.ip_configs, change["interface"]: config})


def _wait_adapter(state: HostState, change: dict) -> HostState:
    _interface(state, change["interface"])
    return state


# ---------------------------------------------------------------------------------------------------- Hyper-V steps
def _switch(state: HostState, name: str) -> VmSwitch:
    switch = next((s for s in state.vm_switches if s.name == name), None)
    if switch is None:
        raise ForbiddenByWindows(f"no Hyper-V switch {name!r}")
    return switch


def _with_switch(state: HostState, switch: VmSwitch) -> HostState:
    return replace(state, vm_switches=tuple(switch if s.name == switch.name else s for s in state.vm_switches))


def _add_vnic(state: HostState, switch: str, name: str, config: IpConfig | None = None) -> HostState:
    adapter = host_vnic_adapter_name(name)
    if any(v.name == name for v in state.host_vnics):
        raise ForbiddenByWindows(f"host vNIC {name!r} exists")
    return replace(
        state,
        host_vnics=(*state.host_vnics, HostVnic(name, switch, 0)),
        adapters={**state.adapters, adapter: _virtual_adapter(adapter, f"{HYPERV_VNIC} #{len(state.host_vnics) + 1}")},
        ip_configs={
            **state.ip_configs,
            adapter: replace(config, interface=adapter) if config else IpConfig(adapter, dhcp=True),
        },
    )


def _drop_vnics(state: HostState, switch: str) -> HostState:
    gone = [v.adapter_name for v in state.host_vnics if v.switch_name == switch]
    return replace(
        state,
        host_vnics=tuple(v for v in state.host_vnics if v.switch_name != switch),
        adapters={k: v for k, v in state.adapters.items() if k not in gone},
        ip_configs=_unbind(state.ip_configs, gone),
        rdma_enabled={k: v for k, v in state.rdma_enabled.items() if k not in gone},
    )


def _new_set_switch(state: HostState, change: dict) -> HostState:
    name, members = change["switch"], list(change["members"])
    if any(s.name == name for s in state.vm_switches):
        raise ForbiddenByWindows(f"Hyper-V switch {name!r} exists")
    taken = [m for m in members if m in state.members]
    if taken:
        raise ForbiddenByWindows(f"{taken} belong to an LBFO team")
    descriptions = tuple(state.adapters[m].description for m in members)
    allow = bool(change.get("allow_management_os"))
    moved = next(
        (state.ip_configs[m] for m in members if m in state.ip_configs and state.ip_configs[m].addresses), None
    )
    state = replace(
        state,
        vm_switches=(*state.vm_switches, VmSwitch(name, "External", descriptions, True, allow)),
        # NOTE: SET's default algorithm differs by build; the planner always sets it after New-VMSwitch.
        vm_switch_teams={**state.vm_switch_teams, name: VmSwitchTeam(name, descriptions, "SwitchIndependent", "")},
        ip_configs=_unbind(state.ip_configs, members),
    )
    # NOTE: with AllowManagementOS the host vNIC named after the switch takes over the IP configuration of the
    # adapter it is bound to (Hyper-V's behaviour for an external switch; documented for New-VMSwitch only as a
    # loss of connectivity while it is made, hence the management gate).
    return _add_vnic(state, name, name, moved) if allow else state


def _set_set_team(state: HostState, change: dict) -> HostState:
    switch = _switch(state, change["switch"])
    team = state.vm_switch_teams[switch.name]
    if change.get("members"):
        members = list(change["members"])
        old = [state.adapter_name_for_description(d) for d in team.adapter_descriptions]
        descriptions = tuple(state.adapters[m].description for m in members)
        team = replace(team, adapter_descriptions=descriptions)
        state = _with_switch(state, replace(switch, adapter_descriptions=descriptions))
        state = replace(
            state,
            ip_configs=_dhcp(replace(state, ip_configs=_unbind(state.ip_configs, members)), set(old) - set(members)),
        )
    if change.get("load_balancing_algorithm"):
        team = replace(team, load_balancing_algorithm=change["load_balancing_algorithm"])
    return replace(state, vm_switch_teams={**state.vm_switch_teams, team.name: team})


def _set_vm_switch(state: HostState, change: dict) -> HostState:
    switch = _switch(state, change["switch"])
    allow = bool(change["allow_management_os"])
    state = _with_switch(state, replace(switch, allow_management_os=allow))
    if allow and not switch.allow_management_os:
        return _add_vnic(state, switch.name, switch.name)
    if not allow:
        return _drop_vnics(state, switch.name)  # the management OS leaves the switch with all its vNICs
    return state


def _remove_set_switch(state: HostState, change: dict) -> HostState:
    switch = _switch(state, change["switch"])
    vms = state.vms_on_switch(switch.name)
    if vms:
        # Remove-VMSwitch -Force would disconnect them; Remove-HpcVMSwitch (HpcWin.psm1) refuses instead.
        raise ForbiddenByWindows(f"virtual machines {vms} are connected to switch {switch.name!r}")
    members = [state.adapter_name_for_description(d) for d in switch.adapter_descriptions]
    state = _drop_vnics(state, switch.name)
    return replace(
        state,
        vm_switches=tuple(s for s in state.vm_switches if s.name != switch.name),
        vm_switch_teams={k: v for k, v in state.vm_switch_teams.items() if k != switch.name},
        ip_configs=_dhcp(state, members),
    )


def _add_host_vnic(state: HostState, change: dict) -> HostState:
    switch = _switch(state, change["switch"])
    if not switch.allow_management_os:
        raise ForbiddenByWindows(f"switch {switch.name!r} does not allow the management OS")
    return _add_vnic(state, switch.name, change["vnic"])


def _set_host_vnic_vlan(state: HostState, change: dict) -> HostState:
    if not any(v.name == change["vnic"] for v in state.host_vnics):
        raise ForbiddenByWindows(f"no host vNIC {change['vnic']!r}")
    vlan = int(change["vlan_id"])
    return replace(
        state, host_vnics=tuple(replace(v, vlan_id=vlan) if v.name == change["vnic"] else v for v in state.host_vnics)
    )


def _set_rdma(state: HostState, change: dict) -> HostState:
    _interface(state, change["adapter"])
    return replace(state, rdma_enabled={**state.rdma_enabled, change["adapter"]: bool(change["enabled"])})


def _no_op(state: HostState, change: dict) -> HostState:
    return state


STEPS = {
    "new_team": _new_team,
    "remove_team": _remove_team,
    "rename_team": _rename_team,
    "set_team": _set_team,
    "add_member": _add_member,
    "remove_member": _remove_member,
    "set_member_mode": _set_member_mode,
    "rename_team_nic": _rename_team_nic,
    "set_team_nic_vlan": _set_team_nic_vlan,
    "set_team_nic_default": _set_team_nic_default,
    "add_team_nic": _add_team_nic,
    "remove_team_nic": _remove_team_nic,
    "set_ip": _set_ip,
    "set_ip_dhcp": _set_ip_dhcp,
    "set_ip_options": _set_ip_options,
    "restore_ip": _restore_ip,
    "wait_adapter": _wait_adapter,
    "new_set_switch": _new_set_switch,
    "set_set_team": _set_set_team,
    "set_vm_switch": _set_vm_switch,
    "remove_set_switch": _remove_set_switch,
    "add_host_vnic": _add_host_vnic,
    "set_host_vnic_vlan": _set_host_vnic_vlan,
    "set_rdma": _set_rdma,
    "arm_rollback": _no_op,
    "disarm_rollback": _no_op,
}


def apply(state: HostState, changes: list[dict]) -> HostState:
    """The state after running `changes` in order; ForbiddenByWindows for a step Windows refuses."""
    for change in changes:
        state = STEPS[change["action"]](state, change)
    return state
