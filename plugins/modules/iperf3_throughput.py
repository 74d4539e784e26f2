#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: iperf3_throughput
short_description: Measure TCP throughput with iperf3 and judge it against a NIC team's expected bandwidth
version_added: 0.1.0
description:
  - In C(client) mode runs C(iperf3 -c TARGET -J -P N -t T) (plus C(--bind), C(-R), C(-p) when asked) and returns the
    total sent and received bits per second, the numbers of every stream, the retransmits and the CPU load of both
    ends.
  - iperf3 exits 0 even when the test failed (refused, server busy) and only reports an C(error) key in its JSON;
    the module treats that key as a failure.
  - Given the speed of one member link and the number of members, it reports the team's utilisation and findings
    in plain words, for example that one stream cannot exceed one member link.
  - Without a link speed, given the rate one stream reached on the same path just before
    (O(single_stream_ceiling_bits_per_second)), it grades the parallel streams against that ceiling instead, and
    says so in its findings.
  - In C(server) mode starts a one-off server, C(iperf3 -s -1 -D), that serves exactly one test and then exits;
    delegate such a task to the host the client will target, before the client task.
  - Changes nothing on the hosts; the one-off server leaves nothing behind.
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.attributes
attributes:
  check_mode:
    support: full
    details: A measurement is read-only, so check mode runs it the same way (traffic is still sent).
options:
  mode:
    description:
      - C(client) runs a test against O(target); C(server) starts a one-off server on this host and returns once it
        listens.
    type: str
    choices: [client, server]
    default: client
  target:
    description:
      - Address or name of the iperf3 server. Required in C(client) mode.
    type: str
  port:
    description:
      - Server port (C(-p)).
    type: int
    default: 5201
  parallel:
    description:
      - Number of parallel streams (C(-P)). A team can only be filled by at least as many flows as it has members.
    type: int
    default: 8
  duration_s:
    description:
      - Test length in seconds (C(-t)).
    type: int
    default: 10
  bind_address:
    description:
      - Local address to bind to (C(--bind)); in C(server) mode the address the server listens on.
    type: str
  reverse:
    description:
      - Let the server send and the client receive (C(-R)).
    type: bool
    default: false
  connect_timeout_s:
    description:
      - Give up when the control connection is not set up within this time (C(--connect-timeout)).
    type: int
    default: 10
  expected_link_bits_per_second:
    description:
      - Speed of ONE member link in bits per second, for example C(10000000000) for 10GbE.
      - When set, the module reports the team's utilisation and whether it reaches O(min_utilisation_percent).
    type: int
  single_stream_ceiling_bits_per_second:
    description:
      - The rate ONE stream reached on the same path, measured just before (a run of this module with O(parallel=1)).
      - Used only when O(expected_link_bits_per_second) is unset; the received rate of the parallel streams is then
        graded against it with O(min_utilisation_percent), so a path with no published link speed still gets a
        verdict with a reason.
    type: float
  member_count:
    description:
      - Number of member links in the team.
    type: int
    default: 1
  min_utilisation_percent:
    description:
      - The team reaches its expected bandwidth when the received rate is at least this percentage of
        O(expected_link_bits_per_second) x O(member_count).
    type: float
    default: 80.0
  server_ready_timeout_s:
    description:
      - In C(server) mode, how long to wait for the server to listen.
    type: int
    default: 5
notes:
  - One iperf3 server serves one test at a time; a second client gets "the server is busy" and the task fails.
  - Only TCP tests are supported.
  - The one-off server is found listening through C(/proc/net/tcp) and C(/proc/net/tcp6), so server mode needs Linux.
seealso:
  - module: hpc.balance.ipvs_spread
  - module: hpc.balance.tokens_per_expert
"""

EXAMPLES = r"""
- name: Start a one-off iperf3 server on the storage host
  hpc.balance.iperf3_throughput:
    mode: server
    bind_address: 198.18.0.21
  delegate_to: storage1

- name: Eight parallel streams against a two-member 10GbE team
  hpc.balance.iperf3_throughput:
    target: 198.18.0.21
    parallel: 8
    duration_s: 10
    expected_link_bits_per_second: 10000000000
    member_count: 2
  register: team

- name: Fail when the team stays below its expected bandwidth
  ansible.builtin.assert:
    that: team.reaches_expected
    fail_msg: "{{ team.findings | join('; ') }}"
