"""The lab probe's stream sessions against a real TCP server on the loopback: what it reports as broken or stalled.

The server behaves like the lab's session service (lvs-uml files/lab_services.py: greets with its name, then echoes
each line), and then like the two ways a director failover can hurt an established connection: the new master has
no IPVS entry and its own stack answers with a RST (the session is reset), or no director forwards it for a while
(the echoes stop, then resume after TCP retransmits).
"""

from __future__ import annotations

import socket
import socketserver
import struct
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "site" / "files"))

import vip_probe  # noqa: E402

LINES_BEFORE_TROUBLE = 5


class _Session(socketserver.StreamRequestHandler):
    behaviour = "echo"

    def handle(self) -> None:
        self.wfile.write(b"rs-test\n")
        for number, line in enumerate(self.rfile):
            if number == LINES_BEFORE_TROUBLE and self.behaviour == "reset":
                # SO_LINGER with a zero timeout: close() sends a RST instead of a FIN (socket(7)).
                self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.request.close()
                return
            if number == LINES_BEFORE_TROUBLE and self.behaviour == "pause":
                time.sleep(2.5)
            self.wfile.write(line)


class _Threaded(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


@pytest.fixture
def session_server():
    servers = []

    def start(behaviour: str) -> tuple[str, int]:
        handler = type("Handler", (_Session,), {"behaviour": behaviour})
        server = _Threaded(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_healthy_sessions_echo_every_byte_without_a_stall(session_server, tmp_path):
    host, port = session_server("echo")
    out = tmp_path / "stream.json"

    result = vip_probe.stream(host, port, 3, 1.0, out)

    assert result["by_server"] == {"rs-test": 3}
    assert result["broken"] == 0 and result["errors"] == []
    assert result["stalls_over_limit"] == 0
    assert result["longest_stall_s"] < 0.5
    assert 3 * 8 <= result["echoes"] <= 3 * 11  # a byte every 0.1 s for 1 s on each session
    assert (tmp_path / "stream.json.connected").read_text() == '{"rs-test": 3}'


def test_a_reset_session_counts_as_broken(session_server, tmp_path):
    host, port = session_server("reset")

    result = vip_probe.stream(host, port, 2, 1.5, tmp_path / "stream.json")

    assert result["broken"] == 2
    assert any("ConnectionResetError" in error or "closed by the other end" in error for error in result["errors"])
    # No echo after the reset: the time from the last echo to the end is a stall of about a second.
    assert result["longest_stall_s"] > 0.8


def test_echoes_that_stop_for_longer_than_two_seconds_count_as_a_stall_not_a_break(session_server, tmp_path):
    host, port = session_server("pause")

    result = vip_probe.stream(host, port, 2, 4.0, tmp_path / "stream.json")

    assert result["broken"] == 0
    assert result["stalls_over_limit"] == 2
    assert 2.4 <= result["longest_stall_s"] < 3.5
    # The stall began after the fifth echo, about half a second into the stream.
    assert 0.3 <= result["stall_from_s"] - result["started_s"] <= 1.2
