# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a win_nic_team task asks for, validated across fields: TeamDesired, and how it reads against the host.

The argument spec (action plugin) checks types and choices; this checks what spans fields and Windows' rules that need
no host: a standby member only in SwitchIndependent mode, the LACP timer only with Lacp, VLANs in range and once each,
what SET does not have.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._winplan import quoted_names as _names
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    KINDS,
    LACP_TIMERS,
    LOAD_BALANCING_ALGORITHMS,
    SET_LOAD_BALANCING_ALGORITHMS,
    SET_TEAMING_MODES,
    TEAMING_MODES,
    HostState,
    IpConfig,
    choice,
    int_or_none,
)

IP_SOURCES = ("static", "dhcp", "members")
DEFAULT_ROLLBACK_TIMEOUT_S = 300


# ---------------------------------------------------------------------------------------------------- desired state
@dataclass(frozen=True)
class TeamNicIp:
    """IPv4 configuration wanted on the primary team NIC: static, DHCP, or the static one a member carries now.

    The options keep a storage team NIC out of the host's own traffic: ``interface_metric`` (Set-NetIPInterface
    -InterfaceMetric; None leaves the metric as it is), ``skip_as_source`` (Set-NetIPAddress -SkipAsSource, static
    addresses only) and ``register_in_dns`` (Set-DnsClient -RegisterThisConnectionsAddress); None leaves each alone.
    """

    source: str
    address: str | None = None
    prefix_length: int | None = None
    gateway: str | None = None
    dns_servers: tuple = ()
    interface_metric: int | None = None
    skip_as_source: bool | None = None
    register_in_dns: bool | None = None

    @classmethod
    def from_args(cls, args: dict | None) -> TeamNicIp | None:
        if not args:
            return None
        source = choice(args.get("source") or "static", IP_SOURCES, "team_nic_ip.source")
        address = args.get("address") or None
        prefix = int_or_none(args.get("prefix_length"))
        if source == "static":
            if not address or prefix is None:
                raise ValueError("team_nic_ip with source static needs address and prefix_length")
            try:
                ipaddress.IPv4Interface(f"{address}/{prefix}")
            except ValueError as error:
                raise ValueError(f"team_nic_ip address {address}/{prefix} is not an IPv4 address: {error}") from error
        elif address or prefix is not None:
            raise ValueError(f"team_nic_ip with source {source} takes no address: drop address and prefix_length")
        metric = int_or_none(args.get("interface_metric"))
        if metric is not None and not 1 <= metric <= 9999:
            raise ValueError(f"team_nic_ip.interface_metric is {metric}: use 1-9999 (lower is preferred)")
        skip = args.get("skip_as_source")
        if skip is not None and source == "dhcp":
            raise ValueError("team_nic_ip.skip_as_source applies to a static address: drop it with source dhcp")
        register = args.get("register_in_dns")
        return cls(
            source,
            address,
            prefix,
            args.get("gateway") or None,
            tuple(args.get("dns_servers") or ()),
            metric,
            None if skip is None else bool(skip),
            None if register is None else bool(register),
        )


@dataclass(frozen=True)
class HostVnicDesired:
    """A host (management OS) vNIC on a SET switch: Add-VMNetworkAdapter -ManagementOS, its access VLAN, RDMA."""

    name: str
    vlan_id: int = 0
    rdma: bool | None = None


