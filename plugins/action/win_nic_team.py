# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of hpc.balance.win_nic_team: gather -> plan (module_utils._winteam) -> apply -> wait -> verdict.

The Windows host only runs two thin PowerShell modules (win_nic_team_gather, win_nic_team_apply); every decision is
taken here so that it is the same, unit-tested code for every host. A change on the management path runs behind a
rollback task ("commit confirmed"): armed before the change, disarmed once this plugin has reconnected.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import replace
from typing import Any

from ansible.errors import AnsibleError

from ansible_collections.hpc.balance.plugins.module_utils._wincommand import with_commands
from ansible_collections.hpc.balance.plugins.module_utils._winplan import Plan
from ansible_collections.hpc.balance.plugins.module_utils._winteam import desired_summary, plan, summary, verdict
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import (
    DEFAULT_ROLLBACK_TIMEOUT_S,
    IP_SOURCES,
    TeamDesired,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_findings import pcie_report
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    KINDS,
    LACP_TIMERS,
    LOAD_BALANCING_ALGORITHMS,
    TEAMING_MODES,
    HostState,
    parse_host_state,
    vendor_driver_file_patterns,
)
from ansible_collections.hpc.balance.plugins.plugin_utils._win_action import WinPlanAction

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
    "lacp_timer": {"type": "str", "choices": list(LACP_TIMERS.values())},
    "standby_member": {"type": "str"},
    "team_nic_name": {"type": "str"},
    "vlan_id": {"type": "int"},
    "vlan_team_nics": {
        "type": "list",
        "elements": "dict",
        "options": {"vlan_id": {"type": "int", "required": True}, "name": {"type": "str"}},
    },
    "team_nic_ip": {
        "type": "dict",
        "options": {
            "source": {"type": "str", "choices": list(IP_SOURCES), "default": "static"},
            "address": {"type": "str"},
            "prefix_length": {"type": "int"},
            "gateway": {"type": "str"},
            "dns_servers": {"type": "list", "elements": "str", "default": []},
        },
    },
    "rename_from": {"type": "str"},
    "allow_management_os": {"type": "bool"},
    "host_vnics": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "name": {"type": "str", "required": True},
            "vlan_id": {"type": "int", "default": 0},
            "rdma": {"type": "bool"},
        },
    },
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "force": {"type": "bool", "default": False},
    "for_vswitch": {"type": "bool", "default": False},
    "allow_management_change": {"type": "bool", "default": False},
    "rollback_timeout_s": {"type": "int", "default": DEFAULT_ROLLBACK_TIMEOUT_S},
    "preflight_only": {"type": "bool", "default": False},
    "wait_timeout_s": {"type": "int", "default": 180},
    "wait_delay_s": {"type": "int", "default": 5},
}


def _dropped_connection_errors() -> tuple[type[BaseException], ...]:
    """What a WinRM or PSRP call can raise when the change re-binds the NIC that carries the connection.

    ansible-core 2.19's winrm connection plugin raises more than AnsibleConnectionFailure:
    - ``_winrm_connect`` (run by ``reset()`` and by the first call after it) raises a plain
      ``AnsibleError('the connection attempt timed out')`` for an operation timeout;
    - ``_winrm_exec`` turns only ``requests.exceptions.Timeout`` into AnsibleConnectionFailure: a connection reset
      or refused (``requests.exceptions.ConnectionError``, an OSError) escapes as it is;
    - the command clean-up in its ``finally`` re-raises pywinrm's ``WinRMTransportError`` (HTTP status other than
      400), and ``_winrm_run_command`` re-raises ``WSManFaultError`` (a ``WinRMError``).
    AnsibleError covers AnsibleConnectionFailure and the send_input failure; OSError covers every requests error.
    """
    errors: list[type[BaseException]] = [AnsibleError, OSError]
    try:
        from winrm.exceptions import WinRMError, WinRMOperationTimeoutError, WinRMTransportError
    except ImportError:
        pass
    else:
        errors += [WinRMError, WinRMOperationTimeoutError, WinRMTransportError]
    try:
        from pypsrp.exceptions import WinRMError as PsrpError  # psrp: its WinRMTransportError is a WinRMError
    except ImportError:
        pass
    else:
        errors.append(PsrpError)
    return tuple(errors)


DROPPED_CONNECTION_ERRORS = _dropped_connection_errors()

# Indirection so tests can drive the wait loops without sleeping.
_sleep = time.sleep
_monotonic = time.monotonic


def management_addresses_from(task_vars: dict) -> tuple:
    """ansible_host (or the inventory name) when it is an IP address: the address the controller connects to."""
    host = task_vars.get("ansible_host") or task_vars.get("inventory_hostname") or ""
    try:
        return (str(ipaddress.ip_address(str(host))),)
    except ValueError:
        return ()  # a name: the gather's WinRM connection records still give the address in use


