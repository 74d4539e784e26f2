# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is win_nic_team_gather.ps1 beside this file.

DOCUMENTATION = r"""
---
module: win_nic_team_gather
short_description: Report NIC-team, adapter, PCIe and Hyper-V switch state of a Windows host as JSON records
version_added: "0.1.0"
description:
  - Runs C(Get-NetLbfoTeam), C(Get-NetLbfoTeamMember), C(Get-NetLbfoTeamNic), C(Get-NetAdapter -IncludeHidden),
    C(Get-NetAdapterHardwareInfo), C(Get-VMSwitch) and C(Get-VMSwitchTeam) (when Hyper-V is installed), and lists
    the system drivers whose file name matches O(driver_file_patterns), returning the selected properties of each.
  - Also reports the IPv4 configuration (C(Get-NetIPAddress), C(Get-NetIPInterface), C(Get-NetRoute),
    C(Get-DnsClientServerAddress)), the IPv6 addresses, the established connections on O(connection_ports)
    (C(Get-NetTCPConnection)), RDMA state
    (C(Get-NetAdapterRdma)) and the host vNICs of Hyper-V switches, so that the controller can tell which change
    would cut it off.
  - Reports each adapter's jumbo packet size (C(Get-NetAdapterAdvancedProperty -RegistryKeyword '*JumboPacket')), so
    that members with different sizes are refused before they are teamed.
  - A system driver without a path is skipped rather than failing the gather.
  - It decides nothing and changes nothing. M(hpc.balance.win_nic_team) runs it and makes the decisions.
author:
  - hpc.balance maintainers (@hpc-balance)
options:
  driver_file_patterns:
    description:
      - Wildcard patterns (C(-like)) of driver file names to report from C(Win32_SystemDriver), used to detect vendor
        teaming tools. M(hpc.balance.win_nic_team) passes its own list.
    type: list
    elements: str
    default: []
  connection_ports:
    description:
      - Local TCP ports whose established connections are reported in RV(winrm_connections), that is the port the
        controller's connection reaches this host on.
      - M(hpc.balance.win_nic_team) passes the port its connection plugin resolved (WinRM, PSRP or SSH); the default
        is the two WinRM ports.
    type: list
    elements: int
    default: [5985, 5986]
extends_documentation_fragment:
  - hpc.balance.windows.gather
attributes:
  check_mode:
    description: Read-only; runs the same in check mode.
seealso:
  - module: hpc.balance.win_nic_team
"""

EXAMPLES = r"""
- name: Look at the teams and adapters of a host
  hpc.balance.win_nic_team_gather:
  register: host_links
"""

