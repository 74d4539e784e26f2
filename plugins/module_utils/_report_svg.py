# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inline SVG charts for the audit report: bars, a layers x experts heatmap and a trend line.

Every chart is plain SVG (no script, nothing fetched) with a fixed pixel size. Axis labels never overlap: a label is
drawn only where the previous one has ended, using ``text_width`` - an upper bound of the rendered width of the
label at the chart's font size - so the spacing holds for any number of members.
"""

from __future__ import annotations

import html
from typing import Sequence

from ansible_collections.hpc.balance.plugins.module_utils._units import format_bits_per_second

FONT_PX = 10
# Upper bound of a glyph's advance in the fonts a browser picks for system-ui at 10 px: digits, letters, '.', ':'
# are at most about 0.6 em; 0.68 em leaves room for the widest capitals.
CHAR_EM = 0.68
LABEL_GAP_PX = 6
# Heatmap colour buckets: (upper bound of load / layer mean, fill). Idle is grey, the mean is pale, hot is red.
HEAT_BUCKETS = (
    (1e-12, "#b8bcc6"),
    (0.5, "#2f5fa8"),
    (0.8, "#7ea3d8"),
    (0.95, "#cfdcf0"),
    (1.05, "#f4f4f4"),
    (1.25, "#f6d2c4"),
    (1.6, "#e9967a"),
    (2.0, "#cf5a3f"),
    (float("inf"), "#8e1b0e"),
)
HEAT_LEGEND = ("idle", "< 0.5", "< 0.8", "< 0.95", "~ 1", "> 1.05", "> 1.25", "> 1.6", ">= 2")


def text_width(text: str, font_px: int = FONT_PX) -> float:
    """Upper bound of the rendered width of ``text`` in pixels."""
    return len(text) * font_px * CHAR_EM


def short_number(value: float | None, unit: str = "") -> str:
    """12345 -> '12.3k'; bit/s values through the one rate formatter; None -> 'n/a'."""
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


def pick_bars(values: Sequence[float], max_bars: int) -> tuple[list[int], str]:
    """(indexes to draw, note). With more members than max_bars: the busiest half and the least busy half."""
    indexes = list(range(len(values)))
    if len(values) <= max_bars:
        return indexes, ""
    ordered = sorted(indexes, key=lambda index: values[index], reverse=True)
    busiest = max_bars // 2
    quietest = max_bars - busiest
    chosen = sorted(ordered[:busiest] + ordered[-quietest:])
    return chosen, f"chart shows the {busiest} busiest and {quietest} least busy of {len(values)}"


NICE_STEPS = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 250, 256, 500, 512, 1000)


def spaced_ticks(centres: Sequence[float], texts: Sequence[str], gap_px: float = LABEL_GAP_PX, low: float = 0.0,
                 high: float = float("inf")) -> list[int]:
    """Positions (into centres/texts) of the labels to draw: every k-th for the smallest round k at which no two
    centred labels overlap; a label that would leave the chart (``low``..``high``) is left out."""
    count = len(centres)
    for step in NICE_STEPS + (max(count, 1),):
        shown = [position for position in range(0, count, step)
                 if centres[position] - text_width(texts[position]) / 2 >= low
                 and centres[position] + text_width(texts[position]) / 2 <= high]
        if all(centres[second] - text_width(texts[second]) / 2 >= centres[first] + text_width(texts[first]) / 2
               + gap_px for first, second in zip(shown, shown[1:])):
            return shown
    return []


def _open(width: int, height: int, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(label)}">')


def _text(x: float, y: float, text: str, anchor: str = "middle", css: str = "lbl") -> str:
    return (f'<text class="{css}" font-size="{FONT_PX}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">'
            f"{html.escape(text)}</text>")


def svg_bars(values: Sequence[float], labels: Sequence[str], references: Sequence[tuple[float, str, str]] = (),
             hot: Sequence[int] = (), max_bars: int = 64, unit: str = "", width: int = 640, height: int = 160,
             ticks: Sequence[str] | None = None, axis_title: str = "") -> tuple[str, str]:
    """A bar chart; ``references`` are (value, text, css class) horizontal lines; ``ticks`` are the (short) axis
    labels (default: the labels, which also name each bar in its tooltip). Returns (svg, note)."""
    chosen, note = pick_bars(values, max_bars)
    if not chosen:
        return "", "no data to draw"
    ticks = list(labels if ticks is None else ticks)
    peak_text = short_number(max([values[index] for index in chosen] + [ref[0] for ref in references] + [0]), unit)
    left = int(max(text_width(peak_text), text_width("0")) + 10)
    right, top, bottom = 8, 8, 34 if axis_title else 22
    plot_w = width - left - right
    plot_h = height - top - bottom
    peak = max([values[index] for index in chosen] + [reference[0] for reference in references] + [1e-12])
    step = plot_w / len(chosen)
    bar_w = max(step * 0.8, 1.0)
    hot_set = set(hot)
    base = top + plot_h
    parts = [
        _open(width, height, axis_title or "bar chart"),
        f'<line class="axis" x1="{left}" y1="{base}" x2="{width - right}" y2="{base}"/>',
        _text(left - 4, top + 8, peak_text, "end"),
        _text(left - 4, base, "0", "end"),
    ]
    centres = []
    for position, index in enumerate(chosen):
        value = values[index]
        bar_h = max(plot_h * value / peak, 0.5)
        x = left + position * step + (step - bar_w) / 2
        centres.append(x + bar_w / 2)
        css = "bar hot" if index in hot_set else ("bar idle" if value == 0 else "bar")
        tip = html.escape(f"{labels[index]}: {short_number(value, unit)}")
        parts.append(f'<rect class="{css}" x="{x:.1f}" y="{base - bar_h:.1f}" width="{bar_w:.1f}" '
                     f'height="{bar_h:.1f}"><title>{tip}</title></rect>')
    texts = [str(ticks[index]) for index in chosen]
    for position in spaced_ticks(centres, texts, high=width):
        parts.append(_text(centres[position], base + 14, texts[position]))
    if axis_title:
        parts.append(_text(left + plot_w / 2, height - 4, axis_title, css="lbl ttl"))
    for value, text, css in references:
        y = base - plot_h * value / peak
        parts.append(f'<line class="{css}" x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}">'
                     f"<title>{html.escape(text)}</title></line>")
    parts.append("</svg>")
    return "".join(parts), note


def heat_bucket(ratio: float) -> int:
    """Index into HEAT_BUCKETS for one cell's load / layer mean."""
    for position, (bound, _fill) in enumerate(HEAT_BUCKETS):
        if ratio < bound:
            return position
    return len(HEAT_BUCKETS) - 1