"""

RETURN = r"""
mode:
  description: C(client) or C(server).
  returned: always
  type: str
  sample: client
cmd:
  description: The iperf3 command that was run.
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/iperf3", "-c", "198.18.0.21", "-J", "-P", "8", "-t", "10", "-p", "5201", "--connect-timeout",
           "10000"]
server_listening:
  description: In C(server) mode, whether the one-off server was seen listening (null in C(client) mode).
  returned: always
  type: bool
  sample: null
version:
  description: iperf3 version string from the test.
  returned: when mode is client
  type: str
  sample: iperf 3.12
target:
  description: The server the client connected to.
  returned: when mode is client
  type: str
  sample: 198.18.0.21
port:
  description: The server port.
  returned: when mode is client
  type: int
  sample: 5201
protocol:
  description: Test protocol.
  returned: when mode is client
  type: str
  sample: TCP
num_streams:
  description: Number of parallel streams.
  returned: when mode is client
  type: int
  sample: 8
duration_s:
  description: Requested test length in seconds.
  returned: when mode is client
  type: int
  sample: 10
reverse:
  description: Whether the server sent (C(-R)).
  returned: when mode is client
  type: bool
  sample: false
sent_bits_per_second:
  description: Total rate at the sender (end.sum_sent).
  returned: when mode is client
  type: float
  sample: 18841225830.5
received_bits_per_second:
  description: Total rate at the receiver (end.sum_received); utilisation is computed from this.
  returned: when mode is client
  type: float
  sample: 18830112040.1
sent_bytes:
  description: Bytes sent.
  returned: when mode is client
  type: int
  sample: 23551532032
received_bytes:
  description: Bytes received.
  returned: when mode is client
  type: int
  sample: 23537640050
seconds:
  description: Measured length of the test at the receiver.
  returned: when mode is client
  type: float
  sample: 10.0004
retransmits:
  description: TCP retransmits over all streams (null when the sender did not report them).
  returned: when mode is client
  type: int
  sample: 0
cpu_utilization_percent:
  description: CPU load of this host (C(host_*)) and of the server (C(remote_*)) during the test.
  returned: when mode is client
  type: dict
  sample: {"host_total": 38.5, "host_user": 1.4, "host_system": 37.1, "remote_total": 61.2, "remote_user": 0.9,
           "remote_system": 60.3}
sender_tcp_congestion:
  description: Congestion control algorithm of the sender.
  returned: when mode is client
  type: str
  sample: cubic
receiver_tcp_congestion:
  description: Congestion control algorithm of the receiver.
  returned: when mode is client
  type: str
  sample: cubic
streams:
  description: One entry per stream.
  returned: when mode is client
  type: list
  elements: dict
  contains:
    index:
      description: Stream number, from 0.
      returned: always
      type: int
      sample: 0
    socket:
      description: iperf3's socket id of the stream.
      returned: always
      type: int
      sample: 5
    local_host:
      description: Local address of the stream.
      returned: always
      type: str
      sample: 198.18.0.31
    local_port:
      description: Local port of the stream.
      returned: always
      type: int
      sample: 47092
    remote_host:
      description: Remote address of the stream.
      returned: always
      type: str
      sample: 198.18.0.21
    remote_port:
      description: Remote port of the stream.
      returned: always
      type: int
      sample: 5201
    sent_bits_per_second:
      description: Rate at the sender.
      returned: always
      type: float
      sample: 2355153203.2
    received_bits_per_second:
      description: Rate at the receiver.
      returned: always
      type: float
      sample: 2353764005.0
    sent_bytes:
      description: Bytes sent on the stream.
      returned: always
      type: int
      sample: 2943941504
    received_bytes:
      description: Bytes received on the stream.
      returned: always
      type: int
      sample: 2942205006
    retransmits:
      description: Retransmits on the stream (null when not reported).
      returned: always
      type: int
      sample: 0
    max_rtt_us:
      description: Largest round-trip time seen by the sender, in microseconds (null when not reported).
      returned: always
      type: int
      sample: 412
    mean_rtt_us:
      description: Mean round-trip time seen by the sender, in microseconds (null when not reported).
      returned: always
      type: int
      sample: 120
expected_link_bits_per_second:
  description: The speed of one member link that was given (null when not given).
  returned: when mode is client
  type: int
  sample: 10000000000
member_count:
  description: The number of member links that was given.
  returned: when mode is client
  type: int
  sample: 2
