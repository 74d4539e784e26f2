# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the module is win_smb_multichannel_apply.ps1 beside this file.

DOCUMENTATION = r"""
---
module: win_smb_multichannel_apply
short_description: Run a given, ordered list of SMB Multichannel changes on a Windows host
version_added: "0.1.0"
description:
  - Runs one Smb cmdlet per change, in order, and stops at the first failure, reporting the change that failed and
    those already applied.
  - The list is computed on the controller by M(hpc.balance.win_smb_multichannel); use that module rather than this.
author:
  - hpc.balance maintainers (@hpc-balance)
options:
  changes:
    description: The changes to run, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      action:
        description:
          - C(set_server_multichannel) C(Set-SmbServerConfiguration -EnableMultiChannel), C(set_client_multichannel)
            C(Set-SmbClientConfiguration -EnableMultiChannel), C(add_constraint) C(New-SmbMultichannelConstraint),
            C(remove_constraint) C(Remove-SmbMultichannelConstraint).
        type: str
        required: true
        choices: [set_server_multichannel, set_client_multichannel, add_constraint, remove_constraint]
      enable:
        description: Multichannel on or off.
        type: bool
      server_name:
        description: SMB server of a constraint.
        type: str
      interfaces:
        description: Interface aliases of a constraint.
        type: list
        elements: str
extends_documentation_fragment:
  - hpc.balance.windows.apply
attributes:
  check_mode:
    support: full
  diff_mode:
    description: M(hpc.balance.win_smb_multichannel) returns the diff.
  platform:
    platforms: windows
    support: full
    description: Windows Server 2012 and later.
seealso:
  - module: hpc.balance.win_smb_multichannel
"""

EXAMPLES = r"""
- name: Enable client multichannel (normally planned by hpc.balance.win_smb_multichannel)
  hpc.balance.win_smb_multichannel_apply:
    changes:
      - action: set_client_multichannel
        enable: true
"""

RETURN = r"""
applied:
  description: Each change as run (or, in check mode, as it would be run).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "add_constraint", "command": "New-SmbMultichannelConstraint",
            "parameters": {"ServerName": "fs01", "InterfaceAlias": ["Storage"], "Force": true}}]
"""
