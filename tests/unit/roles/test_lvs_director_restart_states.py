"""The rolling restart reads each VRRP instance's state from keepalived's own data dump, and goes on to the next
director only when every instance of the one just restarted is BACKUP or MASTER (a backup in FAULT would leave the
master's VIPs without a taker).

The dumps under fixtures/keepalived_data were written by keepalived 2.2.7 (Debian 12's package, the lab's guests) on
the signal `keepalived --signum=DATA` names: master.data and backup.data from the two directors of the lvs-uml
scenario, fault.data from the backup with a `track_interface` that was down. The awk program and the wait loop run as
the role ships them, on those files.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
from lvs_role_files import ROLES, load_yaml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "keepalived_data"
VARS = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")
WAIT = "Wait until every VRRP instance here is BACKUP or MASTER, never FAULT, before the next director goes"

pytestmark = pytest.mark.skipif(shutil.which("awk") is None or shutil.which("bash") is None,
                                reason="needs awk and bash")


def _states_awk() -> str:
    """The awk program of lvs_director_vrrp_states, as the role runs it."""
    (program,) = re.findall(r"awk '([^']*)'", VARS["lvs_director_vrrp_states"])
    return program


def _states(dump: Path) -> list[str]:
    result = subprocess.run(["awk", _states_awk(), str(dump)], capture_output=True, text=True, check=True, timeout=30)
    return result.stdout.splitlines()


@pytest.mark.parametrize(("dump", "expected"), [
    ("master.data", ["VI_LVS_UML MASTER"]),
    ("backup.data", ["VI_LVS_UML BACKUP"]),
    ("fault.data", ["VI_LVS_UML FAULT"]),
])
def test_each_instance_state_is_read_from_keepalived_s_data_dump(dump, expected):
    # The interfaces' own "State = UP, RUNNING" lines later in the dump are not taken for an instance's state.
    assert _states(FIXTURES / dump) == expected


def _run_wait(dump: Path, instances: list[str]) -> subprocess.CompletedProcess:
    """The wait task's script, rendered as Ansible would, with the dump read from a recorded file."""
    (task,) = [t for t in load_yaml(ROLES / "lvs_director" / "tasks" / "restart_one.yml") if t["name"] == WAIT]
    host = {"lvs_director_resolved": {"vrrp_instances": [{"name": name} for name in instances]}}
    script = jinja2.Environment().from_string(task["ansible.builtin.shell"]).render(
        lvs_director_restart_host="dir2", hostvars={"dir2": host}, lvs_director_vip_wait_s=0.5,
        lvs_director_poll_s=0.1, lvs_director_vrrp_states=f"awk '{_states_awk()}' {dump}")
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("dump", ["backup.data", "master.data"])
def test_the_roll_goes_on_once_the_restarted_director_is_backup_or_master(dump):
    result = _run_wait(FIXTURES / dump, ["VI_LVS_UML"])
    assert result.returncode == 0, result.stderr


def test_the_roll_stops_when_the_restarted_director_came_back_in_fault():
    result = _run_wait(FIXTURES / "fault.data", ["VI_LVS_UML"])
    assert result.returncode == 1
    assert "its VRRP instances are VI_LVS_UML FAULT" in result.stderr
    assert "the rolling restart stops before the next director" in result.stderr


def test_the_roll_stops_when_an_instance_of_the_config_is_missing_from_the_dump():
    result = _run_wait(FIXTURES / "backup.data", ["VI_LVS_UML", "VI_LVS_UML6"])
    assert result.returncode == 1


def test_the_roll_stops_when_keepalived_writes_no_dump(tmp_path):
    result = _run_wait(tmp_path / "absent.data", ["VI_LVS_UML"])
    assert result.returncode == 1
    assert "unknown, no data dump" in result.stderr
