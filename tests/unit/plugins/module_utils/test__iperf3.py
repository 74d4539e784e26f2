"""iperf3 -J parsing on output captured from iperf3 3.12 over loopback (8 streams, 1 reversed stream, refused, busy),
torn output, and the plain-words assessment of a team."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._iperf3 import (
    Iperf3Error,
    assess,
    assess_against_ceiling,
    load_json,
    parse_result,
)

FIXTURES = Path(__file__).parent / "fixtures"
TEN_GBIT = 10_000_000_000


def fixture(name):
    return (FIXTURES / name).read_text()


def test_eight_streams_totals_and_first_stream():
    result = parse_result(fixture("iperf3_tcp_p8.json"))
    assert {key: result[key] for key in ("version", "protocol", "num_streams", "duration_s", "reverse", "target",
                                         "port", "sent_bits_per_second", "received_bits_per_second", "sent_bytes",
                                         "received_bytes", "seconds", "retransmits", "sender_tcp_congestion")} == {
        "version": "iperf 3.12", "protocol": "TCP", "num_streams": 8, "duration_s": 3, "reverse": False,
        "target": "127.0.0.1", "port": 52013, "sent_bits_per_second": 21480372997.25753,
        "received_bits_per_second": 21479743581.888775, "sent_bytes": 8063549440, "received_bytes": 8063549440,
        "seconds": 3.00322, "retransmits": 0, "sender_tcp_congestion": "bbr"}
    assert len(result["streams"]) == 8
    assert result["streams"][0] == {
        "index": 0, "socket": 5, "local_host": "127.0.0.1", "local_port": 55866, "remote_host": "127.0.0.1",
        "remote_port": 52013, "sent_bits_per_second": 2685046624.6571913,
        "received_bits_per_second": 2684967947.736097, "sent_bytes": 1007943680, "received_bytes": 1007943680,
        "retransmits": 0, "max_rtt_us": 69, "mean_rtt_us": 50}
    assert result["cpu_utilization_percent"]["host_total"] == 96.6526476449735


def test_reverse_stream_reports_retransmits():
    result = parse_result(json.loads(fixture("iperf3_tcp_p1_reverse.json")))
    assert (result["reverse"], result["num_streams"], result["retransmits"]) == (True, 1, 28)
    assert result["received_bits_per_second"] == 20613881645.43228


def _without_end_sums():
    document = json.loads(fixture("iperf3_tcp_p8.json"))
    document["end"] = {}
    return document


def _udp_shaped():
    document = json.loads(fixture("iperf3_tcp_p8.json"))
    document["end"] = {"sum": document["end"]["sum_sent"], "streams": []}
    return document


ERROR_CASES = [
    ("refused", fixture("iperf3_error_refused.json"),
     "iperf3 reported an error: unable to connect to server: Connection refused"),
    ("busy", fixture("iperf3_error_busy.json"),
     "iperf3 reported an error: the server is busy running a test. try again later"),
    ("printed_nothing", "  \n", "iperf3 printed nothing: it did not run a test; check that it was called with -J"),
    ("not_an_object", "[1, 2]", "iperf3 output is JSON but not an object (list): expected the -J document"),
    ("interrupted", _without_end_sums(),
     "iperf3 output has no end.sum_sent/end.sum_received: the test did not finish (interrupted, or the output was "
     "cut short)"),
    ("udp", _udp_shaped(),
     "iperf3 output has end.sum but no end.sum_sent/end.sum_received: only TCP tests are supported; drop -u"),
]


@pytest.mark.parametrize(("output", "message"), [case[1:] for case in ERROR_CASES],
                         ids=[case[0] for case in ERROR_CASES])
def test_failures_are_errors_even_with_rc_0(output, message):
    with pytest.raises(Iperf3Error) as error:
        parse_result(output)
    assert str(error.value) == message


def test_error_key_is_kept_verbatim():
    with pytest.raises(Iperf3Error) as error:
        parse_result(fixture("iperf3_error_refused.json"))
    assert error.value.iperf3_error == "unable to connect to server: Connection refused"


def test_torn_output_names_the_json_error_and_the_tail():
    text = fixture("iperf3_tcp_p8.json")[:700]
    with pytest.raises(Iperf3Error) as error:
        load_json(text)
    assert str(error.value.__cause__) == "Unterminated string starting at: line 32 column 5 (char 695)"
    assert str(error.value) == (
        f"iperf3 output is not complete JSON (Unterminated string starting at: line 32 column 5 (char 695)), it ends "
        f"with {text[-60:]!r}: it was cut short or -J was missing")


def synthetic(rates, retransmits=0, host_cpu=20.0, remote_cpu=20.0):
    """A parsed result with the given per-stream received rates (for cases loopback cannot produce)."""
    return {"received_bits_per_second": float(sum(rates)), "retransmits": retransmits,
            "cpu_utilization_percent": {"host_total": host_cpu, "remote_total": remote_cpu},
            "streams": [{"received_bits_per_second": rate} for rate in rates]}


ASSESS_CASES = [
    ("one_stream_on_a_team", synthetic([9.4e9]), TEN_GBIT, 2, 47.0, False, [
        "one stream cannot exceed one member link: a single TCP flow is hashed onto one of the 2 members, so it can "
        "reach at most 10 Gbit/s of the team's 20 Gbit/s; run parallel streams (-P) or use SMB Multichannel "
        "to fill the team",
        "the team reached 47.0 % of its expected 20 Gbit/s (2 x 10 Gbit/s), below the 80 % target"]),
    ("eight_streams_fill_the_team", synthetic([2.35e9] * 8), TEN_GBIT, 2, 94.0, True, [
        "per-stream spread: CV 0.000 (excellent), slowest/fastest 1.00",
        "the team reached 94.0 % of its expected 20 Gbit/s (2 x 10 Gbit/s)"]),
    ("all_flows_on_one_member", synthetic([1.2e9] * 8), TEN_GBIT, 2, 48.0, False, [
        "per-stream spread: CV 0.000 (excellent), slowest/fastest 1.00",
        "8 streams together carried 9.6 Gbit/s, no more than one member link (10 Gbit/s): the flows probably all "
        "landed on one member; check the team's load-balancing algorithm (hash on TCP ports, Dynamic) and the switch "
        "side",
        "the team reached 48.0 % of its expected 20 Gbit/s (2 x 10 Gbit/s), below the 80 % target"]),
    ("fewer_streams_than_members", synthetic([9e9, 9e9], retransmits=12, remote_cpu=95.0), TEN_GBIT, 4, 45.0, False, [
        "per-stream spread: CV 0.000 (excellent), slowest/fastest 1.00",
        "only 2 streams for 4 members: at least one member cannot carry a flow; use -P 8 or more",
        "the team reached 45.0 % of its expected 40 Gbit/s (4 x 10 Gbit/s), below the 80 % target",
        "12 TCP retransmits: the path dropped or reordered packets (full buffers, a faulty cable or a member running "
        "at a different speed)",
        "the remote host's CPU was 95 % busy: the result may be limited by CPU, not by the links"]),
    ("uneven_streams_no_expectation", synthetic([3e9, 1e9]), None, 1, None, None, [
        "per-stream spread: CV 0.500 (severe), slowest/fastest 0.33"]),
]


@pytest.mark.parametrize(("result", "link", "members", "utilisation", "reaches", "findings"),
                         [case[1:] for case in ASSESS_CASES], ids=[case[0] for case in ASSESS_CASES])
def test_assessment_in_plain_words(result, link, members, utilisation, reaches, findings):
    assessment = assess(result, link, members)
    assert assessment["utilisation_percent"] == pytest.approx(utilisation) if utilisation else \
        assessment["utilisation_percent"] is None
    assert assessment["reaches_expected"] is reaches
    assert assessment["findings"] == findings


def test_loopback_stream_beats_one_member_link():
    # The captured single reversed stream ran at 20.6 Gbit/s over loopback: more than a 10GbE member can carry.
    assessment = assess(parse_result(fixture("iperf3_tcp_p1_reverse.json")), TEN_GBIT, 2)
    assert assessment["findings"][1] == (
        "stream 0 carried 20.61 Gbit/s, more than one member link (10 Gbit/s): the test did not cross the team, "
        "or the expected link speed is too low")
    assert assessment["reaches_expected"] is True


def test_parallel_streams_graded_against_the_single_stream_ceiling():
    assessment = assess_against_ceiling(synthetic([1.2e9] * 8), 10e9)
    assert assessment["utilisation_percent"] == pytest.approx(96.0)
    assert assessment["reaches_expected"] is True
    assert assessment["findings"][0] == (
        "8 streams carried 9.6 Gbit/s, 96.0 % of this path's single-stream ceiling 10 Gbit/s (measured with 1 stream, "
        "no link speed given)")


def test_parallel_streams_below_the_single_stream_ceiling_say_so():
    assessment = assess_against_ceiling(synthetic([0.5e9] * 8), 10e9)
    assert assessment["reaches_expected"] is False
    assert assessment["findings"][0].endswith("(measured with 1 stream, no link speed given), below the 80 % target")
