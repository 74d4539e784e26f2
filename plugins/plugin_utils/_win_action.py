# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The steps every win_* action plugin takes: gather, plan, refuse, apply, wait (or verify), in one base class.

A plugin names its modules, its argument spec and its desired-state type, and fills in the hooks (_plan, _diff,
_judge, ...). Everything else (a failed module call, an unreadable record, a refused plan, check mode, the bounded
wait) reads the same for every Windows layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.hpc.balance.plugins.module_utils._wincommand import with_commands


class WinPlanAction(ActionBase):
    """ActionBase for a controller-side plan run against thin PowerShell gather/apply modules."""

    TRANSFERS_FILES = False
    _requires_connection = True
    _supports_check_mode = True
    _supports_async = False

    GATHER_MODULE = ""
    APPLY_MODULE = ""
    ARGUMENT_SPEC: dict = {}
    DESIRED_TYPE: Any = None

    # ------------------------------------------------------------------------------------------------ hooks
    def _gather_args(self, desired: Any, verify: bool) -> dict:
        return {}

    def _parse(self, raw: dict) -> Any:
        raise NotImplementedError

    def _desired(self, desired: Any, task_vars: dict) -> Any:
        """The desired state completed from task vars (e.g. the management address); as given by default."""
        return desired

    def _plan(self, desired: Any, state: Any) -> Any:
        raise NotImplementedError

    def _report(self, desired: Any, state: Any) -> dict:
        """Extra keys for the result (e.g. the PCIe report)."""
        return {}

    def _diff(self, desired: Any, state: Any, changes: list[dict]) -> dict:
        raise NotImplementedError

    def _judge(self, desired: Any, state: Any) -> Any:
        """The verdict (with .ok, .message, .as_dict()) on a freshly gathered state."""
        raise NotImplementedError

    def _needs_wait(self, desired: Any, changed: bool) -> bool:
        return changed

    # ------------------------------------------------------------------------------------------------ steps
    def _run_module(self, name: str, args: dict, task_vars: dict) -> dict:
        result = self._execute_module(module_name=name, module_args=args, task_vars=task_vars)
        if result.get("failed"):
            raise AnsibleActionFail("{} failed: {}".format(name, result.get("msg", "no message")), result=result)
        return result

    def _gather(self, desired: Any, task_vars: dict, verify: bool = False) -> Any:
        """Run the gather module and read its record; an unreadable record fails the task."""
        raw = self._run_module(self.GATHER_MODULE, self._gather_args(desired, verify), task_vars)
        try:
            return self._parse(raw)
        except (KeyError, TypeError, ValueError) as error:
            raise AnsibleActionFail(
                f"{self.GATHER_MODULE} returned a record this plugin cannot read: {error}"
            ) from error

    def _checked_task(self) -> tuple[dict, Any]:
        """Validate the task's arguments; return them with DESIRED_TYPE.from_args(args) and sane wait settings."""
        args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)[1]
        try:
            desired = self.DESIRED_TYPE.from_args(args)
        except ValueError as error:
            raise AnsibleActionFail(str(error)) from error
        if args["wait_timeout_s"] < 0 or args["wait_delay_s"] < 1:
            raise AnsibleActionFail(
                f"wait_timeout_s is {args['wait_timeout_s']} and wait_delay_s is {args['wait_delay_s']}: "
                "use a timeout >= 0 and a delay >= 1 second"
            )
        return args, desired

    def _apply(self, changes: list[dict], desired: Any, args: dict, task_vars: dict, result: dict) -> None:
        applied = self._run_module(self.APPLY_MODULE, {"changes": with_commands(changes)}, task_vars)
        result["applied"] = applied.get("applied", [])

    def run(self, tmp: Any = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args, desired = self._checked_task()
        desired = self._desired(desired, task_vars)

        state = self._gather(desired, task_vars)
        the_plan = self._plan(desired, state)
        result.update(
            changed=False,
            findings=[finding.as_dict() for finding in the_plan.findings],
            changes=the_plan.changes,
            **self._report(desired, state),
        )
        warnings = [finding.message for finding in the_plan.findings if finding.severity == "warn"]
        if warnings:
            result["warnings"] = warnings
        if the_plan.refused:
            result.update(failed=True, msg=f"preflight refused the change: {the_plan.refusal_message()}")
            return result
        if args["preflight_only"]:
            result["msg"] = f"preflight passed: {len(the_plan.changes)} change(s) planned"
            return result

        if the_plan.changes:
            self._apply(the_plan.changes, desired, args, task_vars, result)
            result["changed"] = True
            if self._task.diff:
                result["diff"] = self._diff(desired, state, the_plan.changes)
            if result.get("failed"):
                return result
        if self._task.check_mode:
            result["msg"] = f"check mode: {len(the_plan.changes)} change(s) would be made"
            return result

        outcome, waited_s = self._wait(desired, state, bool(the_plan.changes), args, task_vars)
        more = [
            f.message for f in getattr(outcome, "findings", []) if f.severity == "warn" and f.message not in warnings
        ]
        if warnings + more:
            result["warnings"] = warnings + more
        result.update(verdict=outcome.as_dict(), waited_s=round(waited_s, 1), msg=outcome.message)
        if not outcome.ok:
            result["failed"] = True
            if waited_s:
                result["msg"] = (
                    f"{outcome.message} (after waiting {waited_s:.0f} s of wait_timeout_s={args['wait_timeout_s']})"
                )
        return result

    def _wait(self, desired: Any, state: Any, changed: bool, args: dict, task_vars: dict) -> tuple[Any, float]:
        """Re-gather until the verdict is ok or wait_timeout_s has passed; when nothing waits, judge once."""
        if not self._needs_wait(desired, changed):
            return self._judge(desired, state), 0.0
        return poll_verdict(
            lambda: self._judge(desired, self._gather(desired, task_vars, verify=True)),
            args,
            self._sleep,
            self._monotonic,
        )

    def _sleep(self, seconds: float) -> None:
        raise NotImplementedError  # each plugin calls its module's _sleep, which its tests replace

    def _monotonic(self) -> float:
        raise NotImplementedError


def poll_verdict(
    check: Callable[[], Any], args: dict, sleep: Callable[[float], None], monotonic: Callable[[], float]
) -> tuple[Any, float]:
    """Call check() until its verdict is ok or the next try would pass wait_timeout_s; return (verdict, elapsed_s).

    sleep and monotonic are passed in by the plugin so that its tests can drive the loop without sleeping.
    """
    started = monotonic()
    while True:
        outcome = check()
        elapsed = monotonic() - started
        if outcome.ok or elapsed + args["wait_delay_s"] > args["wait_timeout_s"]:
            return outcome, elapsed
        sleep(args["wait_delay_s"])
