# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Balance statistics shared by every reporter.

Connections per real server, bits per second per iperf3 stream and tokens per expert are all "load per member".
Keeping one implementation here means "spread", "max/mean" and "CV grade" mean the same thing on every layer.

Conventions (also in docs/moe-stats-schema.md):

- CV is the population coefficient of variation: pstdev / mean (every member is counted, none is sampled).
- With weights, the statistics are computed on load per unit of weight, so a split that follows the weights exactly
  has CV 0 and max/mean 1. Members with weight 0 receive no new work and are left out of the statistics.
- deviation = (actual share - expected share) / expected share: 0.25 means 25 % more than its weighted share;
  shares are taken of the load on members with weight > 0. The expected share is weight / sum of weights unless the
  caller gives the shares outright (an IPVS scheduler that does not split by weight, see _ipvs_grading.py).
- idle share = fraction of counted members with zero load.
- hot members carry more than ``hot_factor`` x mean; hot share = fraction of the total they carry.

``summarize`` is the fast path (one pass, exact integer arithmetic for integer counts). Its slow, obvious twin built on
the ``statistics`` module lives with the tests that use it as an oracle (tests/unit/plugins/module_utils/
spread_reference.py).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

# Upper bounds (exclusive) of the CV grades; anything at or above the last bound is "severe".
CV_GRADE_BOUNDS = ((0.1, "excellent"), (0.3, "good"), (0.5, "fair"))
CV_GRADE_SEVERE = "severe"
CV_GRADES = tuple(bound_name[1] for bound_name in CV_GRADE_BOUNDS) + (CV_GRADE_SEVERE,)

DEFAULT_HOT_FACTOR = 2.0


def _check_number(value: Any, what: str, index: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = type(value).__name__
        raise ValueError(f"{what} at index {index} is {value!r} ({kind}): balance statistics need numbers")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} at index {index} is {value!r}: balance statistics need finite numbers")
    if value < 0:
        raise ValueError(f"{what} at index {index} is {value!r}: balance statistics need non-negative numbers")


def check_values(values: Iterable[float], weights: Iterable[float] | None = None
                 ) -> tuple[list[float], list[float] | None]:
    """Raise ValueError naming the first bad value or weight; return the values and weights as lists."""
    values = list(values)
    for index, value in enumerate(values):
        _check_number(value, "value", index)
    if weights is None:
        return values, None
    weights = list(weights)
    if len(weights) != len(values):
        raise ValueError(
            f"got {len(weights)} weights for {len(values)} values: give one weight per member "
            f"(or none for equal weights)"
        )
    for index, weight in enumerate(weights):
        _check_number(weight, "weight", index)
    return values, weights


def cv_grade(cv: float | None) -> str | None:
    """Grade a coefficient of variation: <0.1 excellent, 0.1-0.3 good, 0.3-0.5 fair, >=0.5 severe; None stays None."""
    if cv is None:
        return None
    for bound, name in CV_GRADE_BOUNDS:
        if cv < bound:
            return name
    return CV_GRADE_SEVERE


def expected_shares(weights: Iterable[float]) -> list[float | None]:
    """Each member's expected fraction of the total: weight / sum(weights). None for all when no weight is positive."""
    weights = list(weights)
    total = math.fsum(weights)
    if total <= 0:
        return [None] * len(weights)
    return [weight / total for weight in weights]


def fewest_to_judge(weights: Iterable[float], limit_fraction: float) -> int | None:
    """The fewest units (connections, tokens) over which one unit more or less on any member with a weight moves its
    deviation by no more than ``limit_fraction``: 1 / (limit x smallest expected share), rounded up.

    Below it, even a scheduler that hands out every unit exactly by weight can miss the limit: with weights 3:1 and a
    5 % limit, 15 connections split 12 / 3 at best or 11 / 4, 20 % and 7 % off. None when no weight is positive or
    the limit is 0 (then no count is enough).
    """
    shares = [share for share in expected_shares(weights) if share]
    if not shares or limit_fraction <= 0:
        return None
    return math.ceil(1.0 / (limit_fraction * min(shares)) - 1e-9)


