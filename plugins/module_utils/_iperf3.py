# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""iperf3 ``-J`` output -> totals, per-stream numbers and plain-words findings about a NIC team.

Why the care: with ``-J`` iperf3 exits 0 even when the test failed (connection refused, server busy) and only puts
the text in an ``error`` key, so the ``error`` key - not the exit code - decides failure. A single TCP flow is hashed
onto one member of a team, so only parallel streams can show whether the team as a whole delivers.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._spread import summarize
from ansible_collections.hpc.balance.plugins.module_utils._units import format_bits_per_second

# Tolerance when comparing a measured rate against one member link (TCP/IP overhead and timer jitter).
LINK_TOLERANCE = 1.05
CPU_BUSY_PERCENT = 90.0


class Iperf3Error(Exception):
    """iperf3 reported a failure, or its output is not a complete -J document."""

    def __init__(self, message: str, iperf3_error: str | None = None) -> None:
        super().__init__(message)
        self.iperf3_error = iperf3_error


def load_json(text: str) -> dict[str, Any]:
    """Parse iperf3 -J output text; raise Iperf3Error for empty, non-JSON or error-carrying output."""
    if not text or not text.strip():
        raise Iperf3Error("iperf3 printed nothing: it did not run a test; check that it was called with -J")
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise Iperf3Error(
            f"iperf3 output is not complete JSON ({exc}), it ends with {text.strip()[-60:]!r}: it was cut short or -J "
            f"was missing"
        ) from exc
    if not isinstance(document, dict):
        raise Iperf3Error(
            f"iperf3 output is JSON but not an object ({type(document).__name__}): expected the -J document"
        )
    return document


def _number(mapping: dict[str, Any], key: str) -> Any:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def parse_result(document: str | dict[str, Any]) -> dict[str, Any]:
    """-J document (dict or text) -> result dict. Raises Iperf3Error on an ``error`` key or a missing summary."""
    if not isinstance(document, dict):
        document = load_json(document)
    if document.get("error"):
        raise Iperf3Error(f"iperf3 reported an error: {document['error']}", iperf3_error=document["error"])
    start = document.get("start") or {}
    end = document.get("end") or {}
    test_start = start.get("test_start") or {}
    sum_sent = end.get("sum_sent")
    sum_received = end.get("sum_received")
    if not isinstance(sum_sent, dict) or not isinstance(sum_received, dict):
        if isinstance(end.get("sum"), dict):
            raise Iperf3Error("iperf3 output has end.sum but no end.sum_sent/end.sum_received: only TCP tests "
                              "are supported; drop -u")
        raise Iperf3Error("iperf3 output has no end.sum_sent/end.sum_received: the test did not finish "
                          "(interrupted, or the output was cut short)")

    connected = {}
    for entry in start.get("connected") or []:
        if isinstance(entry, dict) and "socket" in entry:
            connected[entry["socket"]] = entry

    streams = []
    for index, stream in enumerate(end.get("streams") or []):
        sender = stream.get("sender") or {}
        receiver = stream.get("receiver") or {}
        socket_id = sender.get("socket", receiver.get("socket"))
        link = connected.get(socket_id, {})
        streams.append({
            "index": index,
            "socket": socket_id,
            "local_host": link.get("local_host"),
            "local_port": link.get("local_port"),
            "remote_host": link.get("remote_host"),
            "remote_port": link.get("remote_port"),
            "sent_bits_per_second": _number(sender, "bits_per_second"),
            "received_bits_per_second": _number(receiver, "bits_per_second"),
            "sent_bytes": _number(sender, "bytes"),
            "received_bytes": _number(receiver, "bytes"),
            "retransmits": _number(sender, "retransmits"),
            "max_rtt_us": _number(sender, "max_rtt"),
            "mean_rtt_us": _number(sender, "mean_rtt"),
        })

    cpu = end.get("cpu_utilization_percent") or {}
    connecting_to = start.get("connecting_to") or {}
    return {
        "version": start.get("version"),
        "protocol": test_start.get("protocol"),
        "num_streams": test_start.get("num_streams", len(streams)),
        "duration_s": test_start.get("duration"),
        "reverse": bool(test_start.get("reverse")),
        "target": connecting_to.get("host"),
        "port": connecting_to.get("port"),
        "sent_bits_per_second": _number(sum_sent, "bits_per_second"),
        "received_bits_per_second": _number(sum_received, "bits_per_second"),
        "sent_bytes": _number(sum_sent, "bytes"),
        "received_bytes": _number(sum_received, "bytes"),
        "seconds": _number(sum_received, "seconds"),
        "retransmits": _number(sum_sent, "retransmits"),
        "cpu_utilization_percent": {
            key: _number(cpu, key)
            for key in ("host_total", "host_user", "host_system", "remote_total", "remote_user", "remote_system")
        },
        "sender_tcp_congestion": end.get("sender_tcp_congestion"),
        "receiver_tcp_congestion": end.get("receiver_tcp_congestion"),
        "streams": streams,
    }


