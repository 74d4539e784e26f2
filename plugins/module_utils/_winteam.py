# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NIC-team decisions for Windows hosts: desired state + gathered state -> findings, a minimal change list, a verdict.

Why this lives in Python: the PowerShell side is kept thin on purpose. ``win_nic_team_gather`` only reports what the
cmdlets say (parsed by ``_winteam_state``), ``win_nic_team_apply`` only runs the commands of a given change list
(rendered by ``_wincommand``). Every decision (is it safe to team these cards, can this change cut the controller off,
what is the smallest change, is the team healthy) is made here, on the controller.

The file reads in the order of a run: desired, findings, changes, the management-path gate, verdict.
Windows' rules the plan keeps (each modelled in ``_winteam_model`` and checked by an idempotence property test):

- a standby member exists only in SwitchIndependent mode; Static and Lacp make every member active
  (NIC Teaming settings, learn.microsoft.com/windows-server/networking/technologies/nic-teaming/nic-teaming-settings);
- tagging the primary team NIC renames it "<team> - VLAN <id>", so the plan tags first and renames after;
  ``Set-NetLbfoTeamNic -Default`` (not ``-VlanID 0``) returns it to the untagged Default mode (Set-NetLbfoTeamNic);
- Windows Server 2022 (build 20348) and later refuse a Hyper-V switch on an LBFO team; 2016/2019 allow it, deprecated.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import ntpath
from dataclasses import dataclass, field

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._winplan import INFO, REFUSE, WARN, Finding, Plan, refusals
from ansible_collections.hpc.balance.plugins.module_utils._winplan import quoted_names as _names
from ansible_collections.hpc.balance.plugins.module_utils._winrollback import render_rollback_script, rollback_steps
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    KINDS,
    LACP_TIMERS,
    LOAD_BALANCING_ALGORITHMS,
    PCIE_LINK_SPEEDS,
    SET_LOAD_BALANCING_ALGORITHMS,
    SET_TEAMING_MODES,
    TEAMING_MODES,
    VENDOR_TEAMING_TOOLS,
    WINDOWS_SERVER_2022_BUILD,
    HostState,
    VmSwitch,
    card_model,
    choice,
    format_bits_per_second,
    host_vnic_adapter_name,
    int_or_none,
)

IP_SOURCES = ("static", "dhcp", "members")
DEFAULT_ROLLBACK_TIMEOUT_S = 300
OPT_IN_VARIABLE = "win_nic_team_allow_management_change"


# ---------------------------------------------------------------------------------------------------- desired state
@dataclass(frozen=True)
class TeamNicIp:
    """IPv4 configuration wanted on the primary team NIC: static, DHCP, or the static one a member carries now."""

    source: str
    address: str | None = None
    prefix_length: int | None = None
    gateway: str | None = None
    dns_servers: tuple = ()

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
        return cls(source, address, prefix, args.get("gateway") or None, tuple(args.get("dns_servers") or ()))


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
    rollback_timeout_s: int = DEFAULT_ROLLBACK_TIMEOUT_S
    management_addresses: tuple = ()  # set by the action plugin: ansible_host when it is an address

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


def _check_set(teaming_mode, algorithm, standby, vlan_id, vlan_team_nics, lacp_timer, args) -> None:
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
    result = []
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


# ---------------------------------------------------------------------------------------------------- findings
# ---------------------------------------------------------------------------------------------------- findings
def _vendor_teaming_evidence(state: HostState) -> list[tuple[str, list[str]]]:
    """[(tool name, evidence)] for every vendor teaming manager found on the host."""
    found = []
    for tool in VENDOR_TEAMING_TOOLS:
        evidence = []
        for driver in state.teaming_drivers:
            file_name = ntpath.basename(driver.get("PathName") or "").lower()
            if any(fnmatch.fnmatch(file_name, pattern) for pattern in tool["driver_files"]):
                evidence.append("driver {} ({}, {})".format(driver.get("Name"), file_name, driver.get("State") or "?"))
        for adapter in state.adapters.values():
            by_file = any(fnmatch.fnmatch(adapter.driver_file.lower(), pattern) for pattern in tool["driver_files"])
            by_description = any(
                fnmatch.fnmatch(adapter.description.lower(), pattern.lower())
                for pattern in tool["adapter_descriptions"]
            )
            if by_file or by_description:
                evidence.append(f"adapter '{adapter.name}' ({adapter.description})")
        if evidence:
            found.append((tool["name"], evidence))
    return found


def _check_members_exist(desired: TeamDesired, state: HostState) -> list[Finding]:
    findings = []
    missing = [member for member in desired.members if member not in state.adapters]
    if missing:
        physical = sorted(name for name, adapter in state.adapters.items() if not adapter.hidden)
        findings.append(
            Finding(
                REFUSE,
                "member_missing",
                f"member{'s' if len(missing) > 1 else ''} {_names(missing)} not found on the host; "
                f"adapters present: {_names(physical)}. Fix the names in members (Get-NetAdapter)",
            )
        )
    return findings


