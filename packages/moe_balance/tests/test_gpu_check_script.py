"""benchmarks/gpu_check.py: the dry run end to end, and a step that hangs or dies is recorded while the others run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
STEP_NAMES = [
    "kernel_tests",
    "router",
    "router_at_scale",
    "cold_compile",
    "cross_device",
    "placement",
    "matching_largest",
    "bf16_ties",
    "expert_parallel",
    "int32_boundary",
]

# A script that runs gpu_check with fake steps added to its table: the steps' processes run this same script, so
# they find the fakes too. "hang" also starts a grandchild, which the timeout must kill with it.
FAKE_STEPS = """
import os, subprocess, sys, time
sys.path.insert(0, {benchmarks!r})
import gpu_check

def hang(mode):
    print("hanging on purpose", flush=True)
    sleeper = subprocess.Popen(["sleep", "600"])
    open({pid_file!r}, "w").write(str(sleeper.pid))
    time.sleep(600)

def dies(mode):
    print("dying on purpose", flush=True)
    os._exit(3)

def after(mode):
    return {{"ok": True, "mode_seen": mode}}

gpu_check.STEPS[:0] = [gpu_check.Step("hang", "__main__:hang", 600), gpu_check.Step("dies", "__main__:dies", 60)]
gpu_check.STEPS.append(gpu_check.Step("after", "__main__:after", 60))
sys.exit(gpu_check.main())
"""


def load_benchmark(name: str) -> ModuleType:
    """A module of benchmarks/ by file, its folder on sys.path only while it loads (its siblings are imported as
    gpu_check.py's steps import them)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"benchmarks/{name}.py cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def run_check(script: Path, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(
        [sys.executable, str(script), "--dry-run", "--out", str(out), *args],
        cwd=BENCHMARKS.parent,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return done, json.loads(out.read_text()) if out.exists() else {}


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_dry_run_records_each_chosen_step_ok_under_its_name_with_its_limit(tmp_path):
    # `make gpu-check` runs every step's dry run in make test and fails on any step that is not ok; here the quick
    # steps, whose records say what the dry run stands in for, are read field by field.
    chosen = ["cross_device", "expert_parallel", "int32_boundary"]
    args = [arg for name in chosen for arg in ("--step", name)]
    done, result = run_check(BENCHMARKS / "gpu_check.py", tmp_path / "check.json", "--step-timeout-s", "90", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["ok"] is True and result["mode"] == "dry-run" and result["failed"] == []
    assert list(result["steps"]) == [name for name in STEP_NAMES if name in chosen]
    assert all(step["ok"] is True for step in result["steps"].values())
    assert result["steps"]["expert_parallel"]["timeout_s"] <= 90 and result["steps"]["expert_parallel"]["wall_s"] < 90
    assert result["steps"]["int32_boundary"]["skipped"] == "needs > 8 GiB on a GPU"
    assert result["steps"]["cross_device"]["skipped"].endswith("GPU(s), dry run")
    expert_parallel = result["steps"]["expert_parallel"]
    assert (expert_parallel["backend"], expert_parallel["ranks"]) == ("gloo", 2)
    assert all(case["computed_equals_predicted"] for case in expert_parallel["cases"].values())
    assert set(result["timings_s"]) == {*chosen, "total"}


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    """gpu_check with a step that hangs (limit 3 s), one that dies, and one after them that works."""
    folder = tmp_path_factory.mktemp("fake_steps")
    script = folder / "fake_steps.py"
    pid_file = folder / "sleeper.pid"
    script.write_text(FAKE_STEPS.format(benchmarks=str(BENCHMARKS), pid_file=str(pid_file)))
    args = ("--step", "hang", "--step", "dies", "--step", "after", "--timeout-s", "hang=3")
    done, result = run_check(script, folder / "check.json", *args)
    return done, result, int(pid_file.read_text())


def test_a_hanging_step_is_killed_at_its_limit_with_its_output_and_the_next_steps_run(fake_run):
    done, result, _ = fake_run
    assert done.returncode == 1, done.stdout + done.stderr
    assert list(result["steps"]) == ["hang", "dies", "after"]  # --step picks these; the real steps did not run
    hang = result["steps"]["hang"]
    assert hang["ok"] is False and hang["timed_out"] is True and hang["timeout_s"] == 3
    assert hang["error"] == "ran past its 3 s limit and was killed"
    assert "hanging on purpose" in hang["output_tail"] and hang["wall_s"] < 30
    assert result["steps"]["after"]["ok"] is True and result["steps"]["after"]["mode_seen"] == "dry-run"
    assert result["failed"] == ["hang", "dies"] and result["ok"] is False


def test_a_timed_out_step_takes_the_processes_it_started_with_it(fake_run):
    _, _, sleeper_pid = fake_run
    assert not alive(sleeper_pid)


def test_a_step_that_dies_is_recorded_with_its_exit_code_and_output(fake_run):
    _, result, _ = fake_run
    dies = result["steps"]["dies"]
    assert dies["ok"] is False and "timed_out" not in dies
    assert dies["error"] == "its process ended with exit code 3 before writing a result"
    assert "dying on purpose" in dies["output_tail"]


def test_an_unknown_step_is_refused_with_the_names_there_are(tmp_path):
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_check.py"), "--step", "no_such_step", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=False,
    )
    assert done.returncode == 2
    assert "--step no_such_step: no such step; the steps are kernel_tests, router," in done.stderr


def test_without_pytest_the_kernel_tests_are_skipped_not_failed(monkeypatch):
    steps = load_benchmark("gpu_check_tests")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else find_spec(name, *a))
    assert steps.kernel_tests("dry-run") == {"ok": True, "skipped": "pytest not installed"}


def test_with_one_gpu_the_expert_parallel_step_is_skipped_not_failed(monkeypatch):
    step = load_benchmark("gpu_check_expert_parallel")
    monkeypatch.setattr(step.torch.cuda, "device_count", lambda: 1)
    assert step.expert_parallel("gpu") == {"ok": True, "skipped": "1 GPU"}


def test_a_kernel_test_file_is_left_out_by_the_third_party_modules_it_cannot_import(tmp_path):
    test_file = tmp_path / "test_x.py"
    test_file.write_text("import os\nimport torch\nfrom no_such_module.sub import thing\nfrom . import local\n")
    assert load_benchmark("gpu_check_tests").missing_modules(test_file) == ["no_such_module"]
