#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ipvs_spread
short_description: Report how IPVS spreads connections over the real servers, against their weights
version_added: 0.1.0
description:
  - Reads the IPVS table of an LVS director and reports, per virtual service, the scheduler, its flags and, per real
    server, the weight, the active and inactive connections and (with the C(ipvsadm) source) the total connections,
    packets and bytes.
  - Computes how far each real server's share of the load is from its weighted share and gives a C(balanced) verdict
    against a threshold (15 percent by default).
  - By default it grades what each service's scheduler balances - current connections as the kernel weighs them
    (256 x active + inactive) for C(lc), C(wlc), C(lblc) and C(lblcr), active connections for C(sed) and C(nq), and
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
        C(active_conns) for sed and nq; else C(conns_rate) with per-server counters and I(window_s) above 0,
        C(conns) with counters and I(window_s=0), C(current_conns) without counters.
    type: str
    choices: [auto, conns, conns_rate, conn_overhead, current_conns, active_conns, in_packets, in_bytes]
    default: auto
  window_s:
    description:
      - Seconds between the two readings a rate is computed from (C(conns_rate), and C(auto) for rate-graded
        schedulers). C(0) reads once; C(auto) then grades cumulative C(conns).
      - C(auto) also grades cumulative C(conns), and says why, when the window holds too few new connections to see
        the weights within I(threshold_percent) (fewer than 1 / (limit x smallest weighted share), so 80 for 3:1 at
        5 %), for example the tail of a burst that ended just before the first reading.
    type: float
    default: 2.0
  threshold_percent:
    description:
      - A service is balanced when no real server with a weight above 0 deviates from its weighted share by more
        than this many percent.
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
      - Also list the connection entries IPVS holds to this real server address (C(/proc/net/ip_vs_conn) under
        I(proc_net_path), either source), counted by state, in RV(connections). It shows what holds a drain - for
        example ESTABLISHED entries of connections that ended while the real server was down, which IPVS keeps until
        its tcp timeout because in DR the director never sees the real server's reset.
    type: str
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
    - True when every judged service is balanced, false when one is not, null when no service carried any load.
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
            graded current connections as wlc weighs them (256 x active + inactive)"]
connections:
  description: The connection entries to I(connections_of), when it is given.
  returned: when connections_of is given
  type: dict
  contains:
    address:
      description: The real server address, as the table spells it.
      type: str
      sample: 198.18.0.11
    total:
      description: How many entries IPVS holds to it.
      type: int
      sample: 12
    by_state:
      description: Entries per state (C(ESTABLISHED) is what IPVS counts as active).
      type: dict
      sample: {ESTABLISHED: 12, FIN_WAIT: 3}
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
    balanced:
      description: The verdict for this service; null when no load was recorded.
      returned: always
      type: bool
      sample: true
    max_abs_deviation_percent:
      description: Largest deviation of a weighted real server from its share, in percent.
      returned: always
      type: float
      sample: 4.2
    spread:
      description:
        - Balance statistics of the metric per unit of weight, from the shared C(_spread) module utils.
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
          description: Its weight divided by the sum of the weights (null when all weights are 0).
          returned: always
          type: float
          sample: 0.5
        deviation_percent:
          description: (share - expected_share) / expected_share in percent (null for weight 0 or no load).
          returned: always
          type: float
          sample: 4.2
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hpc.balance.plugins.module_utils._addresses import address_spelling, parse_address
from ansible_collections.hpc.balance.plugins.module_utils._ipvs import (
    IpvsParseError,
    merge_ipvsadm,
    parse_ipvsadm,
    parse_proc_ip_vs,
    parse_proc_ip_vs_conn,
    parse_proc_ip_vs_stats,
    pinning_warning,
    service_key,
    totals,
)
from ansible_collections.hpc.balance.plugins.module_utils._spread import expected_shares, fewest_to_judge, summarize

