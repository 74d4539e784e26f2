"""Track processes need the kernel's process events, which the kernel sends only with CONFIG_PROC_EVENTS and only in
the initial network namespace: the role's probe (vars/main.yml, lvs_director_process_events_probe) and the
preflight's refusal. (The lab's user-mode Linux guests, built without CONFIG_PROC_EVENTS, show the probe's other
refusal in lvs-uml.)

keepalived.conf(5) (2.2.7), "VRRP track processes": keepalived reads /proc at its start and then "uses the
process_events kernel <-> userspace connector to receive notification of process changes". The oracle below runs the
real keepalived 2.2.7 in a network namespace of its own with a process it tracks running: it logs "Failed to set/clear
process event listen - errno 111 - Connection refused" and holds the instance in FAULT ("tracked process ... quorum not
achieved"). The probe makes the same request (PROC_CN_MCAST_LISTEN), starts and ends a process, waits for an event
and undoes the request (PROC_CN_MCAST_IGNORE): answered in this machine's own namespace, refused in a new one. The
namespace tests need root and `ip`; they skip otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from lvs_director_pair import KEEPALIVED, VIP, pair_settings

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_problems, lvs_director_resolve

ROLE = Path(__file__).resolve().parents[4] / "roles" / "lvs_director"
PROBE = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["lvs_director_process_events_probe"]
IP = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
NAMESPACES = pytest.mark.skipif(os.geteuid() != 0 or IP is None, reason="needs root and ip(8) for a network namespace")
REFUSED = "the process events connector: [Errno 111] Connection refused"


def errors(host_refused=None, **both):
    configs = [lvs_director_resolve(pair_settings(host, process_events_refused=host_refused if host == "dir1"
                                                  else None, **both)) for host in ("dir1", "dir2")]
    return [entry["message"] for entry in lvs_director_problems(configs)["errors"]]


def haproxy_tracked():
    return {"track_processes": [{"name": "haproxy", "process": "haproxy", "weight": 0}],
            "vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                                "track_processes": ["haproxy"]}]}


def test_an_instance_tracking_a_process_where_the_kernel_refuses_process_events_is_refused():
    assert errors(REFUSED, **haproxy_tracked()) == [
        "dir1: lvs_director_vrrp_instances VI_LVS track processes, but keepalived would learn of no process start or "
        f"end on this host ({REFUSED}): the kernel sends process events only when built with CONFIG_PROC_EVENTS, and "
        "only in the initial network namespace, not in a container's own or an ip netns one. An instance that tracks "
        "a process would keep the state it had when keepalived started, or stay in FAULT where the kernel refuses "
        "keepalived's request (\"Failed to set/clear process event listen\"); run keepalived in the host's network "
        "namespace on a kernel with process events, or track the process with a vrrp script "
        "(lvs_director_vrrp_scripts, e.g. pidof) instead"
    ]


def test_served_or_unasked_process_events_and_an_untracked_process_pass():
    assert errors(None, **haproxy_tracked()) == []
    untracked = haproxy_tracked()
    del untracked["vrrp_instances"][0]["track_processes"]
    assert errors(REFUSED, **untracked) == []


@pytest.fixture
def namespace():
    """A network namespace of this test's own, removed afterwards."""
    name = f"pe-probe-{os.getpid()}"
    subprocess.run([IP, "netns", "add", name], check=True)
    yield name
    subprocess.run([IP, "netns", "delete", name], check=False)


@NAMESPACES
def test_the_probe_is_answered_here_and_refused_in_a_network_namespace_of_its_own(namespace):
    here = subprocess.run(["python3", "-c", PROBE], capture_output=True, text=True, timeout=30, check=False)
    assert (here.returncode, here.stderr) == (0, "")
    inside = subprocess.run([IP, "netns", "exec", namespace, "python3", "-c", PROBE], capture_output=True, text=True,
                            timeout=30, check=False)
    assert (inside.returncode, inside.stderr.strip()) == (1, REFUSED)


@NAMESPACES
@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_the_oracle_keepalived_in_a_network_namespace_cannot_track_a_running_process(namespace, tmp_path):
    # Both ends of a veth pair in the namespace: an interface that is up, so only the track process can fault it.
    ns = [IP, "netns", "exec", namespace]
    subprocess.run([IP, "-n", namespace, "link", "add", "pe0", "type", "veth", "peer", "name", "pe1"], check=True)
    for link in ("pe0", "pe1", "lo"):
        subprocess.run([IP, "-n", namespace, "link", "set", link, "up"], check=True)
    subprocess.run([IP, "-n", namespace, "addr", "add", "198.18.0.250/24", "dev", "pe0"], check=True)
    program = tmp_path / "pe-tracked"
    shutil.copy("/bin/sleep", program)
    config = tmp_path / "keepalived.conf"
    config.write_text(
        'vrrp_track_process tracked {\n    process "pe-tracked"\n    weight 0\n    quorum 1\n}\n'
        "vrrp_instance VI_PE {\n    state BACKUP\n    interface pe0\n    virtual_router_id 77\n    priority 100\n"
        "    advert_int 1\n    virtual_ipaddress {\n        198.18.0.251/32\n    }\n"
        "    track_process {\n        tracked\n    }\n}\n")
    running = subprocess.Popen([str(program), "60"])
    pid_files = [f"--{kind}={tmp_path / kind}.pid" for kind in ("pid", "vrrp_pid", "checkers_pid")]
    try:
        keepalived = subprocess.Popen(ns + [KEEPALIVED, "--dont-fork", "--log-console", "--log-detail",
                                            "--vrrp", f"--use-file={config}", *pid_files],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(3)
        keepalived.terminate()
        log = keepalived.communicate(timeout=30)[0]
    finally:
        running.kill()
    assert "Failed to set/clear process event listen - errno 111 - Connection refused" in log, log
    assert "(VI_PE) entering FAULT state (tracked process tracked quorum not achieved)" in log, log
    assert "Entering MASTER STATE" not in log
