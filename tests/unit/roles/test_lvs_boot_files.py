"""The files the LVS roles install for boot and crash handling parse: systemd units (systemd-analyze verify, with the
role's drop-in on top of the packaged keepalived.service) and shell scripts (sh -n, shellcheck where installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from lvs_role_files import ROLES, load_yaml

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
SHELLCHECK = shutil.which("shellcheck")
KEEPALIVED_UNIT = Path("/lib/systemd/system/keepalived.service")
DIRECTOR_VARS = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")

REALSERVER_VARS = {
    "lvs_realserver_vip_cidrs": ["198.18.0.100/32", "198.18.0.101/32"],
    "lvs_realserver_vip_label": "lo:lvs",
    "lvs_realserver_unit_name": "hpc-balance-lvs-vip",
    "lvs_realserver_sysctl_file": "/etc/sysctl.d/60-hpc-balance-lvs-realserver.conf",
}
REALSERVER_VARS_V6 = dict(REALSERVER_VARS, lvs_realserver_vip_cidrs=["198.18.0.100/32", "fd00::100/128"])
DIRECTOR_RESOLVED = {
    "vrrp_instances": [
        {"interface": "eth0", "virtual_ipaddresses": ["198.18.0.100/32"]},
        {"interface": "vec0", "virtual_ipaddresses": ["198.18.0.101/24", "198.18.0.102/32"]},
    ],
    "virtual_servers": [
        {"address": "198.18.0.100", "port": 80, "protocol": "TCP"},
        {"address": "198.18.0.101", "port": 53, "protocol": "UDP"},
        {"address": "2001:db8::100", "port": 9000, "protocol": "SCTP"},
    ],
}


def systemd_verify(unit_dir, unit):
    env = dict(os.environ, SYSTEMD_UNIT_PATH=f"{unit_dir}:")
    return subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", unit], capture_output=True, text=True, env=env,
                          timeout=60, check=False, cwd=unit_dir)


def shell_problems(path):
    found = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True, check=False).stderr
    if SHELLCHECK:
        found += subprocess.run([SHELLCHECK, "--shell=sh", str(path)], capture_output=True, text=True,
                                check=False).stdout
    return found


def test_vip_unit_adds_each_vip_with_the_label_after_the_arp_settings(render):
    text = render("lvs_realserver", "vip.service.j2", **REALSERVER_VARS)
    assert "After=systemd-sysctl.service\n" in text
    assert "ExecStart=/sbin/ip addr replace 198.18.0.101/32 dev lo label lo:lvs\n" in text
    assert "WantedBy=multi-user.target\n" in text


def test_vip_unit_adds_an_ipv6_vip_with_nodad_and_without_a_label(render):
    text = render("lvs_realserver", "vip.service.j2", **REALSERVER_VARS_V6)
    assert "ExecStart=/sbin/ip addr replace 198.18.0.100/32 dev lo label lo:lvs\n" in text
    assert "ExecStart=/sbin/ip addr replace fd00::100/128 dev lo nodad\n" in text
    assert "ExecStop=-/sbin/ip addr del fd00::100/128 dev lo\n" in text


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("variables", [REALSERVER_VARS, REALSERVER_VARS_V6], ids=["IPv4", "IPv4 and IPv6"])
def test_systemd_accepts_the_vip_unit(render, tmp_path, variables):
    (tmp_path / "hpc-balance-lvs-vip.service").write_text(render("lvs_realserver", "vip.service.j2", **variables))
    result = systemd_verify(tmp_path, "hpc-balance-lvs-vip.service")
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.skipif(SYSTEMD_ANALYZE is None or not KEEPALIVED_UNIT.exists(), reason="needs systemd-analyze and "
                    "the keepalived package's unit")
@pytest.mark.parametrize("broken", [False, True], ids=["role drop-in", "broken drop-in (the check can fail)"])
def test_systemd_accepts_keepalived_with_the_drop_in(render, tmp_path, broken):
    shutil.copy(KEEPALIVED_UNIT, tmp_path / "keepalived.service")
    dropin = render("lvs_director", "systemd-dropin.conf.j2",
                    lvs_director_vip_cleanup_path="/etc/keepalived/hpc-balance-vip-cleanup")
    if broken:
        dropin = dropin.replace("Restart=on-failure", "Restart=on-failur")
    (tmp_path / "keepalived.service.d").mkdir()
    (tmp_path / "keepalived.service.d" / "hpc-balance.conf").write_text(dropin)
    result = systemd_verify(tmp_path, "keepalived.service")
    assert result.returncode == 0
    assert (result.stderr == "") != broken, result.stderr


def test_drop_in_runs_the_cleanup_after_every_stop_and_ignores_its_failure(render):
    text = render("lvs_director", "systemd-dropin.conf.j2",
                  lvs_director_vip_cleanup_path="/etc/keepalived/hpc-balance-vip-cleanup")
    assert "ExecStopPost=-/etc/keepalived/hpc-balance-vip-cleanup\n" in text


def render_cleanup(render, tmp_path, vrrp_only=False, daemon_args=()):
    script = tmp_path / "cleanup"
    script.write_text(render("lvs_director", "vip-cleanup.sh.j2", lvs_director_resolved=DIRECTOR_RESOLVED,
                             lvs_director_vrrp_only=vrrp_only, lvs_director_daemon_args=list(daemon_args),
                             lvs_director_pid_file=str(tmp_path / "keepalived.pid"),
                             lvs_director_ipvsadm_protocol_flags=DIRECTOR_VARS["lvs_director_ipvsadm_protocol_flags"]))
    return script


def run_cleanup(script, tmp_path, service_result=None):
    """Run the cleanup with stand-ins for ip and ipvsadm that only log their arguments; the log's lines."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    for tool in ("ip", "ipvsadm"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n')
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    if service_result is not None:
        env["SERVICE_RESULT"] = service_result
    subprocess.run(["sh", str(script)], env=env, check=True, capture_output=True, timeout=30)
    return log.read_text().splitlines() if log.exists() else []