RETURN = r"""
ip_addresses:
  description: C(Get-NetIPAddress -AddressFamily IPv4) records (C(SkipAsSource) true keeps the address out of
    source address selection).
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceAlias": "MGMT", "InterfaceIndex": 3, "IPAddress": "10.0.0.21", "PrefixLength": 24,
            "PrefixOrigin": 1, "AddressFamily": 2, "SkipAsSource": false}]
ipv6_addresses:
  description: C(Get-NetIPAddress -AddressFamily IPv6) records, to find the interface that carries an IPv6
    management address and to record the static IPv6 addresses a rollback restores.
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceAlias": "MGMT", "InterfaceIndex": 3, "IPAddress": "2001:db8:10::21", "PrefixLength": 64,
            "PrefixOrigin": 1, "AddressFamily": 23}]
ip_interfaces:
  description: C(Get-NetIPInterface -AddressFamily IPv4) records (C(Dhcp) and C(AutomaticMetric) 0 disabled,
    1 enabled).
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceAlias": "MGMT", "InterfaceIndex": 3, "AddressFamily": 2, "Dhcp": 0, "InterfaceMetric": 25,
            "AutomaticMetric": 1}]
routes:
  description: C(Get-NetRoute -DestinationPrefix 0.0.0.0/0,::/0) records (the default gateways of both families).
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceAlias": "MGMT", "DestinationPrefix": "0.0.0.0/0", "NextHop": "10.0.0.1", "RouteMetric": 0}]
dns_servers:
  description: C(Get-DnsClientServerAddress) records, one per interface and address family (2 IPv4, 23 IPv6).
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceAlias": "MGMT", "AddressFamily": 2, "ServerAddresses": ["10.0.0.2", "10.0.0.3"]}]
dns_clients:
  description: C(Get-DnsClient) records; C(RegisterThisConnectionsAddress) says whether the interface registers its
    addresses in DNS.
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceAlias": "MGMT", "RegisterThisConnectionsAddress": true}]
vm_adapters:
  description: C(Get-VMNetworkAdapter -VMName *) records, the virtual machines' adapters and the switch each is
    connected to; empty without Hyper-V. A switch with one is never removed.
  returned: always
  type: list
  elements: dict
  sample: [{"VMName": "vm01", "Name": "Network Adapter", "SwitchName": "SETswitch"}]
winrm_connections:
  description: Established TCP connections on O(connection_ports) (C(Get-NetTCPConnection)); their local
    address (IPv4 or IPv6) is the address the controller reaches this host by.
  returned: always
  type: list
  elements: dict
  sample: [{"LocalAddress": "10.0.0.21", "LocalPort": 5985, "RemoteAddress": "10.0.0.5", "State": 5}]
jumbo_packets:
  description: C(Get-NetAdapterAdvancedProperty -RegistryKeyword '*JumboPacket') records, one per adapter whose driver
    has the keyword. C(RegistryValue) is the largest frame in bytes, Ethernet header included (1514 is jumbo frames
    off).
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC1", "InterfaceDescription": "Intel(R) Ethernet Converged Network Adapter X710",
            "RegistryKeyword": "*JumboPacket", "RegistryValue": ["9014"], "DisplayValue": "9014 Bytes"}]
rdma:
  description: C(Get-NetAdapterRdma) records.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC1", "InterfaceDescription": "Intel(R) Ethernet Converged Network Adapter X710",
            "Enabled": false}]
host_vnics:
  description: C(Get-VMNetworkAdapter -ManagementOS) records; empty without Hyper-V.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "SETswitch", "SwitchName": "SETswitch", "IsManagementOs": true}]
host_vnic_vlans:
  description: C(Get-VMNetworkAdapterVlan -ManagementOS) as ParentAdapter (vNIC name), OperationMode, AccessVlanId.
  returned: always
  type: list
  elements: dict
  sample: [{"ParentAdapter": "SMB1", "OperationMode": "Access", "AccessVlanId": 12}]
lbfo_available:
  description: Whether the NetLbfo cmdlets exist on the host.
  returned: always
  type: bool
  sample: true
teams:
  description:
    - C(Get-NetLbfoTeam) records (Name, Members, TeamNics, TeamingMode, LoadBalancingAlgorithm, LacpTimer, Status).
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "Storage", "Members": ["NIC1", "NIC2"], "TeamNics": "Storage", "TeamingMode": 1,
            "LoadBalancingAlgorithm": 5, "LacpTimer": 0, "Status": 0}]
team_members:
  description: C(Get-NetLbfoTeamMember) records.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC2", "Team": "Storage", "AdministrativeMode": 0, "OperationalStatus": 2, "FailureReason": 3,
            "InterfaceDescription": "Intel(R) Ethernet Converged Network Adapter X710 #2", "TransmitLinkSpeed": 0,
            "ReceiveLinkSpeed": 0}]
team_nics:
  description: C(Get-NetLbfoTeamNic) records.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "Storage", "Team": "Storage", "VlanID": null, "Primary": true, "Default": true,
            "InterfaceDescription": "Microsoft Network Adapter Multiplexor Driver"}]
adapters:
  description: C(Get-NetAdapter -IncludeHidden) records.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC1", "InterfaceDescription": "Intel(R) Ethernet Converged Network Adapter X710", "Status": "Up",
            "MediaConnectState": 1, "Speed": 10000000000, "DriverProvider": "Intel",
            "DriverVersionString": "1.12.101.0",
            "DriverName": "\\SystemRoot\\System32\\drivers\\i40ea68.sys", "Virtual": false, "Hidden": false}]
hardware_info:
  description: C(Get-NetAdapterHardwareInfo) records (PCIe location, current and maximum link speed and width).
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC1", "SegmentNumber": 0, "BusNumber": 59, "DeviceNumber": 0, "FunctionNumber": 0,
            "PciExpressCurrentLinkSpeedEncoded": 3, "PciExpressCurrentLinkWidth": 8,
            "PciExpressMaxLinkSpeedEncoded": 3, "PciExpressMaxLinkWidth": 8}]
hyperv_present:
  description: Whether the Hyper-V management service and the Hyper-V cmdlets exist.
  returned: always
  type: bool
  sample: false
vm_switches:
  description: C(Get-VMSwitch) records (enums as names).
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "vSwitch-Storage", "SwitchType": "External", "EmbeddedTeamingEnabled": false,
            "NetAdapterInterfaceDescription": "Microsoft Network Adapter Multiplexor Driver"}]
vm_switch_teams:
  description: C(Get-VMSwitchTeam) records of the SET switches.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "SETswitch", "TeamingMode": "SwitchIndependent", "LoadBalancingAlgorithm": "HyperVPort",
            "NetAdapterInterfaceDescription": ["Intel(R) Ethernet Converged Network Adapter X710 #3"]}]
teaming_drivers:
  description: C(Win32_SystemDriver) records whose file name matches O(driver_file_patterns).
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "iANSMiniport", "PathName": "C:\\Windows\\system32\\DRIVERS\\iansw60e.sys", "State": "Running"}]
os:
  description: Operating system caption, version and build number.
  returned: always
  type: dict
  sample: {"caption": "Microsoft Windows Server 2022 Datacenter", "version": "10.0.20348", "build_number": 20348}
"""
