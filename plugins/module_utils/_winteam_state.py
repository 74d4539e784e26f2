# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NIC-team decisions for Windows hosts: desired state + gathered state -> findings, a minimal change list, a verdict.

Why this lives in Python: the PowerShell side is kept thin on purpose. ``win_nic_team_gather`` only reports what the
NetLbfo, NetAdapter and Hyper-V cmdlets say (as JSON records), ``win_nic_team_apply`` only runs a given list of
changes. Every decision (is it safe to team these cards, what is the smallest change, is the team healthy) is made
here, on the controller, where it is unit-tested on records in the documented shape of the cmdlets' output.

Shapes accepted for each gathered record (``ConvertTo-Json`` of the selected properties):

- CIM enums arrive as their uint32 value (``"TeamingMode": 1``) or, where PowerShell already converted them, as
  their name (``"TeamingMode": "SwitchIndependent"``); both are accepted, names case-insensitively.
- ``ConvertTo-Json`` turns a one-element array into a scalar; list fields accept both.

Value maps are the documented ones of MSFT_NetLbfoTeam, MSFT_NetLbfoTeamMember (MSFT_NetImPlatAdapter),
MSFT_NetAdapter and MSFT_NetAdapterHardwareInfoSettingData (root/StandardCimv2).
"""

from __future__ import annotations

import fnmatch
import ntpath
from dataclasses import dataclass, field

from ansible_collections.hpc.balance.plugins.module_utils._winplan import INFO, REFUSE, WARN, Finding, gated_plan
from ansible_collections.hpc.balance.plugins.module_utils._winplan import as_list as _as_list
from ansible_collections.hpc.balance.plugins.module_utils._winplan import quoted_names as _names

# ---------------------------------------------------------------------------------------------------- value maps
TEAMING_MODES = {0: "Static", 1: "SwitchIndependent", 2: "Lacp"}
LOAD_BALANCING_ALGORITHMS = {0: "TransportPorts", 2: "IPAddresses", 3: "MacAddresses", 4: "HyperVPort", 5: "Dynamic"}
TEAM_STATUSES = {0: "Up", 1: "Down", 2: "Degraded"}
ADMINISTRATIVE_MODES = {0: "Active", 1: "Standby"}
OPERATIONAL_STATUSES = {0: "Active", 1: "Standby", 2: "Failed"}
FAILURE_REASONS = {
    0: "NoFailure",
    1: "AdministrativeDecision",
    3: "PhysicalMediaDisconnected",
    4: "WaitingForStableConnectivity",
    5: "LacpNegotiationIssue",
    6: "NicNotPresent",
    7: "UnknownFailure",
    9: "VirtualSwitchLacksExternalConnectivity",
}
MEDIA_CONNECT_STATES = {0: "Unknown", 1: "Connected", 2: "Disconnected"}
VM_SWITCH_TYPES = {0: "Private", 1: "Internal", 2: "External"}

# PCIe link speed as encoded in PciExpressCurrentLinkSpeedEncoded / PciExpressMaxLinkSpeedEncoded:
# encoded value -> (transfer rate in GT/s per lane, line-code efficiency). Gen1/2 use 8b/10b, Gen3-5 128b/130b,
# Gen6 FLIT mode (242 payload bytes of 256).
PCIE_LINK_SPEEDS = {
    1: (2.5, 8 / 10),
    2: (5.0, 8 / 10),
    3: (8.0, 128 / 130),
    4: (16.0, 128 / 130),
    5: (32.0, 128 / 130),
    6: (64.0, 242 / 256),
}

KINDS = ("lbfo", "set")
SET_TEAMING_MODES = ("SwitchIndependent",)
SET_LOAD_BALANCING_ALGORITHMS = ("HyperVPort", "Dynamic")

# Windows Server 2022 is build 20348: from there on a Hyper-V switch on an LBFO team is unsupported.
WINDOWS_SERVER_2022_BUILD = 20348

# Vendor teaming managers (an NDIS intermediate driver of their own). One teaming manager per machine: LBFO is
# refused while one of these is installed. Patterns match a driver's file name or a (hidden) adapter's description.
VENDOR_TEAMING_TOOLS = (
    {
        "name": "Intel Advanced Network Services (ANS)",
        "driver_files": ("ians*.sys",),
        "adapter_descriptions": ("*Advanced Network Services Virtual Adapter*",),
    },
    {
        "name": "Broadcom Advanced Server Program (BASP)",
        "driver_files": ("basp*.sys",),
        "adapter_descriptions": ("*BASP Virtual Adapter*",),
    },
    {
        "name": "QLogic Advanced Server Program (QLASP)",
        "driver_files": ("qlasp*.sys",),
        "adapter_descriptions": ("*QLASP Virtual Adapter*",),
    },
    {
        "name": "HPE Network Configuration Utility teaming",
        "driver_files": ("cpqteam*.sys",),
        "adapter_descriptions": ("HP Network Team*", "HPE Network Team*"),
    },
)


def vendor_driver_file_patterns():
    """Driver file patterns the gather module filters Win32_SystemDriver with (one source: VENDOR_TEAMING_TOOLS)."""
    return sorted({pattern for tool in VENDOR_TEAMING_TOOLS for pattern in tool["driver_files"]})


# ---------------------------------------------------------------------------------------------------- helpers
def enum_name(value, table, what):
    """Name of a CIM enum value given as its number or its name; raises ValueError naming the field otherwise."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}: expected one of {sorted(table.values())}")
    if isinstance(value, int):
        if value in table:
            return table[value]
        raise ValueError(f"{what} is {value}: not a documented value ({table})")
    text = str(value).strip()
    if text.isdigit():
        return enum_name(int(text), table, what)
    for name in table.values():
        if name.lower() == text.lower():
            return name
    raise ValueError(f"{what} is {value!r}: expected one of {sorted(table.values())}")


