"""Connections from a client to an LVS virtual service, one TCP connection (an HTTP GET) each, and who answered.

Each real server of the scenario answers with its own name, so the client sees which one the director chose.

  vip_probe.py count URL N                   N connections one after another, each from a client port no
                                             earlier count used (see SOURCE_PORTS), each given 2 s; prints
                                             {"ok": .., "failed": .., "by_server": {name: count}, "errors": [..],
                                             "source_ports": [first, last]}
  vip_probe.py watch URL LOG STOP_FILE [INTERVAL_S TIMEOUT_S]
                                             a connection every INTERVAL_S (0.25) s until STOP_FILE exists (300 s at
                                             most), each given TIMEOUT_S (1) s; each one appends {"t": epoch_s,
                                             "server": name or null, "error": text or null} to LOG
  vip_probe.py stop STOP_FILE LOG [LOG..]     creates STOP_FILE and waits until each watch writing a LOG has logged
                                             its last connection and ended (10 s at most); prints {"ended": [..],
                                             "still_running": [..]} and fails when one did not end
  vip_probe.py outage LOG SINCE_EPOCH_S NAME what the clients saw of NAME after SINCE (a reboot's start), as JSON:
                                             its last answer before its longest silence and its first one after
                                             (seconds after SINCE), and the connections that failed meanwhile
  vip_probe.py gaps LOG SINCE_EPOCH_S        the longest time without an answer after SINCE (between two answers, any
                                             server), the failed connections and the answers, as JSON
  vip_probe.py hold HOST PORT N SECONDS OUT [STOP_FILE]
                                             N TCP sessions to the session service (it greets with its name, then
                                             echoes lines), each sending a line every 0.5 s for SECONDS, or until
                                             STOP_FILE exists; writes OUT.connected once all are open, then OUT:
                                             {"by_server", "exchanges", "errors", "last_echo_s" (epoch)}
  vip_probe.py stream HOST PORT N SECONDS OUT
                                             N TCP sessions to the session service, each sending a byte (an empty
                                             line) every 0.1 s for SECONDS and timing the echoes; writes
                                             OUT.connected once all are open, then OUT and stdout: {"started_s",
                                             "ended_s" (epoch), "by_server", "echoes", "broken" (sessions reset or
                                             closed by the other end), "longest_stall_s", "stall_from_s" (epoch),
                                             "stalls_over_limit" (over 2 s), "errors"}
  vip_probe.py udp HOST PORT N               N datagrams to the UDP echo service (it answers with its name);
                                             prints {"ok", "failed", "by_server"}

Python standard library only: it runs on the lab's client host.
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

CONNECT_TIMEOUT_S = 1.0
# count waits as long as watch is given in the scenarios (2 s): a connection whose first SYN or SYN-ACK was lost is
# answered after TCP's initial retransmission timeout of 1 s (RFC 6298, 2.1), which a client does not see as a failure.
COUNT_TIMEOUT_S = 2.0
WATCH_INTERVAL_S = 0.25
WATCH_LIMIT_S = 300.0
# How long stop waits for the watches: one connection's timeout (3 s at most in the scenarios) and one interval, with
# room for a loaded host.
STOP_WAIT_S = 10.0
STREAM_INTERVAL_S = 0.1
# A session whose echoes stop for longer than this counts as stalled (issue: "0 stalls over 2 s").
STREAM_STALL_LIMIT_S = 2.0
# After the last byte is sent, how long a session may take to echo what is still in flight.
STREAM_DRAIN_S = 3.0

# Why count picks its client ports: in DR the director sees only the client's half of a connection, so IPVS keeps
# each entry (client address and port) for minutes after the connection closed (FIN_WAIT, tcp_fin 120 s). A new
# connection from a client port that such an entry still holds goes to the same real server without being scheduled
# or counted (ipvs-sysctl, conn_reuse_mode; only TIME_WAIT entries, seen in NAT alone, are rescheduled). The kernel
# hands out client ports from ip_local_port_range (32768-60999 by default) and, after a few hundred short connections
# to one VIP, hands out ports such entries hold. count therefore binds each connection to a port below that range,
# going on from where the last count on this host stopped, so IPVS schedules and counts every connection of a count.
SOURCE_PORTS = range(20000, 32768)
NEXT_SOURCE_PORT_FILE = Path("/tmp/vip-probe-next-source-port")


class _SourcePortHandler(urllib.request.HTTPHandler):
    """urllib's HTTP handler, connecting from a given client port."""

    def __init__(self, source_port: int) -> None:
        super().__init__()
        self.source_port = source_port

    def http_open(self, req):
        return self.do_open(http.client.HTTPConnection, req, source_address=("", self.source_port))