COUNTER_KEYS = ("conns", "in_packets", "out_packets", "in_bytes", "out_bytes")
COUNTER_METRICS = ("conns", "conns_rate", "in_packets", "in_bytes")
# Schedulers that pick the real server with the least connections per weight: lc/wlc/lblc/lblcr weigh an active
# connection 256 times an inactive one (ip_vs_dest_conn_overhead, include/net/ip_vs.h); sed/nq count active ones.
OVERHEAD_SCHEDULERS = ("lc", "wlc", "lblc", "lblcr")
ACTIVE_SCHEDULERS = ("sed", "nq")
GRADED = {
    "conns": "connections scheduled since the counters were zeroed (cumulative: outages and earlier weights count)",
    "conns_rate": "new connections per second over a {window:g} s window",
    "conn_overhead": "current connections as {scheduler} weighs them (256 x active + inactive)",
    "current_conns": "current connections (active + inactive)",
    "active_conns": "active connections now",
    "in_packets": "inbound packets since the counters were zeroed",
    "in_bytes": "inbound bytes since the counters were zeroed",
}
SUMMARY_KEYS = ("count", "total", "mean", "min", "max", "max_over_mean", "min_over_max", "cv", "cv_grade",
                "idle_count", "idle_share", "hot_count", "hot_share")
VERDICT_WORDS = {True: "balanced", False: "NOT balanced", None: "no load to judge"}
# The unit of each metric in the summary's split ("urs1 90 / urs2 30 of 120 connections").
METRIC_UNITS = {
    "conns": "connections",
    "conns_rate": "new connections/s",
    "conn_overhead": "weighted connections",
    "current_conns": "connections",
    "active_conns": "active connections",
    "in_packets": "packets",
    "in_bytes": "bytes",
}
# A longer split does not fit one line; the services' real_servers hold every figure.
SPLIT_MAX_SERVERS = 8


def _read_proc(module, proc_net_path, kernel_hz):
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


def _run_ipvsadm(module, ipvsadm, extra):
    command = [ipvsadm, "-Ln"] + extra + ["--exact"]
    rc, out, err = module.run_command(command)
    if rc != 0:
        module.fail_json(msg=f"{' '.join(command)} failed with rc {rc}: {(err or out).strip()}. Is IPVS loaded "
                             f"(modprobe ip_vs) and are you root?", rc=rc, stdout=out, stderr=err, cmd=command)
    return out


def _read_connections(module, proc_net_path, address, limit):
    """The connection entries to one real server, counted by state; the ``limit`` that expire last listed."""
    path = os.path.join(proc_net_path, "ip_vs_conn")
    try:
        with open(path) as handle:
            entries = parse_proc_ip_vs_conn(handle.read(), destination=address)
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path} for connections_of: {exc}")
    except IpvsParseError as exc:
        module.fail_json(msg=f"cannot read {path}: {exc}")
    by_state = {}
    for entry in entries:
        by_state[entry["state"]] = by_state.get(entry["state"], 0) + 1
    listed = sorted(entries, key=lambda entry: entry["expires_s"], reverse=True)[:limit]
    return {"address": address_spelling(address), "total": len(entries), "by_state": by_state, "entries": listed}


def _read_ipvsadm(module, ipvsadm):
    listing = parse_ipvsadm(_run_ipvsadm(module, ipvsadm, []))
    stats = parse_ipvsadm(_run_ipvsadm(module, ipvsadm, ["--stats"]))
    table = merge_ipvsadm(listing, stats)
    table["totals"] = totals(table["services"])
    return table


def _matches(service, address, port, fwmark):
    if fwmark is not None and service["fwmark"] != fwmark:
        return False
    if port is not None and service["port"] != port:
        return False
    if address is not None and parse_address(service["address"]) != address:
        return False
    return True


def _load(server, metric):
    if metric == "current_conns":
        return (server["active_conns"] or 0) + (server["inactive_conns"] or 0)
    if metric == "conn_overhead":
        return 256 * (server["active_conns"] or 0) + (server["inactive_conns"] or 0)
    return server[metric]


def service_metric(scheduler, requested, has_counters, window_s):
    """The measure to grade a service by: what its scheduler balances when ``requested`` is auto."""
    if requested != "auto":
        return requested
    if scheduler in OVERHEAD_SCHEDULERS:
        return "conn_overhead"
    if scheduler in ACTIVE_SCHEDULERS:
        return "active_conns"
    if not has_counters:
        return "current_conns"
    return "conns_rate" if window_s > 0 else "conns"