def _choice(value, choices, what):
    for choice in choices:
        if str(value).lower() == choice.lower():
            return choice
    raise ValueError("{} is {!r}: expected one of {}".format(what, value, ", ".join(choices)))


def _int_or_none(value):
    if value is None or value == "":
        return None
    return int(value)


def format_bits_per_second(bits_per_second):
    """10000000000 -> '10 Gbit/s' (for messages only)."""
    if bits_per_second is None:
        return "unknown"
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_second >= scale:
            return f"{round(bits_per_second / scale, 2):g} {unit}"
    return f"{bits_per_second} bit/s"


def _model(description):
    """'Intel(R) Ethernet Controller X710 #2' -> 'Intel(R) Ethernet Controller X710' (Windows numbers duplicates)."""
    text = (description or "").strip()
    head, sep, tail = text.rpartition(" #")
    if sep and tail.isdigit():
        return head
    return text


# ---------------------------------------------------------------------------------------------------- gathered state
@dataclass(frozen=True)
class Team:
    name: str
    members: tuple
    team_nics: tuple
    teaming_mode: str
    load_balancing_algorithm: str
    status: str


@dataclass(frozen=True)
class TeamMember:
    name: str
    team: str
    description: str
    administrative_mode: str
    operational_status: str
    failure_reason: str
    transmit_link_speed_bits_per_second: int | None


@dataclass(frozen=True)
class TeamNic:
    name: str
    team: str
    vlan_id: int
    primary: bool


@dataclass(frozen=True)
class Adapter:
    name: str
    description: str
    status: str
    media_connect_state: str
    speed_bits_per_second: int | None
    driver_provider: str
    driver_version: str
    driver_description: str
    driver_file: str
    virtual: bool
    hidden: bool


@dataclass(frozen=True)
class PcieLink:
    name: str
    location: tuple  # (segment, bus, device): functions of one card share its link
    current_speed_encoded: int | None
    current_width: int | None
    max_speed_encoded: int | None
    max_width: int | None

    @staticmethod
    def usable_bits_per_second(speed_encoded, width):
        if speed_encoded not in PCIE_LINK_SPEEDS or not width:
            return None
        transfers_per_lane, efficiency = PCIE_LINK_SPEEDS[speed_encoded]
        return int(transfers_per_lane * 1e9 * efficiency * width)

    @property
    def current_bits_per_second(self):
        return self.usable_bits_per_second(self.current_speed_encoded, self.current_width)

    def describe(self):
        rate = PCIE_LINK_SPEEDS.get(self.current_speed_encoded, (None,))[0]
        return "x{} at {} GT/s".format(self.current_width, rate if rate is not None else "?")


