"""The training monitor: windows, the forward hook, records on disk."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from moe_balance import TokensPerExpertMonitor, route, router_stats
from moe_balance.metrics import read_records


def make_monitor(tmp_path, **options):
    defaults: dict[str, Any] = {
        "num_layers": 2, "num_experts": 4, "top_k": 2, "every_n_steps": 3, "run": "test", "clock": lambda: 12.5,
    }
    return TokensPerExpertMonitor(tmp_path / "experts.jsonl", **(defaults | options))


def test_records_are_written_every_n_steps(tmp_path):
    monitor = make_monitor(tmp_path)
    for step in range(6):
        monitor.observe(0, torch.tensor([1, 1, 2, 0]), num_tokens=2)
        monitor.observe(1, torch.tensor([0, 2, 1, 1]), num_tokens=2)
        written = monitor.step(step)
        assert (written is not None) == (step in (2, 5))
    records, skipped = read_records(tmp_path / "experts.jsonl")
    assert skipped == 0 and [(r["step"], r["layer"]) for r in records] == [(2, 0), (2, 1), (5, 0), (5, 1)]
    assert records[0]["tokens_per_expert"] == [3, 3, 6, 0] and records[0]["num_tokens"] == 6
    assert records[0]["run"] == "test" and records[0]["time_unix_s"] == 12.5
    assert records[0]["rank"] == 0 and records[0]["world_size"] == 1 and "dropped_tokens" not in records[0]


def test_windows_do_not_overlap(tmp_path):
    monitor = make_monitor(tmp_path, num_layers=1, every_n_steps=1)
    monitor.observe(0, torch.tensor([1, 1, 0, 0]), num_tokens=1)
    first = monitor.step(0)
    monitor.observe(0, torch.tensor([0, 0, 1, 1]), num_tokens=1)
    second = monitor.step(1)
    assert first[0]["tokens_per_expert"] == [1, 1, 0, 0] and second[0]["tokens_per_expert"] == [0, 0, 1, 1]


def test_layers_not_seen_in_a_window_write_nothing(tmp_path):
    monitor = make_monitor(tmp_path)
    monitor.observe(1, torch.tensor([1, 1, 0, 0]), num_tokens=1)
    assert [r["layer"] for r in monitor.flush(0)] == [1]


def test_dropped_tokens_are_recorded_when_given(tmp_path):
    monitor = make_monitor(tmp_path, num_layers=1)
    monitor.observe(0, torch.tensor([2, 0, 0, 0]), num_tokens=1, dropped_tokens=0)
    monitor.observe(0, torch.tensor([1, 1, 0, 0]), num_tokens=1, dropped_tokens=torch.tensor(1))
    assert monitor.flush(0)[0]["dropped_tokens"] == 1


@pytest.mark.parametrize("routing_fn", [route, router_stats])
def test_forward_hook_observes_router_outputs(tmp_path, routing_fn):
    class Router(torch.nn.Module):
        def forward(self, x):
            return routing_fn(x, 2), "other output"

    monitor = make_monitor(tmp_path, num_layers=1)
    router = Router()
    router.register_forward_hook(monitor.hook(0))
    out, _other = router(torch.randn(5, 4))
    record = monitor.flush(0)[0]
    assert record["tokens_per_expert"] == out.tokens_per_expert.tolist() and record["num_tokens"] == 5


def test_hook_on_a_module_without_routing_output_says_what_to_do(tmp_path):
    monitor = make_monitor(tmp_path)
    with pytest.raises(ValueError, match="no routing result"):
        monitor.hook(0)(None, (), torch.zeros(3))


def test_bad_layer_and_shape_are_refused(tmp_path):
    monitor = make_monitor(tmp_path)
    with pytest.raises(ValueError, match="layer=2 is out of range"):
        monitor.observe(2, torch.zeros(4), 1)
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(4,\)"):
        monitor.observe(0, torch.zeros(3), 1)
