# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation shared by the win_* modules of one role: the planners, the gather modules, the apply modules.

A Windows layer is one planner module (controller side) and two thin PowerShell modules, gather and apply. Options,
check mode support and the platform stay in each module's own DOCUMENTATION, where the argument-spec tests read them.
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
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
"""

    # The apply modules: each names the planner that returns the diff.
    APPLY = r"""
attributes:
  check_mode:
    description: Lists the commands it would run and runs none.
  diff_mode:
    support: none
"""
