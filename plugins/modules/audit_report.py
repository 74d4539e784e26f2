#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: audit_report
short_description: Write the balance audit of all three layers as Markdown, HTML with bar charts, and JSON
version_added: 0.1.0
description:
  - Takes the registered results of M(hpc.balance.ipvs_spread), M(hpc.balance.iperf3_throughput) and
    M(hpc.balance.tokens_per_expert), keyed by host, and writes C(report.md), C(report.html) and C(report.json)
    into O(dest).
  - The HTML page is self-contained (inline CSS and SVG, no scripts, nothing fetched) with small bar charts of the
    load per real server, the throughput per stream and the tokens per expert.
  - Meant to run once on the controller; delegate the task to C(localhost) and set C(run_once).
  - Files are only rewritten when their content changes; leave O(timestamp) unset for a report that is stable
    between runs.
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written; C(changed) tells whether the files would change.
options:
  dest:
    description:
      - Directory to write the three files into; created when missing.
    type: path
    required: true
  title:
    description:
      - Title of the report.
    type: str
    default: hpc.balance audit
  timestamp:
    description:
      - Text shown as the time of the audit, for example C({{ now(utc=true).isoformat() }}). Omitted when unset.
    type: str
  ipvs_spread:
    description:
      - Results of M(hpc.balance.ipvs_spread) keyed by host name. Failed or skipped results are shown as such.
    type: dict
    default: {}
  iperf3_throughput:
    description:
      - Results of M(hpc.balance.iperf3_throughput) in C(client) mode keyed by host name.
    type: dict
    default: {}
  tokens_per_expert:
    description:
      - Results of M(hpc.balance.tokens_per_expert) keyed by host name.
    type: dict
    default: {}
  max_bars:
    description:
      - Most bars per chart; with more members the chart shows the busiest and the least busy half each.
    type: int
    default: 64
seealso:
  - module: hpc.balance.ipvs_spread
  - module: hpc.balance.iperf3_throughput
  - module: hpc.balance.tokens_per_expert
"""

EXAMPLES = r"""
- name: Write the audit on the controller
  hpc.balance.audit_report:
    dest: "{{ audit_dir }}"
    ipvs_spread: "{{ dict(directors | zip(directors | map('extract', hostvars, 'spread'))) }}"
    iperf3_throughput: "{{ {'client1': hostvars['client1'].team} }}"
    tokens_per_expert: "{{ dict(gpus | zip(gpus | map('extract', hostvars, 'experts'))) }}"
  vars:
    directors: "{{ groups['lvs_directors'] }}"
    gpus: "{{ groups['gpu_nodes'] }}"
  delegate_to: localhost
  run_once: true
  register: audit

- name: Show the summary
  ansible.builtin.debug:
    msg: "{{ audit.summary + ['report: ' ~ audit.files.html] }}"
"""

RETURN = r"""
dest:
  description: The directory written to.
  returned: always
  type: str
  sample: /srv/audit/2024-04-12
files:
  description: Paths of the three files (also in check mode, where they are not written).
  returned: always
  type: dict
  contains:
    markdown:
      description: Path of the Markdown report.
      returned: always
      type: str
      sample: /srv/audit/2024-04-12/report.md
    html:
      description: Path of the HTML report.
      returned: always
      type: str
      sample: /srv/audit/2024-04-12/report.html
    json:
      description: Path of the JSON report.
      returned: always
      type: str
      sample: /srv/audit/2024-04-12/report.json
written:
  description: The files that were (or in check mode would be) rewritten.
  returned: always
  type: list
  elements: str
  sample: [/srv/audit/2024-04-12/report.html]
verdicts:
  description:
    - Per layer, C(balanced), C(imbalanced), C(unknown) (nothing to judge), C(error) (a reporter failed) or
      C(not run).
  returned: always
  type: dict
  sample: {"network": "balanced", "host_link": "imbalanced", "compute": "not run"}
summary:
  description: Plain lines, one per layer and host.
  returned: always
  type: list
  elements: str
  sample: ["network: balanced", "  lvs1: TCP 198.18.0.100:80 (wlc): balanced, 2 real servers"]
