"""From tokens_per_expert records to a 4-rank job: the planner ``playbooks/rebalance.yml`` runs
(``playbooks/files/plan_expert_placement.py``, called here with the same arguments the playbook passes) writes the
placement file, 4 gloo ranks (2 nodes x 2) load it, move their experts to it and route a micro-batch with the records'
counts: tokens computed per rank max/mean lands within 0.05 of the file's predicted_max_over_mean, the slots moved
are the planner's moved_slots, and a replica plan on top evens the ranks out further."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gloo_ranks import run_ranks

from moe_balance.expert_parallel.placement_file import SCHEMA

PLANNER = Path(__file__).resolve().parents[3] / "playbooks" / "files" / "plan_expert_placement.py"
WORLD_SIZE, RANKS_PER_NODE, REDUNDANT, TOP_K, D_MODEL, D_FF = 4, 2, 4, 2, 8, 16
# One layer's counts, summed over ranks, as the monitor writes them: two hot experts, six cold ones.
TOKENS_PER_EXPERT = [400, 300, 60, 60, 50, 50, 40, 40]
EXPERTS, PAIRS = len(TOKENS_PER_EXPERT), sum(TOKENS_PER_EXPERT)
SLOTS_PER_RANK = (EXPERTS + REDUNDANT) // WORLD_SIZE
SLOT_BYTES = 3 * D_MODEL * D_FF * 4  # w1, w2, w3 of one slot, float32


def global_topk() -> torch.Tensor:
    """(tokens, 2) routing with exactly TOKENS_PER_EXPERT pairs: token t takes the t-th and (t + tokens)-th entries
    of the sorted pair list (distinct, as no expert has half the pairs). Token t belongs to rank t % 4."""
    pairs = torch.repeat_interleave(torch.arange(EXPERTS), torch.tensor(TOKENS_PER_EXPERT))
    return pairs.view(TOP_K, -1).t().contiguous()


def _job(rank, world_size, placement_path):
    from moe_balance.expert_parallel import (
        ExpertParallelConfig,
        ExpertParallelMoE,
        gather_execution_record,
        load_placement,
    )

    placement = load_placement(placement_path, num_experts=EXPERTS, slots_per_rank=SLOTS_PER_RANK, layers=[0])
    topk_idx = global_topk()[rank::world_size]
    generator = torch.Generator().manual_seed(rank)
    x = torch.randn(topk_idx.shape[0], D_MODEL, generator=generator)
    gates = torch.full(topk_idx.shape, 0.5)
    records = {}
    for spares in (0, 2):
        config = ExpertParallelConfig(
            num_experts=EXPERTS,
            slots_per_rank=SLOTS_PER_RANK,
            d_model=D_MODEL,
            d_ff=D_FF,
            ranks_per_node=RANKS_PER_NODE,
            spare_slots_per_rank=spares,
        )
        layer = ExpertParallelMoE(config)
        move = layer.apply_placement(placement.row(0))
        layer(x, topk_idx, gates)
        assert layer.last_stats is not None
        records[spares] = gather_execution_record(
            layer.last_stats, step=0, layer=0, ranks_per_node=RANKS_PER_NODE, spare_slots_per_rank=spares
        )
    return {"records": records, "move": move.as_record()}


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ep-end-to-end")
    assert PLANNER.is_file(), f"{PLANNER} is missing: the end-to-end test needs the planner rebalance.yml runs"
    records = folder / "tokens_per_expert.jsonl"
    line = {"schema": "moe_balance.tokens_per_expert/1", "step": 100, "layer": 0, "rank": 0, "world_size": 4}
    line.update(tokens_per_expert=TOKENS_PER_EXPERT, top_k=TOP_K, num_tokens=PAIRS // TOP_K)
    records.write_text(json.dumps(line) + "\n")
    placement = folder / "expert_placement.json"
    arguments = ["--records", records, "--placement", placement, "--num-gpus", WORLD_SIZE, "--num-nodes", 2]
    arguments += ["--redundant-experts", REDUNDANT, "--expert-size-bytes", SLOT_BYTES]
    run = subprocess.run(
        [sys.executable, str(PLANNER), *map(str, arguments)], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    outcomes = run_ranks(_job, WORLD_SIZE, folder, str(placement))
    errors = [outcome["error"] for outcome in outcomes if "error" in outcome]
    assert not errors, errors
    return report, json.loads(placement.read_text()), [outcome["value"] for outcome in outcomes]


def test_the_planner_writes_the_schema_the_executor_reads(planned):
    _report, document, _ranks = planned
    assert document["schema"] == SCHEMA


def test_tokens_computed_per_rank_land_within_5_percent_of_the_placements_prediction(planned):
    _report, document, ranks = planned
    predicted = document["predicted_max_over_mean"][0]
    measured = ranks[0]["records"][0]["computed_max_over_mean"]
    assert document["source"]["window"] == "last" and predicted < 1.2
    assert abs(measured - predicted) <= 0.05, (measured, predicted)


def test_the_job_moves_the_slots_the_planner_counted(planned):
    report, _document, ranks = planned
    move = ranks[0]["move"]
    assert len(move["changed_slots"]) == report["moved_slots"] > 0
    remote = (move["bytes_within_node"] + move["bytes_across_nodes"]) // SLOT_BYTES
    assert (remote + move["local_copies"]) * SLOT_BYTES == report["bytes_moved"]


def test_a_replica_plan_on_top_evens_the_ranks_out_further(planned):
    _report, document, ranks = planned
    with_replicas = ranks[0]["records"][2]
    assert with_replicas["tokens_computed_per_rank"] == with_replicas["tokens_predicted_per_rank"]
    assert with_replicas["computed_max_over_mean"] <= min(document["predicted_max_over_mean"][0], 1.01)
