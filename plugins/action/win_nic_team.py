# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of hpc.balance.win_nic_team: gather -> plan (module_utils._winteam) -> apply -> wait -> verdict.

The Windows host only runs two thin PowerShell modules (win_nic_team_gather, win_nic_team_apply); every decision is
taken here so that it is the same, unit-tested code for every host. A change on the management path runs behind a
rollback task ("commit confirmed"): armed before the change, disarmed once this plugin has reconnected.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ansible.errors import AnsibleError

from ansible_collections.hpc.balance.plugins.module_utils._wincommand import with_commands
from ansible_collections.hpc.balance.plugins.module_utils._winplan import Plan
from ansible_collections.hpc.balance.plugins.module_utils._winrollback import LOG_PATH, ROLLBACK_MAY_HAVE_FIRED
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
    normal_address,
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
            "interface_metric": {"type": "int"},
            "skip_as_source": {"type": "bool"},
            "register_in_dns": {"type": "bool"},
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
    "allow_second_default_gateway": {"type": "bool", "default": False},
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

# pywinrm's read timeout (winrm/protocol.py DEFAULT_READ_TIMEOUT_SEC = 30, operation timeout 20), which ansible-core
# 2.19's winrm plugin keeps unless connection_timeout (read = connection_timeout + 10) or the
# ansible_winrm_read_timeout_sec extra is set; psrp's read_timeout option defaults to 30 too.
DEFAULT_READ_TIMEOUT_S = 30
# Beyond one read timeout, what one disarm attempt also spends: the reconnect and the module's start on the host.
DISARM_SLACK_S = 10

# Indirection so tests can drive the wait loops without sleeping.
_sleep = time.sleep
_monotonic = time.monotonic


# The WinRM ports (winrm and psrp connection plugins: 5986 for https, 5985 for http) and ssh's.
WINRM_PORTS = (5985, 5986)
SSH_PORT = 22


def _option(connection: Any, name: str) -> Any:
    """A connection plugin option as Ansible resolved it for this host, or None where the plugin has none."""
    try:
        return connection.get_option(name)
    except (AttributeError, KeyError, AnsibleError):
        return None


def management_addresses_from(task_vars: dict) -> tuple:
    """ansible_host (or the inventory name) when it is an IPv4 or IPv6 address: the address the controller connects
    to; a name gives none (the gather's connection records still give the address in use)."""
    address = normal_address(task_vars.get("ansible_host") or task_vars.get("inventory_hostname") or "")
    return (address,) if address else ()


def read_timeout_s(connection: Any) -> int:
    """How long one call over the connection may wait for the host, as the connection plugin resolved it."""
    winrm_timeout = _option(connection, "connection_timeout")
    extras = _option(connection, "_extras")
    if isinstance(extras, dict) and extras.get("ansible_winrm_read_timeout_sec") is not None:
        return int(extras["ansible_winrm_read_timeout_sec"])
    if str(getattr(connection, "transport", "") or "").endswith("psrp"):
        return int(_option(connection, "read_timeout") or DEFAULT_READ_TIMEOUT_S)
    if winrm_timeout:
        return int(winrm_timeout) + 10  # winrm.py: read_timeout_sec = connection_timeout + 10
    return DEFAULT_READ_TIMEOUT_S


def connection_ports(connection: Any, task_vars: dict) -> tuple:
    """The TCP port the connection reaches the host on, from the connection plugin's resolved ``port`` option.

    winrm resolves it to its default 5986 when unset; psrp leaves it unset and takes 5985 for protocol http, else
    5986; ssh leaves it unset for ssh's own default, 22. Only where the connection has no port option at all are
    ansible_port or the two WinRM ports used.
    """
    port = _option(connection, "port")
    if port is None:
        transport = str(getattr(connection, "transport", "") or "")
        if transport.endswith("psrp"):
            port = 5985 if _option(connection, "protocol") == "http" else 5986
        elif transport.endswith("ssh"):
            port = SSH_PORT
        else:
            port = task_vars.get("ansible_port")
    return (int(port),) if port is not None else WINRM_PORTS


class ActionModule(WinPlanAction):
    GATHER_MODULE = GATHER_MODULE
    APPLY_MODULE = APPLY_MODULE
    ARGUMENT_SPEC = ARGUMENT_SPEC
    DESIRED_TYPE = TeamDesired

    def _gather_args(self, desired: TeamDesired, verify: bool) -> dict:
        return {
            "driver_file_patterns": vendor_driver_file_patterns(),
            "connection_ports": list(desired.management_ports or WINRM_PORTS),
        }

    def _parse(self, raw: dict) -> HostState:
        return parse_host_state(raw)

    def _desired(self, desired: TeamDesired, task_vars: dict) -> TeamDesired:
        return replace(
            desired,
            management_addresses=management_addresses_from(task_vars),
            management_ports=connection_ports(self._connection, task_vars),
        )

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
        margin_s = read_timeout_s(self._connection) + DISARM_SLACK_S
        if arm["timeout_s"] <= margin_s:
            result.update(
                failed=True,
                msg=f"rollback_timeout_s={arm['timeout_s']} leaves the controller no time to disarm the rollback: one "
                f"disarm attempt over this connection can take {margin_s} s (its read timeout and the reconnect). "
                f"Set rollback_timeout_s well above {margin_s}; nothing was changed",
            )
            return
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
        reconnected_s, fired = self._disarm(disarm, arm["timeout_s"], started, task_vars)
        if fired is not None:
            result.update(
                failed=True,
                rollback={"armed": True, "disarmed": False, "may_have_fired": True, "task_name": arm["task_name"]},
                msg=f"the disarm after the change on the management path found that {fired}: the task "
                f"'{arm['task_name']}' may have restored the recorded team and IP state over the change. Run the task "
                "again to see the host as it is now, and read the rollback log %ProgramData%\\" + LOG_PATH,
            )
            return
        if reconnected_s is None:
            result.update(
                failed=True,
                rollback={"armed": True, "disarmed": False, "may_have_fired": True, "task_name": arm["task_name"]},
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

    def _disarm(self, disarm: dict, timeout_s: int, started: float, task_vars: dict) -> tuple[float | None, str | None]:
        """Retry the disarm until the host answers: (seconds to the disarm, None), or (None, why the rollback may
        have fired) when the host says the task is gone, runs or has run, or (None, None) when no attempt got through.

        An attempt starts only while it can end before the task fires: one read timeout of the connection (as its
        plugin resolved it) plus DISARM_SLACK_S before rollback_timeout_s. A late answer is still read right: the
        host-side check tells a task that has run from one that has not.
        """
        margin_s = read_timeout_s(self._connection) + DISARM_SLACK_S
        cut_off = False  # an attempt dropped after it was sent may have unregistered the task itself
        while _monotonic() - started < timeout_s - margin_s:
            try:
                self._connection.reset()
                answer = self._execute_module(
                    module_name=APPLY_MODULE, module_args={"changes": with_commands([disarm])}, task_vars=task_vars
                )
            except DROPPED_CONNECTION_ERRORS:
                cut_off = True  # not back yet: try again while an attempt can end before the rollback fires
            else:
                message = str(answer.get("msg") or "")
                if answer.get("failed") and ROLLBACK_MAY_HAVE_FIRED in message:
                    why = message.split(f"{ROLLBACK_MAY_HAVE_FIRED}: ", 1)[-1]
                    if cut_off:
                        why += " (an earlier disarm attempt was cut off after it was sent, and may have been the one)"
                    return None, why
                if not answer.get("failed") and not answer.get("unreachable"):
                    return _monotonic() - started, None
            _sleep(5)
        return None, None