def _check_members_free(desired: TeamDesired, state: HostState) -> list[Finding]:
    """A member of another LBFO team or of another SET switch cannot join this one."""
    findings = []
    for member in desired.members:
        owner = state.members.get(member)
        if owner is not None and (desired.kind == "set" or owner.team != desired.name):
            findings.append(
                Finding(
                    REFUSE,
                    "member_in_other_team",
                    f"member '{member}' already belongs to LBFO team '{owner.team}': remove it there first",
                )
            )
        adapter = state.adapters.get(member)
        if adapter is None:
            continue
        for switch in state.vm_switches:
            if adapter.description in switch.adapter_descriptions and not (
                desired.kind == "set" and switch.name == desired.name
            ):
                findings.append(
                    Finding(
                        REFUSE,
                        "member_in_vswitch",
                        f"member '{member}' is bound to Hyper-V switch '{switch.name}': "
                        "remove it from that switch first",
                    )
                )
    return findings


def _check_uniform(desired: TeamDesired, state: HostState) -> list[Finding]:
    """Same link speed, same vendor/model/driver: refused unless force (then a warning)."""
    findings = []
    present = [state.adapters[member] for member in desired.members if member in state.adapters]
    severity = WARN if desired.force else REFUSE
    hint = "the team proceeds because force is set" if desired.force else "team equal cards, or set force: true"
    connected = [a for a in present if a.media_connect_state != "Disconnected" and a.speed_bits_per_second]
    for adapter in present:
        if adapter not in connected:
            findings.append(
                Finding(
                    WARN,
                    "member_disconnected",
                    f"member '{adapter.name}' has no link ({adapter.status or adapter.media_connect_state}): "
                    "its speed cannot be compared, and the team will not be Up until it links",
                )
            )
    speeds = sorted({adapter.speed_bits_per_second for adapter in connected})
    if len(speeds) > 1:
        findings.append(
            Finding(
                severity,
                "mixed_link_speeds",
                "members have mixed link speeds ({}): every flow is pinned to one member, so flows on the slower "
                "member run at its speed; {}".format(
                    ", ".join(f"'{a.name}' {format_bits_per_second(a.speed_bits_per_second)}" for a in connected),
                    hint,
                ),
            )
        )
    for code, label, key in (
        ("mixed_vendors", "vendors", lambda a: a.driver_provider),
        ("mixed_models", "models", lambda a: card_model(a.description)),
        ("mixed_drivers", "driver versions", lambda a: a.driver_version),
    ):
        values = {key(adapter) for adapter in present}
        if len(values) > 1:
            findings.append(
                Finding(
                    severity,
                    code,
                    "members differ in {} ({}): offloads and RSS behave differently per card; {}".format(
                        label, ", ".join(f"'{a.name}' {key(a)}" for a in present), hint
                    ),
                )
            )
            break  # one model/driver finding is enough: a different vendor is also a different model and driver
    return findings


def _check_vendor_tools(state: HostState) -> list[Finding]:
    return [
        Finding(
            REFUSE,
            "vendor_teaming_tool",
            "{} is installed ({}): one teaming manager per machine. Remove the vendor teaming software (and its "
            "teams) before teaming with Windows".format(tool, "; ".join(evidence)),
        )
        for tool, evidence in _vendor_teaming_evidence(state)
    ]


def pcie_report(desired: TeamDesired, state: HostState) -> list[dict]:
    """Per member: PCIe link trained, usable bits per second, and what the card's ports in this team need."""
    report = []
    demand_by_card = {}
    for member in desired.members:
        link = state.pcie.get(member)
        adapter = state.adapters.get(member)
        if link is None or adapter is None or None in link.location:
            continue
        demand_by_card.setdefault(link.location, []).append(adapter)
    for member in desired.members:
        link = state.pcie.get(member)
        if link is None:
            continue
        sharing = demand_by_card.get(link.location, [])
        report.append(
            {
                "name": member,
                "link": link.describe(),
                "max_link": "x{} at {} GT/s".format(
                    link.max_width, PCIE_LINK_SPEEDS.get(link.max_speed_encoded, (None,))[0] or "?"
                ),
                "usable_bits_per_second": link.current_bits_per_second,
                "ports_sharing_link": sorted(adapter.name for adapter in sharing),
                "needed_bits_per_second": sum(adapter.speed_bits_per_second or 0 for adapter in sharing) or None,
            }
        )
    return report


