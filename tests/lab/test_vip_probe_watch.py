"""The lab probe's watch and stop against a real HTTP server on the loopback: stop returns once the watch has logged
the connection it had in flight, not after a guessed sleep.

The server answers like the lab's real servers (their HTTP service answers with the host's name) and can be made
slow, so a connection is still in flight when the stop file appears.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

PROBE = Path(__file__).parent / "site" / "files" / "vip_probe.py"
sys.path.insert(0, str(PROBE.parent))

import vip_probe  # noqa: E402

ANSWER_DELAY_S = 0.6


class _Named(http.server.BaseHTTPRequestHandler):
    delay_s = 0.0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        time.sleep(self.delay_s)
        body = b"rs-test\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def named_server():
    servers = []

    def start(delay_s: float) -> str:
        handler = type("Handler", (_Named,), {"delay_s": delay_s})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def test_stop_returns_after_the_connection_in_flight_is_logged(named_server, tmp_path):
    url = named_server(ANSWER_DELAY_S)
    log, stop_file = tmp_path / "watch.jsonl", tmp_path / "watch.stop"
    watcher = subprocess.Popen([sys.executable, str(PROBE), "watch", url, str(log), str(stop_file), "0.05", "2"])
    try:
        deadline = time.monotonic() + 10
        while not (log.exists() and _records(log)) and time.monotonic() < deadline:
            time.sleep(0.05)
        # The next connection is now in flight (each answer takes ANSWER_DELAY_S).
        time.sleep(0.1)
        logged_before = len(_records(log))
        asked = time.time()
        result = subprocess.run([sys.executable, str(PROBE), "stop", str(stop_file), str(log)],
                                capture_output=True, text=True, timeout=20, check=False)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"ended": [str(log)], "still_running": []}
        records = _records(log)
        # The connection that was in flight when stop was asked is in the log, answered.
        assert len(records) == logged_before + 1
        assert records[-1]["server"] == "rs-test" and records[-1]["t"] >= asked
        assert watcher.wait(timeout=5) == 0
    finally:
        watcher.kill()


def test_stop_names_a_watch_that_does_not_end_and_fails(tmp_path):
    log, stop_file = tmp_path / "never.jsonl", tmp_path / "never.stop"
    started = time.monotonic()
    result = vip_probe.stop(stop_file, [log], timeout_s=0.3)
    assert stop_file.exists()
    assert result == {"ended": [], "still_running": [str(log)]}
    assert 0.3 <= time.monotonic() - started < 2


def test_a_watch_restarted_after_its_limit_clears_the_last_ones_marker(named_server, tmp_path):
    url = named_server(0.0)
    log, stop_file = tmp_path / "again.jsonl", tmp_path / "again.stop"
    vip_probe._ended_marker(log).touch()
    watcher = threading.Thread(target=vip_probe.watch, args=(url, log, stop_file, 0.05, 1.0), daemon=True)
    watcher.start()
    deadline = time.monotonic() + 10
    while vip_probe._ended_marker(log).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not vip_probe._ended_marker(log).exists()
    assert vip_probe.stop(stop_file, [log]) == {"ended": [str(log)], "still_running": []}
    watcher.join(timeout=5)
    assert not watcher.is_alive()
