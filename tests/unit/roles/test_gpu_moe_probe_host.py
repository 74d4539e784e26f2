"""gpu_moe's venv decision (roles/gpu_moe/files/probe_host.py): keep, reinstall only moe_balance, or build anew.

A venv is bound to the Python version that created it, so an interpreter upgrade must build a new one; a CPU build of
torch (local label +cpu, which satisfies torch==2.13.0 for pip) must be replaced on a GPU host; a moe_balance bump
alone must not re-copy the 2.8 GiB CUDA stack; a build must not start without the disk it needs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import venv as stdlib_venv
from pathlib import Path
from types import SimpleNamespace

import pytest

FILES = Path(__file__).resolve().parents[3] / "roles" / "gpu_moe" / "files"
SPEC = importlib.util.spec_from_file_location("gpu_moe_probe_host", FILES / "probe_host.py")
probe_host = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe_host)

WANTS = ["torch==2.13.0", "triton==3.7.1", "numpy==2.4.6", "moe_balance==0.1.0"]
KEY = probe_host.venv_key("3.11.7", "torch==2.13.0 triton==3.7.1 numpy==2.4.6 wheelhouse 13.0")
WANTED = f"/opt/moe_balance/venvs/{KEY}"


def venv(python_version="3.11.7", torch="2.13.0", moe="0.1.0", resolved=WANTED + ".20261201090000", exists=True):
    return {
        "path": "/opt/moe_balance/venv",
        "exists": exists,
        "python_exists": exists,
        "resolved": resolved if exists else None,
        "python_version": python_version if exists else None,
        "packages": {"torch": torch, "triton": "3.7.1", "numpy": "2.4.6", "moe_balance": moe},
    }


def test_the_key_names_the_python_version_and_changes_with_the_stack():
    assert KEY.startswith("py3.11-") and len(KEY) == len("py3.11-") + 12
    assert probe_host.venv_key("3.12.3", "same") != probe_host.venv_key("3.11.7", "same")
    assert probe_host.venv_key("3.11.7", "a") != probe_host.venv_key("3.11.7", "b")


@pytest.mark.parametrize(
    ("current", "python_version", "gpu", "wheel_current", "action", "reason"),
    [
        (venv(), "3.11.7", True, True, "keep", None),
        (venv(python_version="3.11.2"), "3.11.7", True, True, "keep", None),
        (venv(moe="0.0.9"), "3.11.7", True, False, "refresh_wheel", None),
        (venv(), "3.11.7", True, False, "refresh_wheel", None),
        (venv(exists=False), "3.11.7", True, True, "build", "there is no venv yet"),
        (
            venv(),
            "3.12.3",
            True,
            True,
            "build",
            "the venv runs Python 3.11.7 and the interpreter is now 3.12.3: a venv is bound to its interpreter's "
            "version, so a new one is built",
        ),
        (
            venv(torch="2.13.0+cpu"),
            "3.11.7",
            True,
            True,
            "build",
            "torch 2.13.0+cpu is a CPU build and this host has a GPU: replaced by the CUDA build",
        ),
        (venv(torch="2.12.0"), "3.11.7", True, True, "build", "torch 2.12.0 is installed, 2.13.0 is wanted"),
        (
            venv(resolved="/opt/moe_balance/venvs/py3.11-000000000000.20261130120000"),
            "3.11.7",
            True,
            True,
            "build",
            "the venv in use (/opt/moe_balance/venvs/py3.11-000000000000.20261130120000) is not one for this stack "
            f"({WANTED}.*)",
        ),
    ],
    ids=[
        "same-stack-kept",
        "patch-release-of-python-kept",
        "moe-balance-bump-reinstalls-only-the-wheel",
        "moe-balance-new-bytes-reinstalls-only-the-wheel",
        "no-venv-built",
        "python-change-rebuilds",
        "cpu-torch-on-gpu-host-replaced",
        "pin-change-rebuilds",
        "other-stack-rebuilds",
    ],
)
def test_venv_action(current, python_version, gpu, wheel_current, action, reason):
    wanted = WANTED if python_version.startswith("3.11") else "/opt/moe_balance/venvs/py3.12-x"
    got, reasons = probe_host.venv_action(current, wanted, python_version, WANTS, gpu, wheel_current, "0.1.0")
    assert got == action
    assert reasons == ([] if reason is None else [reason])


def test_a_cpu_torch_is_kept_in_cpu_mode():
    assert probe_host.venv_action(venv(torch="2.13.0+cpu"), WANTED, "3.11.7", WANTS, False, True, "0.1.0")[0] == "keep"


def fake_disk(free_mib_by_device, device_by_path):
    def stat(path):
        return SimpleNamespace(f_bavail=free_mib_by_device[device_by_path(path)] * 256, f_frsize=4096)

    return {"stat": stat, "device_of": device_by_path}


def test_needs_on_one_filesystem_add_up_and_refuse_when_short(tmp_path):
    venvs, stage = str(tmp_path / "venvs"), str(tmp_path / "stage")
    disk = fake_disk({1: 8000}, lambda path: 1)
    [entry] = probe_host.disk_check([(venvs, 5120), (stage, 2760)], **disk)
    assert entry == {"paths": [venvs, stage], "need_mib": 5632 + 3036, "free_mib": 8000, "ok": False}


def test_needs_on_two_filesystems_are_checked_apart(tmp_path):
    (tmp_path / "big").mkdir()
    venvs, stage = str(tmp_path / "big" / "venvs"), str(tmp_path / "stage")
    disk = fake_disk({1: 6000, 2: 4000}, lambda path: 1 if "big" in path else 2)
    entries = probe_host.disk_check([(venvs, 5120), (stage, 2760)], **disk)
    assert [(e["need_mib"], e["free_mib"], e["ok"]) for e in entries] == [(5632, 6000, True), (3036, 4000, True)]


def test_a_missing_folder_is_measured_on_its_nearest_existing_parent(tmp_path):
    seen = []
    probe_host.disk_check(
        [(str(tmp_path / "a" / "b" / "c"), 1)],
        stat=lambda path: seen.append(path) or os.statvfs(path),
        device_of=lambda path: 1,
    )
    assert seen == [str(tmp_path)]


def test_the_jit_toolchain_names_the_compiler_and_the_header():
    toolchain = probe_host.jit_toolchain()
    assert toolchain["python_h"].endswith("Python.h") and set(toolchain) == {"cc", "python_h", "python_h_exists"}


def test_a_venvs_interpreter_says_so_and_names_its_base(tmp_path):
    """Run for real: the probe under a venv's python (made with the stdlib venv, no pip) and under its base python."""
    stdlib_venv.EnvBuilder(with_pip=False).create(tmp_path / "v")
    probe = Path(__file__).resolve().parents[3] / "roles" / "gpu_moe" / "files" / "probe_host.py"
    args = ["--venv", str(tmp_path / "none"), "--venvs-dir", str(tmp_path / "venvs"), "--stage-dir", str(tmp_path)]
    args += ["--stack-key", "k", "--marker", "m.json", "--wheel-sha256", "0" * 64, "--wheel-version", "0.1.0"]
    seen = {}
    for name, python in (
        ("venv", tmp_path / "v" / "bin" / "python"),
        ("base", Path(sys.base_prefix) / "bin" / "python3"),
    ):
        done = subprocess.run([str(python), str(probe), *args], capture_output=True, text=True, check=True, timeout=60)
        seen[name] = json.loads(done.stdout)["python"]
    assert seen["venv"]["in_venv"] is True and seen["venv"]["base_prefix"] == sys.base_prefix
    assert seen["base"]["in_venv"] is False
