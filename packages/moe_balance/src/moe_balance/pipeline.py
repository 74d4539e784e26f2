"""Pipeline-parallel stage partition: contiguous stages whose slowest stage is as fast as possible, and bubble rate.

``partition`` is exact, not greedy: the best bottleneck is one of the O(L^2) contiguous segment costs, so it binary
searches the sorted candidates with a linear feasibility test (extend each stage while it stays within the candidate
cost and, if given, the memory limit; this maximal-extension rule needs the fewest stages for any bound). The
reference ``partition_reference`` is the textbook O(P * L^2) dynamic programme; tests compare their bottlenecks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _check_numbers(values: object, name: str) -> list[float]:
    if hasattr(values, "tolist"):
        numbers = values.tolist()
    elif isinstance(values, Sequence) and not isinstance(values, (str, bytes)):
        numbers = list(values)
    else:
        raise ValueError(f"{name} must be a sequence of numbers (one per layer); got {type(values).__name__}")
    if not numbers:
        raise ValueError(f"{name} is empty: give one value per layer")
    for index, value in enumerate(numbers):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name}[{index}] = {value!r} is not a number")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name}[{index}] = {value} must be finite and >= 0")
    return [float(value) for value in numbers]


def _check_stages(num_stages: object, num_layers: int) -> int:
    if isinstance(num_stages, bool) or not isinstance(num_stages, int):
        raise ValueError(f"num_stages must be an int; got {num_stages!r}")
    if num_stages < 1 or num_stages > num_layers:
        raise ValueError(
            f"num_stages={num_stages} is out of range for {num_layers} layers: every stage needs at least one "
            f"layer, so use 1 <= num_stages <= {num_layers}"
        )
    return num_stages


def _prefix(values: list[float]) -> list[float]:
    sums = [0.0]
    for value in values:
        sums.append(sums[-1] + value)
    return sums


def _stage_ends(
    cost_prefix: list[float],
    memory_prefix: list[float] | None,
    memory_limit: float,
    bottleneck: float,
    num_stages: int,
) -> list[int] | None:
    """Stage ends for exactly num_stages stages within the bottleneck and memory limit, or None if impossible.

    Each stage grows while it fits and while enough layers remain for the stages after it.
    """
    num_layers = len(cost_prefix) - 1
    ends = []
    start = 0
    for stage in range(num_stages):
        stages_after = num_stages - stage - 1
        end = start + 1
        if cost_prefix[end] - cost_prefix[start] > bottleneck:
            return None
        if memory_prefix is not None and memory_prefix[end] - memory_prefix[start] > memory_limit:
            return None
        while end < num_layers - stages_after:
            if cost_prefix[end + 1] - cost_prefix[start] > bottleneck:
                break
            if memory_prefix is not None and memory_prefix[end + 1] - memory_prefix[start] > memory_limit:
                break
            end += 1
        ends.append(end)
        start = end
    return ends if start == num_layers else None


def partition(
    layer_costs: Sequence[float],
    num_stages: int,
    *,
    layer_memory: Sequence[float] | None = None,
    memory_limit: float | None = None,
) -> list[int]:
    """Split layers into num_stages contiguous, non-empty stages minimising the largest stage cost.

    layer_costs: per-layer time (any unit). layer_memory with memory_limit: per-layer memory and the most one stage
    may hold. Returns the stage boundaries, num_stages + 1 layer indices from 0 to len(layer_costs): stage s holds
    layers boundaries[s] .. boundaries[s + 1] - 1.
    """
    costs = _check_numbers(layer_costs, "layer_costs")
    num_stages = _check_stages(num_stages, len(costs))
    memory_prefix, limit = _memory(layer_memory, memory_limit, len(costs))
    cost_prefix = _prefix(costs)
    num_layers = len(costs)
    candidates = sorted(
        {
            cost_prefix[end] - cost_prefix[start]
            for start in range(num_layers)
            for end in range(start + 1, num_layers + 1)
        }
    )
    low, high = 0, len(candidates) - 1
    if _stage_ends(cost_prefix, memory_prefix, limit, candidates[high], num_stages) is None:
        raise ValueError(
            f"no split into {num_stages} stages keeps every stage within memory_limit={memory_limit}: raise the "
            "limit or use more stages"
        )
    while low < high:
        middle = (low + high) // 2
        if _stage_ends(cost_prefix, memory_prefix, limit, candidates[middle], num_stages) is None:
            low = middle + 1
        else:
            high = middle
    ends = _stage_ends(cost_prefix, memory_prefix, limit, candidates[low], num_stages)
    if ends is None:  # not reached: the search keeps candidates[high] feasible and ends with low == high
        raise RuntimeError(f"no stage split within the bottleneck {candidates[low]}; this is a bug, please report it")
    return [0, *ends]


def _memory(
    layer_memory: Sequence[float] | None, memory_limit: float | None, num_layers: int
) -> tuple[list[float] | None, float]:
    if (layer_memory is None) != (memory_limit is None):
        raise ValueError("layer_memory and memory_limit go together: give both or neither")
    if layer_memory is None:
        return None, math.inf
    memory = _check_numbers(layer_memory, "layer_memory")
    if len(memory) != num_layers:
        raise ValueError(f"layer_memory has {len(memory)} values for {num_layers} layers: give one per layer")
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, (int, float)) or not memory_limit > 0:
        raise ValueError(f"memory_limit={memory_limit!r} must be a number > 0")
    return _prefix(memory), float(memory_limit)


def stage_costs(layer_costs: Sequence[float], boundaries: Sequence[int]) -> list[float]:
    """Cost of each stage of a partition (sum of its layers' costs)."""
    prefix = _prefix(_check_numbers(layer_costs, "layer_costs"))
    return [prefix[end] - prefix[start] for start, end in zip(boundaries[:-1], boundaries[1:], strict=True)]


def partition_reference(
    layer_costs: Sequence[float],
    num_stages: int,
    *,
    layer_memory: Sequence[float] | None = None,
    memory_limit: float | None = None,
) -> float:
    """Optimal bottleneck by dynamic programming (slow, obvious): best[s][l] = min over the last stage's start."""
    costs = _check_numbers(layer_costs, "layer_costs")
    num_stages = _check_stages(num_stages, len(costs))
    memory_prefix, limit = _memory(layer_memory, memory_limit, len(costs))
    prefix = _prefix(costs)
    num_layers = len(costs)
    best = [[math.inf] * (num_layers + 1) for _stage in range(num_stages + 1)]
    best[0][0] = 0.0
    for stage in range(1, num_stages + 1):
        for end in range(1, num_layers + 1):
            for start in range(stage - 1, end):
                if memory_prefix is not None and memory_prefix[end] - memory_prefix[start] > limit:
                    continue
                candidate = max(best[stage - 1][start], prefix[end] - prefix[start])
                best[stage][end] = min(best[stage][end], candidate)
    return best[num_stages][num_layers]


def bubble_rate(num_stages: int, num_micro_batches: int) -> float:
    """Pipeline bubble of a synchronous 1F1B/GPipe schedule, as a share of the ideal compute time: (p - 1) / m."""
    for name, value in (("num_stages", num_stages), ("num_micro_batches", num_micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value!r}")
    return (num_stages - 1) / num_micro_batches