expected_source:
  description:
    - What the result was graded against, C(link speed) (O(expected_link_bits_per_second) x O(member_count)),
      C(single-stream ceiling) (O(single_stream_ceiling_bits_per_second)), or null (nothing to grade against).
  returned: when mode is client
  type: str
  sample: link speed
single_stream_ceiling_bits_per_second:
  description: The single-stream ceiling that was given (null when not given).
  returned: when mode is client
  type: float
  sample: 9410000000.0
team_bits_per_second:
  description:
    - The bandwidth graded against, O(expected_link_bits_per_second) x O(member_count), or the single-stream
      ceiling when no link speed was given (null when neither was given).
  returned: when mode is client
  type: float
  sample: 20000000000.0
utilisation_percent:
  description: Received rate as a percentage of RV(team_bits_per_second) (null when there is nothing to grade against).
  returned: when mode is client
  type: float
  sample: 94.2
reaches_expected:
  description:
    - Whether utilisation_percent is at least O(min_utilisation_percent) (null when there is nothing to grade
      against).
  returned: when mode is client
  type: bool
  sample: true
stream_spread:
  description: Balance statistics of the received rate per stream (see the C(_spread) module utils).
  returned: when mode is client
  type: dict
  sample: {"count": 8, "mean": 2353764005.0, "max_over_mean": 1.03, "min_over_max": 0.95, "cv": 0.021,
           "cv_grade": "excellent"}
findings:
  description: Plain-words findings about the result.
  returned: when mode is client
  type: list
  elements: str
  sample: ["the team reached 94.2 % of its expected 20 Gbit/s (2 x 10 Gbit/s)"]
summary:
  description: One plain line.
  returned: always
  type: str
  sample: "8 streams to 198.18.0.21:5201: 18.83 Gbit/s received, 0 retransmits, 94.2 % of 20 Gbit/s"