@dataclass(frozen=True)
class VmSwitch:
    name: str
    switch_type: str
    adapter_descriptions: tuple
    embedded_teaming: bool


@dataclass(frozen=True)
class VmSwitchTeam:
    name: str
    adapter_descriptions: tuple
    teaming_mode: str
    load_balancing_algorithm: str


@dataclass(frozen=True)
class HostState:
    """Everything win_nic_team_gather reports, typed and normalised."""

    lbfo_available: bool
    teams: dict
    members: dict
    team_nics: tuple
    adapters: dict
    pcie: dict
    hyperv_present: bool
    vm_switches: tuple
    vm_switch_teams: dict
    teaming_drivers: tuple
    os_build: int | None

    def adapter_name_for_description(self, description):
        for adapter in self.adapters.values():
            if adapter.description == description:
                return adapter.name
        return description

    def primary_team_nic(self, team_name):
        nics = [nic for nic in self.team_nics if nic.team == team_name]
        for nic in nics:
            if nic.primary:
                return nic
        return nics[0] if nics else None


def parse_host_state(raw):
    """Typed HostState from the win_nic_team_gather result (a dict); ValueError names a malformed field."""
    teams = {}
    for record in _as_list(raw.get("teams")):
        name = record["Name"]
        teams[name] = Team(
            name=name,
            members=tuple(_as_list(record.get("Members"))),
            team_nics=tuple(_as_list(record.get("TeamNics"))),
            teaming_mode=enum_name(record.get("TeamingMode"), TEAMING_MODES, f"team {name!r} TeamingMode"),
            load_balancing_algorithm=enum_name(
                record.get("LoadBalancingAlgorithm"), LOAD_BALANCING_ALGORITHMS, f"team {name!r} LoadBalancingAlgorithm"
            ),
            status=enum_name(record.get("Status"), TEAM_STATUSES, f"team {name!r} Status"),
        )
    members = {}
    for record in _as_list(raw.get("team_members")):
        name = record["Name"]
        members[name] = TeamMember(
            name=name,
            team=record.get("Team") or "",
            description=record.get("InterfaceDescription") or "",
            administrative_mode=enum_name(
                record.get("AdministrativeMode"), ADMINISTRATIVE_MODES, f"member {name!r} AdministrativeMode"
            ),
            operational_status=enum_name(
                record.get("OperationalStatus"), OPERATIONAL_STATUSES, f"member {name!r} OperationalStatus"
            ),
            failure_reason=enum_name(record.get("FailureReason"), FAILURE_REASONS, f"member {name!r} FailureReason")
            or "NoFailure",
            transmit_link_speed_bits_per_second=_int_or_none(record.get("TransmitLinkSpeed")),
        )
    # A team's member list comes from Get-NetLbfoTeamMember when the team record lacks it.
    for name, team in list(teams.items()):
        if not team.members:
            listed = tuple(sorted(member.name for member in members.values() if member.team == name))
            teams[name] = Team(
                team.name, listed, team.team_nics, team.teaming_mode, team.load_balancing_algorithm, team.status
            )
    team_nics = tuple(
        TeamNic(
            name=record["Name"],
            team=record.get("Team") or "",
            vlan_id=_int_or_none(record.get("VlanID")) or 0,
            primary=bool(record.get("Primary")),
        )
        for record in _as_list(raw.get("team_nics"))
    )
    adapters = {}
    for record in _as_list(raw.get("adapters")):
        name = record["Name"]
        media = record.get("MediaConnectState")
        adapters[name] = Adapter(
            name=name,
            description=record.get("InterfaceDescription") or "",
            status=record.get("Status") or "",
            media_connect_state=enum_name(media, MEDIA_CONNECT_STATES, f"adapter {name!r} MediaConnectState")
            if media is not None
            else "Unknown",
            speed_bits_per_second=_int_or_none(record.get("Speed")),
            driver_provider=record.get("DriverProvider") or "",
            driver_version=record.get("DriverVersionString") or "",
            driver_description=record.get("DriverDescription") or "",
            driver_file=ntpath.basename(record.get("DriverName") or ""),
            virtual=bool(record.get("Virtual")),
            hidden=bool(record.get("Hidden")),
        )
    pcie = {}
    for record in _as_list(raw.get("hardware_info")):
        name = record["Name"]
        pcie[name] = PcieLink(
            name=name,
            location=(
                _int_or_none(record.get("SegmentNumber")),
                _int_or_none(record.get("BusNumber")),
                _int_or_none(record.get("DeviceNumber")),
            ),
            current_speed_encoded=_int_or_none(record.get("PciExpressCurrentLinkSpeedEncoded")),
            current_width=_int_or_none(record.get("PciExpressCurrentLinkWidth")),
            max_speed_encoded=_int_or_none(record.get("PciExpressMaxLinkSpeedEncoded")),
            max_width=_int_or_none(record.get("PciExpressMaxLinkWidth")),
        )
    vm_switches = tuple(
        VmSwitch(
            name=record["Name"],
            switch_type=enum_name(
                record.get("SwitchType"), VM_SWITCH_TYPES, "vSwitch {!r} SwitchType".format(record["Name"])
            ),
            adapter_descriptions=tuple(
                _as_list(record.get("NetAdapterInterfaceDescriptions"))
                or _as_list(record.get("NetAdapterInterfaceDescription"))
            ),
            embedded_teaming=bool(record.get("EmbeddedTeamingEnabled")),
        )
        for record in _as_list(raw.get("vm_switches"))
    )
    vm_switch_teams = {}
    for record in _as_list(raw.get("vm_switch_teams")):
        name = record["Name"]
        vm_switch_teams[name] = VmSwitchTeam(
            name=name,
            adapter_descriptions=tuple(_as_list(record.get("NetAdapterInterfaceDescription"))),
            teaming_mode=enum_name(record.get("TeamingMode"), TEAMING_MODES, f"SET team {name!r} TeamingMode"),
            load_balancing_algorithm=enum_name(
                record.get("LoadBalancingAlgorithm"),
                LOAD_BALANCING_ALGORITHMS,
                f"SET team {name!r} LoadBalancingAlgorithm",
            ),
        )
    os_info = raw.get("os") or {}
    return HostState(
        lbfo_available=bool(raw.get("lbfo_available", True)),
        teams=teams,
        members=members,
        team_nics=team_nics,
        adapters=adapters,
        pcie=pcie,
        hyperv_present=bool(raw.get("hyperv_present")),
        vm_switches=vm_switches,
        vm_switch_teams=vm_switch_teams,
        teaming_drivers=tuple(_as_list(raw.get("teaming_drivers"))),
        os_build=_int_or_none(os_info.get("build_number")),
    )


