# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NIC-team state for Windows hosts: what win_nic_team_gather reports, typed and normalised (no decisions here).

``_winteam`` plans on this state; ``win_nic_team_gather`` only reports what the NetLbfo, NetAdapter, NetTCPIP,
DnsClient and Hyper-V cmdlets say, one list of records per cmdlet (Get-NetAdapterAdvancedProperty for the one
keyword *JumboPacket).

Shapes accepted for each gathered record (the selected properties, serialised by Ansible.Basic):

- CIM enums arrive as their uint32 value (``"TeamingMode": 1``) or, where PowerShell already converted them, as
  their name (``"TeamingMode": "SwitchIndependent"``); both are accepted, names case-insensitively.
- A list property may arrive as a scalar: some properties are type-extension properties (``TeamNics`` of
  MSFT_NetLbfoTeam, ``NetAdapterInterfaceDescription`` of a VMSwitch) whose value is one string when there is one
  item. Serialisation does not unwrap arrays kept in a hashtable; list fields accept both shapes all the same.

Value maps are the documented ones of MSFT_NetLbfoTeam, MSFT_NetLbfoTeamMember (MSFT_NetImPlatAdapter),
MSFT_NetAdapter, MSFT_NetAdapterHardwareInfoSettingData, MSFT_NetIPAddress and MSFT_NetIPInterface
(root/StandardCimv2).
"""

from __future__ import annotations

import ipaddress
import ntpath
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._winplan import as_list as _as_list

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
LACP_TIMERS = {0: "Fast", 1: "Slow"}
PREFIX_ORIGINS = {0: "Other", 1: "Manual", 2: "WellKnown", 3: "Dhcp", 4: "RouterAdvertisement"}
DHCP_STATES = {0: "Disabled", 1: "Enabled"}
VLAN_OPERATION_MODES = {0: "Untagged", 1: "Access", 2: "Trunk", 3: "Private"}

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

# Windows Server 2022 is build 20348: from there on Hyper-V refuses to bind a switch to an LBFO team NIC. Earlier
# builds allow it (deprecated since Windows Server 2016, which introduced SET).
WINDOWS_SERVER_2022_BUILD = 20348

# New-NetLbfoTeam / Set-NetLbfoTeam take -LacpTimer from Windows Server 2016 (build 14393): the Windows Server 2012 R2
# pages (MicrosoftDocs windows-powershell-docs, docset/winserver2012r2-ps/netlbfo/Set-NetLbfoTeam.md and
# New-NetLbfoTeam.md) list only -TeamingMode and -LoadBalancingAlgorithm; the 2016 pages add -LacpTimer.
LACP_TIMER_MIN_BUILD = 14393


def lacp_timer_settable(os_build: int | None) -> bool:
    """Whether this build's NetLbfo cmdlets take -LacpTimer; an unknown build is taken as not."""
    return os_build is not None and os_build >= LACP_TIMER_MIN_BUILD


# Vendor teaming managers (an NDIS intermediate driver of their own). One teaming manager per machine: LBFO is
# refused while one of these is installed. Patterns match a driver's file name or a (hidden) adapter's description.
VENDOR_TEAMING_TOOLS: tuple[dict[str, Any], ...] = (
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


def vendor_driver_file_patterns() -> list[str]:
    """Driver file patterns the gather module filters Win32_SystemDriver with (one source: VENDOR_TEAMING_TOOLS)."""
    return sorted({pattern for tool in VENDOR_TEAMING_TOOLS for pattern in tool["driver_files"]})


# ---------------------------------------------------------------------------------------------------- helpers
def enum_name(value: object, table: dict[int, str], what: str) -> str | None:
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


def required_enum_name(value: object, table: dict[int, str], what: str) -> str:
    """``enum_name`` for a field every gathered record carries: a missing one is refused, not passed on as None."""
    name = enum_name(value, table, what)
    if name is None:
        raise ValueError(f"{what} is missing: expected one of {sorted(table.values())}")
    return name


def choice(value: object, choices: tuple[str, ...], what: str) -> str:
    for choice in choices:
        if str(value).lower() == choice.lower():
            return choice
    raise ValueError("{} is {!r}: expected one of {}".format(what, value, ", ".join(choices)))


def int_or_none(value: object) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"expected a number, got {value!r}")


