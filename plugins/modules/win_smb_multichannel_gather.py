# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is win_smb_multichannel_gather.ps1 beside this file.

DOCUMENTATION = r"""
---
module: win_smb_multichannel_gather
short_description: Report the SMB Multichannel state of a Windows host as JSON records
version_added: "0.1.0"
description:
  - Returns the selected properties of C(Get-SmbServerConfiguration), C(Get-SmbClientConfiguration),
    C(Get-SmbMultichannelConstraint), C(Get-SmbMultichannelConnection -IncludeNotSelected),
    C(Get-SmbClientNetworkInterface), C(Get-SmbServerNetworkInterface), C(Get-NetAdapterRss), C(Get-NetAdapterRdma),
    C(Get-NetAdapter) and C(Get-NetLbfoTeamMember).
  - With O(share) it first opens the share (C(Test-Path)), so that the SMB session whose channels are listed exists,
    and waits up to O(settle_s) in the same logon for O(min_channels) channels (each run is a fresh logon).
  - Opening a share from a WinRM session needs a credential path past the double hop (become with runas, CredSSP,
    or Kerberos delegation); M(hpc.balance.win_smb_multichannel) refuses O(share) without one.
  - It decides nothing and changes nothing. M(hpc.balance.win_smb_multichannel) runs it.
author:
  - hpc.balance maintainers (@hpc-balance)
options:
  share:
    description: UNC path of a share to open before listing the connections.
    type: str
  min_channels:
    description: With O(share), stop waiting once the share's selected connections carry this many channels.
    type: int
    default: 2
  settle_s:
    description: With O(share), seconds to wait at most for the channels to open.
    type: int
    default: 10
extends_documentation_fragment:
  - hpc.balance.windows.gather
attributes:
  check_mode:
    description: Read-only (opening a share only sets up an SMB session); runs the same in check mode.
seealso:
  - module: hpc.balance.win_smb_multichannel
"""

EXAMPLES = r"""
- name: Open a share and list its multichannel connections
  hpc.balance.win_smb_multichannel_gather:
    share: \\fs01\scratch
  register: smb_state
"""

RETURN = r"""
server_interfaces:
  description: C(Get-SmbServerNetworkInterface) records (what this host's SMB server offers).
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceIndex": 21, "FriendlyName": "Storage", "RssCapable": true, "RdmaCapable": false,
            "LinkSpeed": 20000000000, "IpAddress": "10.20.0.11"}]
rdma:
  description: C(Get-NetAdapterRdma) records.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC1", "InterfaceDescription": "Intel(R) Ethernet Converged Network Adapter X710",
            "Enabled": false}]
team_members:
  description: C(Get-NetLbfoTeamMember) records (Name, Team); empty without NetLbfo.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC1", "Team": "Storage"}]
server_configuration:
  description: EnableMultiChannel, EnableSMB2Protocol and EnableSMB1Protocol of the SMB server.
  returned: always
  type: dict
  sample: {"EnableMultiChannel": true, "EnableSMB2Protocol": true, "EnableSMB1Protocol": false}
client_configuration:
  description: EnableMultiChannel of the SMB client.
  returned: always
  type: dict
  sample: {"EnableMultiChannel": true}
constraints:
  description: C(Get-SmbMultichannelConstraint) records.
  returned: always
  type: list
  elements: dict
  sample: [{"ServerName": "fs02", "InterfaceAlias": "MGMT", "InterfaceIndex": 3,
            "InterfaceGuid": "{5e0c2a7b-94f1-4d3e-8a61-0b7d2c9e4f13}"}]
share_probe:
  description: Whether O(share) could be opened, and the error if not (empty without O(share)).
  returned: always
  type: dict
  sample: {"path": "\\\\fs01\\scratch", "reachable": true, "error": null}
connections:
  description: C(Get-SmbMultichannelConnection -IncludeNotSelected) records.
  returned: always
  type: list
  elements: dict
  sample: [{"ServerName": "fs01", "Selected": true, "ClientInterfaceFriendlyName": "Storage",
            "ClientIpAddress": "10.20.0.11", "ServerIpAddress": "10.20.0.2", "ClientRSSCapable": true,
            "CurrentChannels": 4, "MaxChannels": 4, "Failed": false}]
client_interfaces:
  description: C(Get-SmbClientNetworkInterface) records.
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceIndex": 21, "FriendlyName": "Storage", "RssCapable": true, "RdmaCapable": false,
            "LinkSpeed": 20000000000,
            "IpAddresses": ["10.20.0.11"]}]
rss:
  description: C(Get-NetAdapterRss) records.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "NIC1", "Enabled": true, "NumberOfReceiveQueues": 8, "MaxProcessors": 8}]
adapters:
  description: Name, InterfaceIndex and Status of every adapter.
  returned: always
  type: list
  elements: dict
  sample: [{"Name": "Storage", "InterfaceIndex": 21, "Status": "Up"}]
"""