# ---------------------------------------------------------------------------------------------------- desired state
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

    @classmethod
    def from_args(cls, args):
        name = (args.get("name") or "").strip()
        if not name:
            raise ValueError("name is empty: give the team (or SET switch) a name")
        members = tuple(args.get("members") or ())
        state = _choice(args.get("state") or "present", ("present", "absent"), "state")
        kind = _choice(args.get("kind") or "lbfo", KINDS, "kind")
        teaming_mode = _choice(
            args.get("teaming_mode") or "SwitchIndependent", tuple(TEAMING_MODES.values()), "teaming_mode"
        )
        algorithm = _choice(
            args.get("load_balancing_algorithm") or "Dynamic",
            tuple(LOAD_BALANCING_ALGORITHMS.values()),
            "load_balancing_algorithm",
        )
        standby = args.get("standby_member") or None
        vlan_id = _int_or_none(args.get("vlan_id"))
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
        if vlan_id is not None and not 0 <= vlan_id <= 4094:
            raise ValueError(f"vlan_id is {vlan_id}: use 1-4094, or 0 for the untagged default team NIC")
        if kind == "set":
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
            if vlan_id:
                raise ValueError("vlan_id belongs on the host vNICs of a SET switch, not on the switch: leave it 0")
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
        )

    @property
    def active_members(self):
        return tuple(member for member in self.members if member != self.standby_member)


# ---------------------------------------------------------------------------------------------------- findings
def _vendor_teaming_evidence(state):
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


def _check_members_exist(desired, state):
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


def _check_members_free(desired, state):
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


