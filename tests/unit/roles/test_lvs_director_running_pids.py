"""Issue 28, defect 19: the lvs_director role asks whether *its* keepalived runs through keepalived's own pid files
(keepalived 2.2's pidfile.h: /run/keepalived.pid, /run/vrrp.pid, /run/checkers.pid) and the process name behind each
(/proc/PID/comm), never through a host-wide `pidof keepalived`, which also counts keepalived running in another
network namespace or container of the host.

The shell snippet runs as the role ships it (vars/main.yml, lvs_director_running_pids), with the three pid files
moved into a temporary folder; the processes are real, started under the name keepalived."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from lvs_role_files import ROLES, load_yaml

VARS = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")
PID_FILES = ("/run/keepalived.pid", "/run/vrrp.pid", "/run/checkers.pid")

pytestmark = pytest.mark.skipif(shutil.which("sleep") is None, reason="needs sleep")


def _snippet(folder: Path) -> str:
    text = VARS["lvs_director_running_pids"].replace("{{ lvs_director_pid_file }}", PID_FILES[0])
    for path in PID_FILES:
        text = text.replace(path, str(folder / Path(path).name))
    return text


def _start(folder: Path, name: str) -> subprocess.Popen:
    """A real process whose name (comm) is NAME: a copy of sleep under that name."""
    program = folder / name
    if not program.exists():
        shutil.copy(shutil.which("sleep"), program)
    return subprocess.Popen([str(program), "60"])


def _run(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", _snippet(folder)], capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def processes():
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_the_pid_files_it_reads_are_keepalived_s_own():
    text = VARS["lvs_director_running_pids"]
    assert "pidof" not in text
    assert VARS["lvs_director_pid_file"] == PID_FILES[0]
    assert all(path in text for path in PID_FILES[1:])


def test_the_keepalived_behind_its_pid_files_counts(tmp_path, processes):
    parent, vrrp = _start(tmp_path, "keepalived"), _start(tmp_path, "keepalived")
    processes += [parent, vrrp]
    (tmp_path / "keepalived.pid").write_text(f"{parent.pid}\n")
    (tmp_path / "vrrp.pid").write_text(f"{vrrp.pid}\n")
    result = _run(tmp_path)
    assert result.returncode == 0
    assert result.stdout.split() == [str(parent.pid), str(vrrp.pid)]


def test_a_keepalived_without_its_pid_files_does_not_count(tmp_path, processes):
    # Another namespace's or container's keepalived: `pidof keepalived` would see it, the role does not.
    processes.append(_start(tmp_path, "keepalived"))
    result = _run(tmp_path)
    assert result.returncode == 1
    assert result.stdout.strip() == ""


def test_a_stale_pid_file_naming_another_program_does_not_count(tmp_path, processes):
    other = _start(tmp_path, "nginx")
    processes.append(other)
    (tmp_path / "keepalived.pid").write_text(f"{other.pid}\n")
    assert _run(tmp_path).returncode == 1


def test_no_task_of_the_role_asks_pidof():
    role = ROLES / "lvs_director"
    files = [*sorted((role / "tasks").glob("*.yml")), role / "handlers" / "main.yml"]
    uses = [f"{path.name}: {line.strip()}" for path in files for line in path.read_text().splitlines()
            if re.search(r"\bpidof\b", line) and not line.strip().startswith("#")]
    assert uses == []