def _check_pcie(desired: TeamDesired, state: HostState) -> list[Finding]:
    findings = []
    for entry in pcie_report(desired, state):
        link = state.pcie[entry["name"]]
        usable = entry["usable_bits_per_second"]
        needed = entry["needed_bits_per_second"]
        if usable is not None and needed is not None and usable < needed:
            findings.append(
                Finding(
                    WARN,
                    "pcie_bottleneck",
                    "member '{}': its PCIe link ({}, about {} usable) cannot carry the nominal {} of {}; move the "
                    "card to a wider or faster slot".format(
                        entry["name"],
                        entry["link"],
                        format_bits_per_second(usable),
                        format_bits_per_second(needed),
                        " + ".join(entry["ports_sharing_link"]),
                    ),
                )
            )
        degraded_width = link.max_width and link.current_width and link.current_width < link.max_width
        degraded_speed = (
            link.max_speed_encoded
            and link.current_speed_encoded
            and link.current_speed_encoded < link.max_speed_encoded
        )
        if degraded_width or degraded_speed:
            findings.append(
                Finding(
                    WARN,
                    "pcie_link_degraded",
                    "member '{}': PCIe link trained at {}, below the card's {} (slot, riser or BIOS setting)".format(
                        entry["name"], entry["link"], entry["max_link"]
                    ),
                )
            )
        findings.append(
            Finding(
                INFO,
                "pcie_link",
                "member '{}': PCIe {}, about {} usable".format(
                    entry["name"], entry["link"], format_bits_per_second(usable)
                ),
            )
        )
    return findings


def _vswitches_on_team(desired: TeamDesired, state: HostState) -> list[VmSwitch]:
    """Hyper-V switches bound to this team's NIC (or to one of its members)."""
    descriptions = set()
    team = state.teams.get(desired.name)
    if team is not None:
        for nic_name in team.team_nics:
            nic = state.adapters.get(nic_name)
            if nic is not None:
                descriptions.add(nic.description)
    return [switch for switch in state.vm_switches if descriptions & set(switch.adapter_descriptions)]


def _check_hyperv(desired: TeamDesired, state: HostState) -> list[Finding]:
    if desired.kind != "lbfo":
        if not state.hyperv_present:
            return [
                Finding(
                    REFUSE,
                    "hyperv_missing",
                    "kind is 'set' but Hyper-V is not installed: Switch Embedded Teaming is a Hyper-V switch. "
                    "Install the Hyper-V role, or use kind: lbfo",
                )
            ]
        existing = [switch for switch in state.vm_switches if switch.name == desired.name]
        if existing and not existing[0].embedded_teaming:
            return [
                Finding(
                    REFUSE,
                    "vswitch_not_set",
                    f"Hyper-V switch '{desired.name}' exists without embedded teaming: rename it or pick another name",
                )
            ]
        return []
    on_team = _vswitches_on_team(desired, state)
    if not (desired.for_vswitch or on_team):
        return []
    if on_team:
        reason = f"Hyper-V switch {_names([s.name for s in on_team])} sits on team '{desired.name}'"
    else:
        reason = f"for_vswitch is set: a Hyper-V switch would sit on team '{desired.name}'"
    if desired.for_vswitch and not state.hyperv_present:
        reason += " (Hyper-V is not installed yet)"
    offer = (
        "use Switch Embedded Teaming instead: kind: set (New-VMSwitch -EnableEmbeddedTeaming $true -NetAdapterName {})"
    )
    offer = offer.format(",".join(desired.members))
    if state.os_build is not None and state.os_build < WINDOWS_SERVER_2022_BUILD:
        return [
            Finding(
                WARN,
                "lbfo_under_vswitch_deprecated",
                f"{reason}. This host (build {state.os_build}) still allows it, but a Hyper-V switch on an LBFO team "
                f"is deprecated and refused from Windows Server 2022 (build {WINDOWS_SERVER_2022_BUILD}): {offer}",
            )
        ]
    return [
        Finding(
            REFUSE,
            "lbfo_under_vswitch",
            "{}. A Hyper-V switch on an LBFO team is unsupported from Windows Server 2022 (this host: build {}): "
            "{}".format(reason, state.os_build if state.os_build is not None else "unknown", offer),
        )
    ]


def _check_standby(desired: TeamDesired) -> list[Finding]:
    if desired.standby_member is None:
        return []
    return [
        Finding(
            WARN,
            "standby_member",
            f"standby member '{desired.standby_member}' carries no traffic and its failed link shows only when an "
            "active member fails; alarm on its state, or make it active for more bandwidth",
        )
    ]


def _check_host_vnics(desired: TeamDesired, state: HostState) -> list[Finding]:
    findings = []
    for vnic in desired.host_vnics:
        for current in state.host_vnics:
            if current.name == vnic.name and current.switch_name != desired.name:
                findings.append(
                    Finding(
                        REFUSE,
                        "host_vnic_elsewhere",
                        f"host vNIC '{vnic.name}' is on Hyper-V switch '{current.switch_name}', not '{desired.name}': "
                        "rename one of them",
                    )
                )
    return findings


