"""What Windows allows a host's network set-up to be, as Microsoft's pages say it: a table of rules over the raw
records a gather returns (the fixtures' JSON), written from the pages and not from the planner's model, so that a
fixture the model would accept by mistake still fails.

Each rule names the page and the sentence it follows. Where the sentence is given as ``says`` it is the page's
statement in our words; ``quote`` is the page's own text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# The build of Windows Server 2022 (learn.microsoft.com/windows/release-health/windows-server-release-info).
WINDOWS_SERVER_2022_BUILD = 20348
SWITCH_INDEPENDENT = (1, "SwitchIndependent")
STANDBY = (1, "Standby")
SET_ALGORITHMS = (4, 5, "HyperVPort", "Dynamic")


def _list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _vswitch_on_lbfo_team_nic(raw: dict) -> list[str]:
    build = (raw.get("os") or {}).get("build_number") or 0
    if build < WINDOWS_SERVER_2022_BUILD:
        return []
    team_nic_descriptions = {nic.get("InterfaceDescription") for nic in _list(raw.get("team_nics"))}
    return [
        f"switch {switch['Name']!r} is bound to an LBFO team NIC on build {build}"
        for switch in _list(raw.get("vm_switches"))
        if not switch.get("EmbeddedTeamingEnabled")
        and team_nic_descriptions
        & set(
            _list(switch.get("NetAdapterInterfaceDescriptions")) or _list(switch.get("NetAdapterInterfaceDescription"))
        )
    ]


def _set_not_switch_independent(raw: dict) -> list[str]:
    return [
        f"SET team {team['Name']!r} is {team.get('TeamingMode')!r}"
        for team in _list(raw.get("vm_switch_teams"))
        if team.get("TeamingMode") not in SWITCH_INDEPENDENT
    ]


def _set_algorithm(raw: dict) -> list[str]:
    return [
        f"SET team {team['Name']!r} balances by {team.get('LoadBalancingAlgorithm')!r}"
        for team in _list(raw.get("vm_switch_teams"))
        if team.get("LoadBalancingAlgorithm") not in SET_ALGORITHMS
    ]


def _set_member_count(raw: dict) -> list[str]:
    return [
        f"SET team {team['Name']!r} has {len(_list(team.get('NetAdapterInterfaceDescription')))} members"
        for team in _list(raw.get("vm_switch_teams"))
        if not 1 <= len(_list(team.get("NetAdapterInterfaceDescription"))) <= 8
    ]


def _lbfo_member_count(raw: dict) -> list[str]:
    found = []
    for team in _list(raw.get("teams")):
        members = [m for m in _list(raw.get("team_members")) if m.get("Team") == team["Name"]]
        if not 1 <= len(members) <= 32:
            found.append(f"LBFO team {team['Name']!r} has {len(members)} members")
    return found


def _standby_outside_switch_independent(raw: dict) -> list[str]:
    modes = {team["Name"]: team.get("TeamingMode") for team in _list(raw.get("teams"))}
    return [
        f"member {member['Name']!r} is standby in a {modes.get(member.get('Team'))!r} team"
        for member in _list(raw.get("team_members"))
        if member.get("AdministrativeMode") in STANDBY and modes.get(member.get("Team")) not in SWITCH_INDEPENDENT
    ]


@dataclass(frozen=True)
class Rule:
    name: str
    page: str
    says: str
    broken_by: Callable[[dict], list[str]]
    quote: str = ""
    unquoted: str = ""  # why no page sentence is quoted; every rule has one or the other


RULES = (
    Rule(
        "no_vswitch_on_an_lbfo_team_nic_from_windows_server_2022",
        "github.com/microsoft/Convert-LBFO2SET (README, by Microsoft); learn.microsoft.com/azure-stack/hci/concepts/"
        "host-network-requirements (Switch Embedded Teaming)",
        "From Windows Server 2022 a Hyper-V switch cannot be bound to an LBFO team NIC; SET is the teaming for a "
        "Hyper-V switch.",
        _vswitch_on_lbfo_team_nic,
        quote="with Windows Server 2022, and newer, no longer allowing an LBFO NIC to be attached to a Hyper-V "
        "vmSwitch",
    ),
    Rule(
        "set_is_switch_independent",
        "learn.microsoft.com/windows-server/virtualization/hyper-v-virtual-switch/rdma-and-switch-embedded-teaming",
        "SET supports only the switch-independent teaming mode.",
        _set_not_switch_independent,
        quote="SET supports only Switch Independent mode",
    ),
    Rule(
        "set_balances_by_hyperv_port_or_dynamic",
        "learn.microsoft.com/windows-server/virtualization/hyper-v-virtual-switch/rdma-and-switch-embedded-teaming",
        "SET distributes load with the Hyper-V Port or the Dynamic algorithm only.",
        _set_algorithm,
        quote="The options for SET team Load Balancing distribution mode are Hyper-V Port and Dynamic.",
    ),
    Rule(
        "set_has_one_to_eight_members",
        "learn.microsoft.com/windows-server/virtualization/hyper-v-virtual-switch/rdma-and-switch-embedded-teaming",
        "SET groups between one and eight physical Ethernet network adapters.",
        _set_member_count,
        quote="SET supports between one and eight network adapters in a team.",
    ),
    Rule(
        "lbfo_has_one_to_thirty_two_members",
        "learn.microsoft.com/windows-server/networking/technologies/nic-teaming/nic-teaming",
        "NIC Teaming groups between one and 32 physical Ethernet network adapters.",
        _lbfo_member_count,
        quote="NIC Teaming allows you to group between one and 32 physical Ethernet network adapters into one or more "
        "software-based virtual network adapters.",
    ),
    Rule(
        "standby_only_in_switch_independent_mode",
        "learn.microsoft.com/windows-server/networking/technologies/nic-teaming/nic-teaming-settings",
        "A standby adapter is a setting of Switch Independent mode; switch-dependent teams (Static, LACP) use every "
        "member.",
        _standby_outside_switch_independent,
        unquoted="No sentence found: the NIC Teaming pages describe a Standby adapter (nic-teaming-settings) and "
        "Set-NetLbfoTeamMember allows at most one, but none states that Static or LACP teams refuse one. The rule "
        "stays as our reading, to be checked on a host.",
    ),
)


def broken_rules(raw: dict) -> dict:
    """Rule name -> what breaks it, for every rule the recorded state breaks."""
    return {rule.name: found for rule in RULES if (found := rule.broken_by(raw))}
