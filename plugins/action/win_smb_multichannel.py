# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of hpc.balance.win_smb_multichannel: gather -> plan (module_utils._winsmb) -> apply -> verify.

The Windows host only runs win_smb_multichannel_gather and win_smb_multichannel_apply; the decisions and the
channel verdict are made here.
"""

from __future__ import annotations

import time

from ansible_collections.hpc.balance.plugins.module_utils._winsmb import (
    SmbDesired,
    channel_verdict,
    parse_smb_state,
    plan,
)
from ansible_collections.hpc.balance.plugins.plugin_utils._win_action import WinPlanAction, poll_verdict

GATHER_MODULE = "hpc.balance.win_smb_multichannel_gather"
APPLY_MODULE = "hpc.balance.win_smb_multichannel_apply"

ARGUMENT_SPEC = {
    "server_enabled": {"type": "bool", "default": True},
    "client_enabled": {"type": "bool", "default": True},
    "constraints": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "server_name": {"type": "str", "required": True},
            "interfaces": {"type": "list", "elements": "str", "required": True},
        },
    },
    "verify_share": {"type": "str"},
    "min_channels": {"type": "int", "default": 2},
    "rss_interfaces": {"type": "list", "elements": "str", "default": []},
    "preflight_only": {"type": "bool", "default": False},
    "wait_timeout_s": {"type": "int", "default": 60},
    "wait_delay_s": {"type": "int", "default": 5},
}

# Indirection so tests can drive the wait loop without sleeping.
_sleep = time.sleep
_monotonic = time.monotonic


def _switches(state):
    return {
        "server_multichannel": state.server_multichannel,
        "client_multichannel": state.client_multichannel,
        "constraints": {server: list(aliases) for server, aliases in sorted(state.constraints.items())},
    }


class ActionModule(WinPlanAction):
    def _gather(self, share, task_vars):
        args = {"share": share} if share else {}
        return self._gather_with(GATHER_MODULE, parse_smb_state, args, task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args, desired = self._checked_task(ARGUMENT_SPEC, SmbDesired)

        # The share is opened only once the configuration is right: preflight gathers without it.
        state = self._gather(None, task_vars)
        smb_plan = plan(desired, state)
        result.update(
            changed=False,
            findings=[finding.as_dict() for finding in smb_plan.findings],
            changes=smb_plan.changes,
        )
        warnings = [finding.message for finding in smb_plan.findings if finding.severity == "warn"]
        if smb_plan.refused:
            result.update(failed=True, msg=f"preflight refused the change: {smb_plan.refusal_message()}")
            if warnings:
                result["warnings"] = warnings
            return result
        if args["preflight_only"]:
            result["msg"] = f"preflight passed: {len(smb_plan.changes)} change(s) planned"
            if warnings:
                result["warnings"] = warnings
            return result

        if smb_plan.changes:
            applied = self._run_module(APPLY_MODULE, {"changes": smb_plan.changes}, task_vars)
            result["applied"] = applied.get("applied", [])
            result["changed"] = True
            if self._task.diff:
                after = {
                    "server_multichannel": desired.server_enabled,
                    "client_multichannel": desired.client_enabled,
                    "constraints": dict(_switches(state)["constraints"]),
                }
                for server, interfaces in desired.constraints:
                    for name in list(after["constraints"]):
                        if name.lower() == server.lower():
                            del after["constraints"][name]
                    after["constraints"][server] = sorted(interfaces)
                result["diff"] = {"before": _switches(state), "after": after}
        if self._task.check_mode:
            result["msg"] = f"check mode: {len(smb_plan.changes)} change(s) would be made"
            if warnings:
                result["warnings"] = warnings
            return result

        outcome, waited_s = self._verify(desired, args, task_vars)
        warnings += [f.message for f in outcome.findings if f.severity == "warn" and f.message not in warnings]
        if warnings:
            result["warnings"] = warnings
        result.update(verdict=outcome.as_dict(), waited_s=round(waited_s, 1), msg=outcome.message)
        if not outcome.ok:
            result["failed"] = True
        return result

    def _verify(self, desired, args, task_vars):
        """Open verify_share and re-check until it uses min_channels or wait_timeout_s has passed."""
        if not desired.verify_share:
            return channel_verdict(desired, None), 0.0

        def check():
            return channel_verdict(desired, self._gather(desired.verify_share, task_vars))

        return poll_verdict(check, args, _sleep, _monotonic)
