# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How ipvs_spread grades one IPVS virtual service: the measure its scheduler balances, the split that scheduler
makes, the verdict, and the plain-words findings and summary line.

The statistics themselves (shares, deviations, CV) come from _spread.py, the one place for them. This file decides
what each scheduler is held to, from what the kernel's scheduler does with a real server's weight:

- weighted schedulers (wrr, wlc, sed, nq, lblc, lblcr, sh, mh, twos, and any scheduler not named below): new
  connections in proportion to the weights, so the expected share is weight / sum of weights;
- rr and lc only ask whether a weight is above 0 (ip_vs_rr.c, ip_vs_lc.c): every real server with a weight above 0
  is expected to get an equal share, one with weight 0 none;
- fo sends every new connection to the first available real server with the highest weight (ip_vs_fo.c): that one is
  expected to get all of it, the others nothing;
- ovf also starts with the highest weight but moves on to the next one while the active connections of the first
  exceed its weight (ip_vs_ovf.c), and dh maps each destination address to one real server, one hash bucket per real
  server whatever its weight (ip_vs_dh.c): their split follows the concurrency or the destinations, not a share, so
  they are not graded (``balanced`` null, with the reason).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ansible_collections.hpc.balance.plugins.module_utils._ipvs import pinning_warning, service_key
from ansible_collections.hpc.balance.plugins.module_utils._spread import expected_shares, fewest_to_judge, summarize

# Schedulers that pick the real server with the least connections per weight: lc/wlc/lblc/lblcr weigh an active
# connection 256 times an inactive one (ip_vs_dest_conn_overhead, include/net/ip_vs.h); sed/nq count active ones, and
# ovf compares a real server's active connections with its weight.
OVERHEAD_SCHEDULERS = ("lc", "wlc", "lblc", "lblcr")
ACTIVE_SCHEDULERS = ("sed", "nq", "ovf")
# The kernel source each scheduler that does not split by weight follows (net/netfilter/ipvs/).
KERNEL_SOURCES = {"rr": "ip_vs_rr.c", "lc": "ip_vs_lc.c", "fo": "ip_vs_fo.c", "ovf": "ip_vs_ovf.c", "dh": "ip_vs_dh.c"}
# Schedulers that use a weight only to tell 0 (quiesced) from more: an equal share for every real server above 0.
EQUAL_SHARE_SCHEDULERS = {
    "rr": "rr takes the real servers with a weight above 0 in turn, whatever the weight",
    "lc": "lc picks the real server with the fewest connections among those with a weight above 0, whatever the "
          "weight",
}
# Schedulers that use the weights as an order: all new connections to the first real server with the highest weight.
HIGHEST_WEIGHT_SCHEDULERS = {
    "fo": "fo sends every new connection to the first available real server with the highest weight",
}
# Schedulers whose split is no share of the connections: not graded.
UNGRADED_SCHEDULERS = {
    "ovf": "ovf sends new connections to the real server with the highest weight until its active connections "
           "exceed its weight, then to the next, so its split follows the concurrency, not a share",
    "dh": "dh maps each destination address to one real server, one hash bucket per real server whatever its "
          "weight, so its split follows the destinations, not a share",
}
# The metrics that count connections: one connection more or less is the smallest step of their split.
CONNECTION_METRICS = ("conns", "conns_rate", "current_conns", "active_conns")
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
NOT_GRADED_WORDS = "not graded"
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

Warn = Callable[[str], None]


class Split(NamedTuple):
    """What a scheduler is expected to do with one service's real servers."""

    counted: list[int]  # weights the statistics are taken with: a real server with 0 is left out
    shares: list[float | None]  # expected share per real server (None: no expectation)
    expected: str | None  # the expectation in words when it is not the weights' shares, else None
    not_graded: str | None  # why the split is not graded, else None


def _why(scheduler: str, words: str) -> str:
    return f"{words} ({KERNEL_SOURCES[scheduler]})"


