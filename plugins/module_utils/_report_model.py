# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit report as a document model: verdicts, reasons, one number per layer, and sections made of blocks.

The renderers (``_report_markdown``, ``_report_html``) only lay the blocks out; every decision - what a verdict is,
why, what is worth a chart, which layers are the worst - is taken here, once. A block is a plain dict with a
``kind``:

- ``heading``: ``text``, ``state`` (balanced, imbalanced, unknown, error, skipped) and the ``word`` shown;
- ``status``: one line for a reporter that failed or was skipped (``state``, ``text``);
- ``bars``: ``values``, ``labels`` (tooltips), ``ticks`` (axis labels), ``axis_title``, ``references``
  ((value, text, css class) lines), ``hot`` indexes, ``unit``, ``max_bars``;
- ``heatmap``: ``rows`` (layers x experts), ``row_labels``, ``row_title``, ``column_title``;
- ``trend``: ``values`` over runs (oldest first), ``labels``, ``unit``, ``limit``, ``title``;
- ``table``: ``header`` and ``rows`` of cells; ``note``: ``text`` (``italic`` false for a line of numbers);
  ``findings``: ``items`` and an optional ``title``.
"""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.hpc.balance.plugins.module_utils._moe_stats import DEFAULT_MAX_OVER_MEAN_LIMIT
from ansible_collections.hpc.balance.plugins.module_utils._report_history import history_section
from ansible_collections.hpc.balance.plugins.module_utils._units import format_bits_per_second

NETWORK, HOST_LINK, COMPUTE = "network", "host_link", "compute"
# (layer, reporter option, heading)
LAYERS = ((NETWORK, "ipvs_spread", "Network layer (LVS / IPVS connection spread)"),
          (HOST_LINK, "iperf3_throughput", "Host link layer (Linux client to real-server streams)"),
          (COMPUTE, "tokens_per_expert", "Compute layer (MoE tokens per expert)"))
VERDICT_KEY = {"ipvs_spread": "balanced", "iperf3_throughput": "reaches_expected", "tokens_per_expert": "balanced"}
STATE_WORDS = {True: "balanced", False: "imbalanced", None: "unknown", "error": "error", "skipped": "skipped"}
THROUGHPUT_WORDS = {True: "reaches the expected bandwidth", False: "below the expected bandwidth",
                    None: "no expected bandwidth"}
TABLE_ROWS_PER_BAR = 4
# From this many MoE layers on one host the layers are drawn as one heatmap plus bars for the worst layers only.
HEATMAP_MIN_LAYERS = 5
DEFAULT_WORST_LAYERS = 4
NO_BANDWIDTH_REASON = ("no expected bandwidth: set hpc_balance_audit_link_bits_per_second, or leave it unset so the "
                       "audit measures the path's single-stream ceiling first")
METRICS = {
    NETWORK: ("worst deviation from the weights", "%"),
    HOST_LINK: ("share of the expected bandwidth reached", "%"),
    COMPUTE: ("worst layer max/mean", "x mean"),
}
Block = Dict[str, Any]


# ---------------------------------------------------------------- states and verdicts


def result_state(result: Any, key: str) -> Any:
    """'error', 'skipped', True, False or None for one registered result."""
    if not isinstance(result, dict) or result.get("failed"):
        return "error"
    if result.get("skipped"):
        return "skipped"
    return result.get(key)


def layer_verdict(results: dict[str, Any], key: str) -> str:
    """One word per layer: imbalanced beats error beats balanced; all skipped is skipped; nothing is 'not run'."""
    if not results:
        return "not run"
    states = [result_state(result, key) for result in results.values()]
    if False in states:
        return "imbalanced"
    if "error" in states:
        return "error"
    if True in states:
        return "balanced"
    if all(state == "skipped" for state in states):
        return "skipped"
    return "unknown"


def skip_reason(result: Any) -> str | None:
    """Why a result was skipped, in words (Ansible's own skip_reason when nothing better was set), or None."""
    if isinstance(result, dict) and result.get("skip_reason"):
        return str(result["skip_reason"])
    return None


def host_lines(option: str, host: str, result: Any) -> list[str]:
    state = result_state(result, VERDICT_KEY[option])
    if state == "error":
        message = result.get("msg", "no result") if isinstance(result, dict) else "no result"
        return [f"  {host}: reporter failed: {message}"]
    if state == "skipped":
        reason = skip_reason(result)
        return [f"  {host}: skipped: {reason}" if reason else f"  {host}: skipped"]
    summary = result.get("summary")
    if isinstance(summary, str):
        summary = [summary]
    lines = [f"  {host}: {line}" for line in summary or []]
    return lines or [f"  {host}: {STATE_WORDS[state]}"]


# ---------------------------------------------------------------- one number per layer (history and trends)


def _usable(results: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [result for result in results.values() if result_state(result, key) not in ("error", "skipped")]


def layer_metric(layer: str, results: dict[str, Any]) -> dict[str, Any]:
    """The number a layer is judged by in this run (None when nothing was measured), with its name, unit, limit."""
    name, unit = METRICS[layer]
    value = limit = None
    if layer == NETWORK:
        services = [service for result in _usable(results, "balanced") for service in result.get("services") or []]
        deviations = [service["max_abs_deviation_percent"] for service in services
                      if service.get("max_abs_deviation_percent") is not None]
        value = max(deviations) if deviations else None
        limits = [result.get("threshold_percent") for result in _usable(results, "balanced")]
        limit = next((item for item in limits if item is not None), None)
    elif layer == HOST_LINK:
        shares = [result["utilisation_percent"] for result in _usable(results, "reaches_expected")
                  if result.get("utilisation_percent") is not None]
        value = min(shares) if shares else None
    else:
        usable = _usable(results, "balanced")
        found = [(result.get("overall") or {}).get("max_over_mean") for result in usable]
        ratios = [ratio for ratio in found if ratio is not None]
        value = max(ratios) if ratios else None
        limit = max_over_mean_limit(usable[0]) if usable else None
    return {"name": name, "unit": unit, "value": value, "limit": limit}


def max_over_mean_limit(result: dict[str, Any]) -> float:
    """The limit a tokens_per_expert result was graded with (its module default when the result does not say)."""
    return result.get("max_over_mean_limit") or DEFAULT_MAX_OVER_MEAN_LIMIT


# ---------------------------------------------------------------- reasons


def layer_reason(layer: str, option: str, results: dict[str, Any], verdict: str) -> str | None:
    """One sentence saying why the layer got its verdict (None where the host lines say it all)."""
    if verdict == "skipped":
        reasons = sorted({reason for reason in map(skip_reason, results.values()) if reason is not None})
        return "; ".join(reasons) or None
    if verdict == "error":
        failed = [host for host, result in sorted(results.items())
                  if result_state(result, VERDICT_KEY[option]) == "error"]
        return f"the reporter failed on {', '.join(failed)}"
    if layer == HOST_LINK and verdict != "not run":
        return _host_link_reason(results)
    metric = layer_metric(layer, results)
    if metric["value"] is None:
        return None
    if layer == NETWORK:
        limit = f" (limit {metric['limit']:g} %)" if metric["limit"] is not None else ""
        return f"worst deviation from the weights {metric['value']:.1f} %{limit}"
    return f"worst layer max/mean {metric['value']:.2f} (limit {metric['limit']:.2f})"


def _host_link_reason(results: dict[str, Any]) -> str:
    reasons = []
    for host, result in sorted(results.items()):
        if result_state(result, "reaches_expected") in ("error", "skipped"):
            continue
        received = format_bits_per_second(result.get("received_bits_per_second"))
        streams = result.get("num_streams") or len(result.get("streams") or [])
        share = result.get("utilisation_percent")
        if share is None:
            reasons.append(f"{host}: {streams} streams carried {received}; {NO_BANDWIDTH_REASON}")
            continue
        expected = format_bits_per_second(result.get("team_bits_per_second"))
        if result.get("expected_source") == "single-stream ceiling":
            against = f"this path's single-stream ceiling {expected}, measured just before with 1 stream"
        else:
            members = result.get("member_count") or 1
            link = format_bits_per_second(result.get("expected_link_bits_per_second"))
            against = f"the expected {expected} ({members} x {link})"
        reasons.append(f"{host}: {streams} streams carried {received}, {share:.1f} % of {against}")
    return "; ".join(reasons) if reasons else "no host measured"


# ---------------------------------------------------------------- blocks, one builder per reporter


def _heading(text: str, state: Any, words: dict[Any, str] | None = None) -> Block:
    return {"kind": "heading", "text": text, "state": STATE_WORDS[state], "word": (words or STATE_WORDS)[state]}


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: float | None, is_fraction: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{100.0 * value if is_fraction else value:.1f} %"


def _network(host: str, result: dict[str, Any], max_bars: int) -> list[Block]:
    blocks: list[Block] = []
    for service in result.get("services") or []:
        blocks.append(_heading(f"{host} - {service.get('name')} ({service.get('scheduler')})", service.get("balanced")))
        servers = service.get("real_servers") or []
        loads = [server.get("load") or 0 for server in servers]
        weighted = [server.get("weight") for server in servers if server.get("weight")]
        references = []
        if sum(loads) and weighted and len(set(weighted)) == 1:
            references.append((sum(loads) / len(weighted), "weighted share", "ref"))
        labels = [str(server.get("address")) for server in servers]
        blocks.append({"kind": "bars", "values": loads, "labels": labels, "ticks": labels, "axis_title": "real server",
                       "references": references, "hot": [], "unit": "", "max_bars": max_bars})
        spread = service.get("spread") or {}
        blocks.append({"kind": "note", "italic": False, "text": (
            f"CV {_num(spread.get('cv'))} ({spread.get('cv_grade')}), max/mean {_num(spread.get('max_over_mean'))}, "
            f"worst deviation {_pct(service.get('max_abs_deviation_percent'))}")})
        shown = servers[:max_bars * TABLE_ROWS_PER_BAR]
        rows = [[server.get("address"), server.get("port"), server.get("forward"), server.get("weight"),
                 server.get("active_conns"), server.get("inactive_conns"), server.get("load"),
                 _pct(server.get("share"), True), _pct(server.get("expected_share"), True),
                 _pct(server.get("deviation_percent"))] for server in shown]
        blocks.append({"kind": "table", "header": ["real server", "port", "forward", "weight", "active", "inactive",
                                                   "load", "share", "weighted share", "deviation"], "rows": rows})
        if len(shown) < len(servers):
            blocks.append({"kind": "note",
                           "text": f"the table shows {len(shown)} of {len(servers)} real servers; report.json has all"})
        findings = list(service.get("findings") or [])
        if service.get("pinning_warning"):
            findings.insert(0, service["pinning_warning"])
        blocks.append({"kind": "findings", "items": findings})
    return blocks


def _host_link(host: str, result: dict[str, Any], max_bars: int) -> list[Block]:
    blocks = [_heading(f"{host} - {result.get('summary')}", result.get("reaches_expected"), THROUGHPUT_WORDS)]
    streams = result.get("streams") or []
    rates = [stream.get("received_bits_per_second") or 0.0 for stream in streams]
    labels = [f"stream {position}" for position in range(len(streams))]
    references = []
    if rates:
        references.append((sum(rates) / len(rates), "mean per stream", "ref"))
    if result.get("expected_link_bits_per_second"):
        # One flow is hashed onto one member: a real limit of each stream.
        references.append((float(result["expected_link_bits_per_second"]), "one member link", "lim"))
    elif result.get("single_stream_ceiling_bits_per_second") and rates:
        # The ceiling is what the whole path carried with one stream: each of N streams' share of it is 1/N.
        ceiling = float(result["single_stream_ceiling_bits_per_second"])
        references.append((ceiling / len(rates),
                           f"per-stream share of the {format_bits_per_second(ceiling)} ceiling", "lim"))
    blocks.append({"kind": "bars", "values": rates, "labels": labels, "ticks": [str(i) for i in range(len(streams))],
                   "axis_title": "stream", "references": references, "hot": [], "unit": "bit/s",
                   "max_bars": max_bars})
    rows = [[labels[position], format_bits_per_second(stream.get("sent_bits_per_second")),
             format_bits_per_second(stream.get("received_bits_per_second")), _num(stream.get("retransmits")),
             f"{stream.get('local_host')}:{stream.get('local_port')}"] for position, stream in enumerate(streams)]
    blocks.append({"kind": "table", "header": ["stream", "sent", "received", "retransmits", "local end"],
                   "rows": rows})
    blocks.append({"kind": "findings", "items": list(result.get("findings") or [])})
    return blocks


def _layer_bars(host: str, layer: dict[str, Any], limit: float) -> list[Block]:
    tokens = layer.get("tokens_per_expert") or []
    mean = layer.get("mean_tokens_per_expert")
    references = [(mean, "mean", "ref"), (mean * limit, f"limit {limit:.2f} x mean", "lim")] if mean else []
    return [
        _heading(f"{host} - layer {layer.get('layer')}: max/mean {_num(layer.get('max_over_mean'), 2)}, "
                 f"CV {_num(layer.get('cv'))} ({layer.get('cv_grade')})", layer.get("balanced")),
        {"kind": "bars", "values": tokens, "labels": [f"expert {index}" for index in range(len(tokens))],
         "ticks": [str(index) for index in range(len(tokens))], "axis_title": "expert",
         "references": references, "hot": layer.get("hot_experts") or [], "unit": "", "max_bars": max(len(tokens), 1)},
    ]


def _layer_row(layer: dict[str, Any]) -> list[Any]:
    return [layer.get("layer"), layer.get("num_experts"), layer.get("total_tokens"),
            _num(layer.get("max_over_mean"), 2), _num(layer.get("cv")), layer.get("cv_grade"),
            len(layer.get("idle_experts") or []),
            _pct(layer.get("hot_share"), True), f"{layer.get('step_first')}-{layer.get('step_last')}",
            STATE_WORDS[layer.get("balanced")]]


LAYER_HEADER = ["layer", "experts", "tokens", "max/mean", "CV", "grade", "idle", "hot share", "steps", "verdict"]


def worst_layers(layers: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The ``count`` layers with the highest max/mean (ties: lower layer number first), in that order."""
    ranked = sorted(layers, key=lambda layer: (-(layer.get("max_over_mean") or 0.0), layer.get("layer") or 0))
    return ranked[:count]


def _compute(host: str, result: dict[str, Any], worst_count: int, heatmap_min_layers: int) -> list[Block]:
    limit = max_over_mean_limit(result)
    layers = result.get("layers") or []
    blocks: list[Block] = []
    if len(layers) >= heatmap_min_layers:
        overall = result.get("overall") or {}
        experts = max(len(layer.get("tokens_per_expert") or []) for layer in layers)
        blocks.append(_heading(f"{host} - {len(layers)} layers x {experts} experts, "
                               f"worst max/mean {_num(overall.get('max_over_mean'), 2)} "
                               f"(layer {overall.get('worst_layer')})", result.get("balanced")))
        blocks.append({"kind": "heatmap", "rows": [layer.get("tokens_per_expert") or [] for layer in layers],
                       "row_labels": [f"layer {layer.get('layer')}" for layer in layers], "row_title": "layer",
                       "column_title": "expert"})
        worst = worst_layers(layers, worst_count)
        blocks.append({"kind": "note", "text": f"bars for the {len(worst)} worst of {len(layers)} layers by max/mean; "
                                               f"the table lists every layer"})
        for layer in worst:
            blocks += _layer_bars(host, layer, limit)
        blocks.append({"kind": "table", "header": LAYER_HEADER, "rows": [_layer_row(layer) for layer in layers]})
        blocks.append({"kind": "findings", "items": [item for layer in worst for item in layer.get("findings") or []]})
    else:
        for layer in layers:
            blocks += _layer_bars(host, layer, limit)
            blocks.append({"kind": "table", "header": LAYER_HEADER, "rows": [_layer_row(layer)]})
            blocks.append({"kind": "findings", "items": list(layer.get("findings") or [])})
    if result.get("malformed_lines"):
        blocks.append({"kind": "findings", "items": [f"{result['malformed_lines']} malformed lines were skipped"]})
    return blocks


# ---------------------------------------------------------------- the document


def clean(result: Any) -> Any:
    """A registered result without Ansible's bookkeeping (invocation, _ansible_*)."""
    if not isinstance(result, dict):
        return result
    return {key: value for key, value in result.items() if key != "invocation" and not key.startswith("_ansible")}


def layer_heading(layer: str, heading: str, windows_storage_hosts: list[str]) -> str:
    if layer == HOST_LINK and windows_storage_hosts:
        return (f"Host link layer (Linux client to real-server streams; Windows NIC team on "
                f"{', '.join(windows_storage_hosts)})")
    return heading


def build_document(params: dict[str, Any], history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The whole report: verdicts, reasons, metrics, summary lines, sections of blocks, the trend over ``history``
    (earlier report.json documents, oldest first) and the cleaned results (what report.json keeps)."""
    verdicts: dict[str, str] = {}
    reasons: dict[str, str | None] = {}
    metrics: dict[str, dict[str, Any]] = {}
    summary: list[str] = []
    sections = []
    for layer, option, heading in LAYERS:
        results = params.get(option) or {}
        verdict = layer_verdict(results, VERDICT_KEY[option])
        reason = layer_reason(layer, option, results, verdict) if results else None
        verdicts[layer], reasons[layer], metrics[layer] = verdict, reason, layer_metric(layer, results)
        summary.append(f"{layer}: {verdict}" + (f" - {reason}" if reason else ""))
        blocks: list[Block] = []
        if not results:
            blocks.append({"kind": "note", "text": "No host ran this reporter."})
        for host in sorted(results):
            result = results[host]
            lines = host_lines(option, host, result)
            summary += lines
            state = result_state(result, VERDICT_KEY[option])
            if state in ("error", "skipped"):
                blocks.append({"kind": "status", "state": STATE_WORDS[state], "text": lines[0].strip()})
            elif option == "ipvs_spread":
                blocks += _network(host, result, params["max_bars"])
            elif option == "iperf3_throughput":
                blocks += _host_link(host, result, params["max_bars"])
            else:
                blocks += _compute(host, result, params.get("worst_layers") or DEFAULT_WORST_LAYERS,
                                   params.get("heatmap_min_layers") or HEATMAP_MIN_LAYERS)
        sections.append({"layer": layer, "heading": layer_heading(layer, heading, params.get("windows_storage_hosts")
                                                                  or []),
                         "verdict": verdict, "reason": reason, "blocks": blocks})
    document = {
        "title": params["title"],
        "timestamp": params.get("timestamp"),
        "verdicts": verdicts,
        "reasons": reasons,
        "metrics": metrics,
        "summary": summary,
        "run": params.get("run"),
        "results": {option: {host: clean(result) for host, result in (params.get(option) or {}).items()}
                    for option in VERDICT_KEY},
    }
    if history is not None:
        trend = history_section(history, document)
        sections.insert(0, trend)  # first: what changed is what a reader of a repeated audit looks for
        document["changes"] = trend["changes"]
    document["sections"] = sections
    return document
