# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of hpc.balance.win_nic_team: gather -> plan (module_utils._winteam) -> apply -> wait -> verdict.

The Windows host only runs two thin PowerShell modules (win_nic_team_gather, win_nic_team_apply); every decision is
taken here so that it is the same, unit-tested code for every host.
"""

from __future__ import annotations

import time

from ansible_collections.hpc.balance.plugins.module_utils._winteam import (
    KINDS,
    LOAD_BALANCING_ALGORITHMS,
    TEAMING_MODES,
    TeamDesired,
    desired_summary,
    parse_host_state,
    pcie_report,
    plan,
    summary,
    vendor_driver_file_patterns,
    verdict,
)
from ansible_collections.hpc.balance.plugins.plugin_utils._win_action import WinPlanAction, poll_verdict

GATHER_MODULE = "hpc.balance.win_nic_team_gather"
APPLY_MODULE = "hpc.balance.win_nic_team_apply"

ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "members": {"type": "list", "elements": "str", "default": []},
    "kind": {"type": "str", "choices": list(KINDS), "default": "lbfo"},
    "teaming_mode": {"type": "str", "choices": list(TEAMING_MODES.values()), "default": "SwitchIndependent"},
    "load_balancing_algorithm": {
        "type": "str",
        "choices": list(LOAD_BALANCING_ALGORITHMS.values()),
        "default": "Dynamic",
    },
    "standby_member": {"type": "str"},
    "team_nic_name": {"type": "str"},
    "vlan_id": {"type": "int"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "force": {"type": "bool", "default": False},
    "for_vswitch": {"type": "bool", "default": False},
    "preflight_only": {"type": "bool", "default": False},
    "wait_timeout_s": {"type": "int", "default": 180},
    "wait_delay_s": {"type": "int", "default": 5},
}

# Indirection so tests can drive the wait loop without sleeping.
_sleep = time.sleep
_monotonic = time.monotonic


class ActionModule(WinPlanAction):
    def _gather(self, task_vars):
        args = {"driver_file_patterns": vendor_driver_file_patterns()}
        return self._gather_with(GATHER_MODULE, parse_host_state, args, task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args, desired = self._checked_task(ARGUMENT_SPEC, TeamDesired)

        state = self._gather(task_vars)
        team_plan = plan(desired, state)
        before = summary(desired, state)
        result.update(
            changed=False,
            findings=[finding.as_dict() for finding in team_plan.findings],
            changes=team_plan.changes,
            pcie=pcie_report(desired, state) if desired.state == "present" else [],
        )
        warnings = [finding.message for finding in team_plan.findings if finding.severity == "warn"]
        if warnings:
            result["warnings"] = warnings
        if team_plan.refused:
            result.update(failed=True, msg=f"preflight refused the change: {team_plan.refusal_message()}")
            return result
        if args["preflight_only"]:
            result["msg"] = f"preflight passed: {len(team_plan.changes)} change(s) planned"
            return result

        if team_plan.changes:
            applied = self._run_module(APPLY_MODULE, {"changes": team_plan.changes}, task_vars)
            result["applied"] = applied.get("applied", [])
            result["changed"] = True
            if self._task.diff:
                result["diff"] = {"before": before, "after": desired_summary(desired, before)}
        if self._task.check_mode:
            result["msg"] = f"check mode: {len(team_plan.changes)} change(s) would be made"
            return result

        outcome, waited_s = self._wait(desired, state, bool(team_plan.changes), args, task_vars)
        result["verdict"] = outcome.as_dict()
        result["waited_s"] = round(waited_s, 1)
        result["msg"] = outcome.message
        if not outcome.ok:
            result["failed"] = True
            if waited_s:
                result["msg"] = (
                    f"{outcome.message} (after waiting {waited_s:.0f} s of wait_timeout_s={args['wait_timeout_s']})"
                )
        return result

    def _wait(self, desired, state, changed, args, task_vars):
        """After a change, re-gather until the verdict is ok or wait_timeout_s has passed; unchanged: judge once."""
        if not changed:
            return verdict(desired, state), 0.0
        return poll_verdict(lambda: verdict(desired, self._gather(task_vars)), args, _sleep, _monotonic)