def _check_team_nic_ip(desired: TeamDesired, state: HostState) -> list[Finding]:
    if desired.team_nic_ip is None or desired.team_nic_ip.source != "members" or desired.name in state.teams:
        return []
    if _member_static_ip(desired, state) is None:
        return [
            Finding(
                REFUSE,
                "no_member_ip",
                "team_nic_ip source is members, but no member carries exactly one static IPv4 address to move: "
                "give team_nic_ip source static with address and prefix_length",
            )
        ]
    return []


def _check_rdma_on_lbfo(desired: TeamDesired, state: HostState) -> list[Finding]:
    """An LBFO team NIC cannot do RDMA: SMB Direct over members with RDMA on is lost once they are teamed."""
    if desired.kind != "lbfo" or desired.state != "present":
        return []
    lost = [m for m in desired.members if state.rdma_enabled.get(m) and m not in state.members]
    if not lost:
        return []
    return [
        Finding(
            WARN,
            "lbfo_loses_rdma",
            f"RDMA is enabled on {_names(lost)}: an LBFO team NIC exposes no RDMA, so SMB Direct over these cards "
            "stops once they are teamed (SMB falls back to TCP). Keep RDMA cards out of LBFO: use kind: set with "
            "host_vnics and rdma: true, or SMB Multichannel over the separate cards",
        )
    ]


def preflight(desired: TeamDesired, state: HostState) -> list[Finding]:
    """Findings that must be looked at before any change. Any 'refuse' finding stops the run."""
    if desired.state == "absent":
        return []
    findings = []
    if desired.kind == "lbfo" and not state.lbfo_available:
        findings.append(
            Finding(
                REFUSE,
                "lbfo_unavailable",
                "the NetLbfo cmdlets are not available on this host: NIC teaming needs Windows Server 2012 or later",
            )
        )
    findings += _check_members_exist(desired, state)
    findings += _check_members_free(desired, _state_after_rename(desired, state))
    findings += _check_vendor_tools(state)
    findings += _check_hyperv(desired, state)
    findings += _check_uniform(desired, state)
    findings += _check_pcie(desired, state)
    findings += _check_standby(desired)
    findings += _check_host_vnics(desired, state)
    findings += _check_team_nic_ip(desired, state)
    findings += _check_rdma_on_lbfo(desired, state)
    return findings


# ---------------------------------------------------------------------------------------------------- changes
def _state_after_rename(desired: TeamDesired, state: HostState) -> HostState:
    change = _rename_change(desired, state)
    return model.apply(state, [change]) if change else state


def _rename_change(desired: TeamDesired, state: HostState) -> dict | None:
    if desired.kind != "lbfo" or not desired.rename_from or desired.name in state.teams:
        return None
    if desired.rename_from not in state.teams:
        return None
    return {"action": "rename_team", "team": desired.rename_from, "new_name": desired.name}


def _member_static_ip(desired: TeamDesired, state: HostState) -> tuple | None:
    """(address, prefix, gateway, dns) of the one member carrying a static IPv4 address, or None."""
    found = []
    for member in desired.members:
        config = state.ip_configs.get(member)
        if config is not None and len(config.static_addresses) == 1 and not config.dhcp:
            address, prefix = config.static_addresses[0]
            found.append((address, prefix, config.gateway, config.dns_servers))
    return found[0] if len(found) == 1 else None


def _new_team_changes(desired: TeamDesired) -> list[dict]:
    new_team = {
        "action": "new_team",
        "team": desired.name,
        "members": list(desired.members),
        "teaming_mode": desired.teaming_mode,
        "load_balancing_algorithm": desired.load_balancing_algorithm,
    }
    if desired.lacp_timer:
        new_team["lacp_timer"] = desired.lacp_timer
    if desired.team_nic_name:
        new_team["team_nic_name"] = desired.team_nic_name
    changes = [new_team]
    if desired.standby_member:
        changes.append(
            {
                "action": "set_member_mode",
                "team": desired.name,
                "member": desired.standby_member,
                "administrative_mode": "Standby",
            }
        )
    return changes


