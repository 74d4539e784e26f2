# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Markdown rendering of the audit document model (``_report_model``): headings, tables, notes, findings.

Charts have no Markdown form; their notes (what a chart leaves out) are kept, and the trend is a table.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._report_svg import pick_bars


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |")
    return lines + [""]


def _block(block: dict[str, Any]) -> list[str]:
    kind = block["kind"]
    if kind == "heading":
        return [f"#### {block['text']}, {block['word']}", ""]
    if kind == "status":
        return [block["text"], ""]
    if kind == "note":
        return [block["text"], ""] if not block.get("italic", True) else [f"_{block['text']}_", ""]
    if kind == "table":
        return _table(block["header"], block["rows"])
    if kind == "findings":
        if not block["items"]:
            return []
        title = [f"**{block['title']}:**", ""] if block.get("title") else []
        return title + [f"- {item}" for item in block["items"]] + [""]
    if kind == "trend":
        values = ["n/a" if value is None else f"{value:.2f}" for value in block["values"]]
        return [f"{block['title']}: " + ", ".join(f"{label} {value}" for label, value in zip(block["labels"], values)),
                ""]
    if kind == "bars":
        note = pick_bars(block["values"], block["max_bars"])[1]
        return [f"_{note}_", ""] if note else []
    return []  # a heatmap is a picture only: the HTML page has it, the layer table follows it


def render_markdown(document: dict[str, Any]) -> str:
    lines = [f"# {document['title']}", ""]
    if document.get("timestamp"):
        lines += [f"Audited: {document['timestamp']}", ""]
    for section in document["sections"]:
        verdict = f": {section['verdict']}" if section.get("verdict") else ""
        lines += [f"## {section['heading']}{verdict}", ""]
        if section.get("reason"):
            lines += [f"Reason: {section['reason']}", ""]
        for block in section["blocks"]:
            lines += _block(block)
    return "\n".join(lines).rstrip() + "\n"