class ActionModule(WinPlanAction):
    GATHER_MODULE = GATHER_MODULE
    APPLY_MODULE = APPLY_MODULE
    ARGUMENT_SPEC = ARGUMENT_SPEC
    DESIRED_TYPE = TeamDesired

    def _gather_args(self, desired: TeamDesired, verify: bool) -> dict:
        return {"driver_file_patterns": vendor_driver_file_patterns()}

    def _parse(self, raw: dict) -> HostState:
        return parse_host_state(raw)

    def _desired(self, desired: TeamDesired, task_vars: dict) -> TeamDesired:
        return replace(desired, management_addresses=management_addresses_from(task_vars))

    def _plan(self, desired: TeamDesired, state: HostState) -> Plan:
        return plan(desired, state)

    def _report(self, desired: TeamDesired, state: HostState) -> dict:
        return {"pcie": pcie_report(desired, state) if desired.state == "present" else []}

    def _diff(self, desired: TeamDesired, state: HostState, changes: list[dict]) -> dict:
        return {"before": summary(desired, state), "after": desired_summary(desired, state, changes)}

    def _judge(self, desired: TeamDesired, state: HostState) -> Any:
        return verdict(desired, state)

    def _sleep(self, seconds: float) -> None:
        _sleep(seconds)

    def _monotonic(self) -> float:
        return _monotonic()

    def _apply(self, changes: list[dict], desired: TeamDesired, args: dict, task_vars: dict, result: dict) -> None:
        if changes[0]["action"] != "arm_rollback" or self._task.check_mode:
            super()._apply(changes, desired, args, task_vars, result)
            return
        self._apply_behind_rollback(changes, desired, task_vars, result)

    def _apply_behind_rollback(self, changes: list[dict], desired: TeamDesired, task_vars: dict, result: dict) -> None:
        """Arm + change in one call (the connection may drop in it), then reconnect and disarm within the timeout."""
        arm, disarm = changes[0], changes[-1]
        started = _monotonic()
        try:
            applied = self._execute_module(
                module_name=APPLY_MODULE, module_args={"changes": with_commands(changes[:-1])}, task_vars=task_vars
            )
        except DROPPED_CONNECTION_ERRORS as error:
            # The change may have run: only the reconnect and disarm below tell, so this is not a failure yet.
            applied = {"unreachable": True, "msg": f"{type(error).__name__}: {error}"}
        if applied.get("failed"):
            ran = [step.get("command") for step in applied.get("applied", [])]
            armed = "Register-HpcRollback" in ran
            result.update(
                failed=True,
                applied=applied.get("applied", []),
                rollback={"armed": armed, "disarmed": False, "task_name": arm["task_name"]},
                msg=f"{APPLY_MODULE} failed: {applied.get('msg', 'no message')}; "
                + (
                    f"the rollback task '{arm['task_name']}' is armed and restores the recorded state within "
                    f"{arm['timeout_s']} s (left armed on purpose: the change stopped half-way)"
                    if armed
                    else "the rollback was not armed, and nothing after it ran"
                ),
            )
            return
        result["applied"] = applied.get("applied", [])
        reconnected_s = self._disarm(disarm, arm["timeout_s"], started, task_vars)
        if reconnected_s is None:
            result.update(
                failed=True,
                rollback={"armed": True, "disarmed": False, "task_name": arm["task_name"]},
                msg=f"the controller did not reconnect within rollback_timeout_s={arm['timeout_s']} after the change "
                f"on the management path: the scheduled task '{arm['task_name']}' on the host restores the recorded "
                "team and IP state; if the host stays unreachable, follow the out-of-band procedure in the "
                "win_nic_team role README",
            )
            return
        result["rollback"] = {
            "armed": True,
            "disarmed": True,
            "task_name": arm["task_name"],
            "reconnected_after_s": round(reconnected_s, 1),
        }

    def _disarm(self, disarm: dict, timeout_s: int, started: float, task_vars: dict) -> float | None:
        """Retry the disarm call until it succeeds; None when the rollback fires first (a margin of 20 s)."""
        while _monotonic() - started < timeout_s - 20:
            try:
                self._connection.reset()
                answer = self._execute_module(
                    module_name=APPLY_MODULE, module_args={"changes": with_commands([disarm])}, task_vars=task_vars
                )
                if not answer.get("failed") and not answer.get("unreachable"):
                    return _monotonic() - started
            except DROPPED_CONNECTION_ERRORS:
                pass  # not back yet: try again until the margin before the rollback fires
            _sleep(5)
        return None
