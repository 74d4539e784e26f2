# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of hpc.balance.win_smb_multichannel: gather -> plan (module_utils._winsmb) -> apply -> verify.

The Windows host only runs win_smb_multichannel_gather and win_smb_multichannel_apply; the decisions and the
channel verdict are made here. The share is opened only to verify, and only with a credential path that avoids the
WinRM double hop (become with runas, CredSSP, or Kerberos delegation), which this plugin reads from the task.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._winplan import Plan
from ansible_collections.hpc.balance.plugins.module_utils._winsmb import (
    ChannelVerdict,
    SmbDesired,
    SmbState,
    channel_verdict,
    credential_path,
    parse_smb_state,
    plan,
)
from ansible_collections.hpc.balance.plugins.plugin_utils._win_action import WinPlanAction

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
    "exclusive_constraints": {"type": "bool", "default": False},
    "verify_share": {"type": "str"},
    "min_channels": {"type": "int", "default": 2},
    "settle_s": {"type": "int", "default": 10},
    "rss_interfaces": {"type": "list", "elements": "str", "default": []},
    "preflight_only": {"type": "bool", "default": False},
    "wait_timeout_s": {"type": "int", "default": 60},
    "wait_delay_s": {"type": "int", "default": 5},
}

# Indirection so tests can drive the wait loop without sleeping.
_sleep = time.sleep
_monotonic = time.monotonic


def _switches(state: SmbState) -> dict:
    return {
        "server_multichannel": state.server_multichannel,
        "client_multichannel": state.client_multichannel,
        "constraints": {server: list(aliases) for server, aliases in sorted(state.constraints.items())},
    }


class ActionModule(WinPlanAction):
    GATHER_MODULE = GATHER_MODULE
    APPLY_MODULE = APPLY_MODULE
    ARGUMENT_SPEC = ARGUMENT_SPEC
    DESIRED_TYPE = SmbDesired

    def _gather_args(self, desired: SmbDesired, verify: bool) -> dict:
        # The share is opened only once the configuration is right: preflight gathers without it.
        if not verify:
            return {}
        return {"share": desired.verify_share, "min_channels": desired.min_channels, "settle_s": desired.settle_s}

    def _parse(self, raw: dict) -> SmbState:
        return parse_smb_state(raw)

    def _desired(self, desired: SmbDesired, task_vars: dict) -> SmbDesired:
        become = bool(getattr(self._task, "become", False))
        method = getattr(self._task, "become_method", None)
        return replace(desired, credential_path=credential_path(become, method, task_vars))

    def _plan(self, desired: SmbDesired, state: SmbState) -> Plan:
        return plan(desired, state)

    def _report(self, desired: SmbDesired, state: SmbState) -> dict:
        return {"credential_path": desired.credential_path, "server_interfaces": list(state.server_interfaces)}

    def _diff(self, desired: SmbDesired, state: SmbState, changes: list[dict]) -> dict:
        after = {
            "server_multichannel": desired.server_enabled,
            "client_multichannel": desired.client_enabled,
            "constraints": dict(_switches(state)["constraints"]),
        }
        for change in changes:
            if change["action"] == "remove_constraint":
                left = [a for a in after["constraints"].get(change["server_name"], []) if a not in change["interfaces"]]
                after["constraints"][change["server_name"]] = left
            elif change["action"] == "add_constraint":
                current = after["constraints"].setdefault(change["server_name"], [])
                current += [a for a in change["interfaces"] if a not in current]
        after["constraints"] = {k: sorted(v) for k, v in sorted(after["constraints"].items()) if v}
        return {"before": _switches(state), "after": after}

    def _needs_wait(self, desired: SmbDesired, changed: bool) -> bool:
        return bool(desired.verify_share)

    def _judge(self, desired: SmbDesired, state: SmbState) -> ChannelVerdict:
        return channel_verdict(desired, state)

    def _wait(self, desired: SmbDesired, state: Any, changed: bool, args: dict, task_vars: dict) -> tuple:
        if not desired.verify_share:
            return channel_verdict(desired, None), 0.0
        return super()._wait(desired, state, changed, args, task_vars)

    def _sleep(self, seconds: float) -> None:
        _sleep(seconds)

    def _monotonic(self) -> float:
        return _monotonic()