@dataclass(frozen=True)
class TeamDesired:
    """What the task asks for, validated across fields (the argument spec already checked types and choices)."""

    name: str
    members: tuple = ()
    kind: str = "lbfo"
    teaming_mode: str = "SwitchIndependent"
    load_balancing_algorithm: str = "Dynamic"
    standby_member: str | None = None
    team_nic_name: str | None = None
    vlan_id: int | None = None
    state: str = "present"
    force: bool = False
    for_vswitch: bool = False
    lacp_timer: str | None = None
    rename_from: str | None = None
    vlan_team_nics: tuple | None = None  # ((vlan id, name or None), ...); None leaves extra team NICs alone
    team_nic_ip: TeamNicIp | None = None
    allow_management_os: bool | None = None  # None: leave an existing switch as it is; a new one gets False
    host_vnics: tuple = ()
    allow_management_change: bool = False
    allow_second_default_gateway: bool = False
    rollback_timeout_s: int = DEFAULT_ROLLBACK_TIMEOUT_S
    management_addresses: tuple = ()  # set by the action plugin: ansible_host when it is an address
    management_ports: tuple = ()  # set by the action plugin: the port its connection reaches the host on

    @classmethod
    def from_args(cls, args: dict) -> TeamDesired:
        name = (args.get("name") or "").strip()
        if not name:
            raise ValueError("name is empty: give the team (or SET switch) a name")
        members = tuple(args.get("members") or ())
        state = choice(args.get("state") or "present", ("present", "absent"), "state")
        kind = choice(args.get("kind") or "lbfo", KINDS, "kind")
        teaming_mode = choice(
            args.get("teaming_mode") or "SwitchIndependent", tuple(TEAMING_MODES.values()), "teaming_mode"
        )
        algorithm = choice(
            args.get("load_balancing_algorithm") or "Dynamic",
            tuple(LOAD_BALANCING_ALGORITHMS.values()),
            "load_balancing_algorithm",
        )
        lacp_timer = args.get("lacp_timer") or None
        if lacp_timer is not None:
            lacp_timer = choice(lacp_timer, tuple(LACP_TIMERS.values()), "lacp_timer")
        standby = args.get("standby_member") or None
        vlan_id = int_or_none(args.get("vlan_id"))
        _check_members(members, state, standby)
        if standby is not None and teaming_mode != "SwitchIndependent":
            raise ValueError(
                f"standby_member {standby!r} needs teaming_mode SwitchIndependent: in {teaming_mode} mode Windows "
                "makes every member active. Drop standby_member or use SwitchIndependent"
            )
        if lacp_timer is not None and teaming_mode != "Lacp":
            raise ValueError(f"lacp_timer {lacp_timer!r} applies to teaming_mode Lacp only (got {teaming_mode})")
        if vlan_id is not None and not 0 <= vlan_id <= 4094:
            raise ValueError(f"vlan_id is {vlan_id}: use 1-4094, or 0 for the untagged default team NIC")
        vlan_team_nics = _vlan_team_nics(args.get("vlan_team_nics"), vlan_id)
        host_vnics = _host_vnics(args.get("host_vnics"))
        allow_management_os = args.get("allow_management_os")
        allow_management_os = None if allow_management_os is None else bool(allow_management_os)
        if kind == "set":
            _check_set(teaming_mode, algorithm, standby, vlan_id, vlan_team_nics, lacp_timer, args)
            if host_vnics and allow_management_os is False:
                raise ValueError("host_vnics need allow_management_os: true (the management OS shares the switch)")
            if host_vnics:
                allow_management_os = True
        elif host_vnics or allow_management_os is not None:
            raise ValueError("host_vnics and allow_management_os belong to kind: set (a Hyper-V switch)")
        rollback_timeout_s = int(args.get("rollback_timeout_s") or DEFAULT_ROLLBACK_TIMEOUT_S)
        if rollback_timeout_s < 60:
            raise ValueError(f"rollback_timeout_s is {rollback_timeout_s}: give the host at least 60 seconds")
        return cls(
            name=name,
            members=members,
            kind=kind,
            teaming_mode=teaming_mode,
            load_balancing_algorithm=algorithm,
            standby_member=standby,
            team_nic_name=args.get("team_nic_name") or None,
            vlan_id=vlan_id,
            state=state,
            force=bool(args.get("force")),
            for_vswitch=bool(args.get("for_vswitch")),
            lacp_timer=lacp_timer,
            rename_from=args.get("rename_from") or None,
            vlan_team_nics=vlan_team_nics,
            team_nic_ip=TeamNicIp.from_args(args.get("team_nic_ip")),
            allow_management_os=allow_management_os,
            host_vnics=host_vnics,
            allow_management_change=bool(args.get("allow_management_change")),
            allow_second_default_gateway=bool(args.get("allow_second_default_gateway")),
            rollback_timeout_s=rollback_timeout_s,
            management_addresses=tuple(args.get("management_addresses") or ()),
        )

    @property
    def active_members(self) -> tuple:
        return tuple(member for member in self.members if member != self.standby_member)