def _check_uniform(desired, state):
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
        ("mixed_models", "models", lambda a: _model(a.description)),
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


def _check_vendor_tools(state):
    return [
        Finding(
            REFUSE,
            "vendor_teaming_tool",
            "{} is installed ({}): one teaming manager per machine. Remove the vendor teaming software (and its "
            "teams) before teaming with Windows".format(tool, "; ".join(evidence)),
        )
        for tool, evidence in _vendor_teaming_evidence(state)
    ]


def pcie_report(desired, state):
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


def _check_pcie(desired, state):
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


def _vswitches_on_team(desired, state):
    """Hyper-V switches bound to this team's NIC (or to one of its members)."""
    descriptions = set()
    team = state.teams.get(desired.name)
    if team is not None:
        for nic_name in team.team_nics:
            nic = state.adapters.get(nic_name)
            if nic is not None:
                descriptions.add(nic.description)
    return [switch for switch in state.vm_switches if descriptions & set(switch.adapter_descriptions)]


def _check_hyperv(desired, state):
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
    return [
        Finding(
            REFUSE,
            "lbfo_under_vswitch",
            "{}. A Hyper-V switch on an LBFO team is unsupported from Windows Server 2022 (this host: build {}): "
            "use Switch Embedded Teaming instead: kind: set (New-VMSwitch -EnableEmbeddedTeaming $true -NetAdapterName "
            "{})".format(
                reason, state.os_build if state.os_build is not None else "unknown", ",".join(desired.members)
            ),
        )
    ]


def _check_standby(desired):
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


def preflight(desired, state):
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
    findings += _check_members_free(desired, state)
    findings += _check_vendor_tools(state)
    findings += _check_hyperv(desired, state)
    findings += _check_uniform(desired, state)
    findings += _check_pcie(desired, state)
    findings += _check_standby(desired)
    return findings


# ---------------------------------------------------------------------------------------------------- changes
def _lbfo_changes(desired, state):
    team = state.teams.get(desired.name)
    if desired.state == "absent":
        return [{"action": "remove_team", "team": desired.name}] if team is not None else []
    changes = []
    if team is None:
        new_team = {
            "action": "new_team",
            "team": desired.name,
            "members": list(desired.members),
            "teaming_mode": desired.teaming_mode,
            "load_balancing_algorithm": desired.load_balancing_algorithm,
        }
        if desired.team_nic_name:
            new_team["team_nic_name"] = desired.team_nic_name
        changes.append(new_team)
        if desired.standby_member:
            changes.append(
                {
                    "action": "set_member_mode",
                    "team": desired.name,
                    "member": desired.standby_member,
                    "administrative_mode": "Standby",
                }
            )
        if desired.vlan_id:
            changes.append(
                {
                    "action": "set_team_nic_vlan",
                    "team_nic": desired.team_nic_name or desired.name,
                    "vlan_id": desired.vlan_id,
                }
            )
        return changes

    set_team = {}
    if team.teaming_mode != desired.teaming_mode:
        set_team["teaming_mode"] = desired.teaming_mode
    if team.load_balancing_algorithm != desired.load_balancing_algorithm:
        set_team["load_balancing_algorithm"] = desired.load_balancing_algorithm
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
    changes += sorted(mode_changes, key=lambda change: change["administrative_mode"] != "Active")
    primary = state.primary_team_nic(desired.name)
    nic_name = primary.name if primary is not None else desired.name
    if desired.team_nic_name and primary is not None and primary.name != desired.team_nic_name:
        changes.append({"action": "rename_team_nic", "team_nic": primary.name, "new_name": desired.team_nic_name})
        nic_name = desired.team_nic_name
    if desired.vlan_id is not None and primary is not None and primary.vlan_id != desired.vlan_id:
        changes.append({"action": "set_team_nic_vlan", "team_nic": nic_name, "vlan_id": desired.vlan_id})
    return changes