def svg_heatmap(rows: Sequence[Sequence[float]], row_labels: Sequence[str], width: int = 960,
                row_title: str = "layer", column_title: str = "expert") -> tuple[str, str]:
    """Rows (layers) x columns (experts), each cell coloured by its load / its row's mean. Returns (svg, note).

    Cells of one colour that touch in a row are drawn as one rectangle of one path per colour, so 58 x 256 cells
    stay a small page.
    """
    if not rows or not any(rows):
        return "", "no data to draw"
    columns = max(len(row) for row in rows)
    left = int(max(text_width(str(label)) for label in row_labels) + 12)
    right, top = 8, 8
    plot_w = width - left - right
    cell_w = plot_w / columns
    row_h = max(min(12.0, 480.0 / len(rows)), 3.0)
    plot_h = row_h * len(rows)
    height = int(top + plot_h + 64)
    paths: list[list[str]] = [[] for _bucket in HEAT_BUCKETS]
    for row_index, row in enumerate(rows):
        mean = sum(row) / len(row) if row else 0.0
        y = top + row_index * row_h
        start = 0
        while start < len(row):
            bucket = heat_bucket(row[start] / mean) if mean else 0
            end = start + 1
            while end < len(row) and (heat_bucket(row[end] / mean) if mean else 0) == bucket:
                end += 1
            x = left + start * cell_w
            run_w = (end - start) * cell_w
            paths[bucket].append(f"M{x:.2f} {y:.2f}h{run_w:.2f}v{row_h:.2f}h{-run_w:.2f}z")
            start = end
    parts = [_open(width, height, f"{row_title} x {column_title} heatmap")]
    for (_bound, fill), cells in zip(HEAT_BUCKETS, paths):
        if cells:
            parts.append(f'<path fill="{fill}" d="{"".join(cells)}"/>')
    parts.append(f'<rect class="frame" x="{left}" y="{top}" width="{plot_w:.1f}" height="{plot_h:.1f}" fill="none"/>')
    row_centres = [top + (index + 0.5) * row_h + 3 for index in range(len(rows))]
    shown_rows = _spaced_rows(row_centres, FONT_PX + 2)
    for index in shown_rows:
        parts.append(_text(left - 4, row_centres[index], str(row_labels[index]), "end"))
    column_centres = [left + (index + 0.5) * cell_w for index in range(columns)]
    column_texts = [str(index) for index in range(columns)]
    for index in spaced_ticks(column_centres, column_texts, high=width):
        parts.append(_text(column_centres[index], top + plot_h + 13, column_texts[index]))
    title = f"{column_title} (colour: tokens / the {row_title}'s mean)"
    parts.append(_text(left + plot_w / 2, top + plot_h + 27, title, css="lbl ttl"))
    parts.append(_legend(left, top + plot_h + 38, plot_w))
    parts.append("</svg>")
    return "".join(parts), ""


