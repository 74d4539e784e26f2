"""Report charts: bars stay small, no axis label overlaps another or leaves the chart at any member count, the
heatmap draws 58 x 256 cells as a few paths, and the trend leaves gaps for runs without a number."""

from __future__ import annotations

from collections import defaultdict
from xml.etree import ElementTree

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._report_svg import (
    HEAT_BUCKETS,
    heat_bucket,
    svg_bars,
    svg_heatmap,
    svg_trend,
    text_width,
)

SVG = "{http://www.w3.org/2000/svg}"


def label_boxes(svg):
    """(y, left, right, text) of every text element, from its anchor and the width bound the charts space with."""
    root = ElementTree.fromstring(svg)
    boxes = []
    for element in root.iter(f"{SVG}text"):
        width = text_width(element.text or "")
        x = float(element.get("x"))
        left = {"start": x, "middle": x - width / 2, "end": x - width}[element.get("text-anchor")]
        boxes.append((float(element.get("y")), left, left + width, element.text))
    return boxes, float(root.get("width"))


def assert_no_label_overlaps(svg):
    boxes, width = label_boxes(svg)
    rows = defaultdict(list)
    for y, left, right, text in boxes:
        assert left >= 0 and right <= width, f"label {text!r} ({left:.1f}..{right:.1f}) leaves the {width} px chart"
        rows[y].append((left, right, text))
    for y, row in rows.items():
        row.sort()
        for (_l1, right, first), (left, _r2, second) in zip(row, row[1:], strict=False):
            assert left >= right, f"labels {first!r} and {second!r} overlap at y={y}"


@pytest.mark.parametrize(("count", "max_bars", "bars", "note"), [
    (5, 64, 5, ""),
    (5000, 64, 64, "chart shows the 32 busiest and 32 least busy of 5000"),
    (0, 64, 0, "no data to draw"),
])
def test_bar_charts_stay_small(count, max_bars, bars, note):
    values = list(range(count))
    svg, text = svg_bars(values, [f"rs{index}" for index in values], max_bars=max_bars)
    assert svg.count("<rect") == bars and text == note


@pytest.mark.parametrize("count", [1, 2, 8, 16, 64, 65, 100, 256, 1000])
def test_expert_axis_labels_never_overlap(count):
    svg, _note = svg_bars(list(range(count)), [f"expert {index}" for index in range(count)],
                          ticks=[str(index) for index in range(count)], axis_title="expert", max_bars=count)
    assert_no_label_overlaps(svg)
    assert "expert 0expert" not in "".join(text for *_box, text in label_boxes(svg)[0])


@pytest.mark.parametrize("count", [2, 3, 12, 64])
def test_long_real_server_labels_never_overlap(count):
    labels = [f"2001:db8:1234:5678::{index:x}" for index in range(count)]
    svg, _note = svg_bars([1000 + index for index in range(count)], labels, axis_title="real server")
    assert_no_label_overlaps(svg)


def test_the_first_expert_is_labelled_and_the_axis_says_what_it_counts():
    svg, _note = svg_bars([5] * 64, [f"expert {index}" for index in range(64)], ticks=[str(i) for i in range(64)],
                          axis_title="expert", max_bars=64)
    texts = [text for *_box, text in label_boxes(svg)[0]]
    assert "0" in texts and "expert" in texts and texts.count("expert") == 1


def test_heatmap_of_58_layers_by_256_experts_is_a_few_paths_with_spaced_labels():
    rows = [[(layer * 7 + expert * 13) % 97 + (400 if expert == layer else 0) for expert in range(256)]
            for layer in range(58)]
    svg, note = svg_heatmap(rows, [f"layer {layer}" for layer in range(58)])
    assert note == ""
    root = ElementTree.fromstring(svg)
    assert len(root.findall(f"{SVG}path")) <= len(HEAT_BUCKETS)
    assert len(svg) < 400_000, "the heatmap should stay a small page"
    assert_no_label_overlaps(svg)
    labels = [element.text for element in root.iter(f"{SVG}text")]
    assert "layer 0" in labels and "0" in labels


@pytest.mark.parametrize(("ratio", "bucket"), [(0.0, 0), (0.3, 1), (1.0, 4), (1.9, 7), (2.0, 8), (50.0, 8)])
def test_heat_buckets_split_idle_even_and_hot(ratio, bucket):
    assert heat_bucket(ratio) == bucket


def test_trend_draws_points_and_leaves_a_gap_for_a_run_without_a_number():
    svg, note = svg_trend([1.9, None, 1.2, 1.02], ["#1", "#2", "#3", "#4"], limit=2.0)
    assert note == ""
    root = ElementTree.fromstring(svg)
    assert len(root.findall(f"{SVG}circle")) == 3
    assert len(root.findall(f"{SVG}polyline")) == 1
    assert_no_label_overlaps(svg)
