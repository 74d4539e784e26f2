"""The lab's connection probe: count takes each connection's client port once, below the kernel's ephemeral range.

In DR, IPVS schedules and counts a connection only when no entry for its client address and port is left
(ipvs-sysctl.rst, conn_reuse_mode), and entries stay up to tcp_fin (120 s) after a close. These tests run the probe
against a real HTTP server on the loopback and read the client ports that server saw.
"""

from __future__ import annotations

import http.server
import random
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "site" / "files"))

import vip_probe  # noqa: E402


class _NameHandler(http.server.BaseHTTPRequestHandler):
    seen_ports: list[int] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).seen_ports.append(self.client_address[1])
        body = b"rs-test\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _NameHandler.seen_ports = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NameHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", _NameHandler.seen_ports
    httpd.shutdown()
    httpd.server_close()


def ephemeral_ports() -> range:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return range(int(low), int(high) + 1)


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports in the probe's range that no socket holds now.

    A run of this file a minute earlier leaves its client ports in TIME_WAIT, where a bind to them fails."""
    for start in random.sample(range(vip_probe.SOURCE_PORTS.start, vip_probe.SOURCE_PORTS.stop - count), 200):
        try:
            for port in range(start, start + count):
                with socket.socket() as probe:
                    probe.bind(("", port))
        except OSError:
            continue
        return start
    raise AssertionError(f"no {count} free consecutive ports in {vip_probe.SOURCE_PORTS}")


def test_count_uses_each_client_port_once_below_the_ephemeral_range_and_goes_on_next_time(server, tmp_path):
    url, seen = server
    state = tmp_path / "next-port"
    start = free_ports(8)
    state.write_text(str(start))

    first = vip_probe.count(url, 5, state)
    second = vip_probe.count(url, 3, state)

    assert first["ok"] == 5 and first["by_server"] == {"rs-test": 5}
    assert seen == list(range(start, start + 8))
    assert first["source_ports"] == [start, start + 4] and second["source_ports"] == [start + 5, start + 7]
    assert not set(vip_probe.SOURCE_PORTS) & set(ephemeral_ports())


def test_count_skips_a_port_another_socket_holds(server, tmp_path):
    url, seen = server
    state = tmp_path / "next-port"
    held = free_ports(3) + 1
    state.write_text(str(held - 1))
    with socket.socket() as holder:
        holder.bind(("", held))
        result = vip_probe.count(url, 2, state)
    assert result["ok"] == 2 and result["failed"] == 0
    assert seen == [held - 1, held + 1]


def test_count_starts_the_range_again_after_its_end(server, tmp_path, monkeypatch):
    url, seen = server
    state = tmp_path / "next-port"
    start = free_ports(4)
    monkeypatch.setattr(vip_probe, "SOURCE_PORTS", range(start, start + 4))
    state.write_text(str(start + 3))
    vip_probe.count(url, 2, state)
    assert seen == [start + 3, start]


def test_hold_ends_when_its_stop_file_appears_and_says_when_the_last_echo_came(tmp_path):
    """lvs-uml's false alarm ends its session once the real server is back, instead of after a fixed 40 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def echo():
        conn, _address = listener.accept()
        with conn, conn.makefile("rwb") as stream:
            stream.write(b"rs-test\n")
            stream.flush()
            for line in stream:
                stream.write(line)
                stream.flush()

    threading.Thread(target=echo, daemon=True).start()
    stop, out = tmp_path / "stop", tmp_path / "hold.json"
    threading.Timer(1.2, stop.touch).start()
    started = time.time()
    result = vip_probe.hold("127.0.0.1", port, 1, 30, out, stop)
    listener.close()
    assert time.time() - started < 5
    assert result["errors"] == [] and result["by_server"] == {"rs-test": 1} and result["exchanges"] >= 2
    assert started < result["last_echo_s"] <= time.time()