EVERYTHING = [
    "ip addr del 198.18.0.100/32 dev eth0",
    "ip addr del 198.18.0.101/24 dev vec0",
    "ip addr del 198.18.0.102/32 dev vec0",
    "ipvsadm -D -t 198.18.0.100:80",
    "ipvsadm -D -u 198.18.0.101:53",
    "ipvsadm -D --sctp-service [2001:db8::100]:9000",
]


@pytest.mark.parametrize(
    ("service_result", "daemon_args", "vrrp_only", "expected"),
    [
        pytest.param("signal", [], False, EVERYTHING, id="crash under systemd: VIPs and this config's services"),
        pytest.param("core-dump", [], False, EVERYTHING, id="core dump under systemd"),
        pytest.param("success", [], False, [], id="clean stop: keepalived released everything itself"),
        pytest.param("signal", ["--dont-release-ipvs"], False, EVERYTHING[:3], id="--dont-release-ipvs is kept"),
        pytest.param("signal", ["--dont-release-vrrp"], False, EVERYTHING[3:], id="--dont-release-vrrp is kept"),
        pytest.param("signal", [], True, EVERYTHING[:3], id="VRRP only: no IPVS"),
        pytest.param(None, [], False, EVERYTHING, id="by hand, no keepalived pid file"),
    ],
)
def test_cleanup_removes_only_what_this_keepalived_left_after_a_crash(
        render, tmp_path, service_result, daemon_args, vrrp_only, expected):
    script = render_cleanup(render, tmp_path, vrrp_only=vrrp_only, daemon_args=daemon_args)
    assert shell_problems(script) == ""
    assert run_cleanup(script, tmp_path, service_result) == expected


def test_cleanup_by_hand_leaves_a_live_keepalived_alone_whatever_runs_elsewhere(render, tmp_path):
    """Scoped to this keepalived's pid file: `pidof keepalived` would also see other namespaces' keepalived."""
    script = render_cleanup(render, tmp_path)
    assert "pidof" not in script.read_text()
    fake = tmp_path / "keepalived"
    fake.symlink_to(shutil.which("sleep"))
    with subprocess.Popen([str(fake), "30"]) as live:
        try:
            (tmp_path / "keepalived.pid").write_text(f"{live.pid}\n")
            assert run_cleanup(script, tmp_path) == []
        finally:
            live.kill()
    (tmp_path / "keepalived.pid").write_text("999999999\n")  # stale: the keepalived it named is gone
    assert run_cleanup(script, tmp_path) == EVERYTHING


@pytest.mark.parametrize("variables", [REALSERVER_VARS, REALSERVER_VARS_V6], ids=["IPv4", "IPv4 and IPv6"])
def test_sysv_boot_script_applies_the_arp_settings_before_the_vips(render, tmp_path, variables):
    script = tmp_path / "hpc-balance-lvs-vip"
    script.write_text(render("lvs_realserver", "vip.init.j2", **variables))
    text = script.read_text()
    assert text.index('sysctl -q -p "$SYSCTL_FILE"') < text.index('ip addr replace "$vip"')
    assert "# Provides:          hpc-balance-lvs-vip\n" in text
    assert shell_problems(script) == ""


def test_sysv_boot_script_adds_an_ipv6_vip_with_nodad_and_an_ipv4_vip_with_the_label(render, tmp_path):
    script = tmp_path / "hpc-balance-lvs-vip"
    script.write_text(render("lvs_realserver", "vip.init.j2", **REALSERVER_VARS_V6))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for tool in ("ip", "sysctl"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n')
        (bin_dir / tool).chmod(0o755)
    # The script sets its own PATH: put the stand-ins that only log their arguments first in it.
    script.write_text(script.read_text().replace("PATH=/sbin:", f"PATH={bin_dir}:/sbin:"))
    subprocess.run(["sh", str(script), "start"], check=True, capture_output=True, timeout=30)
    assert log.read_text().splitlines() == [
        "sysctl -q -p /etc/sysctl.d/60-hpc-balance-lvs-realserver.conf",
        "ip addr replace 198.18.0.100/32 dev lo label lo:lvs",
        "ip addr replace fd00::100/128 dev lo nodad",
    ]


@pytest.mark.parametrize(
    ("vrrp_only", "line"),
    [(True, "-net.ipv4.vs.expire_nodest_conn = 1\n"), (False, "\nnet.ipv4.vs.expire_nodest_conn = 1\n"),
     # As -e and INI inventories give it: text, read as Ansible's bool filter does.
     ("false", "\nnet.ipv4.vs.expire_nodest_conn = 1\n"), ("yes", "-net.ipv4.vs.expire_nodest_conn = 1\n")],
)
def test_director_sysctl_file_marks_ipvs_keys_optional_only_without_ipvs(render, vrrp_only, line):
    text = render("lvs_director", "sysctl.conf.j2", lvs_director_vrrp_only=vrrp_only,
                  lvs_director_sysctls={"net.ipv4.vs.expire_nodest_conn": 1, "net.ipv4.ip_forward": True})
    assert line in text
    assert "\nnet.ipv4.ip_forward = 1\n" in text
