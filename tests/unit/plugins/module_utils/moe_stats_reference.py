"""Slow, obvious twin of ``_moe_stats.aggregate`` (group, filter, sum): the oracle the streaming window is compared
against. Test code only, kept beside the tests so nothing ships to a target that only a test runs."""

from __future__ import annotations


def reference_aggregate(records, window="last"):
    """Slow, obvious twin of ``aggregate``: group, filter, sum."""
    layers = []
    for layer in sorted({record["layer"] for record in records}):
        selected = [record for record in records if record["layer"] == layer]
        if window == "last":
            last = max(record["step"] for record in selected)
            selected = [record for record in selected if record["step"] == last]
        steps = sorted({record["step"] for record in selected})
        layers.append({
            "layer": layer,
            "num_experts": len(selected[0]["tokens_per_expert"]),
            "top_k": selected[-1]["top_k"],
            "records": len(selected),
            "steps": len(steps),
            "step_first": steps[0],
            "step_last": steps[-1],
            "ranks": sorted({record["rank"] for record in selected if "rank" in record}),
            "num_tokens": sum(record["num_tokens"] for record in selected),
            "dropped_tokens": sum(record.get("dropped_tokens", 0) for record in selected),
            "tokens_per_expert": [
                sum(column) for column in zip(*(r["tokens_per_expert"] for r in selected), strict=False)
            ],
        })
    return layers