def card_model(description: str) -> str:
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
    lacp_timer: str = "Fast"


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
    """A team interface. ``default`` is the untagged primary one (Default mode); its VLAN is then 0."""

    name: str
    team: str
    vlan_id: int
    primary: bool
    default: bool = False


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
    interface_index: int | None = None
    # *JumboPacket (Get-NetAdapterAdvancedProperty): largest frame in bytes, Ethernet header included, 1514 when
    # jumbo frames are off. None: not gathered, or the driver has no such keyword.
    jumbo_packet_bytes: int | None = None


@dataclass(frozen=True)
class PcieLink:
    name: str
    location: tuple  # (segment, bus, device): functions of one card share its link
    current_speed_encoded: int | None
    current_width: int | None
    max_speed_encoded: int | None
    max_width: int | None

    @staticmethod
    def usable_bits_per_second(speed_encoded: int | None, width: int | None) -> int | None:
        if speed_encoded not in PCIE_LINK_SPEEDS or not width:
            return None
        transfers_per_lane, efficiency = PCIE_LINK_SPEEDS[speed_encoded]
        return int(transfers_per_lane * 1e9 * efficiency * width)

    @property
    def current_bits_per_second(self) -> int | None:
        return self.usable_bits_per_second(self.current_speed_encoded, self.current_width)

    def describe(self) -> str:
        speed = self.current_speed_encoded
        rate = PCIE_LINK_SPEEDS[speed][0] if speed in PCIE_LINK_SPEEDS else None
        return "x{} at {} GT/s".format(self.current_width, rate if rate is not None else "?")


@dataclass(frozen=True)
class VmSwitch:
    name: str
    switch_type: str
    adapter_descriptions: tuple
    embedded_teaming: bool
    allow_management_os: bool = False


@dataclass(frozen=True)
class VmSwitchTeam:
    name: str
    adapter_descriptions: tuple
    teaming_mode: str
    load_balancing_algorithm: str


@dataclass(frozen=True)
class HostVnic:
    """A management-OS network adapter on a Hyper-V switch; Windows shows it as adapter 'vEthernet (<name>)'."""

    name: str
    switch_name: str
    vlan_id: int = 0  # access VLAN; 0 untagged

    @property
    def adapter_name(self) -> str:
        return host_vnic_adapter_name(self.name)


def host_vnic_adapter_name(vnic_name: str) -> str:
    return f"vEthernet ({vnic_name})"


