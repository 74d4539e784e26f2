"""Slow, obvious twin of ``_spread.summarize``, built from one small function per statistic and the ``statistics``
module: the oracle the fast path is compared against. Test code only, kept beside the tests so nothing ships to a
target that only a test runs."""

from __future__ import annotations

import math
import statistics

from ansible_collections.hpc.balance.plugins.module_utils._spread import (
    DEFAULT_HOT_FACTOR,
    _empty_summary,
    check_values,
    cv_grade,
    deviations,
)


def mean(values):
    """Arithmetic mean, None for no values."""
    values = list(values)
    if not values:
        return None
    return math.fsum(values) / len(values)


def max_over_mean(values):
    """max / mean (1.0 = perfectly even); None when there are no values or the mean is 0."""
    values = list(values)
    average = mean(values)
    if not average:
        return None
    return max(values) / average


def min_over_max(values):
    """min / max (1.0 = perfectly even, 0.0 = some member idle); None when there are no values or the max is 0."""
    values = list(values)
    if not values or not max(values):
        return None
    return min(values) / max(values)


def coefficient_of_variation(values):
    """Population standard deviation / mean; None when there are no values or the mean is 0."""
    values = list(values)
    average = mean(values)
    if not average:
        return None
    return math.sqrt(math.fsum((value - average) ** 2 for value in values) / len(values)) / average


def idle_share(values):
    """Fraction of members with zero load; None for no members."""
    values = list(values)
    if not values:
        return None
    return sum(1 for value in values if value == 0) / len(values)


def hot_members(values, hot_factor=DEFAULT_HOT_FACTOR):
    """Indexes of members carrying more than hot_factor x mean."""
    values = list(values)
    average = mean(values)
    if not average:
        return []
    limit = hot_factor * average
    return [index for index, value in enumerate(values) if value > limit]


def hot_share(values, hot_factor=DEFAULT_HOT_FACTOR):
    """Fraction of the total carried by the hot members (0.0 when none is hot); None when the total is 0."""
    values = list(values)
    total = math.fsum(values)
    if total <= 0:
        return None
    return math.fsum(values[index] for index in hot_members(values, hot_factor)) / total


def reference_summary(values, weights=None, hot_factor=DEFAULT_HOT_FACTOR):
    """Slow, obvious twin of ``summarize`` built from the small functions above and ``statistics``."""
    values, weights = check_values(values, weights)
    deviation_list = deviations(values, weights)
    if weights is None:
        counted = list(range(len(values)))
        loads = list(values)
    else:
        counted = [index for index in range(len(values)) if weights[index] > 0]
        if not counted:
            return _empty_summary(len(values), deviation_list)
        mean_weight = statistics.fmean([weights[index] for index in counted])
        loads = [values[index] / weights[index] * mean_weight for index in counted]
    if not counted:
        return _empty_summary(len(values), deviation_list)
    average = statistics.fmean(loads)
    cv = statistics.pstdev(loads) / average if average else None
    total = math.fsum(loads)
    hot_positions = [position for position, load in enumerate(loads) if total and load > hot_factor * average]
    known = [abs(deviation) for deviation in deviation_list if deviation is not None]
    return {
        "members": len(values),
        "count": len(loads),
        "total": sum(values[index] for index in counted),
        "mean": average,
        "min": min(loads),
        "max": max(loads),
        "max_over_mean": max_over_mean(loads),
        "min_over_max": min_over_max(loads) if total else None,
        "cv": cv,
        "cv_grade": cv_grade(cv),
        "idle_count": sum(1 for load in loads if load == 0),
        "idle_share": idle_share(loads),
        "hot_count": len(hot_positions),
        "hot_share": hot_share(loads, hot_factor),
        "hot_members": [counted[position] for position in hot_positions],
        "idle_members": [counted[position] for position, load in enumerate(loads) if load == 0],
        "deviations": deviation_list,
        "max_abs_deviation": max(known) if known else None,
    }