def weights_set_no_shares(scheduler: str) -> str | None:
    """Why new weights set no new shares for ``scheduler``; None for a scheduler that splits by weight."""
    for table in (EQUAL_SHARE_SCHEDULERS, HIGHEST_WEIGHT_SCHEDULERS, UNGRADED_SCHEDULERS):
        if scheduler in table:
            return _why(scheduler, table[scheduler])
    return None


def expected_split(scheduler: str, weights: list[int], addresses: list[str] | None = None) -> Split:
    """The split ``scheduler`` makes over real servers with these weights (in the table's order), named by
    ``addresses`` in the words."""
    above_zero = [1 if weight > 0 else 0 for weight in weights]
    if scheduler in EQUAL_SHARE_SCHEDULERS:
        return Split(above_zero, expected_shares(above_zero),
                     f"equal shares for the real servers with a weight above 0 ({scheduler} ignores the weights "
                     f"beyond that, {KERNEL_SOURCES[scheduler]})", None)
    if scheduler in HIGHEST_WEIGHT_SCHEDULERS:
        highest = max(weights, default=0)
        if highest <= 0:
            return Split(above_zero, [None] * len(weights), None, None)
        first = weights.index(highest)  # of equal highest weights, the kernel keeps the first in the table
        name = addresses[first] if addresses else f"real server {first + 1}"
        shares: list[float | None] = [1.0 if index == first else 0.0 for index in range(len(weights))]
        return Split(above_zero, shares,
                     f"all new connections on {name}, the first with the highest weight "
                     f"({KERNEL_SOURCES[scheduler]})", None)
    if scheduler in UNGRADED_SCHEDULERS:
        return Split(above_zero, [None] * len(weights), None, _why(scheduler, UNGRADED_SCHEDULERS[scheduler]))
    return Split(list(weights), expected_shares(weights), None, None)


def load(server: dict[str, Any], metric: str) -> float | None:
    """One real server's value of ``metric``."""
    if metric == "current_conns":
        return (server["active_conns"] or 0) + (server["inactive_conns"] or 0)
    if metric == "conn_overhead":
        return 256 * (server["active_conns"] or 0) + (server["inactive_conns"] or 0)
    return server[metric]


def service_metric(scheduler: str, requested: str, has_counters: bool, window_s: float) -> str:
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


def add_rates(first: dict[str, Any], second: dict[str, Any], window_s: float) -> dict[str, Any]:
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


def _loads(name: str, servers: list[dict[str, Any]], metric: str, warn: Warn) -> list[float]:
    loads = []
    for server in servers:
        value = load(server, metric) or 0
        if value < 0:
            warn(f"{name}: real server {server['address']} reports {metric} = {value}; counted as 0 (kernel counter "
                 f"underflow)")
            value = 0
        loads.append(value)
    return loads


def connections_in(metric: str, total: float, window_s: float) -> int | None:
    """How many connections a load of ``total`` stands for: the window's new connections for a rate, the count for
    the other connection metrics; None for a load that is no count of connections (weighted overhead, packets,
    bytes)."""
    if metric == "conns_rate":
        return round(total * window_s)
    if metric in CONNECTION_METRICS:
        return round(total)
    return None


def too_few_to_judge(connections: int | None, shares: list[float | None], threshold_percent: float) -> int | None:
    """The fewest connections it takes to see ``shares`` within the limit (``_spread.fewest_to_judge``) when
    ``connections`` is fewer; None when they are enough, or when the load is no count of connections."""
    if connections is None:
        return None
    fewest = fewest_to_judge([share or 0.0 for share in shares], threshold_percent / 100.0)
    return fewest if fewest is not None and connections < fewest else None


