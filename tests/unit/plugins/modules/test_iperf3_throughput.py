"""iperf3_throughput against the real iperf3 on loopback: the module starts a one-off server, measures through it,
and reports refused and busy servers as failures although iperf3 exits 0."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest

from ansible_collections.hpc.balance.plugins.modules import iperf3_throughput

IPERF3 = shutil.which("iperf3")
needs_iperf3 = pytest.mark.skipif(IPERF3 is None, reason="iperf3 is not installed (apt-get install iperf3)")
TEN_GBIT = 10_000_000_000


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def port():
    """A free loopback port; a one-off server still waiting there afterwards is ended by one short test."""
    number = free_port()
    yield number
    if iperf3_throughput._listening(number):
        subprocess.run([IPERF3, "-c", "127.0.0.1", "-p", str(number), "-t", "1", "-J"], capture_output=True,
                       timeout=30, check=False)


def server(run_module, port):
    failed, result = run_module(iperf3_throughput, {"mode": "server", "bind_address": "127.0.0.1", "port": port})
    assert not failed, result
    return result


@needs_iperf3
def test_one_off_server_then_four_streams(run_module, port):
    started = server(run_module, port)
    assert (started["server_listening"], started["changed"]) == (True, False)
    assert started["cmd"] == [IPERF3, "-s", "-1", "-D", "-p", str(port), "--bind", "127.0.0.1"]
    failed, result = run_module(iperf3_throughput, {
        "target": "127.0.0.1", "port": port, "parallel": 4, "duration_s": 1, "expected_link_bits_per_second": TEN_GBIT,
        "member_count": 2})
    assert not failed, result["msg"] if failed else ""
    assert result["cmd"] == [IPERF3, "-c", "127.0.0.1", "-J", "-P", "4", "-t", "1", "-p", str(port),
                             "--connect-timeout", "10000"]
    assert (result["num_streams"], len(result["streams"]), result["changed"]) == (4, 4, False)
    assert result["received_bits_per_second"] > 0 and result["sent_bits_per_second"] > 0
    assert {stream["remote_port"] for stream in result["streams"]} == {port}
    assert result["team_bits_per_second"] == 2 * TEN_GBIT
    assert result["utilisation_percent"] == pytest.approx(100 * result["received_bits_per_second"] / (2 * TEN_GBIT))
    assert result["stream_spread"]["count"] == 4
    assert result["summary"].startswith(f"4 streams to 127.0.0.1:{port}: ")
    assert not iperf3_throughput._listening(port)  # the one-off server is gone


@needs_iperf3
def test_refused_connection_fails_although_iperf3_exits_0(run_module, port):
    failed, result = run_module(iperf3_throughput, {"target": "127.0.0.1", "port": port, "duration_s": 1})
    assert failed
    assert (result["msg"], result["rc"]) == (
        "iperf3 reported an error: unable to connect to server: Connection refused (rc 0)", 0)
    assert result["iperf3_error"] == "unable to connect to server: Connection refused"


@needs_iperf3
def test_busy_server_fails(run_module, port):
    server(run_module, port)
    first = subprocess.Popen([IPERF3, "-c", "127.0.0.1", "-p", str(port), "-t", "2", "-J"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        failed, result = run_module(iperf3_throughput, {"target": "127.0.0.1", "port": port, "duration_s": 1})
    finally:
        first.wait(timeout=30)
    assert failed
    assert result["msg"] == "iperf3 reported an error: the server is busy running a test. try again later (rc 0)"


@needs_iperf3
def test_server_refuses_a_port_in_use(run_module, port):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        failed, result = run_module(iperf3_throughput, {"mode": "server", "port": port})
    assert failed and result["msg"] == (
        f"port {port} already has a listening socket on this host: another iperf3 server (or service) runs there; "
        f"stop it or choose another port")


@pytest.mark.parametrize(("args", "message"), [
    ({"target": "127.0.0.1", "parallel": 0}, "parallel is 0: give a value from 1 to 128"),
    ({"target": "127.0.0.1", "port": 70000}, "port is 70000: give a value from 1 to 65535"),
    ({"target": "127.0.0.1", "expected_link_bits_per_second": 0},
     "expected_link_bits_per_second is 0: give one member link's speed, e.g. 10000000000 for 10GbE"),
    ({}, "mode is client but all of the following are missing: target"),
])
def test_wrong_arguments_are_explained(run_module, args, message):
    failed, result = run_module(iperf3_throughput, args)
    assert failed and result["msg"] == message


def test_missing_iperf3_is_explained(run_module, monkeypatch):
    monkeypatch.setattr(iperf3_throughput.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    failed, result = run_module(iperf3_throughput, {"target": "127.0.0.1"})
    assert failed and result["msg"] == (
        "iperf3 is not installed on this host (not found on PATH); install the iperf3 package")