def _check_members(members: tuple, state: str, standby: str | None) -> None:
    duplicates = sorted({member for member in members if members.count(member) > 1})
    if duplicates:
        raise ValueError(f"members lists {_names(duplicates)} more than once: name each adapter once")
    if state == "present" and not members:
        raise ValueError("members is empty: a team with state=present needs at least one adapter")
    if standby is not None and standby not in members:
        raise ValueError(
            f"standby_member {standby!r} is not in members ({_names(members)}): "
            "add it to members or leave standby_member empty"
        )
    if standby is not None and len(members) < 2:
        raise ValueError(f"standby_member {standby!r} needs at least one other, active member")


def _check_set(
    teaming_mode: str,
    algorithm: str,
    standby: str | None,
    vlan_id: int | None,
    vlan_team_nics: tuple | None,
    lacp_timer: str | None,
    args: dict,
) -> None:
    if teaming_mode not in SET_TEAMING_MODES:
        raise ValueError(
            f"teaming_mode {teaming_mode!r} is not available with Switch Embedded Teaming: "
            "SET is SwitchIndependent only"
        )
    if algorithm not in SET_LOAD_BALANCING_ALGORITHMS:
        raise ValueError(
            "load_balancing_algorithm {!r} is not available with Switch Embedded Teaming: use {}".format(
                algorithm, " or ".join(SET_LOAD_BALANCING_ALGORITHMS)
            )
        )
    if standby is not None:
        raise ValueError("standby_member is not available with Switch Embedded Teaming: leave it empty")
    if vlan_id or vlan_team_nics:
        raise ValueError("VLANs belong on the host vNICs of a SET switch (host_vnics), not on the switch")
    if args.get("team_nic_ip") or args.get("team_nic_name") or args.get("rename_from"):
        raise ValueError("team_nic_ip, team_nic_name and rename_from belong to kind: lbfo")


def _vlan_team_nics(entries: list | None, primary_vlan: int | None) -> tuple | None:
    if entries is None:
        return None
    result: list[tuple[int, str | None]] = []
    for index, entry in enumerate(entries):
        vlan = int_or_none(entry.get("vlan_id"))
        if vlan is None or not 1 <= vlan <= 4094:
            raise ValueError(f"vlan_team_nics[{index}].vlan_id is {vlan}: use 1-4094")
        if vlan == primary_vlan or vlan in [v for v, _n in result]:
            raise ValueError(f"vlan_team_nics names VLAN {vlan} twice (the primary team NIC counts): one NIC per VLAN")
        result.append((vlan, entry.get("name") or None))
    return tuple(sorted(result))


def _host_vnics(entries: list | None) -> tuple:
    result = []
    for index, entry in enumerate(entries or ()):
        name = (entry.get("name") or "").strip()
        if not name:
            raise ValueError(f"host_vnics[{index}].name is empty: name the host vNIC")
        vlan = int_or_none(entry.get("vlan_id")) or 0
        if not 0 <= vlan <= 4094:
            raise ValueError(f"host_vnics[{index}].vlan_id is {vlan}: use 1-4094, or 0 for untagged")
        result.append(HostVnicDesired(name, vlan, entry.get("rdma")))
    if len({vnic.name for vnic in result}) != len(result):
        raise ValueError("host_vnics names one vNIC twice: one entry per vNIC")
    return tuple(result)


# ---------------------------------------------------------------------------------------------------- desired vs host
def state_after_rename(desired: TeamDesired, state: HostState) -> HostState:
    change = rename_change(desired, state)
    return model.apply(state, [change]) if change else state


def rename_change(desired: TeamDesired, state: HostState) -> dict | None:
    if desired.kind != "lbfo" or not desired.rename_from or desired.name in state.teams:
        return None
    if desired.rename_from not in state.teams:
        return None
    return {"action": "rename_team", "team": desired.rename_from, "new_name": desired.name}


def member_static_ip(desired: TeamDesired, state: HostState) -> IpConfig | None:
    """The IPv4 configuration of the one member carrying exactly one static address, or None."""
    found = []
    for member in desired.members:
        config = state.ip_configs.get(member)
        if config is not None and len(config.static_addresses) == 1 and not config.dhcp:
            found.append(config)
    return found[0] if len(found) == 1 else None