def _set_changes(desired, state):
    switch = next((s for s in state.vm_switches if s.name == desired.name), None)
    if desired.state == "absent":
        return [{"action": "remove_set_switch", "switch": desired.name}] if switch is not None else []
    if switch is None:
        return [
            {
                "action": "new_set_switch",
                "switch": desired.name,
                "members": list(desired.members),
                "load_balancing_algorithm": desired.load_balancing_algorithm,
            }
        ]
    team = state.vm_switch_teams.get(desired.name)
    change = {}
    if team is not None:
        current = {state.adapter_name_for_description(d) for d in team.adapter_descriptions}
        if current != set(desired.members):
            change["members"] = list(desired.members)
        if team.load_balancing_algorithm != desired.load_balancing_algorithm:
            change["load_balancing_algorithm"] = desired.load_balancing_algorithm
    else:
        change = {"members": list(desired.members), "load_balancing_algorithm": desired.load_balancing_algorithm}
    return [dict({"action": "set_set_team", "switch": desired.name}, **change)] if change else []


def plan_changes(desired, state):
    """The smallest ordered list of changes that takes the host from `state` to `desired` (empty: nothing to do)."""
    if desired.kind == "set":
        return _set_changes(desired, state)
    return _lbfo_changes(desired, state)


# ---------------------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str
    status: str | None = None
    members: list = field(default_factory=list)

    def as_dict(self):
        return {"ok": self.ok, "message": self.message, "status": self.status, "members": self.members}


def _member_report(record):
    return {
        "name": record.name,
        "administrative_mode": record.administrative_mode,
        "operational_status": record.operational_status,
        "failure_reason": record.failure_reason,
        "transmit_link_speed_bits_per_second": record.transmit_link_speed_bits_per_second,
    }


def _lbfo_verdict(desired, state):
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


def _set_verdict(desired, state):
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


def verdict(desired, state):
    """Is the host where `desired` wants it, and healthy? A failure names the member at fault."""
    if desired.kind == "set":
        return _set_verdict(desired, state)
    return _lbfo_verdict(desired, state)


# ---------------------------------------------------------------------------------------------------- plan
def plan(desired, state):
    """Preflight findings and, when nothing is refused, the change list (empty when refused: nothing may change)."""
    return gated_plan(preflight(desired, state), lambda: plan_changes(desired, state))


def summary(desired, state):
    """Short before/after view of the team used for --diff."""
    if desired.kind == "set":
        team = state.vm_switch_teams.get(desired.name)
        if team is None:
            return {"kind": "set", "name": desired.name, "present": False}
        return {
            "kind": "set",
            "name": desired.name,
            "present": True,
            "members": sorted(state.adapter_name_for_description(d) for d in team.adapter_descriptions),
            "load_balancing_algorithm": team.load_balancing_algorithm,
        }
    team = state.teams.get(desired.name)
    if team is None:
        return {"kind": "lbfo", "name": desired.name, "present": False}
    primary = state.primary_team_nic(desired.name)
    standby = sorted(
        name for name in team.members if name in state.members and state.members[name].administrative_mode == "Standby"
    )
    return {
        "kind": "lbfo",
        "name": desired.name,
        "present": True,
        "members": sorted(team.members),
        "standby_member": standby[0] if standby else None,
        "teaming_mode": team.teaming_mode,
        "load_balancing_algorithm": team.load_balancing_algorithm,
        "team_nic_name": primary.name if primary is not None else None,
        "vlan_id": primary.vlan_id if primary is not None else None,
    }


def desired_summary(desired, before):
    """The summary the host should show once the plan is applied (the 'after' side of --diff)."""
    if desired.state == "absent":
        return {"kind": desired.kind, "name": desired.name, "present": False}
    if desired.kind == "set":
        return {
            "kind": "set",
            "name": desired.name,
            "present": True,
            "members": sorted(desired.members),
            "load_balancing_algorithm": desired.load_balancing_algorithm,
        }
    team_nic = desired.team_nic_name or (before.get("team_nic_name") if before.get("present") else desired.name)
    vlan = desired.vlan_id if desired.vlan_id is not None else (before.get("vlan_id") if before.get("present") else 0)
    return {
        "kind": "lbfo",
        "name": desired.name,
        "present": True,
        "members": sorted(desired.members),
        "standby_member": desired.standby_member,
        "teaming_mode": desired.teaming_mode,
        "load_balancing_algorithm": desired.load_balancing_algorithm,
        "team_nic_name": team_nic,
        "vlan_id": vlan,
    }
