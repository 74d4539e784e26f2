"""tokens_per_expert's smoke mode runs under a time limit: a hung smoke test ends the task with the reason."""

from __future__ import annotations

import sys

from ansible_collections.hpc.balance.plugins.modules import tokens_per_expert


def hanging_python(tmp_path, monkeypatch):
    """A Python whose ``-m moe_balance smoke --json`` hangs (as on a GPU held by another process)."""
    package = tmp_path / "moe_balance"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import sys, time\nprint('starting', file=sys.stderr, flush=True)\ntime.sleep(60)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return sys.executable


def test_a_hung_smoke_test_is_stopped_after_timeout_s(run_module, tmp_path, monkeypatch):
    failed, result = run_module(tokens_per_expert, {"python": hanging_python(tmp_path, monkeypatch), "timeout_s": 2})
    assert failed and result["rc"] == 124
    assert result["msg"].startswith(
        f"{sys.executable} -m moe_balance smoke --json did not finish within timeout_s=2 s and was stopped"
    )
    assert result["msg"].endswith("stderr: starting")


def test_timeout_s_must_be_positive(run_module):
    failed, result = run_module(tokens_per_expert, {"python": sys.executable, "timeout_s": 0})
    assert failed and result["msg"] == "timeout_s is 0: give the seconds the smoke test may take, such as 900"