def _team_settings_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    team = state.teams[desired.name]
    changes = []
    set_team = {}
    if team.teaming_mode != desired.teaming_mode:
        set_team["teaming_mode"] = desired.teaming_mode
    if team.load_balancing_algorithm != desired.load_balancing_algorithm:
        set_team["load_balancing_algorithm"] = desired.load_balancing_algorithm
    if desired.lacp_timer and team.lacp_timer != desired.lacp_timer:
        set_team["lacp_timer"] = desired.lacp_timer
    if set_team:
        changes.append(dict({"action": "set_team", "team": desired.name}, **set_team))
    current = set(team.members)
    # Add before remove: the team keeps at least one member throughout.
    for member in desired.members:
        if member not in current:
            mode = "Standby" if member == desired.standby_member else "Active"
            changes.append(
                {"action": "add_member", "team": desired.name, "member": member, "administrative_mode": mode}
            )
    for member in team.members:
        if member not in desired.members:
            changes.append({"action": "remove_member", "team": desired.name, "member": member})
    if desired.teaming_mode != "SwitchIndependent":
        return changes  # Static and Lacp make every member active: there is no mode to set
    # Activate before putting another member on standby: a team allows at most one standby member.
    mode_changes = []
    for member in desired.members:
        record = state.members.get(member)
        if member not in current or record is None:
            continue
        wanted = "Standby" if member == desired.standby_member else "Active"
        if record.administrative_mode != wanted:
            mode_changes.append(
                {"action": "set_member_mode", "team": desired.name, "member": member, "administrative_mode": wanted}
            )
    return changes + sorted(mode_changes, key=lambda change: change["administrative_mode"] != "Active")


def _primary_nic_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    """VLAN first, then the name: tagging renames the primary team NIC, so a rename before it would not last."""
    primary = state.primary_team_nic(desired.name)
    if primary is None:
        return []
    changes = []
    name = primary.name
    if desired.vlan_id is not None and primary.vlan_id != desired.vlan_id:
        if desired.vlan_id == 0:
            changes.append({"action": "set_team_nic_default", "team": desired.name, "team_nic": name})
        else:
            changes.append(
                {"action": "set_team_nic_vlan", "team": desired.name, "team_nic": name, "vlan_id": desired.vlan_id}
            )
        name = model.primary_name_after_vlan(desired.name, desired.vlan_id)
    if desired.team_nic_name and name != desired.team_nic_name:
        changes.append({"action": "rename_team_nic", "team_nic": name, "new_name": desired.team_nic_name})
    return changes


def _vlan_nic_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    if desired.vlan_team_nics is None:
        return []
    extra = {nic.vlan_id: nic for nic in state.team_nics if nic.team == desired.name and not nic.primary}
    changes = []
    for vlan, name in desired.vlan_team_nics:
        current = extra.get(vlan)
        if current is None:
            changes.append(
                {
                    "action": "add_team_nic",
                    "team": desired.name,
                    "vlan_id": vlan,
                    "team_nic": name or model.vlan_nic_default_name(desired.name, vlan),
                }
            )
        elif name and current.name != name:
            changes.append({"action": "rename_team_nic", "team_nic": current.name, "new_name": name})
    wanted = {vlan for vlan, _name in desired.vlan_team_nics}
    for vlan, nic in sorted(extra.items()):
        if vlan not in wanted:
            changes.append({"action": "remove_team_nic", "team": desired.name, "vlan_id": vlan, "team_nic": nic.name})
    return changes


def _ip_changes(desired: TeamDesired, before: HostState, state: HostState) -> list[dict]:
    """The team NIC's IPv4 configuration; `state` is the host as the earlier changes leave it."""
    wanted = desired.team_nic_ip
    primary = state.primary_team_nic(desired.name)
    if wanted is None or primary is None:
        return []
    current = state.ip_configs.get(primary.name)
    if wanted.source == "dhcp":
        if current is not None and current.dhcp:
            return []
        return [{"action": "set_ip_dhcp", "interface": primary.name}]
    if wanted.source == "members":
        moved = _member_static_ip(desired, before) if desired.name not in before.teams else None
        if moved is None:
            return []  # the team exists: the address moved when it was made, and stays where it is
        address, prefix, gateway, dns = moved
    else:
        address, prefix, gateway, dns = wanted.address, wanted.prefix_length, wanted.gateway, wanted.dns_servers
    if (
        current is not None
        and not current.dhcp
        and current.static_addresses == ((address, prefix),)
        and current.gateway == gateway
        and tuple(current.dns_servers) == tuple(dns)
    ):
        return []
    change = {"action": "set_ip", "interface": primary.name, "address": address, "prefix_length": prefix}
    if gateway:
        change["gateway"] = gateway
    if dns:
        change["dns_servers"] = list(dns)
    return [change]


def _lbfo_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    rename = _rename_change(desired, state)
    changes = [rename] if rename else []
    current = model.apply(state, changes)
    if desired.state == "absent":
        return changes + ([{"action": "remove_team", "team": desired.name}] if desired.name in current.teams else [])
    if desired.name not in current.teams:
        changes += _new_team_changes(desired)
        changes.append({"action": "wait_adapter", "interface": desired.team_nic_name or desired.name})
    else:
        changes += _team_settings_changes(desired, current)
    current = model.apply(state, changes)
    for step in (_primary_nic_changes, _vlan_nic_changes):
        more = step(desired, current)
        changes += more
        current = model.apply(current, more)
    return changes + _ip_changes(desired, state, current)


