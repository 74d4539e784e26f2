# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is win_smb_multichannel_apply.ps1 beside this file.

DOCUMENTATION = r"""
---
module: win_smb_multichannel_apply
short_description: Run a given, ordered list of SMB Multichannel changes on a Windows host
version_added: "0.1.0"
description:
  - Runs, in order, the SmbShare cmdlets that make each SMB Multichannel change, with the parameters given, and
    stops at the first failure, reporting the change that failed and the commands already run.
  - The only commands it runs (O(changes[].commands[].command)) are C(New-SmbMultichannelConstraint),
    C(Remove-SmbMultichannelConstraint), C(Set-SmbClientConfiguration), C(Set-SmbServerConfiguration),
    C(Update-SmbMultichannelConnection).
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.windows.apply
attributes:
  platform:
    description: Windows Server 2012 and later (SMB 3).
seealso:
  - module: hpc.balance.win_smb_multichannel
"""

EXAMPLES = r"""
- name: Enable client multichannel and refresh the sessions (normally planned by hpc.balance.win_smb_multichannel)
  hpc.balance.win_smb_multichannel_apply:
    changes:
      - action: set_client_multichannel
        commands:
          - command: Set-SmbClientConfiguration
            parameters:
              EnableMultiChannel: true
              Force: true
      - action: update_connections
        commands:
          - command: Update-SmbMultichannelConnection
"""

RETURN = r"""
applied:
  description: Each command as run (or, in check mode, as it would be run), with the change it belongs to.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "set_client_multichannel", "command": "Set-SmbClientConfiguration",
            "parameters": {"EnableMultiChannel": true, "Force": true, "Confirm": false, "ErrorAction": "Stop"}}]
"""
