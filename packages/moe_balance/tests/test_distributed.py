"""torch.distributed over gloo on CPU: all-reduced counts equal single-process counts; every rank gets the same bias.

One spawn of WORLD_SIZE processes (one shard of the same tokens each) runs every distributed check; the tests assert
on what the ranks reported.
"""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from moe_balance import BiasBalancer, GlobalBatchAuxLoss, TokensPerExpertMonitor, route
from moe_balance.metrics import read_records

WORLD_SIZE = 3
TOKENS, EXPERTS, TOP_K, STEPS = 96, 8, 2, 4


def full_logits(step: int) -> torch.Tensor:
    """The global batch of one step; rank r routes rows r::WORLD_SIZE."""
    gen = torch.Generator().manual_seed(100 + step)
    return torch.randn(TOKENS, EXPERTS, generator=gen) + torch.linspace(-1, 1, EXPERTS)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, init_method=f"tcp://127.0.0.1:{port}")
    try:
        torch.set_num_threads(1)
        balancer = BiasBalancer(EXPERTS, rate=0.01)  # group=None: the default group
        monitor = TokensPerExpertMonitor(
            os.path.join(out_dir, "experts.jsonl"), num_layers=1, num_experts=EXPERTS, top_k=TOP_K, every_n_steps=STEPS
        )
        global_loss = GlobalBatchAuxLoss(EXPERTS, TOP_K, group=dist.group.WORLD)
        reduced_counts, aux_values = [], []
        for step in range(STEPS):
            shard = full_logits(step)[rank::WORLD_SIZE]
            routing = route(shard, TOP_K, score="sigmoid", bias=balancer.bias)
            monitor.observe(0, routing.tokens_per_expert, shard.shape[0])
            aux_values.append(global_loss(torch.softmax(shard, -1), route(shard, TOP_K).tokens_per_expert).item())
            reduced_counts.append(balancer.update(routing.tokens_per_expert))
            monitor.step(step)
        gathered = [torch.zeros(EXPERTS) for _rank in range(WORLD_SIZE)]
        dist.all_gather(gathered, balancer.bias)
        torch.save(
            {
                "counts": torch.stack(reduced_counts),
                "biases": torch.stack(gathered),
                "bias": balancer.bias,
                "aux": aux_values,
            },
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(_free_port(), str(out_dir)), nprocs=WORLD_SIZE, join=True)
    return [torch.load(out_dir / f"rank{r}.pt") for r in range(WORLD_SIZE)], out_dir


def single_process_run():
    """The same training loop on one process over the whole batch."""
    balancer = BiasBalancer(EXPERTS, rate=0.01)
    counts = []
    for step in range(STEPS):
        counts.append(
            balancer.update(route(full_logits(step), TOP_K, score="sigmoid", bias=balancer.bias).tokens_per_expert)
        )
    return torch.stack(counts), balancer.bias


def test_all_reduced_counts_equal_single_process_counts(ranks):
    results, _out_dir = ranks
    counts, _bias = single_process_run()
    for result in results:
        assert torch.equal(result["counts"], counts)


def test_every_rank_holds_the_same_bias(ranks):
    results, _out_dir = ranks
    _counts, bias = single_process_run()
    for result in results:
        assert torch.equal(result["biases"], bias.expand(WORLD_SIZE, EXPERTS))
    assert bias.abs().sum() > 0  # the bias did move


def test_monitor_writes_global_counts_once(ranks):
    _results, out_dir = ranks
    records, skipped = read_records(out_dir / "experts.jsonl")
    counts, _bias = single_process_run()
    assert skipped == 0 and len(records) == 1  # only rank 0 writes
    assert records[0]["tokens_per_expert"] == counts.sum(0).tolist()
    assert records[0]["num_tokens"] == TOKENS * STEPS and records[0]["world_size"] == WORLD_SIZE


def test_global_batch_aux_loss_uses_counts_from_every_rank(ranks):
    results, _out_dir = ranks
    accumulated = torch.zeros(EXPERTS, dtype=torch.float64)
    for step in range(STEPS):
        accumulated += route(full_logits(step), TOP_K).tokens_per_expert.to(torch.float64)
        f = accumulated / (TOKENS * (step + 1) * TOP_K)
        for rank, result in enumerate(results):
            p_local = torch.softmax(full_logits(step)[rank::WORLD_SIZE], -1).mean(0).to(torch.float64)
            assert result["aux"][step] == pytest.approx(EXPERTS * torch.dot(f, p_local).item(), rel=1e-6)