"""

import html
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.hpc.balance.plugins.module_utils._iperf3 import format_bits_per_second

LAYERS = (("network", "ipvs_spread", "Network layer (LVS / IPVS)"),
          ("host_link", "iperf3_throughput", "Host link layer (NIC team throughput)"),
          ("compute", "tokens_per_expert", "Compute layer (MoE tokens per expert)"))
VERDICT_KEY = {"ipvs_spread": "balanced", "iperf3_throughput": "reaches_expected", "tokens_per_expert": "balanced"}
STATE_WORDS = {True: "balanced", False: "imbalanced", None: "unknown", "error": "error", "skipped": "skipped"}
THROUGHPUT_WORDS = {True: "reaches the expected bandwidth", False: "below the expected bandwidth",
                    None: "no expected bandwidth given"}
TABLE_ROWS_PER_BAR = 4

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem;color:#1b1f23;max-width:72rem}
h1{font-size:1.6rem}h2{font-size:1.3rem;border-bottom:1px solid #ccd;padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1.1rem}h4{font-size:1rem;margin-bottom:.3rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccd;padding:.2rem .5rem;text-align:right}
th{background:#f3f4f8}td.l,th.l{text-align:left}
.balanced{color:#176f2c;font-weight:600}.imbalanced,.error{color:#b3261e;font-weight:600}
.unknown,.not-run,.skipped{color:#6b6f76;font-weight:600}
svg{display:block;margin:.3rem 0 1rem 0}.bar{fill:#4a78c2}.bar.hot{fill:#c2564a}.bar.idle{fill:#b8bcc6}
.ref{stroke:#1b1f23;stroke-dasharray:4 3}.lim{stroke:#b3261e;stroke-dasharray:6 3}
.axis{stroke:#8a8f98}.lbl{font-size:10px;fill:#3b3f46}.note{color:#6b6f76;font-size:.9rem}
"""


# ---------------------------------------------------------------- verdicts and plain lines


def _state(result, key):
    """'error', 'skipped', True, False or None for one registered result."""
    if not isinstance(result, dict) or result.get("failed"):
        return "error"
    if result.get("skipped"):
        return "skipped"
    return result.get(key)


def _layer_verdict(results, key):
    if not results:
        return "not run"
    states = [_state(result, key) for result in results.values()]
    if False in states:
        return "imbalanced"
    if "error" in states:
        return "error"
    if True in states:
        return "balanced"
    return "unknown"


def _host_lines(option, host, result):
    state = _state(result, VERDICT_KEY[option])
    if state == "error":
        message = result.get("msg", "no result") if isinstance(result, dict) else "no result"
        return [f"  {host}: reporter failed: {message}"]
    if state == "skipped":
        return [f"  {host}: skipped"]
    summary = result.get("summary")
    if isinstance(summary, str):
        summary = [summary]
    lines = [f"  {host}: {line}" for line in summary or []]
    return lines or [f"  {host}: {STATE_WORDS[state]}"]


# ---------------------------------------------------------------- SVG bar charts


def _pick_bars(values, max_bars):
    """(indexes to draw, note). With more members than max_bars: the busiest half and the least busy half."""
    indexes = list(range(len(values)))
    if len(values) <= max_bars:
        return indexes, ""
    ordered = sorted(indexes, key=lambda index: values[index], reverse=True)
    busiest = max_bars // 2
    quietest = max_bars - busiest
    chosen = sorted(ordered[:busiest] + ordered[-quietest:])
    return chosen, f"chart shows the {busiest} busiest and {quietest} least busy of {len(values)}"


def _short(value, unit=""):
    if value is None:
        return "n/a"
    if unit == "bit/s":
        return format_bits_per_second(value)
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return f"{value:.0f}"