def assess(result: dict[str, Any], expected_link_bits_per_second: float | None = None, member_count: int = 1,
           min_utilisation_percent: float = 80.0) -> dict[str, Any]:
    """Compare a parsed result with the team's expected capacity; return numbers and plain-words findings.

    ``expected_link_bits_per_second`` is the speed of ONE member link; the team's capacity is that x member_count.
    """
    received = result["received_bits_per_second"] or 0.0
    stream_rates = [stream["received_bits_per_second"] or 0.0 for stream in result["streams"]]
    spread = summarize(stream_rates) if stream_rates else summarize([])
    findings: list[str] = []
    assessment: dict[str, Any] = {
        "team_bits_per_second": None,
        "utilisation_percent": None,
        "reaches_expected": None,
        "stream_spread": spread,
        "findings": findings,
    }
    streams = len(stream_rates)
    if spread["cv"] is not None and streams > 1:
        findings.append(
            f"per-stream spread: CV {spread['cv']:.3f} ({spread['cv_grade']}), "
            f"slowest/fastest {spread['min_over_max'] or 0.0:.2f}"
        )

    if expected_link_bits_per_second:
        link = float(expected_link_bits_per_second)
        team = link * member_count
        utilisation = 100.0 * received / team
        assessment["team_bits_per_second"] = team
        assessment["utilisation_percent"] = utilisation
        assessment["reaches_expected"] = utilisation >= min_utilisation_percent
        link_text = format_bits_per_second(link)
        team_text = format_bits_per_second(team)
        if streams == 1 and member_count > 1:
            findings.append(
                f"one stream cannot exceed one member link: a single TCP flow is hashed onto one of the "
                f"{member_count} members, so it can reach at most {link_text} of the team's {team_text}; run "
                f"parallel streams (-P) or use SMB Multichannel to fill the team"
            )
        elif streams > 1 and member_count > 1 and received <= link * LINK_TOLERANCE:
            findings.append(
                f"{streams} streams together carried {format_bits_per_second(received)}, no more than one member "
                f"link ({link_text}): the flows probably all landed on one member; check the team's load-balancing "
                f"algorithm (hash on TCP ports, Dynamic) and the switch side"
            )
        if 1 < streams < member_count:
            findings.append(
                f"only {streams} streams for {member_count} members: at least one member cannot carry a flow; use "
                f"-P {2 * member_count} or more"
            )
        for index, rate in enumerate(stream_rates):
            if rate > link * LINK_TOLERANCE:
                findings.append(
                    f"stream {index} carried {format_bits_per_second(rate)}, more than one member link "
                    f"({link_text}): the test did not cross the team, or the expected link speed is too low"
                )
                break
        below = "" if assessment["reaches_expected"] else f", below the {min_utilisation_percent:.0f} % target"
        findings.append(
            f"the team reached {utilisation:.1f} % of its expected {team_text} ({member_count} x {link_text}){below}"
        )

    retransmits = result.get("retransmits")
    if retransmits:
        findings.append(
            f"{retransmits} TCP retransmits: the path dropped or reordered packets (full buffers, a faulty cable "
            f"or a member running at a different speed)"
        )
    cpu = result.get("cpu_utilization_percent") or {}
    for side, key in (("this host's", "host_total"), ("the remote host's", "remote_total")):
        value = cpu.get(key)
        if value is not None and value >= CPU_BUSY_PERCENT:
            findings.append(f"{side} CPU was {value:.0f} % busy: the result may be limited by CPU, not by the links")
    return assessment


def assess_against_ceiling(result: dict[str, Any], ceiling_bits_per_second: float,
                           min_utilisation_percent: float = 80.0) -> dict[str, Any]:
    """Grade a parallel-stream result against the path's own single-stream ceiling (no link speed known).

    ``ceiling_bits_per_second`` is what ONE stream reached on the same path just before. Parallel streams should
    carry at least ``min_utilisation_percent`` of it; less means the path, not the stream count, limits the rate
    (a host's CPU, or flows that share a bottleneck unevenly). Returns the same keys as ``assess``.
    """
    assessment = assess(result, None, 1, min_utilisation_percent)
    ceiling = float(ceiling_bits_per_second)
    received = result["received_bits_per_second"] or 0.0
    utilisation = 100.0 * received / ceiling
    assessment["team_bits_per_second"] = ceiling
    assessment["utilisation_percent"] = utilisation
    assessment["reaches_expected"] = utilisation >= min_utilisation_percent
    below = "" if assessment["reaches_expected"] else f", below the {min_utilisation_percent:.0f} % target"
    assessment["findings"].insert(0, (
        f"{len(result['streams'])} streams carried {format_bits_per_second(received)}, {utilisation:.1f} % of this "
        f"path's single-stream ceiling {format_bits_per_second(ceiling)} (measured with 1 stream, no link speed "
        f"given){below}"))
    return assessment