"""

import os
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.balance.plugins.module_utils._iperf3 import (
    Iperf3Error,
    assess,
    assess_against_ceiling,
    parse_result,
)
from ansible_collections.hpc.balance.plugins.module_utils._units import format_bits_per_second

SPREAD_KEYS = ("count", "mean", "min", "max", "max_over_mean", "min_over_max", "cv", "cv_grade")
TCP_LISTEN = "0A"


def _listening(port: int) -> bool:
    """True when some socket listens on ``port`` (any address), per /proc/net/tcp and tcp6."""
    wanted = f":{port:04X}"
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(name):
            continue
        with open(name) as handle:
            next(handle, None)
            for line in handle:
                fields = line.split()
                if len(fields) > 3 and fields[3] == TCP_LISTEN and fields[1].endswith(wanted):
                    return True
    return False


def _server(module: AnsibleModule, iperf3: str, params: dict[str, Any]) -> None:
    command = [iperf3, "-s", "-1", "-D", "-p", str(params["port"])]
    if params["bind_address"]:
        command += ["--bind", params["bind_address"]]
    if _listening(params["port"]):
        module.fail_json(msg=f"port {params['port']} already has a listening socket on this host: another iperf3 "
                             f"server (or service) runs there; stop it or choose another port", cmd=command)
    rc, out, err = module.run_command(command)
    if rc != 0:
        module.fail_json(msg=f"{' '.join(command)} failed with rc {rc}: {(err or out).strip()}",
                         rc=rc, stdout=out, stderr=err, cmd=command)
    deadline = time.monotonic() + params["server_ready_timeout_s"]
    while not _listening(params["port"]):
        if time.monotonic() > deadline:
            module.fail_json(msg=f"the one-off iperf3 server did not listen on port {params['port']} within "
                                 f"{params['server_ready_timeout_s']} s; run '{' '.join(command)}' by hand to see why",
                             cmd=command)
        time.sleep(0.05)
    module.exit_json(changed=False, mode="server", cmd=command, server_listening=True,
                     summary=f"one-off iperf3 server listening on {params['bind_address'] or '*'}:{params['port']}")


def _client_command(iperf3: str, params: dict[str, Any]) -> list[str]:
    command = [iperf3, "-c", params["target"], "-J", "-P", str(params["parallel"]), "-t", str(params["duration_s"]),
               "-p", str(params["port"]), "--connect-timeout", str(params["connect_timeout_s"] * 1000)]
    if params["bind_address"]:
        command += ["--bind", params["bind_address"]]
    if params["reverse"]:
        command.append("-R")
    return command


def _summary(result: dict[str, Any], assessment: dict[str, Any], params: dict[str, Any]) -> str:
    retransmits = "unknown" if result["retransmits"] is None else result["retransmits"]
    line = (f"{len(result['streams'])} streams to {params['target']}:{params['port']}: "
            f"{format_bits_per_second(result['received_bits_per_second'])} received, {retransmits} retransmits")
    if assessment["utilisation_percent"] is not None:
        ceiling = " (single-stream ceiling)" if params["expected_link_bits_per_second"] is None else ""
        line += (f", {assessment['utilisation_percent']:.1f} % of "
                 f"{format_bits_per_second(assessment['team_bits_per_second'])}{ceiling}")
    return line


def _assessment(result: dict[str, Any], params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(assessment, what it graded against): the link speed when given, else the single-stream ceiling, else nothing."""
    if params["expected_link_bits_per_second"] is not None:
        return assess(result, params["expected_link_bits_per_second"], params["member_count"],
                      params["min_utilisation_percent"]), "link speed"
    if params["single_stream_ceiling_bits_per_second"] is not None:
        return assess_against_ceiling(result, params["single_stream_ceiling_bits_per_second"],
                                      params["min_utilisation_percent"]), "single-stream ceiling"
    return assess(result, None, params["member_count"], params["min_utilisation_percent"]), None


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", default="client", choices=["client", "server"]),
            target=dict(type="str"),
            port=dict(type="int", default=5201),
            parallel=dict(type="int", default=8),
            duration_s=dict(type="int", default=10),
            bind_address=dict(type="str"),
            reverse=dict(type="bool", default=False),
            connect_timeout_s=dict(type="int", default=10),
            expected_link_bits_per_second=dict(type="int"),
            single_stream_ceiling_bits_per_second=dict(type="float"),
            member_count=dict(type="int", default=1),
            min_utilisation_percent=dict(type="float", default=80.0),
            server_ready_timeout_s=dict(type="int", default=5),
        ),
        required_if=[("mode", "client", ("target",))],
        supports_check_mode=True,
    )
    params = module.params
    for name, low, high in (("port", 1, 65535), ("parallel", 1, 128), ("duration_s", 1, 86400),
                            ("connect_timeout_s", 1, 3600), ("member_count", 1, 64),
                            ("server_ready_timeout_s", 1, 600)):
        if not low <= params[name] <= high:
            module.fail_json(msg=f"{name} is {params[name]}: give a value from {low} to {high}")
    ceiling = params["single_stream_ceiling_bits_per_second"]
    if ceiling is not None and not ceiling > 0:
        module.fail_json(msg=f"single_stream_ceiling_bits_per_second is {ceiling}: give the rate one stream reached "
                             f"(received_bits_per_second of a parallel=1 run), a number above 0")
    if params["expected_link_bits_per_second"] is not None and params["expected_link_bits_per_second"] < 1:
        module.fail_json(msg=f"expected_link_bits_per_second is {params['expected_link_bits_per_second']}: give one "
                             f"member link's speed, e.g. 10000000000 for 10GbE")

    iperf3 = module.get_bin_path("iperf3")
    if iperf3 is None:
        module.fail_json(msg="iperf3 is not installed on this host (not found on PATH); install the iperf3 package")
    if params["mode"] == "server":
        _server(module, iperf3, params)

    command = _client_command(iperf3, params)
    rc, out, err = module.run_command(command)
    try:
        result = parse_result(out)
    except Iperf3Error as exc:
        module.fail_json(msg=f"{exc} (rc {rc})", iperf3_error=exc.iperf3_error, rc=rc, stdout=out, stderr=err,
                         cmd=command)
    if rc != 0:
        module.fail_json(msg=f"iperf3 exited with rc {rc} without an error in its JSON: {err.strip()}",
                         rc=rc, stdout=out, stderr=err, cmd=command)

    assessment, source = _assessment(result, params)
    spread = assessment.pop("stream_spread")
    result.update(assessment)
    result["stream_spread"] = {key: spread[key] for key in SPREAD_KEYS}
    result.update(changed=False, mode="client", cmd=command, server_listening=None,
                  expected_link_bits_per_second=params["expected_link_bits_per_second"],
                  member_count=params["member_count"], expected_source=source,
                  single_stream_ceiling_bits_per_second=params["single_stream_ceiling_bits_per_second"],
                  summary=_summary(result, assessment, params))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