def fetch(url: str, timeout_s: float = CONNECT_TIMEOUT_S,
          source_port: int | None = None) -> tuple[str | None, str | None] | None:
    """(name of the real server that answered, None) or (None, what went wrong); None when ``source_port`` is held
    by another socket of this host (only a given port can be)."""
    try:
        return _answer(url, timeout_s, source_port), None
    except OSError as error:
        # urllib wraps the socket's error in URLError, whose reason is the OSError itself.
        cause = getattr(error, "reason", error)
        if source_port and isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            return None
        return None, f"{type(error).__name__}: {error}"


def _answer(url: str, timeout_s: float, source_port: int | None) -> str:
    opener = urllib.request.build_opener(_SourcePortHandler(source_port)) if source_port else None
    with (opener.open(url, timeout=timeout_s) if opener else urllib.request.urlopen(url, timeout=timeout_s)) \
            as response:
        return response.read().decode().strip()


def next_source_ports(state: Path = NEXT_SOURCE_PORT_FILE):
    """Client ports in SOURCE_PORTS, from where the last count stopped, round the range; saves the next one."""
    try:
        port = int(state.read_text())
    except (OSError, ValueError):
        port = SOURCE_PORTS.start
    while True:
        if port not in SOURCE_PORTS:
            port = SOURCE_PORTS.start
        state.write_text(str(port + 1))
        yield port
        port += 1


def count(url: str, connections: int, state: Path = NEXT_SOURCE_PORT_FILE) -> dict:
    by_server: Counter[str] = Counter()
    errors, used = [], []
    ports = next_source_ports(state)
    for _connection in range(connections):
        # A port some other socket of this host holds: take the next one.
        while (answer := fetch(url, COUNT_TIMEOUT_S, port := next(ports))) is None:
            pass
        server, error = answer
        used.append(port)
        if server is None:
            errors.append(error)
        else:
            by_server[server] += 1
    return {"ok": by_server.total(), "failed": len(errors), "by_server": dict(by_server), "errors": errors[:5],
            "source_ports": [used[0], used[-1]] if used else []}


def _ended_marker(log_path: Path) -> Path:
    """Where a watch says it logged its last connection and ended because its stop file appeared."""
    return log_path.with_name(log_path.name + ".ended")


