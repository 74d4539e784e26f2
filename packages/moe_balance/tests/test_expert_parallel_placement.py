"""Applying a placement between steps on 4 gloo ranks (2 nodes x 2): every slot ends up holding exactly the new plan's
expert, weights and Adam state alike; slots that keep their expert are neither sent to nor written, and the same
placement applied again moves nothing; a layer that changed placement still computes the reference. One spawn runs
every case; the move planner and the file checks are tested in this process."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from expert_parallel_oracle import EXPERTS, reference_run
from gloo_ranks import run_ranks

from moe_balance.expert_parallel import SlotMove, default_phy2log, plan_slot_moves
from moe_balance.expert_parallel.placement_file import SCHEMA, placement_problem
from moe_balance.placement import plan_rebalance

WORLD_SIZE, RANKS_PER_NODE, SLOTS_PER_RANK = 4, 2, 3
NUM_SLOTS = WORLD_SIZE * SLOTS_PER_RANK
SHAPES = ((4, 6), (6, 4), (4, 6))  # the test's per-slot tensors (small SwiGLU expert)


def current_and_new() -> tuple[torch.Tensor, torch.Tensor]:
    """The default layout and the improved planner's placement for skewed loads. (R,) int64 each."""
    current = default_phy2log(EXPERTS, NUM_SLOTS)
    weight = torch.tensor([[0.35, 0.35] + [0.05] * (EXPERTS - 2)])
    new = plan_rebalance(weight, NUM_SLOTS, 1, WORLD_SIZE // RANKS_PER_NODE, WORLD_SIZE, previous=current[None])
    return current, new.phy2log[0]


def pattern(expert: int, tensor: int, shape: tuple[int, ...]) -> torch.Tensor:
    """What a slot of ``expert`` holds in tensor number ``tensor``: distinct for every (expert, tensor) pair."""
    return expert * 1000 + tensor * 100 + torch.arange(torch.Size(shape).numel(), dtype=torch.float32).view(shape)


def placement_document(rows: list[list[int]], **changes: Any) -> dict:
    """A placement file as playbooks/files/plan_expert_placement.py writes it (docs/expert-placement.md); ``changes``
    replace keys."""
    phy2log = changes.get("phy2log", rows)
    document = {
        "schema": SCHEMA,
        "layers": list(range(len(rows))),
        "num_experts": EXPERTS,
        "num_replicas": NUM_SLOTS,
        "num_gpus": WORLD_SIZE,
        "num_nodes": WORLD_SIZE // RANKS_PER_NODE,
        "num_groups": 1,
        "gpu_slot_counts": [SLOTS_PER_RANK] * WORLD_SIZE,
        "log2phy_layout": "eplb",
        "phy2log": phy2log,
        "logcnt": [[row.count(expert) for expert in range(EXPERTS)] for row in phy2log],
    }
    document.update(changes)
    return document


def _counting_p2p(log: list) -> None:
    """Wrap torch.distributed.batch_isend_irecv so every P2P op this rank issues is logged (kind, peer, bytes)."""
    import torch.distributed as dist

    issue = dist.batch_isend_irecv

    def counted(ops):
        log.extend((op.op.__name__, op.group_peer, op.tensor.numel() * op.tensor.element_size()) for op in ops)
        return issue(ops)

    dist.batch_isend_irecv = counted


def _placement_cases(rank, world_size, placement_path):
    from torch import nn

    from moe_balance.expert_parallel import (
        ExpertParallelConfig,
        ExpertParallelMoE,
        SlotExperts,
        apply_placement,
        apply_slot_rows,
        load_placement,
        module_slot_rows,
        slot_tensors,
    )

    current, new = current_and_new()
    mine = range(rank * SLOTS_PER_RANK, (rank + 1) * SLOTS_PER_RANK)
    experts = SlotExperts(SLOTS_PER_RANK, 4, 6)
    optimizer = torch.optim.Adam(experts.parameters(), lr=1e-3)
    for weight in experts.weights():
        weight.grad = torch.ones_like(weight)
    optimizer.step()  # creates exp_avg / exp_avg_sq
    tensors = slot_tensors(experts.weights(), optimizer)
    with torch.no_grad():
        for number, tensor in enumerate(tensors):
            for local, slot in enumerate(mine):
                tensor[local] = pattern(int(current[slot]), number, tensor.shape[1:])
    log: list = []
    _counting_p2p(log)
    move = apply_placement(tensors, current, new, ranks_per_node=RANKS_PER_NODE)
    holds_new = [
        all(
            torch.equal(tensor[local], pattern(int(new[slot]), n, tensor.shape[1:])) for n, tensor in enumerate(tensors)
        )
        for local, slot in enumerate(mine)
    ]
    first_ops = list(log)
    log.clear()
    again = apply_placement(tensors, new, new, ranks_per_node=RANKS_PER_NODE)
    ops_again = list(log)

    modules = nn.ModuleList(nn.Linear(3, 2) for _slot in mine)
    with torch.no_grad():
        for module, slot in zip(modules, mine, strict=True):
            module.weight.copy_(pattern(int(current[slot]), 0, (2, 3)))
            module.bias.copy_(pattern(int(current[slot]), 1, (2,)))
    apply_slot_rows(module_slot_rows(modules), current, new, ranks_per_node=RANKS_PER_NODE)
    modules_hold_new = [
        torch.equal(module.weight, pattern(int(new[slot]), 0, (2, 3)))
        and torch.equal(module.bias, pattern(int(new[slot]), 1, (2,)))
        for module, slot in zip(modules, mine, strict=True)
    ]

    # A layer in the default layout moves to the placement from the file, then computes the skewed micro-batch.
    from expert_parallel_oracle import D_FF, D_MODEL, expert_weights, routing

    config = ExpertParallelConfig(
        num_experts=EXPERTS,
        slots_per_rank=SLOTS_PER_RANK,
        d_model=D_MODEL,
        d_ff=D_FF,
        ranks_per_node=RANKS_PER_NODE,
        spare_slots_per_rank=1,
    )
    layer = ExpertParallelMoE(config)
    with torch.no_grad():
        for weight, full in zip(layer.experts.weights(), expert_weights(), strict=True):
            weight.copy_(full[current[rank * SLOTS_PER_RANK : (rank + 1) * SLOTS_PER_RANK]])
    placement = load_placement(placement_path, num_experts=EXPERTS, slots_per_rank=SLOTS_PER_RANK)
    layer.apply_placement(placement.row(0))
    x, topk_idx, gates, _upstream = routing(rank, "skewed")
    return {
        "holds_new": holds_new,
        "record": move.as_record(),
        "ops": first_ops,
        "again": again.as_record(),
        "ops_again": ops_again,
        "modules_hold_new": modules_hold_new,
        "layer_y": layer(x, topk_idx, gates).detach(),
        "layer_phy2log": layer.phy2log.clone(),
    }


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ep-placement")
    _current, new = current_and_new()
    (folder / "expert_placement.json").write_text(json.dumps(placement_document([new.tolist()])))
    outcomes = run_ranks(_placement_cases, WORLD_SIZE, folder, str(folder / "expert_placement.json"))
    errors = [outcome["error"] for outcome in outcomes if "error" in outcome]
    assert not errors, errors
    return [outcome["value"] for outcome in outcomes]


def test_the_placement_changes_some_slots_and_keeps_others():
    current, new = current_and_new()
    assert 0 < int((current != new).sum()) < NUM_SLOTS


def test_each_slot_holds_the_new_plans_expert_weights_and_adam_state(ranks):
    for result in ranks:
        assert result["holds_new"] == [True] * SLOTS_PER_RANK


def test_experts_kept_one_module_per_slot_move_the_same_way(ranks):
    for result in ranks:
        assert result["modules_hold_new"] == [True] * SLOTS_PER_RANK


def test_only_changed_slots_travel(ranks):
    """Each rank sends exactly the remote moves it is the source of and receives exactly those it is the target of:
    bytes counted on the P2P ops it issued, one op per peer and direction."""
    current, new = current_and_new()
    moves = plan_slot_moves(current, new, SLOTS_PER_RANK, RANKS_PER_NODE)
    assert {move.slot for move in moves} == set((current != new).nonzero().flatten().tolist())
    slot_bytes = 4 * 3 * sum(torch.Size(shape).numel() for shape in SHAPES)  # weights + exp_avg + exp_avg_sq
    for rank, result in enumerate(ranks):
        rank_of = [move.slot // SLOTS_PER_RANK for move in moves], [move.source // SLOTS_PER_RANK for move in moves]
        remote = [(dst, src) for dst, src in zip(*rank_of, strict=True) if dst != src]
        sent = sum(1 for dst, src in remote if src == rank) * slot_bytes
        received = sum(1 for dst, src in remote if dst == rank) * slot_bytes
        assert sum(size for kind, _peer, size in result["ops"] if kind == "isend") == sent
        assert sum(size for kind, _peer, size in result["ops"] if kind == "irecv") == received
        peers = [(kind, peer) for kind, peer, _size in result["ops"]]
        assert len(peers) == len(set(peers))  # one message per peer and direction
        assert (result["record"]["sent_bytes"], result["record"]["received_bytes"]) == (sent, received)


def test_the_same_placement_again_moves_nothing(ranks):
    for result in ranks:
        assert result["ops_again"] == []
        assert result["again"]["changed_slots"] == [] and result["again"]["p2p_ops"] == 0


def test_bytes_within_and_across_nodes_add_up_to_what_the_ranks_sent(ranks):
    record = ranks[0]["record"]
    assert all(result["record"]["bytes_within_node"] == record["bytes_within_node"] for result in ranks)
    assert record["bytes_within_node"] + record["bytes_across_nodes"] == sum(r["record"]["sent_bytes"] for r in ranks)
    assert json.loads(json.dumps(record)) == record


def test_a_layer_that_loaded_and_applied_the_placement_computes_the_reference(ranks):
    outputs, _input_grads, _weight_grads = reference_run(WORLD_SIZE, "skewed")
    _current, new = current_and_new()
    for rank, result in enumerate(ranks):
        assert torch.equal(result["layer_phy2log"], new)
        torch.testing.assert_close(result["layer_y"], outputs[rank], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("current", "new", "slots_per_rank", "moves"),
    [
        # slot 3 (rank 1, node 0) needs expert 0: slot 0 on its node beats slot 4 on rank 2 (node 1).
        ([0, 1, 2, 3, 0, 5], [0, 1, 2, 0, 0, 5], 1, [SlotMove(3, 0, 0)]),
        # a holder on the slot's own rank wins: a local copy.
        ([0, 1, 2, 3], [0, 1, 2, 2], 2, [SlotMove(3, 2, 2)]),
        # two slots needing expert 1 spread over its two holders on the node.
        ([1, 1, 2, 3, 0, 0, 4, 5], [1, 1, 1, 1, 0, 0, 4, 5], 2, [SlotMove(2, 1, 0), SlotMove(3, 1, 1)]),
        # two slots swapping experts read the placement in service, not each other's new content.
        ([0, 1], [1, 0], 1, [SlotMove(0, 1, 1), SlotMove(1, 0, 0)]),
        ([0, 1, 2, 3], [0, 1, 2, 3], 2, []),
    ],
)
def test_each_changed_slot_copies_from_the_nearest_least_used_holder(current, new, slots_per_rank, moves):
    assert plan_slot_moves(torch.tensor(current), torch.tensor(new), slots_per_rank, 2) == moves


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_experts": 16}, "it was planned for num_experts=16; this job has 8 experts per MoE layer"),
        ({"num_gpus": 8}, "it was planned for num_gpus=8; this job has 4 ranks"),
        ({"num_replicas": 16}, "it was planned for num_replicas=16; this job has 12 slots (4 ranks x 3)"),
        ({"schema": "other/1"}, "it is not a hpc.balance.expert_placement/1 file (schema 'other/1')"),
        ({"gpu_slot_counts": [4, 2, 3, 3]}, "its gpu_slot_counts [4, 2, 3, 3] are not 3 on each of the 4 ranks"),
        ({"phy2log": [[0] * 11]}, "its phy2log is not a (1 layers, 12 slots) table of ints"),
        ({"phy2log": [[0] * 12], "logcnt": None}, "layer 0: experts [1, 2, 3, 4, 5, 6, 7] have no slot"),
        ({"logcnt": [[1] * 8]}, "its logcnt does not match its phy2log"),
        ({"layers": [3]}, "it holds layers [3]; this job's MoE layers are [0]"),
    ],
)
def test_a_placement_for_another_job_is_refused_by_name(changes, message):
    document = placement_document([current_and_new()[1].tolist()], **changes)
    problem = placement_problem(document, num_experts=EXPERTS, world_size=WORLD_SIZE, slots_per_rank=3, layers=[0])
    assert problem is not None and problem.startswith(message), problem