def _window_too_thin(rates: list[float], split: Split, window_s: float, threshold_percent: float) -> str | None:
    """Why the window's new connections cannot grade the split (None when they can).

    An idle window says nothing. A thin one says too little: the kernel refreshes the counters ipvsadm shows every
    2 s (ip_vs_est.c, estimation_timer), so a reading taken just after a burst can fold its last part into the window,
    and with fewer connections than too_few_to_judge asks for, a split exactly as expected can still miss the limit.
    """
    total = sum(rate or 0 for rate, weight in zip(rates, split.counted) if weight > 0)
    new = connections_in("conns_rate", total, window_s)
    if not new:
        return f"no new connection during the {window_s:g} s window"
    fewest = too_few_to_judge(new, split.shares, threshold_percent)
    if fewest is not None:
        seen = "these weights" if split.expected is None else "this split"
        return (f"{new} new connections during the {window_s:g} s window, fewer than the {fewest} it takes to see "
                f"{seen} within {threshold_percent:g} %")
    return None


def _worst_finding(servers: list[dict[str, Any]], stats: dict[str, Any], split: Split, scheduler: str,
                   metric: str, threshold_percent: float) -> str:
    """The real server furthest from its expected share, in words."""
    known = [index for index in range(len(servers)) if stats["deviations"][index] is not None]
    worst = max(known, key=lambda index: abs(stats["deviations"][index]))
    share = split.shares[worst] or 0.0  # a known deviation has a non-zero expected share
    if split.expected is None:
        asks = "its weight asks for"
    elif scheduler in HIGHEST_WEIGHT_SCHEDULERS:
        asks = f"{scheduler} sends it"
    else:
        asks = f"{scheduler}'s equal share is"
    return (f"{servers[worst]['address']} got {100.0 * servers[worst]['share']:.1f} % of the {metric} where {asks} "
            f"{100.0 * share:.1f} % ({100.0 * stats['deviations'][worst]:+.1f} %, limit "
            f"{threshold_percent:g} %)")


def _findings(servers: list[dict[str, Any]], stats: dict[str, Any], split: Split, scheduler: str, metric: str,
              threshold_percent: float, balanced: bool | None, window_s: float) -> list[str]:
    """Plain-words observations about one service's spread."""
    findings = []
    total = stats["total"]  # load on the real servers with a weight above 0
    for server in servers:
        if server["weight"] == 0 and server["load"] and metric == "conns":
            findings.append(f"{server['address']} has weight 0 but {server['load']} connections: it was quiesced after "
                            f"they were scheduled")
    if not servers:
        findings.append("no real servers: the service drops every connection")
    elif stats["count"] == 0:
        findings.append("every real server has weight 0: the service accepts no new connections")
    elif split.not_graded:
        findings.append(f"not graded: {split.not_graded}")
    elif not total and metric == "conns_rate":
        findings.append("no new connections during the window: read while traffic flows, or use metric=conns")
    elif not total:
        findings.append(f"no {metric} recorded yet: send traffic through the virtual service and read again")
    elif balanced is False:
        findings.append(_worst_finding(servers, stats, split, scheduler, metric, threshold_percent))
    if total and not split.not_graded:
        connections = connections_in(metric, total, window_s)
        if too_few_to_judge(connections, split.shares, threshold_percent) is not None:
            if metric == "conns_rate":
                findings.append(f"only {connections} new connections during the {window_s:g} s window over "
                                f"{stats['count']} real servers: too few to judge the spread")
            else:
                findings.append(f"only {total} {metric} over {stats['count']} real servers: too few to judge the "
                                f"spread")
    return findings


