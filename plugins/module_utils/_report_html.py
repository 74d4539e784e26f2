# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTML rendering of the audit document model (``_report_model``): one self-contained page (inline CSS and SVG,
no script, nothing fetched), with the charts drawn by ``_report_svg``."""

from __future__ import annotations

import html
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._report_svg import svg_bars, svg_heatmap, svg_trend

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
.axis{stroke:#8a8f98}.lbl{font-size:10px;fill:#3b3f46}.ttl{fill:#1b1f23}.note{color:#6b6f76;font-size:.9rem}
.frame{stroke:#8a8f98;stroke-width:.5}.trend{stroke:#4a78c2;stroke-width:2}.pt{fill:#4a78c2}
.trends{display:flex;flex-wrap:wrap;gap:1rem}.trends figure{margin:0}figcaption{font-size:.9rem}
.reason{margin:.2rem 0 .8rem 0}
"""


def _css(word: str) -> str:
    return word.replace(" ", "-")


def _cells(tag: str, cells: list[Any]) -> str:
    """Table cells, the first left-aligned (the row's name), the rest right-aligned numbers."""
    return "".join(f'<{tag} class="l">{html.escape(str(cell))}</{tag}>' if position == 0 else
                   f"<{tag}>{html.escape(str(cell))}</{tag}>" for position, cell in enumerate(cells))


def _chart(svg: str, note: str) -> str:
    return svg + (f'<p class="note">{html.escape(note)}</p>' if note else "")


def _block(block: dict[str, Any]) -> str:
    kind = block["kind"]
    if kind == "heading":
        return (f'<h4>{html.escape(block["text"])}, '
                f'<span class="{block["state"]}">{html.escape(block["word"])}</span></h4>')
    if kind == "status":
        return f'<p class="{block["state"]}">{html.escape(block["text"])}</p>'
    if kind == "note":
        return f'<p class="note">{html.escape(block["text"])}</p>'
    if kind == "table":
        rows = "".join(f"<tr>{_cells('td', row)}</tr>" for row in block["rows"])
        return f"<table><tr>{_cells('th', block['header'])}</tr>{rows}</table>"
    if kind == "findings":
        if not block["items"]:
            return ""
        title = f"<h4>{html.escape(block['title'])}</h4>" if block.get("title") else ""
        return title + "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block["items"]) + "</ul>"
    if kind == "bars":
        return _chart(*svg_bars(block["values"], block["labels"], block["references"], hot=block["hot"],
                                max_bars=block["max_bars"], unit=block["unit"], ticks=block["ticks"],
                                axis_title=block["axis_title"]))
    if kind == "heatmap":
        return _chart(*svg_heatmap(block["rows"], block["row_labels"], row_title=block["row_title"],
                                   column_title=block["column_title"]))
    if kind == "trend":
        svg, note = svg_trend(block["values"], block["labels"], unit=block["unit"], limit=block["limit"])
        return f"<figure>{_chart(svg, note)}<figcaption>{html.escape(block['title'])}</figcaption></figure>"
    raise ValueError(f"block kind {kind!r} has no HTML form: add it to _report_html")


def _section(section: dict[str, Any]) -> list[str]:
    verdict = section.get("verdict")
    head = html.escape(section["heading"])
    if verdict:
        head += f': <span class="{_css(verdict)}">{html.escape(verdict)}</span>'
    parts = [f"<h2>{head}</h2>"]
    if section.get("reason"):
        parts.append(f'<p class="reason">Reason: {html.escape(section["reason"])}</p>')
    trends = [block for block in section["blocks"] if block["kind"] == "trend"]
    if trends:
        parts.append('<div class="trends">' + "".join(_block(block) for block in trends) + "</div>")
    parts += [_block(block) for block in section["blocks"] if block["kind"] != "trend"]
    return parts


def render_html(document: dict[str, Any]) -> str:
    title = html.escape(document["title"])
    page = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{title}</title><style>{CSS}</style></head><body>", f"<h1>{title}</h1>"]
    if document.get("timestamp"):
        page.append(f'<p class="note">Audited: {html.escape(document["timestamp"])}</p>')
    page.append('<table><tr><th class="l">layer</th><th>verdict</th><th class="l">reason</th></tr>')
    for section in document["sections"]:
        if section.get("verdict"):
            page.append(f'<tr><td class="l">{html.escape(section["heading"])}</td>'
                        f'<td class="{_css(section["verdict"])}">{html.escape(section["verdict"])}</td>'
                        f'<td class="l">{html.escape(section.get("reason") or "")}</td></tr>')
    page.append("</table>")
    for section in document["sections"]:
        page += _section(section)
    page.append("</body></html>\n")
    return "\n".join(page)