def svg_bars(values, labels, references=(), hot=(), max_bars=64, unit="", width=640, height=150):
    """A small inline bar chart; ``references`` are (value, text, css class) horizontal lines. Returns (svg, note)."""
    chosen, note = _pick_bars(values, max_bars)
    if not chosen:
        return "", "no data to draw"
    # The left margin fits the longest axis label ("999.99 Gbit/s") at the chart font size.
    left, right, top, bottom = 80, 8, 8, 22
    plot_w = width - left - right
    plot_h = height - top - bottom
    peak = max([values[index] for index in chosen] + [reference[0] for reference in references] + [1e-12])
    step = plot_w / len(chosen)
    bar_w = max(step * 0.8, 1.0)
    hot = set(hot)
    base = top + plot_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">',
        f'<line class="axis" x1="{left}" y1="{base}" x2="{width - right}" y2="{base}"/>',
        f'<text class="lbl" font-size="10" x="{left - 4}" y="{top + 8}" text-anchor="end">'
        f'{html.escape(_short(peak, unit))}</text>',
        f'<text class="lbl" font-size="10" x="{left - 4}" y="{base}" text-anchor="end">0</text>',
    ]
    label_every = -(-len(chosen) // 16)  # at most 16 axis labels
    for position, index in enumerate(chosen):
        value = values[index]
        bar_h = max(plot_h * value / peak, 0.5)
        x = left + position * step + (step - bar_w) / 2
        css = "bar hot" if index in hot else ("bar idle" if value == 0 else "bar")
        tip = html.escape(f"{labels[index]}: {_short(value, unit)}")
        parts.append(f'<rect class="{css}" x="{x:.1f}" y="{base - bar_h:.1f}" width="{bar_w:.1f}" '
                     f'height="{bar_h:.1f}"><title>{tip}</title></rect>')
        if position % label_every == 0:
            parts.append(f'<text class="lbl" font-size="10" x="{x + bar_w / 2:.1f}" y="{height - 8}" '
                         f'text-anchor="middle">{html.escape(str(labels[index])[:14])}</text>')
    for value, text, css in references:
        y = base - plot_h * value / peak
        parts.append(f'<line class="{css}" x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}">'
                     f'<title>{html.escape(text)}</title></line>')
    parts.append("</svg>")
    return "".join(parts), note


# ---------------------------------------------------------------- building blocks (Markdown lines + HTML parts)


def _num(value, digits=3):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(fraction_or_percent, is_fraction=False):
    if fraction_or_percent is None:
        return "n/a"
    return f"{100.0 * fraction_or_percent if is_fraction else fraction_or_percent:.1f} %"


def _cells(tag, cells):
    """Table cells, the first left-aligned (the row's name), the rest right-aligned numbers."""
    return "".join(f'<{tag} class="l">{html.escape(cell)}</{tag}>' if position == 0 else
                   f"<{tag}>{html.escape(cell)}</{tag}>" for position, cell in enumerate(cells))


def _table(md, out, header, rows):
    md.append("| " + " | ".join(header) + " |")
    md.append("|" + "|".join(["---"] * len(header)) + "|")
    out.append(f"<table><tr>{_cells('th', header)}</tr>")
    for row in rows:
        cells = [str(cell) for cell in row]
        md.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        out.append(f"<tr>{_cells('td', cells)}</tr>")
    md.append("")
    out.append("</table>")


def _heading(md, out, text, state, words=None):
    css = STATE_WORDS[state]
    word = (words or STATE_WORDS)[state]
    md += [f"#### {text}, {word}", ""]
    out.append(f'<h4>{html.escape(text)}, <span class="{css}">{html.escape(word)}</span></h4>')


def _chart(md, out, svg, note):
    if svg:
        out.append(svg)
    if note:
        out.append(f'<p class="note">{html.escape(note)}</p>')
        md += [f"_{note}_", ""]


def _findings(md, out, findings):
    if not findings:
        return
    out.append("<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in findings) + "</ul>")
    md.extend(f"- {item}" for item in findings)
    md.append("")


# ---------------------------------------------------------------- one section per reporter


def _network(md, out, host, result, max_bars):
    for service in result.get("services") or []:
        _heading(md, out, f"{host} - {service.get('name')} ({service.get('scheduler')})", service.get("balanced"))
        servers = service.get("real_servers") or []
        loads = [server.get("load") or 0 for server in servers]
        weighted = [server.get("weight") for server in servers if server.get("weight")]
        references = []
        if sum(loads) and weighted and len(set(weighted)) == 1:
            references.append((sum(loads) / len(weighted), "weighted share", "ref"))
        _chart(md, out, *svg_bars(loads, [server.get("address") for server in servers], references, max_bars=max_bars))
        spread = service.get("spread") or {}
        md += [f"CV {_num(spread.get('cv'))} ({spread.get('cv_grade')}), max/mean {_num(spread.get('max_over_mean'))}, "
               f"worst deviation {_pct(service.get('max_abs_deviation_percent'))}", ""]
        shown = servers[:max_bars * TABLE_ROWS_PER_BAR]
        rows = [(server.get("address"), server.get("port"), server.get("forward"), server.get("weight"),
                 server.get("active_conns"), server.get("inactive_conns"), server.get("load"),
                 _pct(server.get("share"), True), _pct(server.get("expected_share"), True),
                 _pct(server.get("deviation_percent"))) for server in shown]
        _table(md, out, ["real server", "port", "forward", "weight", "active", "inactive", "load", "share",
                         "weighted share", "deviation"], rows)
        if len(shown) < len(servers):
            _chart(md, out, "", f"the table shows {len(shown)} of {len(servers)} real servers; report.json has all")
        findings = list(service.get("findings") or [])
        if service.get("pinning_warning"):
            findings.insert(0, service["pinning_warning"])
        _findings(md, out, findings)


def _host_link(md, out, host, result, max_bars):
    _heading(md, out, f"{host} - {result.get('summary')}", result.get("reaches_expected"), THROUGHPUT_WORDS)
    streams = result.get("streams") or []
    rates = [stream.get("received_bits_per_second") or 0.0 for stream in streams]
    labels = [f"stream {position}" for position in range(len(streams))]
    references = []
    if rates:
        references.append((sum(rates) / len(rates), "mean per stream", "ref"))
    if result.get("expected_link_bits_per_second"):
        references.append((float(result["expected_link_bits_per_second"]), "one member link", "lim"))
    _chart(md, out, *svg_bars(rates, labels, references, max_bars=max_bars, unit="bit/s"))
    rows = [(labels[position], format_bits_per_second(stream.get("sent_bits_per_second")),
             format_bits_per_second(stream.get("received_bits_per_second")), _num(stream.get("retransmits")),
             f"{stream.get('local_host')}:{stream.get('local_port')}") for position, stream in enumerate(streams)]
    _table(md, out, ["stream", "sent", "received", "retransmits", "local end"], rows)
    _findings(md, out, result.get("findings") or [])


def _compute(md, out, host, result, max_bars):
    limit = result.get("max_over_mean_limit") or 2.0
    for layer in result.get("layers") or []:
        _heading(md, out, f"{host} - layer {layer.get('layer')}: max/mean {_num(layer.get('max_over_mean'), 2)}, "
                          f"CV {_num(layer.get('cv'))} ({layer.get('cv_grade')})", layer.get("balanced"))
        tokens = layer.get("tokens_per_expert") or []
        mean = layer.get("mean_tokens_per_expert")
        references = [(mean, "mean", "ref"), (mean * limit, f"limit {limit:.2f} x mean", "lim")] if mean else []
        labels = [f"expert {index}" for index in range(len(tokens))]
        _chart(md, out, *svg_bars(tokens, labels, references, hot=layer.get("hot_experts") or [],
                                  max_bars=max(max_bars, 256)))
        _table(md, out, ["experts", "tokens", "max/mean", "CV", "grade", "idle", "hot share", "steps"], [(
            layer.get("num_experts"), layer.get("total_tokens"), _num(layer.get("max_over_mean"), 2),
            _num(layer.get("cv")), layer.get("cv_grade"), len(layer.get("idle_experts") or []),
            _pct(layer.get("hot_share"), True), f"{layer.get('step_first')}-{layer.get('step_last')}")])
        _findings(md, out, layer.get("findings") or [])
    if result.get("malformed_lines"):
        _findings(md, out, [f"{result['malformed_lines']} malformed lines were skipped"])


RENDERERS = {"ipvs_spread": _network, "iperf3_throughput": _host_link, "tokens_per_expert": _compute}


def _clean(result):
    if not isinstance(result, dict):
        return result
    return {key: value for key, value in result.items() if key != "invocation" and not key.startswith("_ansible")}


def render(params):
    """(markdown text, html text, json text, verdicts, summary lines) for the module parameters."""
    title = params["title"]
    timestamp = params.get("timestamp")
    verdicts = {}
    summary = []
    md = [f"# {title}", ""] + ([f"Audited: {timestamp}", ""] if timestamp else [])
    body = []
    for layer, option, heading in LAYERS:
        results = params.get(option) or {}
        verdict = _layer_verdict(results, VERDICT_KEY[option])
        verdicts[layer] = verdict
        summary.append(f"{layer}: {verdict}")
        md += [f"## {heading}: {verdict}", ""]
        body.append(f'<h2>{html.escape(heading)}: <span class="{verdict.replace(" ", "-")}">{verdict}</span></h2>')
        if not results:
            md += ["No host ran this reporter.", ""]
            body.append('<p class="note">No host ran this reporter.</p>')
        for host in sorted(results):
            result = results[host]
            lines = _host_lines(option, host, result)
            summary += lines
            state = _state(result, VERDICT_KEY[option])
            if state in ("error", "skipped"):
                md += [lines[0].strip(), ""]
                body.append(f'<p class="{STATE_WORDS[state]}">{html.escape(lines[0].strip())}</p>')
                continue
            RENDERERS[option](md, body, host, result, params["max_bars"])
    page = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{html.escape(title)}</h1>"]
    if timestamp:
        page.append(f'<p class="note">Audited: {html.escape(timestamp)}</p>')
    page.append('<table><tr><th class="l">layer</th><th>verdict</th></tr>')
    for layer, _option, heading in LAYERS:
        page.append(f'<tr><td class="l">{html.escape(heading)}</td>'
                    f'<td class="{verdicts[layer].replace(" ", "-")}">{verdicts[layer]}</td></tr>')
    page += ["</table>"] + body + ["</body></html>\n"]
    document = {
        "title": title,
        "timestamp": timestamp,
        "verdicts": verdicts,
        "summary": summary,
        "results": {option: {host: _clean(result) for host, result in (params.get(option) or {}).items()}
                    for option in VERDICT_KEY},
    }
    return ("\n".join(md).rstrip() + "\n", "\n".join(page), json.dumps(document, indent=1, sort_keys=True) + "\n",
            verdicts, summary)


def _write_if_changed(module, path, text):
    data = to_bytes(text)
    if os.path.exists(path):
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False
    if module.check_mode:
        return True
    handle, temporary = tempfile.mkstemp(prefix=".report-", dir=os.path.dirname(path))
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    os.chmod(temporary, 0o644)
    module.atomic_move(temporary, path)
    return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            title=dict(type="str", default="hpc.balance audit"),
            timestamp=dict(type="str"),
            ipvs_spread=dict(type="dict", default={}),
            iperf3_throughput=dict(type="dict", default={}),
            tokens_per_expert=dict(type="dict", default={}, no_log=False),
            max_bars=dict(type="int", default=64),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["max_bars"] < 2:
        module.fail_json(msg=f"max_bars is {params['max_bars']}: give at least 2")
    dest = params["dest"]
    if os.path.exists(dest) and not os.path.isdir(dest):
        module.fail_json(msg=f"dest {dest} exists and is not a directory; give a directory for the report files")
    markdown, page, document, verdicts, summary = render(params)
    files = {"markdown": os.path.join(dest, "report.md"), "html": os.path.join(dest, "report.html"),
             "json": os.path.join(dest, "report.json")}
    if not os.path.isdir(dest) and not module.check_mode:
        os.makedirs(dest, mode=0o755)
    written = [files[key] for key, text in (("markdown", markdown), ("html", page), ("json", document))
               if _write_if_changed(module, files[key], text)]
    module.exit_json(changed=bool(written), dest=dest, files=files, written=written, verdicts=verdicts,
                     summary=summary)


if __name__ == "__main__":
    main()