def _spaced_rows(centres: Sequence[float], min_px: float) -> list[int]:
    shown: list[int] = []
    for index, centre in enumerate(centres):
        if not shown or centre - centres[shown[-1]] >= min_px:
            shown.append(index)
    return shown


def _legend(x: float, y: float, width: float) -> str:
    box = 12
    slot = width / len(HEAT_BUCKETS)
    parts = []
    for position, ((_bound, fill), text) in enumerate(zip(HEAT_BUCKETS, HEAT_LEGEND)):
        left = x + position * slot
        parts.append(f'<rect x="{left:.1f}" y="{y:.1f}" width="{box}" height="{box}" fill="{fill}" class="frame"/>')
        parts.append(_text(left + box + 4, y + box - 2, text, "start"))
    return "".join(parts)


def svg_trend(values: Sequence[float | None], labels: Sequence[str], unit: str = "", width: int = 320,
              height: int = 110, limit: float | None = None) -> tuple[str, str]:
    """A line over runs (oldest first); None values leave a gap. Returns (svg, note)."""
    known = [value for value in values if value is not None]
    if not known:
        return "", "no value to draw in the history"
    peak = max(known + ([limit] if limit is not None else []) + [1e-12])
    peak_text = short_number(peak, unit)
    left = int(text_width(peak_text) + 10)
    right, top, bottom = 10, 8, 22
    plot_w = width - left - right
    plot_h = height - top - bottom
    base = top + plot_h
    step = plot_w / max(len(values) - 1, 1)
    xs = [left + index * step if len(values) > 1 else left + plot_w / 2 for index in range(len(values))]
    parts = [_open(width, height, "trend over runs"),
             f'<line class="axis" x1="{left}" y1="{base}" x2="{width - right}" y2="{base}"/>',
             _text(left - 4, top + 8, peak_text, "end"), _text(left - 4, base, "0", "end")]
    if limit is not None:
        y = base - plot_h * limit / peak
        parts.append(f'<line class="lim" x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}">'
                     f"<title>limit {html.escape(short_number(limit, unit))}</title></line>")
    segment: list[str] = []
    for x, value in zip(xs, values):
        if value is None:
            if len(segment) > 1:
                parts.append(f'<polyline class="trend" fill="none" points="{" ".join(segment)}"/>')
            segment = []
            continue
        y = base - plot_h * value / peak
        segment.append(f"{x:.1f},{y:.1f}")
        parts.append(f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" r="3">'
                     f"<title>{html.escape(short_number(value, unit))}</title></circle>")
    if len(segment) > 1:
        parts.append(f'<polyline class="trend" fill="none" points="{" ".join(segment)}"/>')
    for position in spaced_ticks(xs, [str(label) for label in labels], high=width):
        parts.append(_text(xs[position], base + 14, str(labels[position])))
    parts.append("</svg>")
    return "".join(parts), ""
