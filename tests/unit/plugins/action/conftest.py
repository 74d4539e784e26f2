"""Drive the win_* action plugins with a scripted stand-in for the Windows host.

Windows cannot run here. The only thing replaced is ActionBase._execute_module (the WinRM round trip to the
PowerShell modules); it returns fixture JSON in the documented shape of the cmdlets' output and records each call.
Everything else (argument validation, planning, check mode, diff, the wait loop) is the real plugin code.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from ansible.playbook.play_context import PlayContext

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "windows"


def load_fixture(name):
    return json.loads((FIXTURES / name).read_text())


class ScriptedHost:
    """Answers module calls from per-module queues; the last answer of a queue repeats."""

    def __init__(self, answers):
        self.answers = {module: list(queue) for module, queue in answers.items()}
        self.calls = []

    def __call__(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        self.calls.append((module_name, copy.deepcopy(module_args)))
        queue = self.answers[module_name]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return copy.deepcopy(answer)

    def modules_called(self):
        return [name for name, _args in self.calls]


class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def windows_fixture():
    """load_fixture as a fixture: the test folders are not packages, so tests cannot import from here."""
    return load_fixture


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def make_action(clock, monkeypatch):
    def build(plugin_module, args, answers, check_mode=False, diff=False, become=False):
        monkeypatch.setattr(plugin_module, "_sleep", clock.sleep)
        monkeypatch.setattr(plugin_module, "_monotonic", clock.monotonic)
        task = MagicMock()
        task.args = args
        task.check_mode = check_mode
        task.diff = diff
        task.async_val = 0
        # become with runas and a password, resolved as the task executor leaves it in the play context: the
        # credential path that avoids the WinRM double hop (test_win_smb_multichannel drives the real resolution).
        play_context = PlayContext()
        if become:
            play_context.become, play_context.become_method, play_context.become_pass = True, "runas", "secret"
        connection = MagicMock()
        connection._shell.tmpdir = None
        connection.become = None
        connection.get_option.side_effect = KeyError  # no connection options: the plugins read the task vars
        action = plugin_module.ActionModule(
            task=task,
            connection=connection,
            play_context=play_context,
            loader=MagicMock(),
            templar=MagicMock(),
            shared_loader_obj=MagicMock(),
        )
        host = ScriptedHost(answers)
        action._execute_module = host
        return action, host

    return build