def report_service(service: dict[str, Any], options: dict[str, Any], warn: Warn) -> dict[str, Any]:
    """Spread of one service against the split its scheduler makes, plus its verdict, pinning warning and findings.

    options -- metric (as asked: auto or one metric), has_counters, window_s (0: one reading), threshold_percent,
               names ({address: name} for the real servers)
    """
    scheduler = service["scheduler"]
    metric = service_metric(scheduler, options["metric"], options["has_counters"], options["window_s"])
    threshold_percent = options["threshold_percent"]
    name = service_key(service)
    servers = service["real_servers"]
    loads = _loads(name, servers, metric, warn)
    graded = GRADED[metric].format(window=options["window_s"], scheduler=scheduler)
    # A missing weight (a server that appeared between the two ipvsadm reads) counts as 1.
    weights = [1 if server["weight"] is None or server["weight"] < 0 else server["weight"] for server in servers]
    split = expected_split(scheduler, weights, [server["address"] for server in servers])
    if metric == "conns_rate" and options["metric"] == "auto" and not split.not_graded:
        window_why = _window_too_thin(loads, split, options["window_s"], threshold_percent)
        if window_why:
            # The counters since they were zeroed are the only load left to grade, and the output says so.
            metric = "conns"
            loads = _loads(name, servers, metric, warn)
            graded = (f"connections scheduled since the counters were zeroed ({window_why}, so the cumulative "
                      f"counters, which carry outages and earlier weights)")
    stats = summarize(loads, split.counted, shares=split.shares)
    total = stats["total"]  # load on the servers with weight > 0
    for index, server in enumerate(servers):
        deviation = stats["deviations"][index]
        server["name"] = (options.get("names") or {}).get(server["address"])
        server["load"] = loads[index]
        server["share"] = loads[index] / total if total and weights[index] > 0 else None
        server["expected_share"] = split.shares[index]
        server["deviation_percent"] = None if deviation is None else round(100.0 * deviation, 3)

    worst = stats["max_abs_deviation"]
    balanced = None if worst is None else 100.0 * worst <= threshold_percent
    warning = pinning_warning(service)
    if warning:
        warn(warning)
    report: dict[str, Any] = {"name": name}
    report.update({key: value for key, value in service.items() if key != "real_servers"})
    report.update({
        "metric": metric,
        "graded": graded,
        "expected_split": split.expected,
        "not_graded": split.not_graded,
        "balanced": balanced,
        "max_abs_deviation_percent": None if worst is None else round(100.0 * worst, 3),
        "spread": {key: stats[key] for key in SUMMARY_KEYS},
        "pinning_warning": warning,
        "findings": _findings(servers, stats, split, scheduler, metric, threshold_percent, balanced,
                              options["window_s"]),
        "real_servers": servers,
    })
    return report


def _split_text(report: dict[str, Any]) -> str | None:
    """'urs1 90 / urs2 30 of 120 connections': what each real server carried, by name where one was given."""
    servers = report["real_servers"]
    if not servers or len(servers) > SPLIT_MAX_SERVERS:
        return None
    loads = [server["load"] or 0 for server in servers]
    if not sum(loads):
        return None  # "no load to judge" says it already
    parts = [f"{server['name'] or server['address']} {value:g}" for server, value in zip(servers, loads)]
    return f"split {' / '.join(parts)} of {sum(loads):g} {METRIC_UNITS[report['metric']]}"


def summary_line(report: dict[str, Any], threshold_percent: float) -> str:
    """One plain line for one service's report."""
    verdict = NOT_GRADED_WORDS if report["not_graded"] else VERDICT_WORDS[report["balanced"]]
    line = f"{report['name']} ({report['scheduler']}): {verdict}, {len(report['real_servers'])} real servers"
    split = _split_text(report)
    if split:
        line += f", {split}"
    if report["max_abs_deviation_percent"] is not None:
        line += f", worst deviation {report['max_abs_deviation_percent']:.1f} % (limit {threshold_percent:g} %)"
        if report["scheduler"] not in HIGHEST_WEIGHT_SCHEDULERS:  # fo is right when its CV is as high as it gets
            line += f", CV {report['spread']['cv'] or 0.0:.3f}"
    if report["not_graded"]:
        return line + f"; {report['not_graded']}"
    line += f"; graded {report['graded']}"
    if report["expected_split"]:
        line += f" against {report['expected_split']}"
    return line