def _set_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    switch = next((s for s in state.vm_switches if s.name == desired.name), None)
    if desired.state == "absent":
        return [{"action": "remove_set_switch", "switch": desired.name}] if switch is not None else []
    changes = []
    if switch is None:
        changes.append(
            {
                "action": "new_set_switch",
                "switch": desired.name,
                "members": list(desired.members),
                "allow_management_os": bool(desired.allow_management_os),
            }
        )
        # New-VMSwitch has no load-balancing parameter: the algorithm is set on the new SET team.
        changes.append(
            {
                "action": "set_set_team",
                "switch": desired.name,
                "load_balancing_algorithm": desired.load_balancing_algorithm,
            }
        )
    else:
        team = state.vm_switch_teams.get(desired.name)
        change = {}
        current = {state.adapter_name_for_description(d) for d in team.adapter_descriptions} if team else set()
        if current != set(desired.members):
            change["members"] = list(desired.members)
        if team is None or team.load_balancing_algorithm != desired.load_balancing_algorithm:
            change["load_balancing_algorithm"] = desired.load_balancing_algorithm
        if change:
            changes.append(dict({"action": "set_set_team", "switch": desired.name}, **change))
        if desired.allow_management_os is not None and switch.allow_management_os != desired.allow_management_os:
            changes.append(
                {"action": "set_vm_switch", "switch": desired.name, "allow_management_os": desired.allow_management_os}
            )
    return changes + _host_vnic_changes(desired, model.apply(state, changes))


def _host_vnic_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    changes = []
    current = {vnic.name: vnic for vnic in state.host_vnics if vnic.switch_name == desired.name}
    for vnic in desired.host_vnics:
        adapter = host_vnic_adapter_name(vnic.name)
        if vnic.name not in current:
            changes.append({"action": "add_host_vnic", "switch": desired.name, "vnic": vnic.name})
        if (
            current.get(vnic.name) is None
            and vnic.vlan_id
            or (vnic.name in current and current[vnic.name].vlan_id != vnic.vlan_id)
        ):
            changes.append({"action": "set_host_vnic_vlan", "vnic": vnic.name, "vlan_id": vnic.vlan_id})
        if vnic.rdma is not None and bool(state.rdma_enabled.get(adapter)) != vnic.rdma:
            changes.append({"action": "set_rdma", "adapter": adapter, "enabled": vnic.rdma})
    return changes


def plan_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    """The smallest ordered list of changes that takes the host from `state` to `desired` (empty: nothing to do)."""
    if desired.kind == "set":
        return _set_changes(desired, state)
    return _lbfo_changes(desired, state)


# ---------------------------------------------------------------------------------------------------- management gate
def management_addresses(desired: TeamDesired, state: HostState) -> list[str]:
    """Addresses the controller reaches the host by: ansible_host (if an address) and the WinRM sessions' own."""
    return sorted(set(desired.management_addresses) | set(state.winrm_local_addresses))


def management_path(desired: TeamDesired, state: HostState) -> dict:
    """Object name (adapter, team, switch) -> (management interface, address) for everything the connection uses."""
    path = {}
    for address in management_addresses(desired, state):
        for interface in state.interfaces_carrying(address):
            path[interface] = (interface, address)
            nic = next((n for n in state.team_nics if n.name == interface), None)
            if nic is not None:
                team = state.teams.get(nic.team)
                for name in (nic.team, *(team.members if team else ())):
                    path.setdefault(name, (interface, address))
            vnic = next((v for v in state.host_vnics if v.adapter_name == interface), None)
            if vnic is not None:
                path.setdefault(vnic.switch_name, (interface, address))
                team = state.vm_switch_teams.get(vnic.switch_name)
                for description in team.adapter_descriptions if team else ():
                    path.setdefault(state.adapter_name_for_description(description), (interface, address))
    return path


def _touches(change: dict) -> set:
    names = {change.get(key) for key in ("team", "member", "team_nic", "interface", "switch", "adapter")}
    names |= set(change.get("members") or ())
    if change.get("vnic"):
        names.add(host_vnic_adapter_name(change["vnic"]))
    return names - {None}


