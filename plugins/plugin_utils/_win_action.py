# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plumbing shared by the win_* action plugins: run a host module, read its record, check the task, poll a verdict.

Each plugin keeps its own plan and verdict; what is here is the part that is the same for every Windows layer, so
that a failed module call, an unreadable record or a bad wait setting reads the same for all of them.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class WinPlanAction(ActionBase):
    """ActionBase for a controller-side plan run against thin PowerShell gather/apply modules."""

    TRANSFERS_FILES = False
    _requires_connection = True
    _supports_check_mode = True
    _supports_async = False

    def _run_module(self, name, args, task_vars):
        result = self._execute_module(module_name=name, module_args=args, task_vars=task_vars)
        if result.get("failed"):
            raise AnsibleActionFail("{} failed: {}".format(name, result.get("msg", "no message")), result=result)
        return result

    def _gather_with(self, gather_module, parse, args, task_vars):
        """Run gather_module and read its record with parse; an unreadable record fails the task."""
        raw = self._run_module(gather_module, args, task_vars)
        try:
            return parse(raw)
        except (KeyError, TypeError, ValueError) as error:
            raise AnsibleActionFail(f"{gather_module} returned a record this plugin cannot read: {error}") from error

    def _checked_task(self, argument_spec, desired_type):
        """Validate the task's arguments; return them with desired_type.from_args(args) and sane wait settings."""
        args = self.validate_argument_spec(argument_spec=argument_spec)[1]
        try:
            desired = desired_type.from_args(args)
        except ValueError as error:
            raise AnsibleActionFail(str(error)) from error
        if args["wait_timeout_s"] < 0 or args["wait_delay_s"] < 1:
            raise AnsibleActionFail(
                f"wait_timeout_s is {args['wait_timeout_s']} and wait_delay_s is {args['wait_delay_s']}: "
                "use a timeout >= 0 and a delay >= 1 second"
            )
        return args, desired


def poll_verdict(check, args, sleep, monotonic):
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