def deviations(values: Iterable[float], weights: Iterable[float] | None = None,
               shares: Iterable[float | None] | None = None) -> list[float | None]:
    """(actual share - expected share) / expected share per member; None where the weight is 0 or nothing flowed.

    Shares are taken of the load on members with weight > 0, so leftovers on a quiesced member shift no one.
    ``shares`` gives each member's expected share outright, for a scheduler that does not split by weight (one that
    sends everything to one member); the weights still say which members count. A member expected to get 0 or None
    has no deviation of its own: what it carries shows as the shortfall of the others.
    """
    values, weights = check_values(values, weights)
    if weights is None:
        weights = [1] * len(values)
    total = math.fsum(value for value, weight in zip(values, weights) if weight > 0)
    if shares is None:
        shares = expected_shares(weights)
    else:
        shares = list(shares)
        if len(shares) != len(values):
            raise ValueError(f"got {len(shares)} expected shares for {len(values)} values: give one per member")
    result: list[float | None] = []
    for index, value in enumerate(values):
        expected = shares[index]
        if not expected or total <= 0:
            result.append(None)
        else:
            result.append((value / total - expected) / expected)
    return result


def _empty_summary(member_count: int, deviation_list: list[float | None]) -> dict[str, Any]:
    return {
        "members": member_count,
        "count": 0,
        "total": 0,
        "mean": None,
        "min": None,
        "max": None,
        "max_over_mean": None,
        "min_over_max": None,
        "cv": None,
        "cv_grade": None,
        "idle_count": 0,
        "idle_share": None,
        "hot_count": 0,
        "hot_share": None,
        "hot_members": [],
        "idle_members": [],
        "deviations": deviation_list,
        "max_abs_deviation": None,
    }


def _load_per_weight(values: list[float], weights: list[float] | None) -> tuple[list[int], list[float]]:
    """(counted member indexes, load per unit weight scaled by the mean weight) for members with weight > 0."""
    if weights is None:
        return list(range(len(values))), values
    counted = [index for index, weight in enumerate(weights) if weight > 0]
    if not counted:
        return [], []
    mean_weight = math.fsum(weights[index] for index in counted) / len(counted)
    if all(weights[index] == weights[counted[0]] for index in counted):
        # Equal weights: the raw loads are already comparable; keeping them avoids float rounding on integers.
        return counted, [values[index] for index in counted]
    return counted, [values[index] / weights[index] * mean_weight for index in counted]


def summarize(values: Iterable[float], weights: Iterable[float] | None = None,
              hot_factor: float = DEFAULT_HOT_FACTOR, shares: Iterable[float | None] | None = None) -> dict[str, Any]:
    """Every balance statistic for one group of members, in one pass over the (normalised) loads.

    ``shares`` (see ``deviations``) replaces the shares the weights give as the expectation the deviations are taken
    against; the other statistics are taken over load per unit of weight as always.
    Returns a JSON-friendly dict; member indexes in ``hot_members``/``idle_members`` refer to the input order.
    """
    values, weights = check_values(values, weights)
    deviation_list = deviations(values, weights, shares)
    counted, loads = _load_per_weight(values, weights)
    if not counted:
        return _empty_summary(len(values), deviation_list)

    count = len(loads)
    total_load: float = 0
    total_squares: float = 0
    smallest = loads[0]
    largest = loads[0]
    idle = []
    for position, load in enumerate(loads):
        total_load += load
        total_squares += load * load
        if load < smallest:
            smallest = load
        if load > largest:
            largest = load
        if load == 0:
            idle.append(counted[position])

    average = total_load / count
    cv: float | None
    ratio_max: float | None
    ratio_min: float | None
    if total_load:
        if all(isinstance(load, int) for load in (total_load, total_squares)):
            # NOTE: exact integer variance (n * sum(x^2) - sum(x)^2) / n^2; no cancellation even for u64 counters.
            cv = math.sqrt(count * total_squares - total_load * total_load) / total_load
        else:
            cv = math.sqrt(math.fsum((load - average) ** 2 for load in loads) / count) / average
        ratio_max = largest / average
        ratio_min = smallest / largest
    else:
        cv = ratio_max = ratio_min = None

    hot = []
    hot_load: float = 0
    if total_load:
        limit = hot_factor * average
        for position, load in enumerate(loads):
            if load > limit:
                hot.append(counted[position])
                hot_load += load

    known = [abs(deviation) for deviation in deviation_list if deviation is not None]
    return {
        "members": len(values),
        "count": count,
        "total": sum(values[index] for index in counted),
        "mean": average,
        "min": smallest,
        "max": largest,
        "max_over_mean": ratio_max,
        "min_over_max": ratio_min,
        "cv": cv,
        "cv_grade": cv_grade(cv),
        "idle_count": len(idle),
        "idle_share": len(idle) / count,
        "hot_count": len(hot),
        "hot_share": (hot_load / total_load) if total_load else None,
        "hot_members": hot,
        "idle_members": idle,
        "deviations": deviation_list,
        "max_abs_deviation": max(known) if known else None,
    }
