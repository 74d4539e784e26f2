"""The expert-parallel layer on 4 gloo ranks (2 nodes x 2): outputs, input gradients and every expert weight's
gradient equal the single-process reference within 1e-5 in float32, with and without replicas, for skewed and balanced
routing, and with an EPLB placement that gives hot experts two slots. One spawn runs every case."""

from __future__ import annotations

import json

import pytest
import torch
from expert_parallel_oracle import EXPERTS, reference_run, routing
from gloo_ranks import run_ranks

from moe_balance.placement import plan_rebalance

WORLD_SIZE, RANKS_PER_NODE = 4, 2
CASES = {  # name: (routing, spare slots per rank, redundant slots per rank)
    "skewed-no-replicas": ("skewed", 0, 0),
    "skewed-replicas": ("skewed", 2, 0),
    "balanced-no-replicas": ("balanced", 0, 0),
    "balanced-replicas": ("balanced", 2, 0),
    "uniform-replicas": ("uniform", 2, 0),
    "skewed-eplb-and-replicas": ("skewed", 2, 1),
    "one-rank-without-tokens": ("idle-rank", 2, 0),
}
TOLERANCE = 1e-5


def eplb_phy2log(redundant_per_rank: int) -> torch.Tensor:
    """The improved planner's placement for the skewed loads, with redundant slots: (R,) int64."""
    skewed = torch.tensor([[0.35, 0.35] + [0.05] * (EXPERTS - 2)])
    slots = (EXPERTS // WORLD_SIZE + redundant_per_rank) * WORLD_SIZE
    return plan_rebalance(skewed, slots, 1, WORLD_SIZE // RANKS_PER_NODE, WORLD_SIZE).phy2log[0]


def _layer_cases(rank, world_size):
    from expert_parallel_oracle import D_FF, D_MODEL, expert_weights

    from moe_balance.expert_parallel import ExpertParallelConfig, ExpertParallelMoE, gather_execution_record

    results = {}
    for name, (kind, spares, redundant) in CASES.items():
        slots_per_rank = EXPERTS // world_size + redundant
        config = ExpertParallelConfig(
            num_experts=EXPERTS,
            slots_per_rank=slots_per_rank,
            d_model=D_MODEL,
            d_ff=D_FF,
            ranks_per_node=RANKS_PER_NODE,
            spare_slots_per_rank=spares,
        )
        layer = ExpertParallelMoE(config)
        if redundant:
            layer.phy2log.copy_(eplb_phy2log(redundant))
        mine = layer.phy2log[rank * slots_per_rank : (rank + 1) * slots_per_rank]
        with torch.no_grad():
            for weight, full in zip(layer.experts.weights(), expert_weights(), strict=True):
                weight.copy_(full[mine])
        x, topk_idx, gates, upstream = routing(rank, kind)
        x.requires_grad_()
        y = layer(x, topk_idx, gates)
        (y * upstream).sum().backward()
        weight_grads = [w.grad.clone() for w in layer.experts.weights()]
        layer.sum_replica_gradients()
        stats = layer.last_stats
        assert stats is not None
        record = gather_execution_record(
            stats, step=3, layer=0, ranks_per_node=RANKS_PER_NODE, spare_slots_per_rank=spares
        )
        results[name] = {
            "y": y.detach(),
            "x_grad": x.grad,
            "weight_grads": weight_grads,
            "summed_grads": [w.grad for w in layer.experts.weights()],
            "phy2log": layer.phy2log.clone(),
            "events": stats.events,
            "replicas": stats.replicas,
            "record": record,
            "plan_after": None if stats.plan is None else stats.plan.rank_load_after,
        }
    return results


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    outcomes = run_ranks(_layer_cases, WORLD_SIZE, tmp_path_factory.mktemp("ep-layer"))
    errors = [outcome["error"] for outcome in outcomes if "error" in outcome]
    assert not errors, errors
    return [outcome["value"] for outcome in outcomes]


@pytest.fixture(scope="module")
def references():
    return {kind: reference_run(WORLD_SIZE, kind) for kind in ("skewed", "balanced", "uniform", "idle-rank")}


@pytest.mark.parametrize("case", CASES)
def test_outputs_equal_the_single_process_reference(ranks, references, case):
    outputs, _input_grads, _weight_grads = references[CASES[case][0]]
    for rank, result in enumerate(ranks):
        torch.testing.assert_close(result[case]["y"], outputs[rank], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("case", CASES)
def test_input_gradients_equal_the_single_process_reference(ranks, references, case):
    _outputs, input_grads, _weight_grads = references[CASES[case][0]]
    for rank, result in enumerate(ranks):
        torch.testing.assert_close(result[case]["x_grad"], input_grads[rank], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("case", CASES)
def test_every_expert_weight_gradient_equals_the_single_process_reference(ranks, references, case):
    """Guests' gradients were added at home; an expert with two physical slots has its gradient split over them."""
    _outputs, _input_grads, weight_grads = references[CASES[case][0]]
    phy2log = ranks[0][case]["phy2log"]
    for index, reference in enumerate(weight_grads):
        per_slot = torch.cat([result[case]["weight_grads"][index] for result in ranks])  # (R, ...)
        per_expert = torch.zeros_like(reference).index_add_(0, phy2log, per_slot)
        torch.testing.assert_close(per_expert, reference, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("case", CASES)
def test_after_summing_replica_gradients_every_slot_holds_its_experts_whole_gradient(ranks, references, case):
    _outputs, _input_grads, weight_grads = references[CASES[case][0]]
    phy2log = ranks[0][case]["phy2log"]
    for index, reference in enumerate(weight_grads):
        per_slot = torch.cat([result[case]["summed_grads"][index] for result in ranks])  # (R, ...)
        torch.testing.assert_close(per_slot, reference[phy2log], atol=TOLERANCE, rtol=0)


def test_skewed_routing_fills_spare_slots_and_balanced_routing_leaves_them_empty(ranks):
    assert ranks[0]["skewed-replicas"]["replicas"] > 0 and ranks[0]["uniform-replicas"]["replicas"] > 0
    assert ranks[0]["balanced-replicas"]["replicas"] == 0
    assert ranks[0]["balanced-replicas"]["events"] == ranks[0]["skewed-replicas"]["events"]  # same collectives


@pytest.mark.parametrize("case", CASES)
def test_tokens_computed_per_rank_are_the_plans_prediction(ranks, case):
    record = ranks[0][case]["record"]
    assert record["tokens_computed_per_rank"] == record["tokens_predicted_per_rank"]
    pairs = sum(routing(rank, CASES[case][0])[1].numel() for rank in range(WORLD_SIZE))
    assert sum(record["tokens_computed_per_rank"]) == pairs
    if ranks[0][case]["plan_after"] is not None:
        assert record["tokens_predicted_per_rank"] == ranks[0][case]["plan_after"].tolist()


def test_replicas_bring_the_skewed_peak_down(ranks):
    without = ranks[0]["skewed-no-replicas"]["record"]
    with_replicas = ranks[0]["skewed-replicas"]["record"]
    assert without["computed_max_over_mean"] > 2.0
    assert with_replicas["computed_max_over_mean"] < 1.1
    assert with_replicas["weight_bytes_within_node"] + with_replicas["weight_bytes_across_nodes"] > 0
    assert without["weight_bytes_within_node"] + without["weight_bytes_across_nodes"] == 0


def test_guest_weights_are_issued_before_home_compute_and_awaited_just_before_the_guests(ranks):
    for result in ranks:
        events = result["skewed-replicas"]["events"]
        assert events == [
            "counts gathered",
            "guest weights issued",
            "tokens dispatched",
            "home experts computed",
            "guest weights received",
            "guest experts computed",
            "outputs combined",
        ]


def test_every_rank_gets_the_same_json_record(ranks):
    for case in CASES:
        records = [result[case]["record"] for result in ranks]
        assert all(record == records[0] for record in records)
        assert json.loads(json.dumps(records[0])) == records[0]
        assert records[0]["schema"] == "moe_balance.expert_parallel/1"