def management_findings(desired: TeamDesired, state: HostState, changes: list[dict]) -> list[Finding]:
    """Refuse (or, opted in, note) every change that can cut the controller off from the host."""
    if not changes:
        return []
    if not state.ip_gathered:
        return [
            Finding(
                REFUSE,
                "management_unknown",
                "the gather reported no IP configuration, so it is unknown whether this change cuts the controller "
                "off: update the collection on the controller (win_nic_team_gather reports it)",
            )
        ]
    path = management_path(desired, state)
    findings = []
    for change in changes:
        hit = sorted(_touches(change) & set(path))
        if not hit:
            continue
        interface, address = path[hit[0]]
        what = f"change '{change['action']}' touches '{hit[0]}'"
        if hit[0] != interface:
            what += f" under '{interface}'"
        if desired.allow_management_change:
            findings.append(
                Finding(
                    WARN,
                    "management_change_with_rollback",
                    f"{what}, which carries the management address {address}: it runs behind a scheduled-task "
                    f"rollback that restores the recorded state unless the controller reconnects within "
                    f"{desired.rollback_timeout_s} s",
                )
            )
        else:
            findings.append(
                Finding(
                    REFUSE,
                    "management_path",
                    f"{what}, and NIC '{interface}' carries the management address {address} (the address Ansible "
                    f"reaches this host by over WinRM): the change can cut the controller off for good. Make it out of "
                    f"band, or set {OPT_IN_VARIABLE}: true (option allow_management_change) to run it behind a "
                    f"scheduled-task rollback armed for rollback_timeout_s={desired.rollback_timeout_s}",
                )
            )
    return findings


def rollback_task_name(desired: TeamDesired) -> str:
    return f"hpc.balance rollback {desired.kind} {desired.name}"


def recorded_desired(desired: TeamDesired, state: HostState) -> TeamDesired:
    """The state the host is in now, as a TeamDesired: what the rollback converges back to."""
    if desired.kind == "set":
        switch = next((s for s in state.vm_switches if s.name == desired.name), None)
        team = state.vm_switch_teams.get(desired.name)
        if switch is None or team is None:
            return TeamDesired(name=desired.name, kind="set", state="absent")
        return TeamDesired(
            name=desired.name,
            kind="set",
            members=tuple(sorted(state.adapter_name_for_description(d) for d in team.adapter_descriptions)),
            load_balancing_algorithm=team.load_balancing_algorithm,
            allow_management_os=switch.allow_management_os,
        )
    old_name = desired.rename_from if _rename_change(desired, state) else desired.name
    team = state.teams.get(old_name)
    if team is None:
        return TeamDesired(name=desired.name, state="absent")
    primary = state.primary_team_nic(old_name)
    standby = [m for m in team.members if m in state.members and state.members[m].administrative_mode == "Standby"]
    return TeamDesired(
        name=old_name,
        rename_from=desired.name if old_name != desired.name else None,
        members=tuple(sorted(team.members)),
        teaming_mode=team.teaming_mode,
        load_balancing_algorithm=team.load_balancing_algorithm,
        lacp_timer=team.lacp_timer if team.teaming_mode == "Lacp" else None,
        standby_member=standby[0] if standby and team.teaming_mode == "SwitchIndependent" else None,
        team_nic_name=primary.name if primary else None,
        vlan_id=primary.vlan_id if primary else None,
        vlan_team_nics=tuple(
            sorted((nic.vlan_id, nic.name) for nic in state.team_nics if nic.team == old_name and not nic.primary)
        ),
    )


def plan(desired: TeamDesired, state: HostState) -> Plan:
    """Preflight findings, then the change list behind the management gate (empty when anything is refused).

    Opted in, a change on the management path is wrapped: arm a rollback task first, disarm it last (the action
    plugin runs the disarm step only once it has reconnected).
    """
    findings = preflight(desired, state)
    if refusals(findings):
        return Plan(findings, [])
    changes = plan_changes(desired, state)
    gate = management_findings(desired, state, changes)
    findings = findings + gate
    if refusals(findings):
        return Plan(findings, [])
    if gate:
        recorded = recorded_desired(desired, state)
        steps = rollback_steps(recorded, state, model.apply(state, changes), plan_changes)
        name = rollback_task_name(desired)
        arm = {
            "action": "arm_rollback",
            "task_name": name,
            "timeout_s": desired.rollback_timeout_s,
            "steps": steps,
            "script": render_rollback_script(name, steps),
        }
        changes = [arm, *changes, {"action": "disarm_rollback", "task_name": name}]
    return Plan(findings, changes)


# ---------------------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str
    status: str | None = None
    members: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"ok": self.ok, "message": self.message, "status": self.status, "members": self.members}


def _member_report(record) -> dict:
    return {
        "name": record.name,
        "administrative_mode": record.administrative_mode,
        "operational_status": record.operational_status,
        "failure_reason": record.failure_reason,
        "transmit_link_speed_bits_per_second": record.transmit_link_speed_bits_per_second,
    }


