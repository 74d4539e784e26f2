"""Pipeline stage partition (exact min-max) and bubble rate."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_balance.pipeline import bubble_rate, partition, partition_reference, stage_costs

costs_strategy = st.lists(
    st.one_of(st.integers(0, 9), st.floats(0, 10, allow_nan=False, allow_infinity=False)), min_size=1, max_size=14
)


@settings(max_examples=80, deadline=None)
@given(costs=costs_strategy, data=st.data())
def test_partition_reaches_the_optimal_bottleneck_with_contiguous_non_empty_stages(costs, data):
    num_stages = data.draw(st.integers(1, len(costs)))
    boundaries = partition(costs, num_stages)
    assert boundaries[0] == 0 and boundaries[-1] == len(costs)
    assert len(boundaries) == num_stages + 1
    assert all(start < end for start, end in zip(boundaries[:-1], boundaries[1:], strict=True))
    assert max(stage_costs(costs, boundaries)) == partition_reference(costs, num_stages)


@settings(max_examples=60, deadline=None)
@given(costs=costs_strategy, data=st.data())
def test_partition_with_a_memory_limit_is_optimal_among_partitions_that_fit(costs, data):
    num_stages = data.draw(st.integers(1, len(costs)))
    memory = data.draw(st.lists(st.integers(1, 5), min_size=len(costs), max_size=len(costs)))
    limit = data.draw(st.integers(1, 12))
    best = partition_reference(costs, num_stages, layer_memory=memory, memory_limit=limit)
    if best == float("inf"):
        with pytest.raises(ValueError, match="memory_limit"):
            partition(costs, num_stages, layer_memory=memory, memory_limit=limit)
        return
    boundaries = partition(costs, num_stages, layer_memory=memory, memory_limit=limit)
    assert max(stage_costs(costs, boundaries)) == best
    for start, end in zip(boundaries[:-1], boundaries[1:], strict=True):
        assert sum(memory[start:end]) <= limit


def test_partition_beats_the_greedy_fill_on_a_known_case():
    # Greedy "fill up to total / stages" gives [5, 1, 1 | 1, 1, 5] -> 7; the optimum is [5 | 1, 1, 1, 1 | 5] -> 5.
    assert partition([5, 1, 1, 1, 1, 5], 3) == [0, 1, 5, 6]


def test_bubble_rate_is_stages_minus_one_over_micro_batches():
    assert bubble_rate(4, 8) == pytest.approx(0.375)
    assert bubble_rate(1, 3) == 0.0


@pytest.mark.parametrize(
    "call,argument",
    [
        (lambda: partition([1, 2], 3), "num_stages"),
        (lambda: partition([], 1), "layer_costs"),
        (lambda: partition([1, -2], 1), "layer_costs"),
        (lambda: partition([1, float("nan")], 1), "layer_costs"),
        (lambda: partition([1, 2], 1, layer_memory=[1, 2]), "memory_limit"),
        (lambda: partition([1, 2], 1, layer_memory=[1], memory_limit=4), "layer_memory"),
        (lambda: bubble_rate(0, 4), "num_stages"),
        (lambda: bubble_rate(2, 0), "num_micro_batches"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


def test_pipeline_is_exported_from_the_package():
    import moe_balance as mb

    assert mb.pipeline.bubble_rate(4, 12) == pytest.approx(3 / 12)
    assert mb.pipeline.partition is partition
