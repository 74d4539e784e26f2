"""Tokens-per-expert statistics and the JSONL record schema — the one place both are defined.

Statistics of one layer's (experts,) counts (``balance_stats``):

- ``max_over_mean``: busiest expert / mean; above 2 is imbalance, 1.0 is perfect.
- ``min_over_max``: quietest / busiest expert (1.0 perfect, 0.0 when an expert is idle).
- ``cv``: coefficient of variation, population standard deviation / mean. ``grade``: ``"excellent"`` (cv < 0.1),
  ``"good"`` (0.1 <= cv < 0.3), ``"fair"`` (0.3 <= cv < 0.5), ``"severe"`` (cv >= 0.5).
- ``idle_share``: share of experts that received no token.
- ``hot_share``: share of all assignments received by hot experts, those above ``hot_factor`` (2) times the mean.
- ``entropy``: Shannon entropy of count/total in nats, ``entropy_normalized`` = entropy / ln(E) (1.0 uniform).

JSONL record schema ``moe_balance.tokens_per_expert/1`` (read without torch by the ``tokens_per_expert`` Ansible
module): one JSON object per line, one line per (step, layer)::

    required:
      "schema":            "moe_balance.tokens_per_expert/1"   exact string
      "step":              int >= 0     training step at the end of the window
      "layer":             int >= 0     MoE layer index
      "tokens_per_expert": [int >= 0]   length E = number of experts; assignments per expert over the window
      "top_k":             int >= 1     experts per token, at most E
      "num_tokens":        int >= 0     tokens routed in the window, before top-k expansion
    optional:
      "rank": int >= 0, "world_size": int > rank   who wrote it; counts are already summed over world_size ranks
      "dropped_tokens": int >= 0        assignments dropped by the capacity limit in the window
      "time_unix_s": float >= 0         wall clock when written
      "run": str                        run name

Without capacity dropping ``sum(tokens_per_expert) == num_tokens * top_k``. Readers skip (and count) lines that are
not valid records; writers only append whole lines.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from typing import IO, Any, cast

SCHEMA = "moe_balance.tokens_per_expert/1"
REQUIRED_KEYS = ("schema", "step", "layer", "tokens_per_expert", "top_k", "num_tokens")
OPTIONAL_KEYS = {"rank": int, "world_size": int, "dropped_tokens": int, "time_unix_s": float, "run": str}
OPTIONAL_MINIMUMS = {"rank": 0, "world_size": 1, "dropped_tokens": 0, "time_unix_s": 0}

CV_GRADES = ((0.1, "excellent"), (0.3, "good"), (0.5, "fair"))  # cv below the bound -> grade; otherwise "severe"
IMBALANCE_MAX_OVER_MEAN = 2.0


def grade_cv(cv: float) -> str:
    """Grade a coefficient of variation: excellent < 0.1 <= good < 0.3 <= fair < 0.5 <= severe."""
    for bound, grade in CV_GRADES:
        if cv < bound:
            return grade
    return "severe"


def _as_counts(tokens_per_expert: Any) -> list[float]:
    if hasattr(tokens_per_expert, "tolist"):  # torch tensor or numpy array, without importing either here
        tokens_per_expert = tokens_per_expert.tolist()
    counts = [float(c) for c in tokens_per_expert]
    if not counts:
        raise ValueError("tokens_per_expert is empty: pass one count per expert")
    if any(not math.isfinite(c) or c < 0 for c in counts):
        raise ValueError(f"tokens_per_expert must hold non-negative finite counts; got {counts[:8]}...")
    return counts


def balance_stats(tokens_per_expert: Any, *, hot_factor: float = 2.0) -> dict[str, Any]:
    """Statistics of one layer's (experts,) counts; see the module docstring for each key."""
    counts = _as_counts(tokens_per_expert)
    num_experts = len(counts)
    total = sum(counts)
    if total <= 0:
        raise ValueError(f"tokens_per_expert sums to 0 over {num_experts} experts: nothing was routed in this window")
    mean = total / num_experts
    high, low = max(counts), min(counts)
    cv = math.sqrt(sum((c - mean) ** 2 for c in counts) / num_experts) / mean
    hot = [c for c in counts if c > hot_factor * mean]
    entropy = -sum(c / total * math.log(c / total) for c in counts if c > 0)
    return {
        "num_experts": num_experts,
        "total": total,
        "mean": mean,
        "max": high,
        "min": low,
        "max_over_mean": high / mean,
        "min_over_max": low / high,
        "cv": cv,
        "grade": grade_cv(cv),
        "idle_experts": sum(1 for c in counts if c == 0),
        "idle_share": sum(1 for c in counts if c == 0) / num_experts,
        "hot_experts": len(hot),
        "hot_share": sum(hot) / total,
        "entropy": entropy,
        "entropy_normalized": entropy / math.log(num_experts) if num_experts > 1 else 1.0,
        "imbalanced": high / mean > IMBALANCE_MAX_OVER_MEAN,
    }