def _lbfo_verdict(desired: TeamDesired, state: HostState) -> Verdict:
    team = state.teams.get(desired.name)
    if desired.state == "absent":
        if team is None:
            return Verdict(True, f"team '{desired.name}' is absent", None)
        return Verdict(False, f"team '{desired.name}' still exists (status {team.status})", team.status)
    if team is None:
        return Verdict(False, f"team '{desired.name}' not found on the host")
    records = [state.members[name] for name in team.members if name in state.members]
    members = [_member_report(record) for record in records]
    if set(team.members) != set(desired.members):
        return Verdict(
            False,
            f"team '{desired.name}' has members {_names(sorted(team.members))}, expected {_names(desired.members)}",
            team.status,
            members,
        )
    not_active = [
        record for record in records if record.name != desired.standby_member and record.operational_status != "Active"
    ]
    detail = "; ".join(
        f"member '{record.name}' is {record.operational_status} ({record.failure_reason})" for record in not_active
    )
    if team.status != "Up":
        return Verdict(
            False,
            "team '{}' is {}: {}".format(desired.name, team.status, detail or "no member reports a failure yet"),
            team.status,
            members,
        )
    if not_active:
        return Verdict(False, f"team '{desired.name}' is Up but {detail}", team.status, members)
    return Verdict(
        True,
        "team '{}' is Up: {}".format(
            desired.name,
            ", ".join(f"'{record.name}' {record.operational_status}" for record in records),
        ),
        team.status,
        members,
    )


def _set_verdict(desired: TeamDesired, state: HostState) -> Verdict:
    switch = next((s for s in state.vm_switches if s.name == desired.name), None)
    if desired.state == "absent":
        if switch is None:
            return Verdict(True, f"SET switch '{desired.name}' is absent")
        return Verdict(False, f"SET switch '{desired.name}' still exists")
    team = state.vm_switch_teams.get(desired.name)
    if switch is None or team is None:
        return Verdict(False, f"SET switch '{desired.name}' not found on the host")
    names = sorted(state.adapter_name_for_description(d) for d in team.adapter_descriptions)
    members = []
    down = []
    for name in names:
        adapter = state.adapters.get(name)
        status = adapter.status if adapter is not None else "missing"
        members.append({"name": name, "status": status})
        if status != "Up":
            down.append(f"member '{name}' is {status}")
    if set(names) != set(desired.members):
        return Verdict(
            False,
            f"SET switch '{desired.name}' has members {_names(names)}, expected {_names(desired.members)}",
            None,
            members,
        )
    if down:
        return Verdict(False, "SET switch '{}': {}".format(desired.name, "; ".join(down)), "Degraded", members)
    return Verdict(True, f"SET switch '{desired.name}' is Up: {_names(names)}", "Up", members)


def verdict(desired: TeamDesired, state: HostState) -> Verdict:
    """Is the host where `desired` wants it, and healthy? A failure names the member at fault."""
    if desired.kind == "set":
        return _set_verdict(desired, state)
    return _lbfo_verdict(desired, state)


# ---------------------------------------------------------------------------------------------------- diff
def summary(desired: TeamDesired, state: HostState) -> dict:
    """Short before/after view of the team used for --diff."""
    if desired.kind == "set":
        team = state.vm_switch_teams.get(desired.name)
        switch = next((s for s in state.vm_switches if s.name == desired.name), None)
        if team is None or switch is None:
            return {"kind": "set", "name": desired.name, "present": False}
        return {
            "kind": "set",
            "name": desired.name,
            "present": True,
            "members": sorted(state.adapter_name_for_description(d) for d in team.adapter_descriptions),
            "load_balancing_algorithm": team.load_balancing_algorithm,
            "allow_management_os": switch.allow_management_os,
            "host_vnics": sorted(
                [v.name, v.vlan_id, bool(state.rdma_enabled.get(v.adapter_name))]
                for v in state.host_vnics
                if v.switch_name == desired.name
            ),
        }
    team = state.teams.get(desired.name)
    if team is None:
        return {"kind": "lbfo", "name": desired.name, "present": False}
    primary = state.primary_team_nic(desired.name)
    standby = sorted(
        name for name in team.members if name in state.members and state.members[name].administrative_mode == "Standby"
    )
    ip = state.ip_configs.get(primary.name) if primary is not None else None
    return {
        "kind": "lbfo",
        "name": desired.name,
        "present": True,
        "members": sorted(team.members),
        "standby_member": standby[0] if standby else None,
        "teaming_mode": team.teaming_mode,
        "load_balancing_algorithm": team.load_balancing_algorithm,
        "lacp_timer": team.lacp_timer,
        "team_nic_name": primary.name if primary is not None else None,
        "vlan_id": primary.vlan_id if primary is not None else None,
        "vlan_team_nics": sorted(
            [nic.vlan_id, nic.name] for nic in state.team_nics if nic.team == desired.name and not nic.primary
        ),
        "team_nic_ip": None
        if ip is None
        else {"dhcp": ip.dhcp, "addresses": [f"{a}/{p}" for a, p in ip.static_addresses], "gateway": ip.gateway},
    }


def desired_summary(desired: TeamDesired, state: HostState, changes: list[dict]) -> dict:
    """The summary the host should show once the changes are applied (the 'after' side of --diff), by the model."""
    return summary(desired, model.apply(state, changes))