def add_rates(first, second, window_s):
    """Per real server of ``second``, conns_rate = new connections per second since ``first``; None when unknown."""
    before = {}
    for service in first["services"]:
        for server in service["real_servers"]:
            before[(service_key(service), server["address"], server["port"])] = server["conns"]
    for service in second["services"]:
        for server in service["real_servers"]:
            earlier = before.get((service_key(service), server["address"], server["port"]))
            now = server["conns"]
            if earlier is None or now is None or now < earlier:  # new server, or counters zeroed in between
                server["conns_rate"] = None
            else:
                server["conns_rate"] = round((now - earlier) / window_s, 3)
    return second


def _loads(name, servers, metric, warn):
    loads = []
    for server in servers:
        load = _load(server, metric) or 0
        if load < 0:
            warn(f"{name}: real server {server['address']} reports {metric} = {load}; counted as 0 (kernel counter "
                 f"underflow)")
            load = 0
        loads.append(load)
    return loads


def _findings(servers, stats, shares, total, metric, threshold_percent, balanced, window_s):
    """Plain-words observations about one service's spread."""
    findings = []
    for server in servers:
        if server["weight"] == 0 and server["load"] and metric == "conns":
            findings.append(f"{server['address']} has weight 0 but {server['load']} connections: it was quiesced after "
                            f"they were scheduled")
    if not servers:
        findings.append("no real servers: the service drops every connection")
    elif stats["count"] == 0:
        findings.append("every real server has weight 0: the service accepts no new connections")
    elif not total and metric == "conns_rate":
        findings.append("no new connections during the window: read while traffic flows, or use metric=conns")
    elif not total:
        findings.append(f"no {metric} recorded yet: send traffic through the virtual service and read again")
    elif balanced is False:
        known = [index for index in range(len(servers)) if stats["deviations"][index] is not None]
        worst = max(known, key=lambda index: abs(stats["deviations"][index]))
        findings.append(
            f"{servers[worst]['address']} got {100.0 * servers[worst]['share']:.1f} % of the {metric} where its weight "
            f"asks for {100.0 * shares[worst]:.1f} % ({100.0 * stats['deviations'][worst]:+.1f} %, limit "
            f"{threshold_percent:g} %)"
        )
    if metric == "conns_rate" and total:
        new = round(total * window_s)
        if stats["count"] and new < 10 * stats["count"]:
            findings.append(f"only {new} new connections during the {window_s:g} s window over {stats['count']} real "
                            f"servers: too few to judge the spread")
    elif total and stats["count"] and total < 10 * stats["count"] and metric != "conn_overhead":
        findings.append(f"only {total} {metric} over {stats['count']} real servers: too few to judge the spread")
    return findings


def _window_too_thin(rates, weights, window_s, threshold_percent):
    """Why the window's new connections cannot grade the split (None when they can).

    An idle window says nothing. A thin one says too little: the kernel refreshes the counters ipvsadm shows every
    2 s (ip_vs_est.c, estimation_timer), so a reading taken just after a burst can fold its last part into the window,
    and with fewer connections than fewest_to_judge a split exactly by weight can still miss the limit.
    """
    new = round(sum(rate or 0 for rate, weight in zip(rates, weights, strict=True) if weight > 0) * window_s)
    if not new:
        return f"no new connection during the {window_s:g} s window"
    fewest = fewest_to_judge(weights, threshold_percent / 100.0)
    if fewest is not None and new < fewest:
        return (f"{new} new connections during the {window_s:g} s window, fewer than the {fewest} it takes to see "
                f"these weights within {threshold_percent:g} %")
    return None


