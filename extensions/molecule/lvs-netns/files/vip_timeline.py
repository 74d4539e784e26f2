"""Who held the VIP when: merge `ip -ts -o monitor address` logs of the directors into one timeline.

Usage: python3 vip_timeline.py SPEC.json   (prints the result as JSON)

SPEC: {"vip": "198.18.0.100/32",
       "hosts": {"dir1": {"log": "PATH", "held_at_start": true}, ...},
       "marks": {"kill": "2026-11-29T14:17:48.726798", "cleanup": "...", "start": "..."}}
      (a mark may also be epoch seconds, as a number)

Times are the hosts' local wall-clock times as `ip -ts` prints them (`date +%Y-%m-%dT%H:%M:%S.%6N` for the marks);
the network-namespace hosts share one kernel clock, so they compare directly.

Result: every VIP event in time order, each interval in which more than one host held the VIP (start and length,
seconds after the kill mark), and the holders at the end.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

# [2026-11-29T14:17:50.583289] Deleted 2: eth0    inet 198.18.0.100/32 scope global eth0\ ...
_EVENT = re.compile(r"^\[(?P<ts>[^\]]+)\] (?P<deleted>Deleted )?\d+: (?P<dev>\S+)\s+inet6? (?P<cidr>\S+)")


def parse_time(text: str | float) -> float:
    """An `ip -ts` timestamp (local time, ISO 8601), or epoch seconds (a number, or its text)."""
    try:
        return float(text)
    except ValueError:
        return datetime.fromisoformat(text).timestamp()


def vip_events(log_text: str, vip: str) -> list[tuple[float, bool]]:
    """(time, added?) for each change of ``vip`` in one host's monitor log, in log order."""
    events = []
    for line in log_text.splitlines():
        match = _EVENT.match(line)
        if match and match["cidr"] == vip:
            events.append((parse_time(match["ts"]), match["deleted"] is None))
    return events


def overlaps(initial: dict[str, bool], events: list[tuple[float, str, bool]]) -> tuple[list[dict], list[str]]:
    """Intervals in which two or more hosts held the VIP, by a sweep over the merged events."""
    holding = {host for host, held in initial.items() if held}
    found, since = [], None
    for time_s, host, added in sorted(events):
        if added:
            holding.add(host)
        else:
            holding.discard(host)
        if len(holding) > 1 and since is None:
            since = (time_s, sorted(holding))
        elif len(holding) <= 1 and since is not None:
            found.append({"start": since[0], "end": time_s, "hosts": since[1]})
            since = None
    if since is not None:
        found.append({"start": since[0], "end": None, "hosts": since[1]})
    return found, sorted(holding)


def first_after(events: list[tuple[float, str, bool]], host: str, added: bool, after: float) -> float | None:
    return next((t for t, h, a in sorted(events) if h == host and a == added and t >= after), None)


def timeline(spec: dict) -> dict:
    vip = spec["vip"]
    merged = []
    for host, source in spec["hosts"].items():
        merged += [(t, host, added) for t, added in vip_events(Path(source["log"]).read_text(), vip)]
    marks = {name: parse_time(text) for name, text in spec["marks"].items()}
    zero = marks["kill"]
    both, holders = overlaps({host: source["held_at_start"] for host, source in spec["hosts"].items()}, merged)

    def since_kill(value):
        return None if value is None else round(value - zero, 6)

    return {
        "events": [{"t_s": since_kill(t), "host": h, "vip": "added" if a else "removed"} for t, h, a in sorted(merged)],
        "marks_s": {name: since_kill(value) for name, value in marks.items()},
        "takeover_s": since_kill(first_after(merged, spec["takeover_host"], True, zero)),
        "preempt_s": (
            None
            if first_after(merged, spec["crashed_host"], True, marks["start"]) is None
            else round(first_after(merged, spec["crashed_host"], True, marks["start"]) - marks["start"], 6)
        ),
        "two_holders": [
            {
                "hosts": item["hosts"],
                "start_s": since_kill(item["start"]),
                "length_s": None if item["end"] is None else round(item["end"] - item["start"], 6),
            }
            for item in both
        ],
        "holders_at_end": holders,
    }


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    print(json.dumps(timeline(spec), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
