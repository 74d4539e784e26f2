# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation shared by the win_* modules of one role: the planners, the gather modules, the apply modules.

A Windows layer is one planner module (controller side) and two thin PowerShell modules, gather and apply. Each
module's description, and the gather modules' options, stay in its own DOCUMENTATION.

The two apply modules take the same option, changes, and differ only in the cmdlets it allows. Ansible merges a
fragment's options into a module's by top-level name only (a module's own `changes` would replace the whole
`changes` below), so the allowed cmdlets are not documented as choices here: each apply module lists them in its
description, and tests/ps1 compares that list with the choices of its .ps1 argument spec.
"""

from __future__ import annotations


class ModuleDocFragment:
    # The planner modules (win_nic_team, win_smb_multichannel): each describes its own diff.
    PLANNER = r"""
attributes:
  check_mode:
    support: full
    description: Gathers and plans, then runs the apply module in check mode, which lists the commands it would run.
  diff_mode:
    support: full
notes:
  - Windows cannot run where this collection is tested. The decision logic is unit-tested on JSON in the documented
    shape of the cmdlets' output (each fixture cites its Learn page), the effect of each apply step is modelled in
    Python after the cmdlets' documentation and the plans are proven idempotent against that model, and the
    PowerShell modules are parse-checked only. Nothing has run on a real Windows host yet.
"""

    # The gather modules: read-only; each describes its own check mode.
    GATHER = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
  platform:
    platforms: windows
    support: full
    description: Windows Server 2012 and later.
"""

    # The apply modules: each lists the cmdlets it allows in its description, and names the planner that sends them
    # (See Also) and its platform.
    APPLY = r"""
options:
  changes:
    description:
      - The changes to run, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      action:
        description: The planned change this step makes, as the planner names it (for the record).
        type: str
        required: true
      commands:
        description: The commands that make the change, run in order.
        type: list
        elements: dict
        required: true
        suboptions:
          command:
            description: Cmdlet (or collection function) to run, one of those the module's description lists; the
              module fails on any other before it runs anything.
            type: str
            required: true
          parameters:
            description: Its parameters, splatted (a switch is C(true)). A command that changes state carries
              C(ErrorAction=Stop) and, where the cmdlet takes it, C(Confirm=false) itself.
            type: dict
            default: {}
attributes:
  check_mode:
    support: full
    description: Lists the commands it would run and runs none.
  diff_mode:
    support: none
    description: The planner that sends the changes (See Also) returns the diff.
  platform:
    platforms: windows
    support: full
notes:
  - The changes and their commands are computed and rendered on the controller by the planner (See Also), in
    module_utils C(_wincommand), where each change's cmdlets and parameters are unit-tested; use that module rather
    than this one.
"""