def _report_service(service, options, warn):
    """Spread of one service against its weights, plus its verdict, pinning warning and findings."""
    metric = service_metric(service["scheduler"], options["metric"], options["has_counters"], options["window_s"])
    threshold_percent = options["threshold_percent"]
    name = service_key(service)
    servers = service["real_servers"]
    loads = _loads(name, servers, metric, warn)
    graded = GRADED[metric].format(window=options["window_s"], scheduler=service["scheduler"])
    # A missing weight (a server that appeared between the two ipvsadm reads) counts as 1.
    weights = [1 if server["weight"] is None or server["weight"] < 0 else server["weight"] for server in servers]
    if metric == "conns_rate" and options["metric"] == "auto":
        window_why = _window_too_thin(loads, weights, options["window_s"], threshold_percent)
        if window_why:
            # The counters since they were zeroed are the only load left to grade, and the output says so.
            metric = "conns"
            loads = _loads(name, servers, metric, warn)
            graded = (f"connections scheduled since the counters were zeroed ({window_why}, so the cumulative "
                      f"counters, which carry outages and earlier weights)")
    stats = summarize(loads, weights)
    shares = expected_shares(weights)
    total = stats["total"]  # load on the servers with weight > 0
    for index, server in enumerate(servers):
        deviation = stats["deviations"][index]
        server["name"] = (options.get("names") or {}).get(server["address"])
        server["load"] = loads[index]
        server["share"] = loads[index] / total if total and weights[index] > 0 else None
        server["expected_share"] = shares[index]
        server["deviation_percent"] = None if deviation is None else round(100.0 * deviation, 3)

    worst = stats["max_abs_deviation"]
    balanced = None if worst is None else 100.0 * worst <= threshold_percent
    warning = pinning_warning(service)
    if warning:
        warn(warning)
    report = {"name": name}
    report.update({key: value for key, value in service.items() if key != "real_servers"})
    report.update({
        "metric": metric,
        "graded": graded,
        "balanced": balanced,
        "max_abs_deviation_percent": None if worst is None else round(100.0 * worst, 3),
        "spread": {key: stats[key] for key in SUMMARY_KEYS},
        "pinning_warning": warning,
        "findings": _findings(servers, stats, shares, total, metric, threshold_percent, balanced,
                              options["window_s"]),
        "real_servers": servers,
    })
    return report


def _split_text(report):
    """'urs1 90 / urs2 30 of 120 connections': what each real server carried, by name where one was given."""
    servers = report["real_servers"]
    if not servers or len(servers) > SPLIT_MAX_SERVERS:
        return None
    loads = [server["load"] or 0 for server in servers]
    if not sum(loads):
        return None  # "no load to judge" says it already
    parts = [f"{server['name'] or server['address']} {load:g}" for server, load in zip(servers, loads)]
    return f"split {' / '.join(parts)} of {sum(loads):g} {METRIC_UNITS[report['metric']]}"


def _summary_line(report, threshold_percent):
    line = (f"{report['name']} ({report['scheduler']}): {VERDICT_WORDS[report['balanced']]}, "
            f"{len(report['real_servers'])} real servers")
    split = _split_text(report)
    if split:
        line += f", {split}"
    if report["max_abs_deviation_percent"] is not None:
        line += (f", worst deviation {report['max_abs_deviation_percent']:.1f} % (limit {threshold_percent:g} %), "
                 f"CV {report['spread']['cv'] or 0.0:.3f}")
    return line + f"; graded {report['graded']}"


def _real_server_names(names):
    """{address: name} with addresses in the table's spelling (IPv6 compressed, no brackets)."""
    return {address_spelling(address): str(name) for address, name in (names or {}).items()}


def _read_table(module, source, ipvsadm, params):
    try:
        if source == "ipvsadm":
            return _read_ipvsadm(module, ipvsadm)
        return _read_proc(module, params["proc_net_path"], params["kernel_hz"])
    except IpvsParseError as exc:
        module.fail_json(msg=f"cannot read the IPVS table from {source}: {exc}")
    return None  # not reached: fail_json exits


def _choose_source(module, params):
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


def main():
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
            connections_of=dict(type="str"),
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

    if params["connections_of"] is not None and parse_address(params["connections_of"]) is None:
        module.fail_json(msg=f"connections_of {params['connections_of']!r} is not an IPv4 or IPv6 address; give a "
                             f"real server's address, e.g. 198.18.0.11")
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
    reports = [_report_service(service, options, module.warn) for service in selected]
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
        summary=[_summary_line(report, threshold_percent) for report in reports],
        services=reports,
        **extra,
    )


if __name__ == "__main__":
    main()
