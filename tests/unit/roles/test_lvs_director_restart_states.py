"""The rolling restart reads each VRRP instance's state from keepalived's own data dump, and goes on to the next
director only when every instance of the one just restarted is BACKUP or MASTER (a backup in FAULT would leave the
master's VIPs without a taker).

The dumps under fixtures/keepalived_data were written by keepalived 2.2.7 (Debian 12's package, the lab's guests) on
the signal `keepalived --signum=DATA` names: master.data and backup.data from the two directors of the lvs-uml
scenario, fault.data from the backup with a `track_interface` that was down. The awk program and the wait loop run as
the role ships them, on those files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import jinja2.nativetypes
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


# The step that gives a restarted director its own priorities back once its IPVS table is loaded. ipvsadm stands in
# through PATH (the kernel's table is a file of the services it holds); the service spelling is ipvsadm(8)'s:
# -t/-u/--sctp-service, ADDRESS:PORT, an IPv6 address in brackets.
TAKE_BACK = "Once this director's checker has loaded the IPVS table, give it its own priorities back (a reload)"
SERVICES = [{"protocol": "TCP", "address": "198.18.0.120", "port": 80},
            {"protocol": "UDP", "address": "fd00:db8::120", "port": 53},
            {"protocol": "SCTP", "address": "198.18.0.121", "port": 9000}]
SPELLED = ["-L -n -t 198.18.0.120:80", "-L -n -u [fd00:db8::120]:53", "-L -n --sctp-service 198.18.0.121:9000"]


def _restart_block_step(name: str) -> tuple[dict, dict]:
    """The step NAME of the restart block, and the block's own variables."""
    (block,) = [t for t in load_yaml(ROLES / "lvs_director" / "tasks" / "restart_one.yml") if "block" in t]
    (task,) = [t for t in block["block"] + block["always"] if t["name"] == name]
    return task, block["vars"]


def _run_take_back(tmp_path: Path, table: list[str],
                   daemon_args: list[str]) -> tuple[subprocess.CompletedProcess, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "table").write_text("".join(f"{line}\n" for line in table))
    (bin_dir / "ipvsadm").write_text(
        f'#!/bin/bash\necho "$*" >> {tmp_path}/ipvsadm.calls\ngrep -qxF -- "$*" {tmp_path}/table\n')
    (bin_dir / "systemctl").write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/systemctl.calls\n')
    for tool in ("ipvsadm", "systemctl"):
        (bin_dir / tool).chmod(0o755)
    conf = tmp_path / "keepalived.conf"
    conf.write_text("priority 1\n")
    Path(f"{conf}.hpc-balance-handover").write_text("priority 150\n")
    keepalived = subprocess.Popen(["python3", "-c", "import time; time.sleep(60)", *daemon_args])
    (tmp_path / "keepalived.pid").write_text(f"{keepalived.pid}\n")
    task, block_vars = _restart_block_step(TAKE_BACK)
    host = {"lvs_director_init": "systemd", "lvs_director_resolved": {"virtual_servers": SERVICES}}
    context = {"lvs_director_restart_host": "dir1", "hostvars": {"dir1": host},
               "lvs_director_config_path": str(conf),
               "lvs_director_reload_commands": VARS["lvs_director_reload_commands"]}
    context.update({name: jinja2.nativetypes.NativeEnvironment().from_string(value).render(**context)
                    for name, value in {**block_vars, **task["vars"]}.items()})
    script = jinja2.Environment().from_string(task["ansible.builtin.shell"]).render(
        **context, lvs_director_pid_file=str(tmp_path / "keepalived.pid"),
        lvs_director_vip_wait_s=0.5, lvs_director_poll_s=0.1,
        lvs_director_ipvsadm_protocol_flags=VARS["lvs_director_ipvsadm_protocol_flags"],
        lvs_director_vrrp_states=f"awk '{_states_awk()}' {FIXTURES / 'backup.data'}")
    try:
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False,
                                env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    finally:
        keepalived.kill()
        keepalived.wait()
    return result, conf


def test_the_restarted_holder_gets_its_priorities_back_once_every_service_is_in_the_table(tmp_path):
    result, conf = _run_take_back(tmp_path, SPELLED, [])
    assert result.returncode == 0, result.stderr
    assert conf.read_text() == "priority 150\n"
    assert not Path(f"{conf}.hpc-balance-handover").exists()
    assert (tmp_path / "ipvsadm.calls").read_text().splitlines() == SPELLED
    assert (tmp_path / "systemctl.calls").read_text() == "reload keepalived\n"


def test_the_restarted_holder_keeps_its_lowered_priorities_while_a_service_is_missing(tmp_path):
    # The always step puts the file back and reloads; this step only fails, with the reason.
    result, conf = _run_take_back(tmp_path, SPELLED[:2], [])
    assert result.returncode == 1
    assert "did not hold every virtual service" in result.stderr
    assert conf.read_text() == "priority 1\n"
    assert not (tmp_path / "systemctl.calls").exists()


def test_a_vrrp_only_keepalived_has_no_table_to_wait_for(tmp_path):
    result, conf = _run_take_back(tmp_path, [], ["--vrrp"])
    assert result.returncode == 0, result.stderr
    assert conf.read_text() == "priority 150\n"
    assert not (tmp_path / "ipvsadm.calls").exists()