def watch(url: str, log_path: Path, stop_file: Path, interval_s: float = WATCH_INTERVAL_S,
          timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    deadline = time.monotonic() + WATCH_LIMIT_S
    _ended_marker(log_path).unlink(missing_ok=True)
    with log_path.open("a") as log:
        while not stop_file.exists() and time.monotonic() < deadline:
            started = time.monotonic()
            server, error = fetch(url, timeout_s)
            log.write(json.dumps({"t": time.time(), "server": server, "error": error}) + "\n")
            log.flush()
            time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    if stop_file.exists():
        _ended_marker(log_path).touch()


def stop(stop_file: Path, log_paths: list[Path], timeout_s: float = STOP_WAIT_S) -> dict:
    """Stop the watches writing ``log_paths`` and wait until each has logged the connection it had in flight.

    A condition, not a fixed sleep: a watch ends within one connection's timeout and one interval after the stop
    file appears, and reading its log before then would miss that connection.
    """
    stop_file.touch()
    deadline = time.monotonic() + timeout_s
    running = list(log_paths)
    while running and time.monotonic() < deadline:
        time.sleep(0.05)
        running = [log_path for log_path in running if not _ended_marker(log_path).exists()]
    return {"ended": [str(path) for path in log_paths if path not in running],
            "still_running": [str(path) for path in running]}


def gaps(records: list[dict], since_s: float) -> dict:
    """The longest time the clients got no answer at all after ``since_s``: what an outage of the VIP looks like."""
    records = [record for record in records if record["t"] >= since_s]
    answers = [record["t"] for record in records if record["server"] is not None]
    longest = max((b - a for a, b in zip(answers, answers[1:], strict=False)), default=None)
    return {
        "connections": len(records),
        "answers": len(answers),
        "failed": len(records) - len(answers),
        "longest_gap_s": None if longest is None else round(longest, 3),
        "servers": sorted({record["server"] for record in records if record["server"]}),
    }


def hold(host: str, port: int, sessions: int, seconds: float, out: Path, stop_file: Path | None = None) -> dict:
    """N long TCP sessions through the VIP; every line sent must come back on the same session. They end after
    ``seconds``, or earlier once ``stop_file`` exists (a check that knows when its event is over ends them then)."""
    opened, by_server, errors, exchanges, last_echo_s = [], Counter(), [], 0, None
    for _session in range(sessions):
        conn = socket.create_connection((host, port), timeout=2.0)
        reader = conn.makefile("r")
        name = reader.readline().strip()
        by_server[name] += 1
        opened.append((conn, reader, name))
    out.with_name(out.name + ".connected").write_text(json.dumps(by_server))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(errors) < 10 and not (stop_file and stop_file.exists()):
        for conn, reader, name in opened:
            try:
                conn.sendall(b"ping\n")
                if reader.readline() != "ping\n":
                    errors.append(f"{name}: no echo")
                else:
                    last_echo_s = time.time()
                exchanges += 1
            except OSError as error:
                errors.append(f"{name}: {type(error).__name__}: {error}")
        time.sleep(0.5)
    for conn, _reader, _name in opened:
        conn.close()
    result = {"by_server": dict(by_server), "exchanges": exchanges, "errors": errors, "last_echo_s": last_echo_s}
    out.write_text(json.dumps(result))
    return result


class _Session:
    """One stream session: its socket, the real server that greeted it, when each echo came back and how it ended.

    Times are wall-clock (epoch) seconds, so they compare with other hosts' logs (`ip -ts monitor`).
    """

    def __init__(self, host: str, port: int) -> None:
        self.conn = socket.create_connection((host, port), timeout=2.0)
        self.reader = self.conn.makefile("rb")
        self.server = self.reader.readline().decode().strip()
        self.echo_times: list[float] = []
        self.error: str | None = None
        self.closing = False

    def read_echoes(self) -> None:
        self.conn.settimeout(None)
        try:
            while self.reader.readline() == b"\n":
                self.echo_times.append(time.time())
            if not self.closing:
                self.error = "closed by the other end"
        except OSError as error:
            if not self.closing:
                self.error = f"{type(error).__name__}: {error}"

    def send_byte(self) -> None:
        if self.error is None:
            try:
                self.conn.sendall(b"\n")
            except OSError as error:
                self.error = f"{type(error).__name__}: {error}"

    def longest_stall(self, started: float, ended: float) -> tuple[float, float]:
        """(from, until): the longest time without an echo between the start and the last byte sent."""
        marks = [started, *[t for t in self.echo_times if t <= ended], ended]
        return max(zip(marks, marks[1:], strict=False), key=lambda pair: pair[1] - pair[0])


def stream(host: str, port: int, sessions: int, seconds: float, out: Path) -> dict:
    """N sessions through the VIP, each sending a byte every 0.1 s; what a director failover does to them.

    A session is reset when the director that takes over has no IPVS entry for it (its own stack answers the next
    segment with a RST), and stalls while no director forwards it. With connection sync the new master has the entry
    and a session only waits for the takeover and TCP's next retransmission. `stall_from_s` (the median session's
    last echo before its longest stall) marks when the path went dead, as the client saw it.
    """
    opened = [_Session(host, port) for _session in range(sessions)]
    by_server = dict(Counter(session.server for session in opened))
    readers = [threading.Thread(target=session.read_echoes, daemon=True) for session in opened]
    for reader in readers:
        reader.start()
    started = time.time()
    out.with_name(out.name + ".connected").write_text(json.dumps(by_server))
    while time.time() - started < seconds:
        tick = time.monotonic()
        for session in opened:
            session.send_byte()
        time.sleep(max(0.0, STREAM_INTERVAL_S - (time.monotonic() - tick)))
    ended = time.time()
    time.sleep(STREAM_DRAIN_S)
    for session in opened:
        session.closing = True
        try:
            session.conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already reset
        session.conn.close()
    for reader in readers:
        reader.join(timeout=2.0)
    stalls = sorted(session.longest_stall(started, ended) for session in opened)
    lengths = [until - since for since, until in stalls]
    result = {
        "sessions": sessions,
        "started_s": round(started, 6),
        "ended_s": round(ended, 6),
        "by_server": by_server,
        "echoes": sum(len(session.echo_times) for session in opened),
        "broken": sum(1 for session in opened if session.error is not None),
        "longest_stall_s": round(max(lengths), 3),
        "stall_from_s": round(stalls[len(stalls) // 2][0], 6),
        "stall_limit_s": STREAM_STALL_LIMIT_S,
        "stalls_over_limit": sum(1 for length in lengths if length > STREAM_STALL_LIMIT_S),
        "errors": sorted({session.error for session in opened if session.error})[:5],
    }
    out.write_text(json.dumps(result))
    return result


def udp(host: str, port: int, datagrams: int) -> dict:
    by_server: Counter[str] = Counter()
    failed = 0
    for number in range(datagrams):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1.0)
            # Connected: a reply from any other source than the VIP is not taken (as most UDP clients behave).
            sock.connect((host, port))
            sock.send(f"probe {number}".encode())
            try:
                name = sock.recv(512).decode().strip()
                by_server[name] += 1
            except OSError:
                failed += 1
    return {"ok": by_server.total(), "failed": failed, "by_server": dict(by_server)}


def outage(records: list[dict], since_s: float, name: str) -> dict:
    """The longest silence of ``name`` after ``since_s`` (it must answer again after it), and the failures in it."""
    records = [record for record in records if record["t"] >= since_s]
    answers = [record["t"] for record in records if record["server"] == name]
    if len(answers) < 2:
        return {
            "server": name,
            "answers": len(answers),
            "connections": len(records),
            "gone_s": None,
            "back_s": None,
            "silence_s": None,
            "failed": None,
        }
    gone, back = max(zip(answers, answers[1:], strict=False), key=lambda pair: pair[1] - pair[0])
    failed = [record["t"] for record in records if record["server"] is None and gone < record["t"] < back]
    return {
        "server": name,
        "answers": len(answers),
        "connections": len(records),
        "gone_s": round(gone - since_s, 2),
        "back_s": round(back - since_s, 2),
        "silence_s": round(back - gone, 2),
        "failed": len(failed),
        "failed_from_s": round(failed[0] - since_s, 2) if failed else None,
        "failed_until_s": round(failed[-1] - since_s, 2) if failed else None,
        "other_servers": sorted({r["server"] for r in records if r["server"] not in (None, name)}),
    }


def main(argv: list[str]) -> int:
    command, *arguments = argv
    if command == "count":
        result = count(arguments[0], int(arguments[1]))
        print(json.dumps(result))
        return 0 if result["failed"] == 0 else 1
    if command == "watch":
        timing = [float(value) for value in arguments[3:5]]
        watch(arguments[0], Path(arguments[1]), Path(arguments[2]), *timing)
        return 0
    if command == "stop":
        result = stop(Path(arguments[0]), [Path(argument) for argument in arguments[1:]])
        print(json.dumps(result))
        return 0 if not result["still_running"] else 1
    if command == "gaps":
        lines = Path(arguments[0]).read_text().splitlines()
        print(json.dumps(gaps([json.loads(line) for line in lines if line], float(arguments[1]))))
        return 0
    if command == "hold":
        stop_file = Path(arguments[5]) if len(arguments) > 5 else None
        result = hold(arguments[0], int(arguments[1]), int(arguments[2]), float(arguments[3]), Path(arguments[4]),
                      stop_file)
        return 0 if not result["errors"] else 1
    if command == "stream":
        result = stream(arguments[0], int(arguments[1]), int(arguments[2]), float(arguments[3]), Path(arguments[4]))
        print(json.dumps(result))
        return 0
    if command == "udp":
        result = udp(arguments[0], int(arguments[1]), int(arguments[2]))
        print(json.dumps(result))
        return 0 if result["failed"] == 0 else 1
    if command == "outage":
        lines = Path(arguments[0]).read_text().splitlines()
        print(json.dumps(outage([json.loads(line) for line in lines if line], float(arguments[1]), arguments[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
