"""playbooks/rebalance.yml, compute part, for real on this machine (local connection, the venv's interpreter has
moe_balance): from skewed tokens_per_expert records it writes a placement whose predicted max/mean is <= 1.05, a
second run with the same records moves nothing, check mode writes nothing, and a byte budget limits the moves."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "rebalance.yml"
PLANNER = ROOT / "playbooks" / "files" / "plan_expert_placement.py"
LAYERS, EXPERTS, GPUS, REDUNDANT, EXPERT_BYTES = 6, 32, 8, 8, 44_040_192


def skewed_records(path, seed=3, top_k=4):
    """Two ranks' records of one step, Zipf-like per layer (the busiest expert ~10x the mean), hot experts differ
    per layer: the shape of an unbalanced router."""
    rng = random.Random(seed)
    with open(path, "w") as handle:
        for rank in range(2):
            for layer in range(LAYERS):
                order = list(range(EXPERTS))
                random.Random(layer).shuffle(order)
                tokens = [0] * EXPERTS
                for position, expert in enumerate(order):
                    tokens[expert] = int(20_000 / (1 + position) ** 1.1) + rng.randint(0, 40)
                tokens[0] += (-sum(tokens)) % top_k
                handle.write(json.dumps({"schema": "moe_balance.tokens_per_expert/1", "step": 500, "layer": layer,
                                         "rank": rank, "tokens_per_expert": tokens, "top_k": top_k,
                                         "num_tokens": sum(tokens) // top_k}) + "\n")
    return path


def rebalance(tmp_path, records, *extra):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"""
all:
  children:
    gpu_nodes:
      hosts:
        gpu1: {{ansible_host: 127.0.0.1, ansible_connection: local, ansible_python_interpreter: {sys.executable}}}
""")
    placement = tmp_path / "placement" / "expert_placement.json"
    result = run_playbook(
        PLAYBOOK, inventory,
        "-e", f"hpc_balance_rebalance_records_path={records}",
        "-e", f"hpc_balance_rebalance_placement_path={placement}",
        "-e", f"hpc_balance_rebalance_moe_python={sys.executable}", "-e", f"hpc_balance_rebalance_num_gpus={GPUS}",
        "-e", f"hpc_balance_rebalance_redundant_experts={REDUNDANT}",
        "-e", f"hpc_balance_rebalance_expert_size_bytes={EXPERT_BYTES}", *extra,
        timeout_s=300, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout), placement


def task(run, name):
    """gpu1's result of the task called ``name`` in a json-callback run."""
    tasks = [item for play in run["plays"] for item in play["tasks"] if item["task"]["name"] == name]
    return tasks[0]["hosts"]["gpu1"]


def plan_of(run):
    return task(run, "Keep the plan")["ansible_facts"]["hpc_balance_rebalance_plan"]


def report_lines(run):
    return task(run, "Report the placement before and after")["msg"]


def changed(run):
    return run["stats"]["gpu1"]["changed"]


def test_skewed_records_get_a_placement_within_5_percent_and_a_second_run_moves_nothing(tmp_path):
    records = skewed_records(tmp_path / "tokens_per_expert.jsonl")
    first, placement = rebalance(tmp_path, records)
    plan = plan_of(first)
    assert plan["changed"] is True and plan["max_over_mean_before"] > 1.5
    assert plan["max_over_mean_after"] <= 1.05, plan
    assert plan["bytes_moved"] == plan["moved_slots"] * EXPERT_BYTES > 0
    assert report_lines(first)[0].startswith(f"compute: predicted max/mean {plan['max_over_mean_before']} -> ")
    assert len(report_lines(first)) == 3 + len(plan["layers_moved"]) and changed(first) == 1
    document = json.loads(placement.read_text())
    assert document["schema"] == "hpc.balance.expert_placement/1"
    assert len(document["phy2log"]) == LAYERS and len(document["phy2log"][0]) == EXPERTS + REDUNDANT
    for row, counts, slots in zip(document["phy2log"], document["logcnt"], document["log2phy"], strict=True):
        assert sorted(set(row)) == list(range(EXPERTS)), "every expert keeps at least one slot"
        assert sum(counts) == EXPERTS + REDUNDANT
        for expert, expert_slots in enumerate(slots):
            assert [slot for slot in expert_slots if slot >= 0] == [s for s, e in enumerate(row) if e == expert]

    second, _placement = rebalance(tmp_path, records)
    again = plan_of(second)
    assert (again["changed"], again["bytes_moved"], again["layers_moved"]) == (False, 0, [])
    assert again["max_over_mean_after"] == plan["max_over_mean_after"]
    assert changed(second) == 0


def test_check_mode_plans_and_writes_nothing(tmp_path):
    records = skewed_records(tmp_path / "tokens_per_expert.jsonl")
    run, placement = rebalance(tmp_path, records, "--check")
    assert not placement.exists()
    assert report_lines(run)[0].endswith("(check mode: nothing written)")
    assert plan_of(run)["max_over_mean_after"] <= 1.05


def _planner():
    spec = importlib.util.spec_from_file_location("plan_expert_placement", PLANNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_byte_budget_moves_the_best_gain_per_byte_first(tmp_path):
    records = skewed_records(tmp_path / "tokens_per_expert.jsonl")
    budget = 40 * EXPERT_BYTES
    run = subprocess.run([sys.executable, str(PLANNER), "--records", str(records), "--placement",
                          str(tmp_path / "placement.json"), "--num-gpus", str(GPUS), "--redundant-experts",
                          str(REDUNDANT), "--expert-size-bytes", str(EXPERT_BYTES), "--max-bytes-moved", str(budget)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    plan = json.loads(run.stdout)
    assert 0 < plan["bytes_moved"] <= budget
    assert plan["layers_over_budget"] and len(plan["layers_moved"]) + len(plan["layers_over_budget"]) == LAYERS


@pytest.mark.parametrize(("gains", "moved", "budget", "chosen"), [
    ([0.5, 0.2, 0.1], [10, 10, 10], None, [True, True, True]),
    ([0.5, 0.2, 0.1], [10, 10, 10], 30, [True, True, True]),
    ([0.5, 0.2, 0.1], [10, 10, 10], 20, [True, True, False]),
    ([0.1, 0.5, 0.3], [10, 40, 10], 25, [True, False, True]),
    ([0.5, 0.0], [10, 0], 5, [False, False]),
])
def test_budget_choice(gains, moved, budget, chosen):
    assert _planner().choose_within_budget(gains, moved, budget) == chosen


def test_planner_names_a_file_without_records(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not json\n")
    run = subprocess.run([sys.executable, str(PLANNER), "--records", str(empty), "--placement", str(tmp_path / "p"),
                          "--num-gpus", "2", "--expert-size-bytes", "1"], capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert json.loads(run.stdout)["msg"] == (
        f"{empty} holds no moe_balance.tokens_per_expert/1 records (1 lines skipped): point the rebalance at the "
        f"JSONL the training monitor writes")
