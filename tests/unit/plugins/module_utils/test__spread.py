"""Balance statistics: tables of (loads, weights) -> expected numbers, grades, errors, and fast == reference."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

import pytest
from spread_reference import (
    coefficient_of_variation,
    hot_members,
    hot_share,
    idle_share,
    max_over_mean,
    mean,
    min_over_max,
    reference_summary,
)

from ansible_collections.hpc.balance.plugins.module_utils._moe_stats import DEFAULT_MAX_OVER_MEAN_LIMIT
from ansible_collections.hpc.balance.plugins.module_utils._spread import (
    CV_GRADE_BOUNDS,
    CV_GRADE_SEVERE,
    cv_grade,
    deviations,
    fewest_to_judge,
    summarize,
)

U64_MAX = 2**64 - 1

SUMMARY_CASES = [
    # (id, values, weights, expected subset of the summary)
    ("even", [10, 10, 10, 10], None, {
        "count": 4, "total": 40, "mean": 10.0, "max_over_mean": 1.0, "min_over_max": 1.0, "cv": 0.0,
        "cv_grade": "excellent", "idle_count": 0, "idle_share": 0.0, "hot_count": 0, "hot_share": 0.0,
        "deviations": [0.0, 0.0, 0.0, 0.0], "max_abs_deviation": 0.0}),
    ("one_hot_member", [100, 10, 10, 10, 10], None, {
        "mean": 28.0, "max_over_mean": 100 / 28, "min_over_max": 0.1, "hot_count": 1, "hot_members": [0],
        "hot_share": 100 / 140, "cv_grade": "severe", "max_abs_deviation": 100 / 28 - 1}),
    ("one_idle_member", [0, 10, 10, 20], None, {
        "idle_count": 1, "idle_share": 0.25, "idle_members": [0], "min_over_max": 0.0, "max_over_mean": 2.0,
        "hot_count": 0, "deviations": [-1.0, 0.0, 0.0, 1.0]}),
    ("nothing_flowed", [0, 0, 0], None, {
        "count": 3, "total": 0, "mean": 0.0, "max_over_mean": None, "min_over_max": None, "cv": None,
        "cv_grade": None, "idle_count": 3, "idle_share": 1.0, "hot_share": None, "deviations": [None] * 3,
        "max_abs_deviation": None}),
    ("no_members", [], None, {
        "members": 0, "count": 0, "total": 0, "mean": None, "cv": None, "cv_grade": None, "idle_share": None,
        "deviations": []}),
    ("follows_weights_exactly", [300, 100, 200], [3, 1, 2], {
        "cv": 0.0, "max_over_mean": 1.0, "deviations": [0.0, 0.0, 0.0], "cv_grade": "excellent"}),
    ("ignores_weights_when_equal", [6, 2], [5, 5], {"mean": 4.0, "max_over_mean": 1.5, "cv": 0.5}),
    ("quiesced_member_left_out", [50, 50, 7], [1, 1, 0], {
        "members": 3, "count": 2, "total": 100, "cv": 0.0, "deviations": [0.0, 0.0, None],
        "max_abs_deviation": 0.0}),
    ("all_weights_zero", [5, 5], [0, 0], {"count": 0, "cv": None, "deviations": [None, None]}),
    ("twice_its_weight", [200, 100], [1, 1], {"deviations": [1 / 3, -1 / 3], "max_abs_deviation": 1 / 3}),
    ("u64_counters_equal", [U64_MAX, U64_MAX], None, {"cv": 0.0, "total": 2 * U64_MAX, "max_over_mean": 1.0}),
    ("floats", [9.5e9, 9.3e9, 9.4e9], None, {"mean": 9.4e9, "cv_grade": "excellent"}),
]


def same(actual, expected):
    """Numbers equal to 1e-9 relative; None, text and lists compared item by item."""
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            same(a, e) for a, e in zip(actual, expected, strict=True))
    if expected is None or isinstance(expected, str):
        return actual == expected
    return actual is not None and actual == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("values", "weights", "expected"), [case[1:] for case in SUMMARY_CASES],
                         ids=[case[0] for case in SUMMARY_CASES])
def test_summary_of_known_loads(values, weights, expected):
    summary = summarize(values, weights)
    for key, value in expected.items():
        assert same(summary[key], value), (key, summary[key], value)


@pytest.mark.parametrize(("cv", "grade"), [
    (0.0, "excellent"), (0.0999, "excellent"), (0.1, "good"), (0.2999, "good"), (0.3, "fair"), (0.4999, "fair"),
    (0.5, "severe"), (3.0, "severe"), (None, None),
])
def test_cv_grade_bounds(cv, grade):
    assert cv_grade(cv) == grade


@pytest.mark.parametrize(("values", "weights", "message"), [
    ([1, -2], None, "value at index 1 is -2: balance statistics need non-negative numbers"),
    ([1, True], None, "value at index 1 is True (bool): balance statistics need numbers"),
    (["7"], None, "value at index 0 is '7' (str): balance statistics need numbers"),
    ([float("nan")], None, "value at index 0 is nan: balance statistics need finite numbers"),
    ([1, 2], [1], "got 1 weights for 2 values: give one weight per member (or none for equal weights)"),
    ([1, 2], [1, -1], "weight at index 1 is -1: balance statistics need non-negative numbers"),
])
def test_bad_input_is_named(values, weights, message):
    with pytest.raises(ValueError) as error:
        summarize(values, weights)
    assert str(error.value) == message


def test_one_count_less_on_u64_counters_is_not_lost():
    # Float variance would cancel to 0 here; the integer path keeps the difference.
    assert summarize([U64_MAX, U64_MAX - 2])["cv"] == pytest.approx(1 / U64_MAX, rel=1e-9)


@pytest.mark.parametrize(("function", "values", "expected"), [
    (mean, [1, 2, 3], 2.0),
    (mean, [], None),
    (max_over_mean, [1, 3], 1.5),
    (max_over_mean, [0, 0], None),
    (min_over_max, [1, 4], 0.25),
    (min_over_max, [0, 0], None),
    (coefficient_of_variation, [1, 3], 0.5),
    (idle_share, [0, 1, 0, 1], 0.5),
    (idle_share, [], None),
    (hot_members, [10, 1, 1, 1, 1], [0]),
    (hot_share, [10, 1, 1, 1, 1], 10 / 14),
    (hot_share, [1, 1], 0.0),
])
def test_small_functions(function, values, expected):
    assert same(function(values), expected)


def test_deviation_without_weights_is_from_the_equal_share():
    assert deviations([30, 10]) == [0.5, -0.5]


def _random_case(rng):
    size = rng.randrange(1, 40)
    kind = rng.choice(["int", "float", "big"])
    if kind == "int":
        values = [rng.randrange(0, 1000) for _i in range(size)]
    elif kind == "float":
        values = [rng.uniform(0, 1e10) for _i in range(size)]
    else:
        values = [rng.randrange(2**60, 2**63) for _i in range(size)]
    weights = None if rng.random() < 0.5 else [rng.randrange(0, 5) for _i in range(size)]
    return values, weights


def test_fast_summary_matches_the_reference_on_random_loads():
    rng = random.Random(20240412)
    for _i in range(300):
        values, weights = _random_case(rng)
        fast = summarize(values, weights)
        slow = reference_summary(values, weights)
        assert fast.keys() == slow.keys()
        for key in fast:
            assert same(fast[key], slow[key]), (key, fast[key], slow[key], values, weights)


def _package_metrics():
    """moe_balance.metrics loaded from the package source on its own (it needs only the standard library), so the
    test neither needs torch nor lets plugins import the package."""
    path = Path(__file__).resolve().parents[4] / "packages" / "moe_balance" / "src" / "moe_balance" / "metrics.py"
    assert path.is_file(), f"{path} is missing: the package's metrics moved; point this test at its new home"
    spec = importlib.util.spec_from_file_location("moe_balance_metrics_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cv_grade_bounds_are_the_packages_bounds():
    metrics = _package_metrics()
    assert CV_GRADE_BOUNDS == metrics.CV_GRADES
    assert CV_GRADE_SEVERE == metrics.grade_cv(float("inf"))
    for cv in (0.0, 0.0999, 0.1, 0.2999, 0.3, 0.4999, 0.5, 3.0):
        assert cv_grade(cv) == metrics.grade_cv(cv), cv


def test_max_over_mean_limit_is_the_packages_imbalance_bound():
    assert DEFAULT_MAX_OVER_MEAN_LIMIT == _package_metrics().IMBALANCE_MAX_OVER_MEAN


def kernel_wrr_picks(weights, count):
    """``count`` picks of IPVS's wrr scheduler, as net/netfilter/ipvs/ip_vs_wrr.c (ip_vs_wrr_schedule) makes them: the
    current weight starts at the largest weight; each pick takes the next server in list order whose weight is at
    least the current weight, and each pass over the list end lowers the current weight by the weights' gcd, back to
    the largest weight below 1."""
    largest, step = max(weights), math.gcd(*weights)
    current, position, picks = largest, -1, []
    while len(picks) < count:
        position += 1
        if position == len(weights):
            position = 0
            current -= step
            if current <= 0:
                current = largest
        if weights[position] >= current:
            picks.append(position)
    return picks


@pytest.mark.parametrize(("weights", "limit", "fewest"), [
    ((3, 1), 0.05, 80), ((1, 1), 0.05, 40), ((1, 1), 0.15, 14), ((3, 0, 1), 0.05, 80), ((5, 3, 2), 0.10, 50),
    ((0, 0), 0.05, None), ((3, 1), 0.0, None),
])
def test_fewest_to_judge_is_one_unit_per_limit_of_the_smallest_share(weights, limit, fewest):
    assert fewest_to_judge(weights, limit) == fewest


def test_windows_cut_from_the_kernels_wrr_picks_judge_right_only_from_fewest_to_judge_on():
    # wrr 3:1 picks servers 0 0 0 1 (ip_vs_wrr.c); a window starts and ends anywhere in that cycle, as the counters'
    # 2 s refresh (ip_vs_est.c) cuts it.
    picks = kernel_wrr_picks([3, 1], 400)
    assert picks[:8] == [0, 0, 0, 1, 0, 0, 0, 1]
    fewest = fewest_to_judge([3, 1], 0.05)

    def worst(start, length):
        window = picks[start:start + length]
        return max(abs(d) for d in deviations([window.count(0), window.count(1)], [3, 1]))

    # From fewest on, every window of picks made exactly by weight is within the limit...
    assert all(worst(start, length) <= 0.05 for start in range(4) for length in range(fewest, fewest + 8))
    # ...and the 15 connections make demo's audit once caught miss it wherever the window starts.
    assert all(worst(start, 15) > 0.05 for start in range(4))
