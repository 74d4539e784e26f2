"""hpc.balance.win_nic_team action plugin: preflight, minimal apply, check mode, diff and the bounded wait."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest
import requests.exceptions
import winrm.exceptions as winrm_exceptions
import yaml
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError

from ansible_collections.hpc.balance.plugins.action import win_nic_team as plugin
from ansible_collections.hpc.balance.plugins.modules import win_nic_team as docs

GATHER = plugin.GATHER_MODULE
APPLY = plugin.APPLY_MODULE


@pytest.fixture
def gathered(windows_fixture):
    def load(name, **team_changes):
        data = windows_fixture(f"nic_team_gather_{name}.json")
        if team_changes:
            data["teams"][0].update(team_changes)
        return data

    return load


def applied(changes):
    return {"changed": True, "applied": [{"action": change["action"]} for change in changes]}


def args(**extra):
    return dict({"name": "Storage", "members": ["NIC1", "NIC2"]}, **extra)


def test_already_in_state_gathers_once_and_changes_nothing(gathered, make_action):
    action, host = make_action(plugin, args(), {GATHER: [gathered("team_up")]})
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER]
    assert (result["changed"], result.get("failed", False), result["changes"]) == (False, False, [])
    assert result["verdict"]["ok"] and result["waited_s"] == 0.0
    assert host.calls[0][1] == {
        "driver_file_patterns": ["basp*.sys", "cpqteam*.sys", "ians*.sys", "qlasp*.sys"],
        "connection_ports": [5985, 5986],  # the stand-in connection has no port option
    }


def test_mode_drift_applies_set_team_then_waits_for_lacp(gathered, make_action, clock):
    negotiating = gathered("lacp_negotiating")
    lacp_up = gathered("team_up", TeamingMode=2)
    action, host = make_action(
        plugin,
        args(teaming_mode="Lacp", wait_delay_s=10),
        {GATHER: [gathered("team_up"), negotiating, negotiating, lacp_up], APPLY: [applied([{"action": "set_team"}])]},
    )
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER, APPLY, GATHER, GATHER, GATHER]
    assert host.calls[1][1] == {
        "changes": [
            {
                "action": "set_team",
                "commands": [
                    {
                        "command": "Set-NetLbfoTeam",
                        "parameters": {
                            "Name": "Storage",
                            "TeamingMode": "Lacp",
                            "Confirm": False,
                            "ErrorAction": "Stop",
                        },
                    }
                ],
            }
        ]
    }
    assert result["changed"] and not result.get("failed")
    assert clock.sleeps == [10, 10]
    assert result["waited_s"] == 20.0
    assert result["msg"] == "team 'Storage' is Up: 'NIC2' Active, 'NIC1' Active"


def test_team_that_stays_degraded_fails_naming_the_member_after_the_bounded_wait(gathered, make_action, clock):
    action, host = make_action(
        plugin,
        args(members=["NIC1", "NIC2", "NIC3"], wait_timeout_s=30, wait_delay_s=10),
        {GATHER: [gathered("team_up"), gathered("team_degraded")], APPLY: [applied([{"action": "add_member"}])]},
    )
    result = action.run(task_vars={})
    assert result["failed"]
    assert result["msg"].startswith("team 'Storage' has members 'NIC1', 'NIC2', expected 'NIC1', 'NIC2', 'NIC3'")
    assert "after waiting 30 s of wait_timeout_s=30" in result["msg"]
    assert clock.sleeps == [10, 10, 10]


def test_degraded_team_without_changes_fails_at_once_naming_the_member(gathered, make_action, clock):
    action, host = make_action(plugin, args(), {GATHER: [gathered("team_degraded")]})
    result = action.run(task_vars={})
    assert result["failed"] and clock.sleeps == []
    assert result["msg"] == "team 'Storage' is Degraded: member 'NIC2' is Failed (PhysicalMediaDisconnected)"
    assert any("member 'NIC2' has no link" in warning for warning in result["warnings"])


def test_refused_preflight_never_calls_apply(gathered, make_action):
    action, host = make_action(plugin, args(members=["NIC1", "MGMT"]), {GATHER: [gathered("no_team")]})
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER]
    assert result["failed"] and result["changes"] == []
    assert result["msg"].startswith("preflight refused the change: members have mixed link speeds")


def test_hyperv_host_is_refused_with_the_set_offer(gathered, make_action):
    action, host = make_action(plugin, args(), {GATHER: [gathered("hyperv_vswitch_on_team")]})
    result = action.run(task_vars={})
    assert result["failed"] and "kind: set" in result["msg"]
    assert host.modules_called() == [GATHER]


def test_check_mode_runs_apply_in_check_mode_and_returns_a_diff(gathered, make_action):
    action, host = make_action(
        plugin,
        args(teaming_mode="Lacp"),
        {GATHER: [gathered("team_up")], APPLY: [applied([{"action": "set_team"}])]},
        check_mode=True,
        diff=True,
    )
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER, APPLY]  # ActionBase passes check mode on to the module
    assert result["changed"] and "verdict" not in result
    assert (result["diff"]["before"]["teaming_mode"], result["diff"]["after"]["teaming_mode"]) == (
        "SwitchIndependent",
        "Lacp",
    )


def test_preflight_only_plans_without_applying(gathered, make_action):
    action, host = make_action(
        plugin, args(members=["NIC1", "NIC2", "NIC3"], preflight_only=True), {GATHER: [gathered("team_up")]}
    )
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER]
    assert result["msg"] == "preflight passed: 1 change(s) planned"
    assert not result["changed"]


def test_inconsistent_arguments_fail_before_touching_the_host(gathered, make_action):
    action, host = make_action(plugin, args(standby_member="NIC7"), {GATHER: [gathered("team_up")]})
    with pytest.raises(AnsibleActionFail, match="standby_member 'NIC7' is not in members"):
        action.run(task_vars={})
    assert host.calls == []


def test_failed_gather_is_reported_with_its_message(gathered, make_action):
    action, _calls = make_action(plugin, args(), {GATHER: [{"failed": True, "msg": "Get-NetAdapter : Access denied"}]})
    with pytest.raises(AnsibleActionFail, match="win_nic_team_gather failed: Get-NetAdapter : Access denied"):
        action.run(task_vars={})


def test_argument_spec_matches_the_documentation():
    options = yaml.safe_load(docs.DOCUMENTATION)["options"]
    assert set(options) == set(plugin.ARGUMENT_SPEC)
    for name, spec in plugin.ARGUMENT_SPEC.items():
        documented = options[name]
        assert documented["type"] == spec["type"], name
        assert documented.get("required", False) == spec.get("required", False), name
        assert documented.get("default") == spec.get("default"), name
        assert documented.get("choices") == spec.get("choices"), name
        assert documented.get("elements") == spec.get("elements"), name


# ---------------------------------------------------------------------------------------------------- management path
class DroppingHost:
    """The scripted host, except that the apply call with the change drops the connection, as a re-bound NIC does,
    and the first `down` disarm calls find the host unreachable."""

    def __init__(self, scripted, down=0):
        self.scripted = scripted
        self.down = down
        self.calls = scripted.calls

    def __call__(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        actions = [change["action"] for change in (module_args or {}).get("changes", [])]
        if module_name == APPLY and actions and actions[0] == "arm_rollback":
            self.scripted.calls.append((module_name, module_args))
            raise AnsibleConnectionFailure("winrm: connection reset")
        if module_name == APPLY and actions == ["disarm_rollback"] and self.down:
            self.down -= 1
            self.scripted.calls.append((module_name, module_args))
            return {"unreachable": True, "msg": "timed out"}
        return self.scripted(module_name, module_args, task_vars)

    def modules_called(self):
        return self.scripted.modules_called()


def test_teaming_the_management_nic_is_refused_by_default_naming_nic_address_and_variable(gathered, make_action):
    action, host = make_action(plugin, args(), {GATHER: [gathered("winrm_on_member")]})
    result = action.run(task_vars={"ansible_host": "192.168.10.21"})
    assert host.modules_called() == [GATHER]
    assert result["failed"] and result["changes"] == []
    assert "NIC 'NIC1' carries the management address 192.168.10.21" in result["msg"]
    assert "win_nic_team_allow_management_change" in result["msg"]


def test_opted_in_the_change_is_armed_applied_and_disarmed_after_reconnecting(gathered, make_action, clock):
    after = gathered("team_up")
    action, scripted = make_action(
        plugin,
        args(allow_management_change=True, team_nic_ip={"source": "members"}),
        {GATHER: [gathered("winrm_on_member"), after], APPLY: [{"changed": True, "applied": []}]},
    )
    action._execute_module = DroppingHost(scripted, down=2)
    result = action.run(task_vars={})
    applied = [[c["action"] for c in call[1]["changes"]] for call in scripted.calls if call[0] == APPLY]
    assert applied == [
        ["arm_rollback", "new_team", "wait_adapter", "set_ip"],
        ["disarm_rollback"],
        ["disarm_rollback"],
        ["disarm_rollback"],
    ]
    arm = scripted.calls[1][1]["changes"][0]["commands"][0]
    assert arm["command"] == "Register-HpcRollback" and arm["parameters"]["TimeoutSeconds"] == 300
    assert result["rollback"] == {
        "armed": True,
        "disarmed": True,
        "task_name": "hpc.balance rollback lbfo Storage",
        "reconnected_after_s": 10.0,
    }
    assert result["changed"] and not result.get("failed")


def test_no_reconnect_before_the_rollback_fires_fails_and_points_to_the_out_of_band_procedure(
    gathered, make_action, clock
):
    action, scripted = make_action(
        plugin,
        args(allow_management_change=True, rollback_timeout_s=60),
        {GATHER: [gathered("winrm_on_member")], APPLY: [{"changed": True, "applied": []}]},
    )
    action._execute_module = DroppingHost(scripted, down=1000)
    result = action.run(task_vars={})
    assert result["failed"] and result["rollback"]["disarmed"] is False
    assert "did not reconnect within rollback_timeout_s=60" in result["msg"]
    assert "out-of-band procedure" in result["msg"]
    assert GATHER not in scripted.modules_called()[1:]  # no verdict is claimed


def test_check_mode_lists_the_rollback_without_arming_it_for_real(gathered, make_action):
    action, host = make_action(
        plugin,
        args(allow_management_change=True),
        {GATHER: [gathered("winrm_on_member")], APPLY: [{"changed": True, "applied": []}]},
        check_mode=True,
    )
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER, APPLY]
    assert [c["action"] for c in host.calls[1][1]["changes"]][0] == "arm_rollback"
    assert result["changed"] and "verdict" not in result


def test_a_change_that_fails_half_way_leaves_the_rollback_armed(gathered, make_action):
    failure = {
        "failed": True,
        "msg": "New-NetLbfoTeam failed for change 'new_team': access denied",
        "applied": [{"action": "arm_rollback", "command": "Register-HpcRollback"}],
    }
    action, host = make_action(
        plugin, args(allow_management_change=True), {GATHER: [gathered("winrm_on_member")], APPLY: [failure]}
    )
    result = action.run(task_vars={})
    assert result["failed"] and result["rollback"] == {
        "armed": True,
        "disarmed": False,
        "task_name": "hpc.balance rollback lbfo Storage",
    }
    assert "is armed and restores the recorded state within 300 s" in result["msg"]
    assert [c["action"] for c in host.calls[-1][1]["changes"]][0] == "arm_rollback"  # no disarm was sent


# What ansible-core 2.19.14's winrm connection plugin (ansible/plugins/connection/winrm.py) really raises when the
# NIC under the connection re-binds; each is raised from the connection below, as the plugin raises it.
WINRM_DROPS = {
    # _winrm_connect, run by reset() and by the first call after it: an operation timeout becomes a plain
    # AnsibleError, not AnsibleConnectionFailure (line 449).
    "connect_timed_out": lambda: AnsibleError("the connection attempt timed out"),
    # _winrm_exec converts only requests.exceptions.Timeout (lines 656-657); a reset escapes as it is.
    "connection_reset": lambda: requests.exceptions.ConnectionError(
        "('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))"
    ),
    # the cleanup_command in _winrm_exec's finally re-raises a WinRMTransportError whose code is not 400
    # (lines 666-670); pywinrm raises it for an HTTP error status (winrm/transport.py).
    "transport_error": lambda: winrm_exceptions.WinRMTransportError("http", 503, "Service Unavailable"),
    # _winrm_run_command re-raises a WSManFaultError other than the quota fault (lines 688-690).
    "wsman_fault": lambda: winrm_exceptions.WSManFaultError(500, "the shell was not found", "", "Internal Error"),
    # _winrm_exec: a requests Timeout becomes AnsibleConnectionFailure (line 657).
    "read_timeout": lambda: AnsibleConnectionFailure("winrm connection error: Read timed out"),
}


class DroppingConnection:
    """A stand-in for the winrm connection: the call that runs the change, and the first `down` reconnects, raise."""

    def __init__(self, make_error, down):
        self.make_error = make_error
        self.down = down
        self.resets = 0
        self._shell = MagicMock()
        self._shell.tmpdir = None

    def exec_command(self, cmd, in_data=None, sudoable=True):
        raise self.make_error()

    def reset(self):
        self.resets += 1
        if self.resets <= self.down:
            raise self.make_error()


class HostBehindConnection:
    """The scripted host, reached through the connection: the apply call with the change goes through
    connection.exec_command, as ActionBase._execute_module's does."""

    def __init__(self, scripted, connection):
        self.scripted = scripted
        self.connection = connection

    def __call__(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        actions = [change["action"] for change in (module_args or {}).get("changes", [])]
        if module_name == APPLY and actions and actions[0] == "arm_rollback":
            self.scripted.calls.append((module_name, module_args))
            self.connection.exec_command("powershell -NoProfile -EncodedCommand ...")
        return self.scripted(module_name, module_args, task_vars)


@pytest.mark.parametrize("drop", sorted(WINRM_DROPS))
def test_a_dropped_winrm_connection_is_waited_for_and_the_rollback_disarmed(gathered, make_action, clock, drop):
    action, scripted = make_action(
        plugin,
        args(allow_management_change=True, team_nic_ip={"source": "members"}),
        {GATHER: [gathered("winrm_on_member"), gathered("team_up")], APPLY: [{"changed": True, "applied": []}]},
    )
    action._connection = DroppingConnection(WINRM_DROPS[drop], down=2)
    action._execute_module = HostBehindConnection(scripted, action._connection)
    result = action.run(task_vars={})
    applied = [[c["action"] for c in call[1]["changes"]] for call in scripted.calls if call[0] == APPLY]
    assert applied == [["arm_rollback", "new_team", "wait_adapter", "set_ip"], ["disarm_rollback"]]
    assert action._connection.resets == 3  # two failed reconnects, then the one that disarmed
    assert result["rollback"]["disarmed"] is True and not result.get("failed")


# ---------------------------------------------------------------------------------------------------- fails closed
@pytest.mark.parametrize(
    ("transport", "options", "ports"),
    [
        # winrm.py: port defaults to 5986 and is what the plugin connects to (ansible_port / ansible_winrm_port).
        ("winrm", {"port": 15986}, [15986]),
        # psrp.py: port unset with protocol http means 5985.
        ("psrp", {"port": None, "protocol": "http"}, [5985]),
        # ssh.py: port unset leaves ssh's own default, 22.
        ("ssh", {"port": None}, [22]),
    ],
)
def test_the_gather_reads_the_connections_on_the_port_the_connection_plugin_resolved(
    gathered, make_action, transport, options, ports
):
    """Get-NetTCPConnection -LocalPort (learn.microsoft.com/powershell/module/nettcpip/get-nettcpconnection): the
    established connections on the port Ansible really uses, not on 5985/5986 whatever the connection is."""
    action, host = make_action(plugin, args(), {GATHER: [gathered("team_up")]})
    action._connection.transport = transport
    action._connection.get_option.side_effect = lambda name: options[name]
    action.run(task_vars={})
    assert host.calls[0][1]["connection_ports"] == ports


def test_a_change_over_a_connection_no_interface_carries_is_refused_before_anything_runs(gathered, make_action):
    over_ssh = gathered("no_team")
    over_ssh["winrm_connections"] = []  # nothing established on port 22 that an interface carries
    action, host = make_action(plugin, args(members=["NIC3", "NIC4"]), {GATHER: [over_ssh]})
    action._connection.transport = "ssh"
    action._connection.get_option.side_effect = lambda name: {"port": None}[name]
    result = action.run(task_vars={"ansible_host": "winhost.example"})
    assert host.modules_called() == [GATHER]
    assert result["failed"] and result["changes"] == []
    assert result["findings"][-1]["code"] == "management_unknown"
    assert "connections on port 22" in result["msg"]


# ---------------------------------------------------------------------------------------------------- the disarm
# Unregister-HpcRollback's errors, as Invoke-ChangeList reports them: the task is gone (it unregisters itself at its
# end), runs, or has run (Get-ScheduledTaskInfo LastTaskResult other than SCHED_S_TASK_HAS_NOT_RUN).
FIRED = {
    "gone": "the task hpc.balance rollback lbfo Storage is not registered; it ran and unregistered itself, "
    "or was removed",
    "running": "the task hpc.balance rollback lbfo Storage is Running",
    "ran": "the task hpc.balance rollback lbfo Storage is Disabled, last run 2026-12-05T18:56:01.0000000+00:00 "
    "with result 0x00000000",
}


@pytest.mark.parametrize("case", sorted(FIRED))
def test_a_disarm_that_finds_the_rollback_fired_fails_at_once_saying_it_may_have_fired(gathered, make_action, case):
    """Get-ScheduledTask State and Get-ScheduledTaskInfo LastRunTime/LastTaskResult
    (learn.microsoft.com/powershell/module/scheduledtasks/get-scheduledtaskinfo) tell a task that ran from one that
    did not: the disarm reports it instead of calling it disarmed, and is not retried."""
    failed = {
        "failed": True,
        "msg": "Unregister-HpcRollback failed for change 'disarm_rollback': "
        f"the rollback may have fired: {FIRED[case]}",
    }
    action, scripted = make_action(
        plugin,
        args(allow_management_change=True, team_nic_ip={"source": "members"}),
        {GATHER: [gathered("winrm_on_member")], APPLY: [{"changed": True, "applied": []}, failed]},
    )
    result = action.run(task_vars={})
    assert list(scripted.modules_called()) == [GATHER, APPLY, APPLY]
    assert result["failed"] and result["rollback"] == {
        "armed": True,
        "disarmed": False,
        "may_have_fired": True,
        "task_name": "hpc.balance rollback lbfo Storage",
    }
    assert f"found that {FIRED[case]}: the task 'hpc.balance rollback lbfo Storage' may have restored" in result["msg"]
    assert "verdict" not in result


class SlowDroppingHost(DroppingHost):
    """Every disarm attempt hangs for one read timeout and then drops, as a call to an unreachable host does."""

    def __init__(self, scripted, clock, hang_s):
        super().__init__(scripted)
        self.clock, self.hang_s, self.started = clock, hang_s, []

    def __call__(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        actions = [change["action"] for change in (module_args or {}).get("changes", [])]
        if module_name == APPLY and actions == ["disarm_rollback"]:
            self.started.append(self.clock.now)
            self.clock.now += self.hang_s
            raise AnsibleConnectionFailure("winrm connection error: Read timed out")
        return super().__call__(module_name, module_args, task_vars, **kwargs)


@pytest.mark.parametrize(
    ("options", "read_timeout_s", "rollback_timeout_s"),
    [
        ({}, 30, 100),  # pywinrm's DEFAULT_READ_TIMEOUT_SEC, kept by ansible-core 2.19.14's winrm.py
        ({"connection_timeout": 60}, 70, 120),  # winrm.py: read_timeout_sec = connection_timeout + 10
        ({"_extras": {"ansible_winrm_read_timeout_sec": 45}}, 45, 90),  # an ansible_winrm_* extra, passed to pywinrm
    ],
)
def test_no_disarm_attempt_starts_unless_one_read_timeout_ends_before_the_rollback_fires(
    gathered, make_action, clock, options, read_timeout_s, rollback_timeout_s
):
    """A disarm call to an unreachable host waits one read timeout before it fails; one started later than that
    before the task fires ends after it (a fixed 20 s margin is shorter than the default 30 s)."""
    action, scripted = make_action(
        plugin,
        args(allow_management_change=True, rollback_timeout_s=rollback_timeout_s),
        {GATHER: [gathered("winrm_on_member")], APPLY: [{"changed": True, "applied": []}]},
    )
    action._connection.get_option.side_effect = lambda name: options[name]
    host = SlowDroppingHost(scripted, clock, read_timeout_s)
    action._execute_module = host
    started = clock.now
    result = action.run(task_vars={})
    assert result["failed"] and f"did not reconnect within rollback_timeout_s={rollback_timeout_s}" in result["msg"]
    assert host.started, "at least one disarm attempt"
    assert all(at - started + read_timeout_s < rollback_timeout_s for at in host.started)


def test_a_rollback_timeout_shorter_than_one_disarm_attempt_is_refused_before_arming(gathered, make_action):
    action, scripted = make_action(
        plugin,
        args(allow_management_change=True, rollback_timeout_s=60),
        {GATHER: [gathered("winrm_on_member")], APPLY: [{"changed": True, "applied": []}]},
    )
    action._connection.get_option.side_effect = lambda name: {"connection_timeout": 60}[name]
    result = action.run(task_vars={})
    assert scripted.modules_called() == [GATHER]
    assert result["failed"] and result["msg"].startswith("rollback_timeout_s=60 leaves the controller no time")
