"""read_commands with real programs: each command's outcome in the shape ansible.builtin.command registers, a missing
program as rc 127 (as a shell reports it), a timeout as rc 124, never a module failure."""

from __future__ import annotations

from ansible_collections.hpc.balance.plugins.modules import read_commands


def test_each_command_registers_like_the_command_module(run_module):
    failed, result = run_module(read_commands, {"commands": {
        "two_lines": ["printf", "a\\nb\\n"], "fails": ["false"], "missing_path": ["test", "-e", "/nonexistent/x"]}})
    assert not failed, result
    assert result["changed"] is False
    assert result["reads"]["two_lines"] == {"cmd": ["printf", "a\\nb\\n"], "rc": 0, "stdout": "a\nb",
                                            "stdout_lines": ["a", "b"], "stderr": ""}
    assert result["reads"]["fails"]["rc"] == 1
    assert result["reads"]["missing_path"]["rc"] == 1


def test_a_program_that_is_not_installed_is_rc_127(run_module):
    failed, result = run_module(read_commands, {"commands": {"nft": ["hpc-balance-no-such-program", "list"]}})
    assert not failed
    assert result["reads"]["nft"]["rc"] == 127
    assert "command not found" in result["reads"]["nft"]["stderr"]


def test_a_command_past_its_time_is_rc_124(run_module):
    failed, result = run_module(read_commands, {"commands": {"slow": ["sleep", "5"]}, "timeout_s": 0.2})
    assert not failed
    assert result["reads"]["slow"]["rc"] == 124


def test_it_runs_in_check_mode_too(run_module):
    failed, result = run_module(read_commands, {"commands": {"echo": ["echo", "hi"]}, "_ansible_check_mode": True})
    assert not failed and result["reads"]["echo"]["stdout"] == "hi"


def test_an_empty_or_non_list_command_is_refused(run_module):
    failed, result = run_module(read_commands, {"commands": {"empty": [], "text": "pidof keepalived"}})
    assert failed
    assert result["msg"].endswith("not so: empty, text")
