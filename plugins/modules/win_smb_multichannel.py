# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin plugins/action/win_smb_multichannel.py on the
# controller, which runs hpc.balance.win_smb_multichannel_gather and hpc.balance.win_smb_multichannel_apply.

DOCUMENTATION = r"""
---
module: win_smb_multichannel
short_description: Enable SMB Multichannel and verify that a share really connects over several channels
version_added: "0.1.0"
description:
  - One TCP flow only ever uses one team member, so a single large copy runs at one card's speed. SMB Multichannel
    opens several channels per SMB session, over several interfaces or over one RSS-capable interface.
  - Enables (or disables) multichannel on the SMB server and client (C(Set-SmbServerConfiguration),
    C(Set-SmbClientConfiguration)), sets multichannel constraints per server (C(New-SmbMultichannelConstraint)),
    warns about interfaces without RSS, and verifies with C(Get-SmbMultichannelConnection) that O(verify_share)
    connects over at least O(min_channels) channels, waiting up to O(wait_timeout_s) for them to open.
  - Decisions are made on the controller (module_utils C(_winsmb)); the host only runs
    M(hpc.balance.win_smb_multichannel_gather) and M(hpc.balance.win_smb_multichannel_apply).
author:
  - hpc.balance maintainers (@hpc-balance)
options:
  server_enabled:
    description: Multichannel on the SMB server of this host.
    type: bool
    default: true
  client_enabled:
    description: Multichannel on the SMB client of this host.
    type: bool
    default: true
  constraints:
    description:
      - Per SMB server, the only client interfaces SMB may use towards it. Servers not listed are left as they are,
        unless O(exclusive_constraints).
      - Constraints are kept per server name string (C(New-SmbMultichannelConstraint -ServerName)) and apply to the
        connections made by that name only; C(fs01) and C(fs01.hpc.example) are two constraints. List the name the
        clients use.
    type: list
    elements: dict
    default: []
    suboptions:
      server_name:
        description: SMB server name, as the client addresses it.
        type: str
        required: true
      interfaces:
        description: Interface aliases (adapter or team NIC names) SMB may use towards that server.
        type: list
        elements: str
        required: true
  exclusive_constraints:
    description: Remove the constraints of servers not listed in O(constraints).
    type: bool
    default: false
  verify_share:
    description:
      - UNC path of a share (C(\\\\server\\share)) to open and check for live multichannel connections. Unset skips
        the check.
      - "The share is opened on the host, inside the WinRM logon. Under NTLM, or Kerberos without delegation, that
        logon cannot authenticate to the file server (the double hop), so the module refuses O(verify_share) unless
        the task runs with C(become: true) and C(become_method: runas) (with C(become_user) an account the share
        admits, and C(ansible_become_password): runas without a password is an S4U logon, which has no network
        credentials), or the connection uses CredSSP (C(ansible_winrm_transport: credssp)) or Kerberos with
        delegation (C(ansible_winrm_kerberos_delegation: true)). Become is read as Ansible resolved it for the task
        and host (task keywords or inventory C(ansible_become_*)), the transport from the connection's options."
    type: str
  settle_s:
    description: Seconds the gather waits, within one logon, for the share's channels to open before it reports.
    type: int
    default: 10
  min_channels:
    description: Channels the verified share must use at least; C(2) or more.
    type: int
    default: 2
  rss_interfaces:
    description: Interfaces whose RSS state is checked before any change (the interfaces of the verified connection
      are always checked).
    type: list
    elements: str
    default: []
  preflight_only:
    description: Only gather and check; report findings and planned changes, change nothing.
    type: bool
    default: false
  wait_timeout_s:
    description: Seconds to wait for the verified share to reach O(min_channels).
    type: int
    default: 60
  wait_delay_s:
    description: Seconds between two checks while waiting.
    type: int
    default: 5
extends_documentation_fragment:
  - hpc.balance.windows.planner
attributes:
  diff_mode:
    description: Returns the server and client switches and the constraints before and after.
  platform:
    platforms: windows
    support: full
    description: Windows Server 2012 and later over WinRM.
seealso:
  - module: hpc.balance.win_nic_team
"""

EXAMPLES = r"""
- name: Enable multichannel and prove that the scratch share uses more than one channel
  hpc.balance.win_smb_multichannel:
    verify_share: \\fs01\scratch
    constraints:
      - server_name: fs01
        interfaces: [Storage]
"""

RETURN = r"""
credential_path:
  description: How the host's logon reaches the file server for O(verify_share) (C(become_runas), C(credssp),
    C(kerberos_delegation)), or that it cannot (C(become_runas_without_password), C(none)).
  returned: always
  type: str
  sample: become_runas
server_interfaces:
  description: C(Get-SmbServerNetworkInterface) records of this host (RSS, RDMA, link speed per interface).
  returned: always
  type: list
  elements: dict
  sample: [{"InterfaceIndex": 21, "FriendlyName": "Storage", "RssCapable": true, "RdmaCapable": false,
            "LinkSpeed": 20000000000, "IpAddress": "10.20.0.11"}]
findings:
  description: Preflight findings; C(refuse) ones stop the run before anything changes.
  returned: always
  type: list
  elements: dict
  sample: [{"severity": "warn", "code": "interface_not_rss_capable",
            "message": "interface 'Storage' is not RSS-capable ..."}]
changes:
  description: The planned change list, in order.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set_client_multichannel", "enable": true}]
applied:
  description: What the apply module ran (or, in check mode, would run).
  returned: when changes were planned
  type: list
  elements: dict
  sample: [{"action": "set_client_multichannel", "command": "Set-SmbClientConfiguration",
            "parameters": {"EnableMultiChannel": true, "Force": true, "Confirm": false, "ErrorAction": "Stop"}}]
verdict:
  description: Channels the verified share uses and over which paths; C(ok) is false below O(min_channels).
  returned: unless preflight_only or check mode
  type: dict
  sample: {"ok": true, "channels": 4,
           "message": "share \\\\fs01\\scratch connects over 4 channels ('Storage' 10.20.0.11 -> 10.20.0.2 x4)",
           "paths": [{"client_interface": "Storage", "client_ip": "10.20.0.11", "server_ip": "10.20.0.2",
                      "current_channels": 4, "max_channels": 4, "client_rss_capable": true,
                      "client_rdma_capable": false, "client_link_speed_bits_per_second": 20000000000}],
           "findings": []}
waited_s:
  description: Seconds spent waiting for the channels.
  returned: unless preflight_only or check mode
  type: float
  sample: 5.0
"""
