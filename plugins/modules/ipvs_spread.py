#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ipvs_spread
short_description: Report how IPVS spreads connections over the real servers, against the split their scheduler makes
version_added: 0.1.0
description:
  - Reads the IPVS table of an LVS director and reports, per virtual service, the scheduler, its flags and, per real
    server, the weight, the active and inactive connections and (with the C(ipvsadm) source) the total connections,
    packets and bytes.
  - Computes how far each real server's share of the load is from the share its scheduler gives it and gives a
    C(balanced) verdict against a threshold (15 percent by default).
  - The expected share follows what the kernel's scheduler does with a weight. The weighted schedulers (C(wrr),
    C(wlc), C(sed), C(nq), C(lblc), C(lblcr), C(sh), C(mh), C(twos)) split new connections by weight, so a real
    server's share is its weight divided by the sum of the weights.
  - C(rr) and C(lc) only test whether a weight is above 0 (ip_vs_rr.c, ip_vs_lc.c), so every real server with a
    weight above 0 is expected to get an equal share whatever its weight, and one with weight 0 none. A correct
    C(rr) pool with weights 3:1 and equal connections is balanced.
  - C(fo) sends every new connection to the first available real server with the highest weight (ip_vs_fo.c), so
    that real server is expected to get all of them (of equal highest weights, the first in the table) and the others
    none; a C(fo) service whose connections are spread evenly is not balanced.
  - C(ovf) sends new connections to the real server with the highest weight until its active connections exceed its
    weight, then to the next (ip_vs_ovf.c), and C(dh) maps each destination address to one real server whatever its
    weight (ip_vs_dh.c). Their split follows the concurrency or the destinations, not a share, so they are not
    graded; C(balanced) is null, C(not_graded) says why, and the split is still shown.
  - By default it grades what each service's scheduler balances - current connections as the kernel weighs them
    (256 x active + inactive) for C(lc), C(wlc), C(lblc) and C(lblcr), active connections for C(sed), C(nq) and C(ovf),
    and
    for the others the rate of new connections over a window (two readings I(window_s) apart) - and says per service
    which measure it graded. Cumulative counters carry outage windows and earlier weights, so they are graded only
    when asked for (C(metric=conns)).
  - Warns about the C(sh) and C(mh) schedulers without their port flag, and about persistence, because both pin all
    clients behind one NAT address to one real server.
  - Read-only; it never changes the IPVS table.
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.attributes
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
options:
  source:
    description:
      - Where to read the table from.
      - C(proc) reads C(/proc/net/ip_vs) (weights, active and inactive connections) and C(/proc/net/ip_vs_stats)
        (totals); it needs no extra package but has no per-server counters.
      - C(ipvsadm) runs C(ipvsadm -Ln --exact) and C(ipvsadm -Ln --stats --exact) and merges them, which adds
        per-server connections, packets and bytes. Counters are never read in the rounded K/M/G form.
      - C(auto) uses C(ipvsadm) when it is installed and I(proc_net_path) is left at C(/proc/net), else C(proc).
    type: str
    choices: [auto, proc, ipvsadm]
    default: auto
  virtual_address:
    description:
      - Only report virtual services with this address (IPv4 or IPv6, any spelling).
    type: str
  virtual_port:
    description:
      - Only report virtual services on this port.
    type: int
  fwmark:
    description:
      - Only report the firewall-mark service with this mark.
    type: int
  metric:
    description:
      - The load that is compared against the weights.
      - C(conns) is the number of connections scheduled since the counters were created or zeroed (C(ipvsadm) source
        only); C(conns_rate) the new connections per second between two readings I(window_s) apart.
      - C(conn_overhead) is 256 x active + inactive connections now, what C(lc) and C(wlc) balance per weight
        (the kernel's C(ip_vs_dest_conn_overhead)); C(current_conns) is active plus inactive connections now;
        C(active_conns) only the active ones.
      - C(in_packets) and C(in_bytes) are the inbound counters (C(ipvsadm) source only).
      - C(auto) picks per service what its scheduler balances - C(conn_overhead) for lc, wlc, lblc, lblcr;
        C(active_conns) for sed, nq and ovf; else C(conns_rate) with per-server counters and I(window_s) above 0,
        C(conns) with counters and I(window_s=0), C(current_conns) without counters.
    type: str
    choices: [auto, conns, conns_rate, conn_overhead, current_conns, active_conns, in_packets, in_bytes]
    default: auto
  window_s:
    description:
      - Seconds between the two readings a rate is computed from (C(conns_rate), and C(auto) for rate-graded
        schedulers). C(0) reads once; C(auto) then grades cumulative C(conns).
      - C(auto) also grades cumulative C(conns), and says why, when the window holds too few new connections to see
        the expected split within I(threshold_percent) (fewer than 1 / (limit x smallest expected share above 0), so
        80 for wrr 3:1 at 5 %), for example the tail of a burst that ended just before the first reading. The same
        rule gives the finding that a count of connections is too few to judge the spread.
    type: float
    default: 2.0
  threshold_percent:
    description:
      - A service is balanced when no real server with a weight above 0 deviates from its expected share (by weight,
        equal for C(rr) and C(lc), all on one real server for C(fo); see the description) by more than this many
        percent.
    type: float
    default: 15.0
  proc_net_path:
    description:
      - Directory holding C(ip_vs) and C(ip_vs_stats). Point it at a saved copy to audit a snapshot.
    type: path
    default: /proc/net
  kernel_hz:
    description:
      - The kernel's C(CONFIG_HZ); C(/proc/net/ip_vs) prints the persistence timeout in jiffies. Debian uses 250.
    type: int
    default: 250
  connections_of:
    description:
      - Also list the connection entries IPVS holds to these real server addresses (C(/proc/net/ip_vs_conn) under
        I(proc_net_path), either source), counted by state and as live connections, in RV(connections). One address
        or a list (a real server's IPv4 and IPv6 address). It shows what holds a drain - for example ESTABLISHED
        entries of connections that ended while the real server was down, which IPVS keeps until its tcp timeout
        because in DR the director never sees the real server's reset.
    type: list
    elements: str
  connections_max:
    description:
      - How many of the entries of I(connections_of) to return, those that expire last first (all are counted).
    type: int
    default: 20
  real_server_names:
    description:
      - Names to show for real server addresses (a dict from address to name), for example the inventory hostnames
        of the real servers. Each real server's C(name) and the summary line use them; addresses without a name are
        shown as they are.
    type: dict
    default: {}
notes:
  - The spread says little with few connections; send at least some hundred connections through a virtual service
    before trusting the verdict. Real servers with weight 0 are quiesced and left out of the verdict.
  - The kernel also skips a real server over its upper connection threshold (keepalived's C(uthreshold)), which the
    table does not show; C(rr), C(lc) and C(fo) services with such thresholds can read as not balanced while they
    are full.
  - The kernel refreshes the counters C(ipvsadm --stats) shows every 2 seconds (its rate estimator), so they lag
    the traffic by up to 2 seconds; a I(window_s) below 2 may see no refresh at all.
  - C(/proc/net/ip_vs) does not show scheduler flags, so with the C(proc) source an C(sh) or C(mh) service is warned
    about even when it hashes ports too (C(sh-port), C(mh-port)); the C(ipvsadm) source sees the flags.
seealso:
  - module: hpc.balance.iperf3_throughput
  - module: hpc.balance.tokens_per_expert
"""

EXAMPLES = r"""
- name: Report the spread of every virtual service
  hpc.balance.ipvs_spread:
  register: spread

- name: Check one VIP and fail when it is out of balance
  hpc.balance.ipvs_spread:
    virtual_address: 198.18.0.100
    virtual_port: 80
    threshold_percent: 10
  register: web
  failed_when: web.balanced is false

- name: Read the table without ipvsadm (no per-server counters)
  hpc.balance.ipvs_spread:
    source: proc
    metric: current_conns
"""

RETURN = r"""
source:
  description: The source that was read.
  returned: always
  type: str
  sample: ipvsadm
metric:
  description: The metric asked for; C(auto) when each service was graded by what its scheduler balances (see each
    service's C(metric) and C(graded)).
  returned: always
  type: str
  sample: auto
window_s:
  description: Seconds between the two readings rates were computed from (0 when the table was read once).
  returned: always
  type: float
  sample: 2.0
threshold_percent:
  description: The threshold used for the verdicts.
  returned: always
  type: float
  sample: 15.0
ipvs_version:
  description: The IPVS version from the table header.
  returned: always
  type: str
  sample: 1.2.1
balanced:
  description:
    - True when every judged service is balanced, false when one is not, null when no service carried any load or
      none was graded (C(ovf), C(dh)).
  returned: always
  type: bool
  sample: true
service_count:
  description: Number of virtual services reported (after filtering).
  returned: always
  type: int
  sample: 1
real_server_count:
  description: Number of real servers over the reported services.
  returned: always
  type: int
  sample: 2
totals:
  description:
    - IPVS-wide counters since the module was loaded (C(/proc/net/ip_vs_stats) or the sum over the services).
    - Keys are null where the source does not know them.
  returned: always
  type: dict
  sample: {"conns": 10000, "in_packets": 60000, "out_packets": 0, "in_bytes": 4000000, "out_bytes": 0}
summary:
  description: One plain line per service.
  returned: always
  type: list
  elements: str
  sample: ["TCP 198.18.0.100:80 (wlc): balanced, 2 real servers, worst deviation 4.2 % (limit 15 %), CV 0.042;
            graded current connections as wlc weighs them (256 x active + inactive)",
           "UDP 198.18.0.100:53 (rr): balanced, 2 real servers, split 198.18.0.11 300 / 198.18.0.12 300 of 600
            connections, worst deviation 0.0 % (limit 15 %), CV 0.000; graded connections scheduled since the counters
            were zeroed (cumulative: outages and earlier weights count) against equal shares for the real servers with
            a weight above 0 (rr ignores the weights beyond that, ip_vs_rr.c)"]
connections:
  description: The connection entries to I(connections_of), when it is given.
  returned: when connections_of is given
  type: dict
  contains:
    addresses:
      description: The real server addresses, as the table spells them.
      type: list
      elements: str
      sample: [198.18.0.11]
    total:
      description: How many entries IPVS holds to them.
      type: int
      sample: 12
    by_state:
      description: Entries per state.
      type: dict
      sample: {ESTABLISHED: 12, FIN_WAIT: 3}
    live:
      description:
        - The entries that may still carry a client's connection - C(ESTABLISHED), and C(SYN_RECV) entries whose
          client sent a SYN within the last 3 s (Linux resends an unanswered SYN 1 s and 3 s after the first).
        - The kernel's ActiveConn counter also counts older C(SYN_RECV) entries, which a real server that was down
          while clients connected leaves for 60 s (IPVS's fixed SYN_RECV timeout) after the last attempt; this count
          leaves them out.
      type: int
      sample: 12
    entries:
      description: Up to I(connections_max) entries, those that expire last first.
      type: list
      elements: dict
      sample: [{protocol: TCP, client_address: 198.18.0.10, client_port: 40000, virtual_address: 198.18.0.100,
                virtual_port: 80, destination_address: 198.18.0.11, destination_port: 80, state: ESTABLISHED,
                expires_s: 611}]
services:
  description: One entry per virtual service.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Service id, C(PROTO ADDRESS:PORT), C(FWM MARK) or C(FWM MARK IPv6).
      returned: always
      type: str
      sample: TCP 198.18.0.100:80
    protocol:
      description: C(TCP), C(UDP), C(SCTP) or C(FWM).
      returned: always
      type: str
      sample: TCP
    address:
      description: Virtual address (null for firewall-mark services).
      returned: always
      type: str
      sample: 198.18.0.100
    port:
      description: Virtual port (null for firewall-mark services).
      returned: always
      type: int
      sample: 80
    fwmark:
      description: Firewall mark (null for address services).
      returned: always
      type: int
      sample: null
    family:
      description: C(ipv4) or C(ipv6) (null for a firewall-mark service without real servers in C(/proc)).
      returned: always
      type: str
      sample: ipv4
    scheduler:
      description: Scheduler name.
      returned: always
      type: str
      sample: wlc
    flags:
      description: Service flags (scheduler flags, C(persistent), C(ops)).
      returned: always
      type: list
      elements: str
      sample: []
    persistent:
      description: Whether the service is persistent.
      returned: always
      type: bool
      sample: false
    persistence_timeout_s:
      description: Persistence timeout in seconds (null when not persistent).
      returned: always
      type: int
      sample: null
    persistence_netmask:
      description: Persistence netmask, dotted for IPv4, prefix length for IPv6 (null when not persistent).
      returned: always
      type: str
      sample: null
    persistence_engine:
      description: Persistence engine such as C(sip) (C(ipvsadm) source only; null when none).
      returned: always
      type: str
      sample: null
    one_packet_scheduling:
      description: Whether one-packet scheduling (C(ops)) is on.
      returned: always
      type: bool
      sample: false
    conns:
      description: Connections scheduled since the service was created (null with the C(proc) source).
      returned: always
      type: int
      sample: 10000
    in_packets:
      description: Inbound packets (null with the C(proc) source).
      returned: always
      type: int
      sample: 60000
    out_packets:
      description: Outbound packets (null with the C(proc) source; 0 in DR mode).
      returned: always
      type: int
      sample: 0
    in_bytes:
      description: Inbound bytes (null with the C(proc) source).
      returned: always
      type: int
      sample: 4000000
    out_bytes:
      description: Outbound bytes (null with the C(proc) source; 0 in DR mode).
      returned: always
      type: int
      sample: 0
    metric:
      description: The measure graded for this service (C(auto) resolved by its scheduler).
      returned: always
      type: str
      sample: conn_overhead
    graded:
      description: That measure in plain words.
      returned: always
      type: str
      sample: current connections as wlc weighs them (256 x active + inactive)
    expected_split:
      description:
        - What the scheduler is held to when it does not split by weight, in words (C(rr), C(lc), C(fo)); null for
          the weighted schedulers and for those not graded.
      returned: always
      type: str
      sample: equal shares for the real servers with a weight above 0 (rr ignores the weights beyond that, ip_vs_rr.c)
    not_graded:
      description: Why the scheduler's split is not graded (C(ovf), C(dh)); null when it is.
      returned: always
      type: str
      sample: null
    balanced:
      description: The verdict for this service; null when no load was recorded or the scheduler is not graded.
      returned: always
      type: bool
      sample: true
    max_abs_deviation_percent:
      description: Largest deviation of a real server from its expected share, in percent (null when none).
      returned: always
      type: float
      sample: 4.2
    spread:
      description:
        - Balance statistics of the metric per unit of weight (per real server with a weight above 0 for the
          schedulers that do not split by weight), from the shared C(_spread) module utils.
        - C(hot_share) is the fraction of the load on real servers above 2 x the mean.
      returned: always
      type: dict
      sample: {"count": 2, "total": 10000, "mean": 5000.0, "min": 4790, "max": 5210, "max_over_mean": 1.042,
               "min_over_max": 0.919, "cv": 0.042, "cv_grade": "excellent", "idle_count": 0, "idle_share": 0.0,
               "hot_count": 0, "hot_share": 0.0}
    pinning_warning:
      description: Plain words when the scheduler or persistence pins NAT'd clients, else null.
      returned: always
      type: str
      sample: null
    findings:
      description: Plain-words observations about the service.
      returned: always
      type: list
      elements: str
      sample: ["198.18.0.12 got 30.0 % of the conns where its weight asks for 50.0 % (-40.0 %, limit 15 %)"]
    real_servers:
      description: One entry per real server.
      returned: always
      type: list
      elements: dict
      contains:
        address:
          description: Real server address.
          returned: always
          type: str
          sample: 198.18.0.11
        name:
          description: The name given for this address in I(real_server_names), else null.
          returned: always
          type: str
          sample: urs1
        port:
          description: Real server port.
          returned: always
          type: int
          sample: 80
        family:
          description: C(ipv4) or C(ipv6).
          returned: always
          type: str
          sample: ipv4
        forward:
          description:
            - Forwarding method, C(Route) (DR), C(Masq) (NAT), C(Tunnel) or C(Local).
            - Null if only the stats listing had the server.
          returned: always
          type: str
          sample: Route
        weight:
          description: Weight (null if only the stats listing had it).
          returned: always
          type: int
          sample: 1
        active_conns:
          description: Active connections now (null if only the stats listing had it).
          returned: always
          type: int
          sample: 12
        inactive_conns:
          description: Inactive connections now (null if only the stats listing had it).
          returned: always
          type: int
          sample: 40
        conns:
          description: Connections scheduled to it (null with the C(proc) source).
          returned: always
          type: int
          sample: 5210
        in_packets:
          description: Inbound packets (null with the C(proc) source).
          returned: always
          type: int
          sample: 31260
        out_packets:
          description: Outbound packets (null with the C(proc) source).
          returned: always
          type: int
          sample: 0
        in_bytes:
          description: Inbound bytes (null with the C(proc) source).
          returned: always
          type: int
          sample: 2084000
        out_bytes:
          description: Outbound bytes (null with the C(proc) source).
          returned: always
          type: int
          sample: 0
        load:
          description: Value of the metric for this server.
          returned: always
          type: int
          sample: 5210
        share:
          description: Its fraction of the service's total load (null when the total is 0).
          returned: always
          type: float
          sample: 0.521
        expected_share:
          description:
            - The share its scheduler gives it - its weight divided by the sum of the weights for the weighted
              schedulers, an equal share of those with a weight above 0 for C(rr) and C(lc), 1 or 0 for C(fo).
            - 0 for weight 0; null when all weights are 0 or the scheduler is not graded.
          returned: always
          type: float
          sample: 0.5
        deviation_percent:
          description: (share - expected_share) / expected_share in percent (null where expected_share is 0 or
            null, or with no load).
          returned: always
          type: float
          sample: 4.2
"""

import os
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.balance.plugins.module_utils._addresses import address_spelling, parse_address
from ansible_collections.hpc.balance.plugins.module_utils._ipvs import (
    IpvsParseError,
    live_connections,
    merge_ipvsadm,
    parse_ipvsadm,
    parse_proc_ip_vs,
    parse_proc_ip_vs_conn,
    parse_proc_ip_vs_stats,
    totals,
)
from ansible_collections.hpc.balance.plugins.module_utils._ipvs_grading import (
    add_rates,
    report_service,
    service_metric,
    summary_line,
)

COUNTER_KEYS = ("conns", "in_packets", "out_packets", "in_bytes", "out_bytes")
COUNTER_METRICS = ("conns", "conns_rate", "in_packets", "in_bytes")


def _read_proc(module: AnsibleModule, proc_net_path: str, kernel_hz: int) -> dict[str, Any]:
    table_path = os.path.join(proc_net_path, "ip_vs")
    if not os.path.exists(table_path):
        module.fail_json(msg=f"{table_path} does not exist: IPVS is not loaded on this host. Load it (modprobe ip_vs) "
                             f"or run this on an LVS director.")
    with open(table_path) as handle:
        table = parse_proc_ip_vs(handle.read(), kernel_hz=kernel_hz)
    stats_path = os.path.join(proc_net_path, "ip_vs_stats")
    table["totals"] = None
    if os.path.exists(stats_path):
        with open(stats_path) as handle:
            stats = parse_proc_ip_vs_stats(handle.read())
        table["totals"] = {key: stats[key] for key in COUNTER_KEYS}
    return table


def _run_ipvsadm(module: AnsibleModule, ipvsadm: str, extra: list[str]) -> str:
    command = [ipvsadm, "-Ln"] + extra + ["--exact"]
    rc, out, err = module.run_command(command)
    if rc != 0:
        module.fail_json(msg=f"{' '.join(command)} failed with rc {rc}: {(err or out).strip()}. Is IPVS loaded "
                             f"(modprobe ip_vs) and are you root?", rc=rc, stdout=out, stderr=err, cmd=command)
    return out


def _read_connections(module: AnsibleModule, proc_net_path: str, addresses: list[str],
                      limit: int) -> dict[str, Any]:
    """The connection entries to one real server's addresses, counted by state and as live connections; the
    ``limit`` that expire last listed."""
    path = os.path.join(proc_net_path, "ip_vs_conn")
    try:
        with open(path) as handle:
            text = handle.read()
        entries = [entry for address in addresses for entry in parse_proc_ip_vs_conn(text, destination=address)]
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path} for connections_of: {exc}")
    except IpvsParseError as exc:
        module.fail_json(msg=f"cannot read {path}: {exc}")
    by_state: dict[str, int] = {}
    for entry in entries:
        by_state[entry["state"]] = by_state.get(entry["state"], 0) + 1
    listed = sorted(entries, key=lambda entry: entry["expires_s"], reverse=True)[:limit]
    return {"addresses": [address_spelling(address) for address in addresses], "total": len(entries),
            "by_state": by_state, "live": live_connections(entries), "entries": listed}


def _read_ipvsadm(module: AnsibleModule, ipvsadm: str) -> dict[str, Any]:
    listing = parse_ipvsadm(_run_ipvsadm(module, ipvsadm, []))
    stats = parse_ipvsadm(_run_ipvsadm(module, ipvsadm, ["--stats"]))
    table = merge_ipvsadm(listing, stats)
    table["totals"] = totals(table["services"])
    return table


def _matches(service: dict[str, Any], address: Any, port: int | None, fwmark: int | None) -> bool:
    if fwmark is not None and service["fwmark"] != fwmark:
        return False
    if port is not None and service["port"] != port:
        return False
    if address is not None and parse_address(service["address"]) != address:
        return False
    return True


def _real_server_names(names: dict[str, Any] | None) -> dict[str, str]:
    """{address: name} with addresses in the table's spelling (IPv6 compressed, no brackets)."""
    return {address_spelling(address): str(name) for address, name in (names or {}).items()}


def _read_table(module: AnsibleModule, source: str, ipvsadm: str | None, params: dict[str, Any]) -> dict[str, Any]:
    try:
        if source == "ipvsadm":
            return _read_ipvsadm(module, ipvsadm or "ipvsadm")  # _choose_source found it for this source
        return _read_proc(module, params["proc_net_path"], params["kernel_hz"])
    except IpvsParseError as exc:
        module.fail_json(msg=f"cannot read the IPVS table from {source}: {exc}")


def _choose_source(module: AnsibleModule, params: dict[str, Any]) -> tuple[str, str | None]:
    source = params["source"]
    live = os.path.normpath(params["proc_net_path"]) == "/proc/net"
    ipvsadm = module.get_bin_path("ipvsadm") if source == "ipvsadm" or (source == "auto" and live) else None
    if source == "ipvsadm" and ipvsadm is None:
        module.fail_json(msg="source=ipvsadm but ipvsadm is not installed on this host; install the ipvsadm package "
                             "or use source=proc")
    if source == "auto":
        source = "ipvsadm" if ipvsadm else "proc"
        if source == "ipvsadm" and not os.path.exists(os.path.join(params["proc_net_path"], "ip_vs")):
            source = "proc"  # fails in _read_proc with the plain 'IPVS is not loaded' message
    return source, ipvsadm


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="auto", choices=["auto", "proc", "ipvsadm"]),
            virtual_address=dict(type="str"),
            virtual_port=dict(type="int"),
            fwmark=dict(type="int"),
            metric=dict(type="str", default="auto", choices=["auto", "conns", "conns_rate", "conn_overhead",
                                                             "current_conns", "active_conns", "in_packets",
                                                             "in_bytes"]),
            window_s=dict(type="float", default=2.0),
            threshold_percent=dict(type="float", default=15.0),
            proc_net_path=dict(type="path", default="/proc/net"),
            kernel_hz=dict(type="int", default=250),
            real_server_names=dict(type="dict", default={}),
            connections_of=dict(type="list", elements="str"),
            connections_max=dict(type="int", default=20),
        ),
        supports_check_mode=True,
    )
    params = module.params
    threshold_percent = params["threshold_percent"]
    if threshold_percent < 0:
        module.fail_json(msg=f"threshold_percent is {threshold_percent:g}: give a percentage >= 0, e.g. 15")
    if params["window_s"] < 0:
        module.fail_json(msg=f"window_s is {params['window_s']:g}: give the seconds between two readings, e.g. 2, or 0 "
                             f"to read once")
    if params["kernel_hz"] < 1:
        module.fail_json(msg=f"kernel_hz is {params['kernel_hz']}: give the kernel's CONFIG_HZ, e.g. 250")
    address = None
    if params["virtual_address"] is not None:
        address = parse_address(params["virtual_address"])
        if address is None:
            module.fail_json(msg=f"virtual_address {params['virtual_address']!r} is not an IPv4 or IPv6 address; "
                                 f"give the VIP, e.g. 198.18.0.100")

    for real_server in params["connections_of"] or []:
        if parse_address(real_server) is None:
            module.fail_json(msg=f"connections_of {real_server!r} is not an IPv4 or IPv6 address; give a real "
                                 f"server's address, e.g. 198.18.0.11")
    if params["connections_max"] < 0:
        module.fail_json(msg=f"connections_max is {params['connections_max']}: give how many entries to list, "
                             f"e.g. 20, or 0 to only count them")

    source, ipvsadm = _choose_source(module, params)
    has_counters = source == "ipvsadm"
    metric = params["metric"]
    if metric in COUNTER_METRICS and not has_counters:
        module.fail_json(msg=f"metric={metric} needs per-server counters, which only source=ipvsadm provides; use "
                             f"metric=current_conns with source=proc")
    if metric == "conns_rate" and params["window_s"] == 0:
        module.fail_json(msg="metric=conns_rate needs two readings: give window_s above 0, e.g. 2")
    table = _read_table(module, source, ipvsadm, params)
    # Rates need a second reading; skipped when no service could be graded by one.
    window_s = params["window_s"] if has_counters and metric in ("auto", "conns_rate") else 0.0
    if window_s and any(service_metric(s["scheduler"], metric, True, window_s) == "conns_rate"
                        for s in table["services"]):
        time.sleep(window_s)
        table = add_rates(table, _read_table(module, source, ipvsadm, params), window_s)
    else:
        window_s = 0.0

    selected = [service for service in table["services"]
                if _matches(service, address, params["virtual_port"], params["fwmark"])]
    options = {"metric": metric, "has_counters": has_counters, "window_s": window_s,
               "threshold_percent": threshold_percent, "names": _real_server_names(params["real_server_names"])}
    reports = [report_service(service, options, module.warn) for service in selected]
    judged = [report["balanced"] for report in reports if report["balanced"] is not None]
    extra = {}
    if params["connections_of"] is not None:
        extra["connections"] = _read_connections(module, params["proc_net_path"], params["connections_of"],
                                                 params["connections_max"])
    module.exit_json(
        changed=False,
        source=source,
        metric=metric,
        window_s=window_s,
        threshold_percent=threshold_percent,
        ipvs_version=table["version"],
        balanced=all(judged) if judged else None,
        service_count=len(reports),
        real_server_count=sum(len(report["real_servers"]) for report in reports),
        totals=table["totals"] or {key: None for key in COUNTER_KEYS},
        summary=[summary_line(report, threshold_percent) for report in reports],
        services=reports,
        **extra,
    )


if __name__ == "__main__":
    main()