def balance_stats_by_layer(counts_by_layer: Sequence[Any], *, hot_factor: float = 2.0) -> dict[str, Any]:
    """Per-layer statistics of (layers, experts) counts, the statistics of the layers' sum, and the worst layer."""
    layers = [balance_stats(c, hot_factor=hot_factor) for c in counts_by_layer]
    if not layers:
        raise ValueError("counts_by_layer is empty: pass one (experts,) count vector per layer")
    summed = [sum(col) for col in zip(*(_as_counts(c) for c in counts_by_layer), strict=True)]
    worst = max(range(len(layers)), key=lambda i: layers[i]["max_over_mean"])
    return {
        "layers": layers,
        "overall": balance_stats(summed, hot_factor=hot_factor),
        "worst_layer": worst,
        "worst_max_over_mean": layers[worst]["max_over_mean"],
        "mean_max_over_mean": sum(s["max_over_mean"] for s in layers) / len(layers),
        "mean_cv": sum(s["cv"] for s in layers) / len(layers),
    }


def _require_int(record: dict, key: str, minimum: int | None) -> None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"record key {key!r} must be an int{bound}; got {value!r}")


def validate_record(record: Any) -> dict:
    """Return ``record`` if it follows the schema, else raise ValueError naming the offending key."""
    if not isinstance(record, dict):
        raise ValueError(f"a record must be a JSON object; got {type(record).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(f"record is missing required key(s) {missing}")
    if record["schema"] != SCHEMA:
        raise ValueError(f"record key 'schema' must be {SCHEMA!r}; got {record['schema']!r}")
    _require_int(record, "step", 0)
    _require_int(record, "layer", 0)
    _require_int(record, "top_k", 1)
    _require_int(record, "num_tokens", 0)
    counts = record["tokens_per_expert"]
    if (
        not isinstance(counts, list)
        or not counts
        or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts)
    ):
        raise ValueError("record key 'tokens_per_expert' must be a non-empty list of non-negative ints")
    if record["top_k"] > len(counts):
        raise ValueError(f"record key 'top_k' must be at most the {len(counts)} experts; got {record['top_k']!r}")
    for key, kind in OPTIONAL_KEYS.items():
        if key not in record:
            continue
        value = record[key]
        allowed = (int, float) if kind is float else kind
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise ValueError(f"record key {key!r} must be {kind.__name__}; got {value!r}")
        if key in OPTIONAL_MINIMUMS and isinstance(value, (int, float)) and value < OPTIONAL_MINIMUMS[key]:
            raise ValueError(f"record key {key!r} must be >= {OPTIONAL_MINIMUMS[key]}; got {value!r}")
    if "rank" in record and "world_size" in record and record["rank"] >= record["world_size"]:
        raise ValueError(f"record key 'rank' must be below world_size {record['world_size']}; got {record['rank']!r}")
    return record


def make_record(
    *,
    step: int,
    layer: int,
    tokens_per_expert: Any,
    top_k: int,
    num_tokens: int,
    **optional: Any,
) -> dict:
    """Build a validated record; ``optional`` takes rank, world_size, dropped_tokens, time_unix_s, run."""
    unknown = sorted(set(optional) - set(OPTIONAL_KEYS))
    if unknown:
        raise ValueError(f"unknown record key(s) {unknown}: optional keys are {sorted(OPTIONAL_KEYS)}")
    counts = [int(round(c)) for c in _as_counts(tokens_per_expert)]
    record = {
        "schema": SCHEMA,
        "step": int(step),
        "layer": int(layer),
        "tokens_per_expert": counts,
        "top_k": int(top_k),
        "num_tokens": int(num_tokens),
    }
    record.update({k: v for k, v in optional.items() if v is not None})
    return validate_record(record)


def write_records(target: str | os.PathLike | IO[str], records: Iterable[dict]) -> int:
    """Append records as JSONL to a path (created with its folder) or an open text file; returns the count."""
    lines = [json.dumps(validate_record(r), separators=(",", ":")) + "\n" for r in records]
    if hasattr(target, "write"):
        cast(IO[str], target).writelines(lines)
        return len(lines)
    folder = os.path.dirname(os.fspath(target))
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(target, "a", encoding="utf-8") as handle:
        handle.write("".join(lines))  # one write call: whole lines only
    return len(lines)


def read_records(path: str | os.PathLike) -> tuple[list[dict], int]:
    """Read a JSONL file; returns (valid records, number of skipped lines that were not valid records)."""
    records, skipped = [], 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                records.append(validate_record(json.loads(line)))
            except ValueError:  # json.JSONDecodeError is a ValueError too
                skipped += 1
    return records, skipped
