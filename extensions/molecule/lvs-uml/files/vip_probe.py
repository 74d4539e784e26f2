"""Connections from a client to an LVS virtual service, one TCP connection (an HTTP GET) each, and who answered.

Each real server of the scenario answers with its own name, so the client sees which one the director chose.

  vip_probe.py count URL N                   N connections one after another; prints
                                             {"ok": .., "failed": .., "by_server": {name: count}, "errors": [..]}
  vip_probe.py watch URL LOG STOP_FILE       a connection every 0.25 s until STOP_FILE exists (300 s at most);
                                             each one appends {"t": epoch_s, "server": name or null,
                                             "error": text or null} to LOG
  vip_probe.py outage LOG SINCE_EPOCH_S NAME what the clients saw of NAME after SINCE (a reboot's start), as JSON:
                                             its last answer before its longest silence and its first one after
                                             (seconds after SINCE), and the connections that failed meanwhile

Python standard library only: it runs on the lab's client host.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

CONNECT_TIMEOUT_S = 1.0
WATCH_INTERVAL_S = 0.25
WATCH_LIMIT_S = 300.0


def fetch(url: str) -> tuple[str | None, str | None]:
    """(name of the real server that answered, None) or (None, what went wrong)."""
    try:
        with urllib.request.urlopen(url, timeout=CONNECT_TIMEOUT_S) as response:
            return response.read().decode().strip(), None
    except OSError as error:
        return None, f"{type(error).__name__}: {error}"


def count(url: str, connections: int) -> dict:
    by_server: dict[str, int] = {}
    errors = []
    for _connection in range(connections):
        server, error = fetch(url)
        if server is None:
            errors.append(error)
        else:
            by_server[server] = by_server.get(server, 0) + 1
    return {"ok": sum(by_server.values()), "failed": len(errors), "by_server": by_server, "errors": errors[:5]}


def watch(url: str, log_path: Path, stop_file: Path) -> None:
    deadline = time.monotonic() + WATCH_LIMIT_S
    with log_path.open("a") as log:
        while not stop_file.exists() and time.monotonic() < deadline:
            started = time.monotonic()
            server, error = fetch(url)
            log.write(json.dumps({"t": time.time(), "server": server, "error": error}) + "\n")
            log.flush()
            time.sleep(max(0.0, WATCH_INTERVAL_S - (time.monotonic() - started)))


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
        watch(arguments[0], Path(arguments[1]), Path(arguments[2]))
        return 0
    if command == "outage":
        lines = Path(arguments[0]).read_text().splitlines()
        print(json.dumps(outage([json.loads(line) for line in lines if line], float(arguments[1]), arguments[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
