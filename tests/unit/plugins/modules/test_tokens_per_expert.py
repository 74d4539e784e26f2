"""tokens_per_expert end to end on files (JSONL with malformed lines, a training log) and on the smoke test, whose
report is replayed from output captured from the real ``python -m moe_balance smoke --json`` (torch takes ~25 s
here, too slow for the unit suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.modules import tokens_per_expert

FIXTURES = Path(__file__).resolve().parents[1] / "module_utils" / "fixtures"
JSONL = str(FIXTURES / "moe_tokens_per_expert.jsonl")
LOG = str(FIXTURES / "moe_train.log")


def warning_texts(result):
    """Warning texts; ansible-core 2.19 returns them as structured events."""
    return [item["event"]["msg"] if isinstance(item, dict) else item for item in result.get("warnings", [])]


def test_jsonl_latest_step_per_layer(run_module):
    failed, result = run_module(tokens_per_expert, {"path": JSONL})
    assert not failed and result["changed"] is False
    assert (result["source"], result["format"], result["window"]) == ("file", "jsonl", "last")
    assert (result["records_read"], result["records_used"], result["malformed_lines"]) == (8, 8, 4)
    assert (result["inconsistent_records"], result["runs"]) == (0, ["demo-run"])
    assert result["balanced"] is False
    assert [layer["tokens_per_expert"] for layer in result["layers"]] == [
        [254, 258, 257, 255, 255, 257, 256, 256], [780, 320, 240, 220, 200, 160, 128, 0]]
    assert result["summary"] == [
        "layer 0: max/mean 1.01, CV 0.005 (excellent), 0 idle of 8 - balanced",
        "layer 1: max/mean 3.05, CV 0.845 (severe), 1 idle of 8 - IMBALANCED",
        "overall: worst max/mean 3.05 (layer 1, limit 2.00), worst CV 0.845 (severe, limit 0.50) - IMBALANCED",
    ]
    assert warning_texts(result) == [
        "4 malformed lines were skipped; the first: line 5: schema is \"moe_balance.tokens_per_expert/0\", expected "
        "'moe_balance.tokens_per_expert/1'"]


def test_all_steps_and_looser_limits(run_module):
    args = {"path": JSONL, "window": "all", "max_over_mean_limit": 2.5, "cv_limit": 0.6}
    _failed, result = run_module(tokens_per_expert, args)
    assert [layer["steps"] for layer in result["layers"]] == [2, 2]
    assert result["layers"][1]["max_over_mean"] == pytest.approx(1170 / 512)
    assert result["balanced"] is True


def test_unknown_run_grades_nothing_and_says_which_runs_exist(run_module):
    _failed, result = run_module(tokens_per_expert, {"path": JSONL, "run": "other"})
    assert (result["layers"], result["balanced"], result["records_used"]) == ([], None, 0)
    assert "no record has run='other'; runs seen: demo-run" in warning_texts(result)


def test_training_log(run_module):
    _failed, result = run_module(tokens_per_expert, {"path": LOG, "num_experts": 4})
    assert (result["format"], result["malformed_lines"], result["ignored_lines"]) == ("log", 1, 2)
    assert [layer["tokens_per_expert"] for layer in result["layers"]] == [
        [4320, 4100, 3980, 4000], [12000, 2100, 2300, 0]]
    assert [layer["balanced"] for layer in result["layers"]] == [True, False]
    assert result["layers"][1]["idle_experts"] == [3]


@pytest.fixture
def smoke_python(tmp_path, monkeypatch):
    """A Python whose ``-m moe_balance smoke --json`` prints the given report and exits with the given code."""

    def make(report, rc=0):
        package = tmp_path / "moe_balance"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text("")
        (package / "report.json").write_text(report if isinstance(report, str) else json.dumps(report))
        (package / "__main__.py").write_text(
            "import pathlib, sys\n"
            "assert sys.argv[1:] == ['smoke', '--json'], sys.argv\n"
            "print(pathlib.Path(__file__).with_name('report.json').read_text())\n"
            f"sys.exit({rc})\n")
        monkeypatch.setenv("PYTHONPATH", str(tmp_path))
        return sys.executable

    return make


def captured_smoke():
    return json.loads((FIXTURES / "moe_smoke.json").read_text())


def test_smoke_records_are_graded(run_module, smoke_python):
    failed, result = run_module(tokens_per_expert, {"python": smoke_python(captured_smoke())})
    assert not failed, result.get("msg")
    assert (result["source"], result["format"], result["records_read"]) == ("smoke", "smoke", 4)
    assert [layer["num_experts"] for layer in result["layers"]] == [64, 64, 64, 64]
    assert result["smoke"]["ok"] is True and result["smoke"]["device"]["device"] == "cpu"
    assert [check["name"] for check in result["smoke"]["checks"]] == [
        "known_answers", "fused_vs_reference", "fractions_sum_to_one", "analytic_gradients", "bias_balancing"]
    assert result["balanced"] is True


def test_failed_smoke_check_fails_the_task_with_its_name(run_module, smoke_python):
    report = captured_smoke()
    report["ok"] = False
    report["checks"][1]["ok"] = False
    failed, result = run_module(tokens_per_expert, {"python": smoke_python(report, rc=1)})
    assert failed and result["msg"] == "moe_balance smoke reported ok=False; failed checks: fused_vs_reference"
    assert len(result["layers"]) == 4  # the records are still graded and returned


def test_smoke_without_json_fails(run_module, smoke_python):
    failed, result = run_module(tokens_per_expert, {"python": smoke_python("Traceback: no module named torch", 1)})
    assert failed and result["msg"] == (
        f"{sys.executable} -m moe_balance smoke --json printed no JSON object (rc 1): Traceback: no module named torch")


@pytest.mark.parametrize(("args", "message"), [
    ({"path": "/nonexistent/stats.jsonl"},
     "path /nonexistent/stats.jsonl does not exist or is not a file; point it at the JSONL stats or the training log"),
    ({"path": JSONL, "python": "/usr/bin/python3"}, "parameters are mutually exclusive: path|python"),
    ({}, "one of the following is required: path, python"),
    ({"path": JSONL, "max_over_mean_limit": 0.5},
     "max_over_mean_limit is 0.5: max/mean is never below 1, give a limit >= 1 such as 2"),
    ({"path": JSONL, "cv_limit": 0}, "cv_limit is 0: give a positive limit such as 0.5"),
    ({"path": LOG, "num_experts": 0}, "num_experts is 0: give the number of experts per layer (>= 1)"),
])
def test_wrong_arguments_are_explained(run_module, args, message):
    failed, result = run_module(tokens_per_expert, args)
    assert failed and result["msg"] == message


def _python_with_moe_balance():
    """This interpreter or the checkout's .venv one, whichever can import moe_balance (torch included)."""
    candidates = [sys.executable, str(Path(__file__).resolve().parents[4] / ".venv" / "bin" / "python")]
    for python in candidates:
        if os.path.exists(python) and subprocess.run([python, "-c", "import moe_balance.smoke"],
                                                     capture_output=True, check=False).returncode == 0:
            return python
    return None


MOE_PYTHON = _python_with_moe_balance()


@pytest.mark.skipif(MOE_PYTHON is None, reason="no Python here has moe_balance and torch installed (make setup)")
def test_real_smoke_records_follow_the_schema(run_module):
    failed, result = run_module(tokens_per_expert, {"python": MOE_PYTHON})
    assert not failed, result.get("msg")
    assert result["smoke"]["ok"] is True
    assert result["records_read"] >= 1
    assert (result["malformed_lines"], result["inconsistent_records"]) == (0, 0)


def test_reporters_import_neither_torch_nor_moe_balance():
    code = ("import sys\n"
            "from ansible_collections.hpc.balance.plugins.modules import tokens_per_expert, ipvs_spread, "
            "iperf3_throughput, audit_report\n"
            "print(sorted(name for name in sys.modules if name.split('.')[0] in ('torch', 'moe_balance', 'numpy')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": os.pathsep.join(sys.path), "PATH": os.environ.get("PATH", "")})
    assert done.stdout.strip() == "[]"
