"""Bad input to the expert-parallel executor on 4 gloo ranks: a placement file for another model or job, files that
differ between nodes, a replica plan that does not add up, a rank that planned from other counts, a rank with bad
routing. Each is a clear ``ExpertParallelError`` with the same message on every rank, never a hang, and the group
still works afterwards. One spawn runs every case in order."""

from __future__ import annotations

import json

import pytest
import torch
from expert_parallel_oracle import D_FF, D_MODEL, EXPERTS, routing
from gloo_ranks import run_ranks
from test_expert_parallel_placement import current_and_new, placement_document

WORLD_SIZE, RANKS_PER_NODE, SLOTS_PER_RANK = 4, 2, 3
EXPECTED = {  # case: the start of the message every rank raises
    "file for another model": "expert placement refused on 4 of 4 ranks; ranks 0, 1, 2, 3: placement file ",
    "file for another rank count": "expert placement refused on 4 of 4 ranks; ranks 0, 1, 2, 3: placement file ",
    "file of another shape": "expert placement refused on 4 of 4 ranks; ranks 0, 1, 2, 3: placement file ",
    "one node's file differs": "expert placement refused on every rank: the ranks hold different placements (ranks "
    "0, 1, 2 vs rank 3); every node must hold the same placement file",
    "one rank's file is missing": "expert placement refused on 1 of 4 ranks; rank 2: placement file ",
    "plan that does not add up": "expert-parallel MoE input refused on every rank: the replica plan does not add up",
    "rank planned from other counts": "expert-parallel MoE input refused on every rank: the ranks hold different "
    "replica plans (ranks 0, 2, 3 hold rank 0's",
    "expert id out of range on one rank": "expert-parallel MoE input refused on 1 of 4 ranks; rank 3: topk_idx holds "
    "expert ids",
    "layer config differs on one rank": "expert-parallel layer refused on every rank: the ranks hold different layer "
    "configs (rank 0 vs ranks 1, 2, 3); build the layer from the same ExpertParallelConfig on every rank",
    "placement that drops an expert": "placement change refused on 4 of 4 ranks; ranks 0, 1, 2, 3: the new placement "
    "drops experts [1, 2, 3, 4, 5, 6, 7]",
    "one rank applies another placement": "placement change refused on every rank: the ranks hold different "
    "placements or slot shapes",
}
DETAIL = {  # case: what the message must also name
    "file for another model": "it was planned for num_experts=16; this job has 8 experts per MoE layer",
    "file for another rank count": "it was planned for num_gpus=8; this job has 4 ranks",
    "file of another shape": "its phy2log is not a (1 layers, 12 slots) table of ints",
    "one rank's file is missing": "cannot be read",
    "plan that does not add up": "which routed",
}


def _config(**changes):
    from moe_balance.expert_parallel import ExpertParallelConfig

    values = dict(num_experts=EXPERTS, slots_per_rank=2, d_model=D_MODEL, d_ff=D_FF, ranks_per_node=RANKS_PER_NODE)
    values.update(spare_slots_per_rank=2, **changes)
    return ExpertParallelConfig(**values)


def _global_load() -> torch.Tensor:
    """Every rank's skewed counts per physical slot (default layout: slot = expert). (ranks, experts) int64."""
    return torch.stack([torch.bincount(routing(r, "skewed")[1].flatten(), minlength=EXPERTS) for r in range(4)])


def _bad_inputs(rank, world_size, folder):
    from moe_balance.expert_parallel import ExpertParallelError, ExpertParallelMoE, apply_placement, load_placement
    from moe_balance.placement import plan_replicas

    def attempt(action):
        try:
            action()
        except ExpertParallelError as exc:
            return str(exc)
        except Exception as exc:  # a wrong kind of error fails the test by name
            return f"{type(exc).__name__}: {exc}"
        return "no error"

    def load(name):
        return load_placement(f"{folder}/{name}", num_experts=EXPERTS, slots_per_rank=SLOTS_PER_RANK)

    outcome = {
        "file for another model": attempt(lambda: load("another_model.json")),
        "file for another rank count": attempt(lambda: load("another_rank_count.json")),
        "file of another shape": attempt(lambda: load("another_shape.json")),
        "one node's file differs": attempt(lambda: load("good.json" if rank < 3 else "stale.json")),
        "one rank's file is missing": attempt(lambda: load("good.json" if rank != 2 else "missing.json")),
    }
    layer = ExpertParallelMoE(_config())
    x, topk_idx, gates, _upstream = routing(rank, "skewed")
    load_matrix = _global_load()
    plan = plan_replicas(load_matrix, spare_slots_per_rank=2, ranks_per_node=RANKS_PER_NODE)
    inflated = type(plan)(**{**plan.__dict__, "tokens": plan.tokens * 3})
    outcome["plan that does not add up"] = attempt(lambda: layer(x, topk_idx, gates, plan=inflated))
    other = load_matrix.clone()
    other[0, 0] += 5
    skewed_plan = plan if rank != 1 else plan_replicas(other, spare_slots_per_rank=2, ranks_per_node=RANKS_PER_NODE)
    outcome["rank planned from other counts"] = attempt(lambda: layer(x, topk_idx, gates, plan=skewed_plan))
    wrong_ids = topk_idx if rank != 3 else topk_idx + EXPERTS
    outcome["expert id out of range on one rank"] = attempt(lambda: layer(x, wrong_ids, gates))
    outcome["layer config differs on one rank"] = attempt(
        lambda: ExpertParallelMoE(_config(d_ff=D_FF if rank else 2 * D_FF))
    )
    current, new = current_and_new()
    tensors = [torch.zeros(SLOTS_PER_RANK, 2)]
    outcome["placement that drops an expert"] = attempt(
        lambda: apply_placement(tensors, current, torch.zeros_like(new), ranks_per_node=RANKS_PER_NODE)
    )
    outcome["one rank applies another placement"] = attempt(
        lambda: apply_placement(tensors, current, new if rank else new.roll(1), ranks_per_node=RANKS_PER_NODE)
    )
    # Still healthy: a plain micro-batch runs and agrees with the plan it made.
    y = layer(x, topk_idx, gates, plan=plan)
    assert layer.last_stats is not None
    outcome["after"] = (tuple(y.shape), layer.last_stats.tokens_computed == int(plan.rank_load_after[rank]))
    return outcome


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ep-bad-input")
    current, new = current_and_new()
    files = {
        "good.json": placement_document([new.tolist()]),
        "stale.json": placement_document([current.tolist()]),
        "another_model.json": placement_document([new.tolist()], num_experts=16),
        "another_rank_count.json": placement_document([new.tolist()], num_gpus=8),
        "another_shape.json": placement_document([new.tolist()[:-1]]),
    }
    for name, document in files.items():
        (folder / name).write_text(json.dumps(document))
    outcomes = run_ranks(_bad_inputs, WORLD_SIZE, folder, str(folder))
    errors = [outcome["error"] for outcome in outcomes if "error" in outcome]
    assert not errors, errors
    return [outcome["value"] for outcome in outcomes]


@pytest.mark.parametrize("case", EXPECTED)
def test_every_rank_raises_the_same_clear_error(ranks, case):
    messages = [result[case] for result in ranks]
    assert all(message == messages[0] for message in messages), messages
    assert messages[0].startswith(EXPECTED[case]), messages[0]
    assert DETAIL.get(case, "") in messages[0]


def test_the_group_still_works_after_every_refusal(ranks):
    for result in ranks:
        assert result["after"] == ((24, D_MODEL), True)