def normal_address(text: object) -> str | None:
    """An IPv4 or IPv6 address written one way: zone index dropped (``fe80::1%12``), an IPv4-mapped IPv6 address
    (``::ffff:10.0.0.21``, what a dual-stack socket reports for an IPv4 peer) as IPv4, IPv6 compressed and lower case;
    None for anything that is not an address (a host name)."""
    try:
        address = ipaddress.ip_address(str(text or "").split("%", 1)[0].strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


@dataclass(frozen=True)
class IpConfig:
    """IP configuration of one interface, both families (Get-NetIPAddress, Get-NetIPInterface, Get-NetRoute for
    0.0.0.0/0 and ::/0, Get-DnsClientServerAddress, Get-DnsClient). ``addresses`` and ``gateway`` are IPv4,
    ``ipv6_addresses`` and ``ipv6_gateway`` IPv6; ``dns_servers`` / ``ipv6_dns_servers`` the servers of each family
    (a Get-DnsClientServerAddress record per family, learn.microsoft.com/powershell/module/dnsclient/
    get-dnsclientserveraddress). ``interface_metric`` None is the automatic metric (Get-NetIPInterface
    AutomaticMetric, learn.microsoft.com/powershell/module/nettcpip/get-netipinterface); ``register_in_dns`` None
    is not gathered (Get-DnsClient RegisterThisConnectionsAddress, learn.microsoft.com/powershell/module/dnsclient/
    get-dnsclient)."""

    interface: str
    addresses: tuple = ()  # ((address, prefix length, prefix origin), ...)
    dhcp: bool = False
    gateway: str | None = None
    dns_servers: tuple = ()
    ipv6_addresses: tuple = ()  # ((address, prefix length, prefix origin), ...)
    ipv6_gateway: str | None = None
    ipv6_dns_servers: tuple = ()
    interface_metric: int | None = None
    skip_as_source: tuple = ()  # addresses with SkipAsSource $true (Get-NetIPAddress)
    register_in_dns: bool | None = None

    @property
    def static_addresses(self) -> tuple:
        return tuple((address, prefix) for address, prefix, origin in self.addresses if origin == "Manual")

    @property
    def static_ipv6_addresses(self) -> tuple:
        return tuple((address, prefix) for address, prefix, origin in self.ipv6_addresses if origin == "Manual")

    @property
    def ipv4_settings(self) -> tuple:
        """What the planner sets: DHCP, or the static IPv4 addresses, gateway and DNS servers."""
        if self.dhcp:
            return (True,)
        return (False, self.static_addresses, self.gateway, tuple(self.dns_servers))

    @property
    def settings(self) -> tuple:
        """What the rollback restores: the IPv4 settings, and the static IPv6 addresses, gateway and DNS servers."""
        ipv6 = (self.static_ipv6_addresses, self.ipv6_gateway, tuple(self.ipv6_dns_servers))
        return (self.ipv4_settings, ipv6 if any(ipv6) else ())

    def carries(self, address: str) -> bool:
        wanted = normal_address(address)
        entries = (*self.addresses, *self.ipv6_addresses)
        return wanted is not None and any(normal_address(entry[0]) == wanted for entry in entries)


@dataclass(frozen=True)
class VmAdapter:
    """A virtual machine's network adapter (Get-VMNetworkAdapter -VMName *): a VM attached to a switch."""

    vm_name: str
    name: str
    switch_name: str


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
    host_vnics: tuple = ()
    rdma_enabled: dict = field(default_factory=dict)  # adapter name -> bool (Get-NetAdapterRdma)
    ip_configs: dict = field(default_factory=dict)  # interface alias -> IpConfig
    # Local addresses of the established connections on the port Ansible connects to (the gather's
    # connection_ports), normalised (normal_address).
    winrm_local_addresses: tuple = ()
    ip_gathered: bool = False  # False: a gather without IP records; management safety cannot be judged
    ipv6_addresses: tuple = ()  # ((interface alias, address), ...): Get-NetIPAddress -AddressFamily IPv6
    vm_adapters: tuple = ()  # VmAdapter, ...: Get-VMNetworkAdapter -VMName *
    vm_adapters_gathered: bool = False  # False: a gather without the record; VMs on a switch cannot be judged

    def vms_on_switch(self, switch: str) -> list[str]:
        """Names of the virtual machines with a network adapter connected to this switch."""
        return sorted({adapter.vm_name for adapter in self.vm_adapters if adapter.switch_name == switch})

    def adapter_name_for_description(self, description: str) -> str:
        for adapter in self.adapters.values():
            if adapter.description == description:
                return adapter.name
        return description

    def primary_team_nic(self, team_name: str) -> TeamNic | None:
        nics = [nic for nic in self.team_nics if nic.team == team_name]
        for nic in nics:
            if nic.primary:
                return nic
        return nics[0] if nics else None

    def interfaces_carrying(self, address: str) -> list[str]:
        """Interfaces with this IPv4 or IPv6 address (written any way normal_address reads)."""
        names = {name for name, config in self.ip_configs.items() if config.carries(address)}
        wanted = normal_address(address)
        names |= {alias for alias, ipv6 in self.ipv6_addresses if wanted and normal_address(ipv6) == wanted}
        return sorted(names)


def _teams(raw: dict) -> dict:
    teams = {}
    for record in _as_list(raw.get("teams")):
        name = record["Name"]
        teams[name] = Team(
            name=name,
            members=tuple(_as_list(record.get("Members"))),
            team_nics=tuple(_as_list(record.get("TeamNics"))),
            teaming_mode=required_enum_name(record.get("TeamingMode"), TEAMING_MODES, f"team {name!r} TeamingMode"),
            load_balancing_algorithm=required_enum_name(
                record.get("LoadBalancingAlgorithm"), LOAD_BALANCING_ALGORITHMS, f"team {name!r} LoadBalancingAlgorithm"
            ),
            status=required_enum_name(record.get("Status"), TEAM_STATUSES, f"team {name!r} Status"),
            lacp_timer=enum_name(record.get("LacpTimer"), LACP_TIMERS, f"team {name!r} LacpTimer") or "Fast",
        )
    return teams


def _members(raw: dict) -> dict:
    members = {}
    for record in _as_list(raw.get("team_members")):
        name = record["Name"]
        members[name] = TeamMember(
            name=name,
            team=record.get("Team") or "",
            description=record.get("InterfaceDescription") or "",
            administrative_mode=required_enum_name(
                record.get("AdministrativeMode"), ADMINISTRATIVE_MODES, f"member {name!r} AdministrativeMode"
            ),
            operational_status=required_enum_name(
                record.get("OperationalStatus"), OPERATIONAL_STATUSES, f"member {name!r} OperationalStatus"
            ),
            failure_reason=enum_name(record.get("FailureReason"), FAILURE_REASONS, f"member {name!r} FailureReason")
            or "NoFailure",
            transmit_link_speed_bits_per_second=int_or_none(record.get("TransmitLinkSpeed")),
        )
    return members


def _team_nics(raw: dict) -> tuple:
    nics = []
    for record in _as_list(raw.get("team_nics")):
        default = bool(record.get("Default"))
        nics.append(
            TeamNic(
                name=record["Name"],
                team=record.get("Team") or "",
                vlan_id=0 if default else int_or_none(record.get("VlanID")) or 0,
                primary=bool(record.get("Primary")),
                default=default,
            )
        )
    return tuple(nics)


def _jumbo_packet_bytes(raw: dict) -> dict:
    """Adapter name -> *JumboPacket size in bytes, from the jumbo_packets records (Get-NetAdapterAdvancedProperty
    -RegistryKeyword '*JumboPacket'). RegistryValue is a string array (MSFT_NetAdapterAdvancedPropertySettingData);
    the keyword is an integer (learn.microsoft.com/windows-hardware/drivers/network/keywords-that-can-be-edited)."""
    sizes = {}
    for record in _as_list(raw.get("jumbo_packets")):
        values = _as_list(record.get("RegistryValue"))
        text = str(values[0]).strip() if values else ""
        if not text:
            continue
        if not text.isdigit():
            raise ValueError(
                "adapter {!r} *JumboPacket RegistryValue is {!r}: expected a size in bytes".format(
                    record.get("Name"), record.get("RegistryValue")
                )
            )
        sizes[record["Name"]] = int(text)
    return sizes


def _adapters(raw: dict) -> dict:
    adapters = {}
    jumbo_packet_bytes = _jumbo_packet_bytes(raw)
    for record in _as_list(raw.get("adapters")):
        name = record["Name"]
        media = record.get("MediaConnectState")
        adapters[name] = Adapter(
            name=name,
            description=record.get("InterfaceDescription") or "",
            status=record.get("Status") or "",
            media_connect_state=required_enum_name(media, MEDIA_CONNECT_STATES, f"adapter {name!r} MediaConnectState")
            if media is not None
            else "Unknown",
            speed_bits_per_second=int_or_none(record.get("Speed")),
            driver_provider=record.get("DriverProvider") or "",
            driver_version=record.get("DriverVersionString") or "",
            driver_description=record.get("DriverDescription") or "",
            driver_file=ntpath.basename(record.get("DriverName") or ""),
            virtual=bool(record.get("Virtual")),
            hidden=bool(record.get("Hidden")),
            interface_index=int_or_none(record.get("InterfaceIndex")),
            jumbo_packet_bytes=jumbo_packet_bytes.get(name),
        )
    return adapters


def _pcie(raw: dict) -> dict:
    pcie = {}
    for record in _as_list(raw.get("hardware_info")):
        name = record["Name"]
        pcie[name] = PcieLink(
            name=name,
            location=(
                int_or_none(record.get("SegmentNumber")),
                int_or_none(record.get("BusNumber")),
                int_or_none(record.get("DeviceNumber")),
            ),
            current_speed_encoded=int_or_none(record.get("PciExpressCurrentLinkSpeedEncoded")),
            current_width=int_or_none(record.get("PciExpressCurrentLinkWidth")),
            max_speed_encoded=int_or_none(record.get("PciExpressMaxLinkSpeedEncoded")),
            max_width=int_or_none(record.get("PciExpressMaxLinkWidth")),
        )
    return pcie


def _vm_switches(raw: dict) -> tuple:
    return tuple(
        VmSwitch(
            name=record["Name"],
            switch_type=required_enum_name(
                record.get("SwitchType"), VM_SWITCH_TYPES, "vSwitch {!r} SwitchType".format(record["Name"])
            ),
            adapter_descriptions=tuple(
                _as_list(record.get("NetAdapterInterfaceDescriptions"))
                or _as_list(record.get("NetAdapterInterfaceDescription"))
            ),
            embedded_teaming=bool(record.get("EmbeddedTeamingEnabled")),
            allow_management_os=bool(record.get("AllowManagementOS")),
        )
        for record in _as_list(raw.get("vm_switches"))
    )


def _vm_switch_teams(raw: dict) -> dict:
    teams = {}
    for record in _as_list(raw.get("vm_switch_teams")):
        name = record["Name"]
        teams[name] = VmSwitchTeam(
            name=name,
            adapter_descriptions=tuple(_as_list(record.get("NetAdapterInterfaceDescription"))),
            teaming_mode=required_enum_name(record.get("TeamingMode"), TEAMING_MODES, f"SET team {name!r} TeamingMode"),
            load_balancing_algorithm=required_enum_name(
                record.get("LoadBalancingAlgorithm"),
                LOAD_BALANCING_ALGORITHMS,
                f"SET team {name!r} LoadBalancingAlgorithm",
            ),
        )
    return teams


def _host_vnics(raw: dict) -> tuple:
    """Get-VMNetworkAdapter -ManagementOS joined with Get-VMNetworkAdapterVlan -ManagementOS (access VLAN)."""
    vlans = {}
    for record in _as_list(raw.get("host_vnic_vlans")):
        mode = enum_name(record.get("OperationMode"), VLAN_OPERATION_MODES, "host vNIC VLAN OperationMode")
        vlans[record.get("ParentAdapter") or ""] = int_or_none(record.get("AccessVlanId")) if mode == "Access" else 0
    return tuple(
        HostVnic(
            name=record["Name"],
            switch_name=record.get("SwitchName") or "",
            vlan_id=vlans.get(record["Name"]) or 0,
        )
        for record in _as_list(raw.get("host_vnics"))
    )


DEFAULT_ROUTES = {"0.0.0.0/0": "gateway", "::/0": "ipv6_gateway"}
ADDRESS_FAMILIES = {2: "IPv4", 23: "IPv6"}  # MSFT_NetIPAddress / DNS client AddressFamily (AF_INET, AF_INET6)


def _family(record: dict, address_field: str | None = None) -> str:
    """IPv4 or IPv6: the record's AddressFamily, else the address itself; a record without either is IPv4."""
    family = record.get("AddressFamily")
    if family is not None:
        return required_enum_name(family, ADDRESS_FAMILIES, "AddressFamily")
    address = normal_address(record.get(address_field)) if address_field else None
    return "IPv6" if address and ":" in address else "IPv4"


def parse_ip_configs(raw: dict) -> dict:
    """Interface alias -> IpConfig, from the ip_addresses / ipv6_addresses / ip_interfaces / routes / dns_servers /
    dns_clients records."""
    configs: dict = {}

    def config(alias: str) -> dict:
        return configs.setdefault(
            alias,
            {"addresses": [], "ipv6_addresses": [], "dhcp": False, "gateway": None, "ipv6_gateway": None,
             "dns_servers": (), "ipv6_dns_servers": (), "interface_metric": None, "skip_as_source": [],
             "register_in_dns": None},
        )  # fmt: skip

    for key in ("ip_addresses", "ipv6_addresses"):
        for record in _as_list(raw.get(key)):
            origin = enum_name(record.get("PrefixOrigin"), PREFIX_ORIGINS, "ip address PrefixOrigin") or "Other"
            family = "ipv6_addresses" if _family(record, "IPAddress") == "IPv6" else "addresses"
            values = config(record["InterfaceAlias"])
            values[family].append((record["IPAddress"], int(record.get("PrefixLength") or 0), origin))
            if record.get("SkipAsSource"):
                values["skip_as_source"].append(record["IPAddress"])
    for record in _as_list(raw.get("ip_interfaces")):
        values = config(record["InterfaceAlias"])
        values["dhcp"] = enum_name(record.get("Dhcp"), DHCP_STATES, "ip interface Dhcp") == "Enabled"
        if record.get("AutomaticMetric") is not None:
            automatic = enum_name(record.get("AutomaticMetric"), DHCP_STATES, "ip interface AutomaticMetric")
            values["interface_metric"] = None if automatic == "Enabled" else int_or_none(record.get("InterfaceMetric"))
    for record in _as_list(raw.get("routes")):
        field_name = DEFAULT_ROUTES.get(record.get("DestinationPrefix"))
        if field_name:
            config(record["InterfaceAlias"])[field_name] = record.get("NextHop")
    for record in _as_list(raw.get("dns_servers")):
        family = "ipv6_dns_servers" if _family(record) == "IPv6" else "dns_servers"
        config(record["InterfaceAlias"])[family] = tuple(_as_list(record.get("ServerAddresses")))
    for record in _as_list(raw.get("dns_clients")):
        if record.get("RegisterThisConnectionsAddress") is not None:
            config(record["InterfaceAlias"])["register_in_dns"] = bool(record["RegisterThisConnectionsAddress"])
    bound = _ipv4_bound(raw)
    return {
        alias: IpConfig(
            interface=alias,
            addresses=tuple(sorted(values["addresses"])),
            dhcp=values["dhcp"],
            gateway=values["gateway"],
            dns_servers=values["dns_servers"],
            ipv6_addresses=tuple(sorted(values["ipv6_addresses"])),
            ipv6_gateway=values["ipv6_gateway"],
            ipv6_dns_servers=values["ipv6_dns_servers"],
            interface_metric=values["interface_metric"],
            skip_as_source=tuple(sorted(values["skip_as_source"])),
            register_in_dns=values["register_in_dns"],
        )
        for alias, values in configs.items()
        # An interface without TCP/IPv4 (a team member, a switch's adapter) has no configuration of its own here,
        # whatever IPv6 or DNS client record it shows.
        if values["addresses"] or alias in bound or values["gateway"] or values["dns_servers"]
    }


def _ipv4_bound(raw: dict) -> set:
    """Interfaces with TCP/IPv4 bound (a Get-NetIPInterface -AddressFamily IPv4 record)."""
    return {record["InterfaceAlias"] for record in _as_list(raw.get("ip_interfaces"))}


def _vm_adapters(raw: dict) -> tuple:
    return tuple(
        VmAdapter(
            vm_name=record.get("VMName") or "",
            name=record.get("Name") or "",
            switch_name=record.get("SwitchName") or "",
        )
        for record in _as_list(raw.get("vm_adapters"))
    )


def parse_host_state(raw: dict) -> HostState:
    """Typed HostState from the win_nic_team_gather result (a dict); ValueError names a malformed field."""
    teams = _teams(raw)
    members = _members(raw)
    # A team's member list comes from Get-NetLbfoTeamMember when the team record lacks it.
    for name, team in list(teams.items()):
        if not team.members:
            listed = tuple(sorted(member.name for member in members.values() if member.team == name))
            teams[name] = Team(
                team.name,
                listed,
                team.team_nics,
                team.teaming_mode,
                team.load_balancing_algorithm,
                team.status,
                team.lacp_timer,
            )
    os_info = raw.get("os") or {}
    return HostState(
        lbfo_available=bool(raw.get("lbfo_available", True)),
        teams=teams,
        members=members,
        team_nics=_team_nics(raw),
        adapters=_adapters(raw),
        pcie=_pcie(raw),
        hyperv_present=bool(raw.get("hyperv_present")),
        vm_switches=_vm_switches(raw),
        vm_switch_teams=_vm_switch_teams(raw),
        teaming_drivers=tuple(_as_list(raw.get("teaming_drivers"))),
        os_build=int_or_none(os_info.get("build_number")),
        host_vnics=_host_vnics(raw),
        rdma_enabled={record.get("Name"): bool(record.get("Enabled")) for record in _as_list(raw.get("rdma"))},
        ip_configs=parse_ip_configs(raw),
        winrm_local_addresses=tuple(
            sorted({normal_address(r.get("LocalAddress")) for r in _as_list(raw.get("winrm_connections"))} - {None})
        ),
        ip_gathered="ip_addresses" in raw,
        ipv6_addresses=tuple(
            sorted((record["InterfaceAlias"], record["IPAddress"]) for record in _as_list(raw.get("ipv6_addresses")))
        ),
        vm_adapters=_vm_adapters(raw),
        vm_adapters_gathered="vm_adapters" in raw or not raw.get("hyperv_present"),
    )
