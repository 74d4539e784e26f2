"""Measure, decide, act, measure again, through the real playbook: playbooks/rebalance.yml (compute part, local
connection, this venv's moe_balance) reads skewed tokens_per_expert records and writes the placement file; 4 gloo
ranks (2 nodes x 2) of moe_balance.expert_parallel load that file, move their experts to it and route the next
micro-batch with the records' counts. Tokens computed per rank max/mean must land within 0.05 of the file's
predicted_max_over_mean, and the slots the job moves must be the ones the plan counted.

The 4-rank job is the package's own end-to-end job (packages/moe_balance/tests/test_expert_parallel_end_to_end.py),
run here on the file the playbook wrote instead of the planner's direct output.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest
from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "rebalance.yml"
PACKAGE_TESTS = ROOT / "packages" / "moe_balance" / "tests"


@pytest.fixture(scope="module")
def job_module():
    """The package's end-to-end job; the spawned ranks import it by name, so its folder goes on PYTHONPATH too."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(PACKAGE_TESTS))
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_TESTS), previous]))
    try:
        yield importlib.import_module("test_expert_parallel_end_to_end")
    finally:
        sys.path.remove(str(PACKAGE_TESTS))
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


def test_the_placement_rebalance_yml_writes_is_what_a_4_rank_job_then_measures(tmp_path, job_module):
    e2e = job_module
    line = {"schema": "moe_balance.tokens_per_expert/1", "step": 100, "layer": 0, "rank": 0, "world_size": 4,
            "tokens_per_expert": e2e.TOKENS_PER_EXPERT, "top_k": e2e.TOP_K, "num_tokens": e2e.PAIRS // e2e.TOP_K}
    records = tmp_path / "tokens_per_expert.jsonl"
    records.write_text(json.dumps(line) + "\n")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"""
all:
  children:
    gpu_nodes:
      hosts:
        gpu1: {{ansible_host: 127.0.0.1, ansible_connection: local, ansible_python_interpreter: {sys.executable}}}
""")
    placement = tmp_path / "placement" / "expert_placement.json"
    run = run_playbook(
        PLAYBOOK, inventory, "--tags", "compute",
        "-e", f"hpc_balance_rebalance_records_path={records}",
        "-e", f"hpc_balance_rebalance_placement_path={placement}",
        "-e", f"hpc_balance_rebalance_moe_python={sys.executable}",
        "-e", f"hpc_balance_rebalance_num_gpus={e2e.WORLD_SIZE}", "-e", "hpc_balance_rebalance_num_nodes=2",
        "-e", f"hpc_balance_rebalance_redundant_experts={e2e.REDUNDANT}",
        "-e", f"hpc_balance_rebalance_expert_size_bytes={e2e.SLOT_BYTES}",
        timeout_s=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    document = json.loads(placement.read_text())

    outcomes = e2e.run_ranks(e2e._job, e2e.WORLD_SIZE, tmp_path, str(placement))
    errors = [outcome["error"] for outcome in outcomes if "error" in outcome]
    assert not errors, errors
    ranks = [outcome["value"] for outcome in outcomes]

    predicted = document["predicted_max_over_mean"][0]
    measured = ranks[0]["records"][0]["computed_max_over_mean"]
    assert predicted < 1.2 and abs(measured - predicted) <= 0.05, (measured, predicted)
    assert all(rank["records"][0] == ranks[0]["records"][0] for rank in ranks)  # one record, the same on every rank
    moved = ranks[0]["move"]["changed_slots"]
    assert len(moved) > 0
