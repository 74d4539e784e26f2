"""Placement benchmark: exact EPLB planner vs the per-layer loop version, improved mode, and the replica planner.

Run from packages/moe_balance:  PYTHONPATH=src python benchmarks/placement.py  [--quick]

Prints, in one run:
1. exact mode (all layers at once) vs the per-layer loop implementation of the same algorithm
   (``moe_balance.placement.eplb_reference``), 58 layers x 256 experts -> 320 slots on 8 nodes / 64 GPUs, for the
   hierarchical policy (8 groups on 8 nodes) and the global policy (4 groups, which do not divide over 8 nodes);
   both must give identical tensors;
2. improved vs exact mode on the same shape with lognormal loads: max/mean GPU load, share of layers where one GPU
   holds two replicas of an expert, share of load served outside an expert's home node;
3. the per-micro-batch replica planner (torch path on CPU) at EP = 16, 32, 64 ranks, 256 experts, K = 2 spare slots,
   8 ranks per node, with a 70 %-imbalanced synthetic load: time, imbalance before/after, cross-node shares.

Timings use one torch thread: the tensors are small, and intra-op threads only add contention on a busy host.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from moe_balance.placement import gpu_slot_counts, plan_rebalance, plan_replicas, rebalance_experts
from moe_balance.placement.eplb_reference import rebalance_experts_reference


def timed(function, repeats: int) -> tuple[float, float, object]:
    """Best and median wall time in seconds over repeats (after one warm-up call), and the last result."""
    result = function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def lognormal_loads(num_layers: int, num_experts: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.exp(torch.randn((num_layers, num_experts), generator=generator, dtype=torch.float64)) * 1000).float()


def gpu_max_over_mean(phy2log: torch.Tensor, weight: torch.Tensor, slot_gpu: torch.Tensor) -> torch.Tensor:
    weight = weight.double()
    count = torch.zeros_like(weight).scatter_add_(1, phy2log, torch.ones_like(phy2log, dtype=weight.dtype))
    gpu_load = torch.zeros((weight.shape[0], int(slot_gpu.max()) + 1), dtype=weight.dtype)
    gpu_load.index_add_(1, slot_gpu, (weight / count).gather(1, phy2log))
    return gpu_load.max(dim=1).values / gpu_load.mean(dim=1)


def duplicate_layer_share(phy2log: torch.Tensor, slot_gpu: torch.Tensor) -> float:
    pairs = slot_gpu.unsqueeze(0) * (int(phy2log.max()) + 1) + phy2log
    return sum(int((row.bincount() > 1).any()) for row in pairs) / phy2log.shape[0]


def synthetic_load(num_ranks: int, num_experts: int, num_tokens: int, peak_over_mean: float, seed: int):
    """(ranks, experts) routed counts: lognormal popularity, the hottest rank scaled to peak_over_mean x mean."""
    generator = torch.Generator().manual_seed(seed)
    popularity = torch.exp(0.6 * torch.randn(num_experts, generator=generator, dtype=torch.float64))
    per_rank = popularity.view(num_ranks, -1)
    rank_load = per_rank.sum(dim=1)
    hot = int(rank_load.argmax())
    rest = float(rank_load.sum() - rank_load[hot])
    per_rank[hot] *= peak_over_mean * rest / (num_ranks * float(rank_load[hot]) * (1 - peak_over_mean / num_ranks))
    per_expert = (popularity / popularity.sum() * num_tokens).round().long()
    expert = torch.repeat_interleave(torch.arange(num_experts), per_expert)
    source = torch.randint(0, num_ranks, (expert.numel(),), generator=generator)
    load = torch.zeros((num_ranks, num_experts), dtype=torch.int64)
    return load.index_put_((source, expert), torch.ones_like(expert), accumulate=True)


def bench_exact(num_layers: int, fast_repeats: int, loop_repeats: int) -> None:
    print(f"1. exact mode vs per-layer loop: {num_layers} layers x 256 experts -> 320 slots, 8 nodes / 64 GPUs")
    print(f"   {'policy: best of n (median)':<28}{'loop (s)':>16}{'exact (ms)':>19}{'speed-up':>15}{'identical':>11}")
    weight = lognormal_loads(num_layers, 256, seed=0)
    for label, num_groups in (("hierarchical (8 groups)", 8), ("global (4 groups / 8 nodes)", 4)):
        args = (weight, 320, num_groups, 8, 64)
        loop_best, loop_median, loop = timed(lambda: rebalance_experts_reference(*args), loop_repeats)  # noqa: B023
        fast_best, fast_median, fast = timed(lambda: rebalance_experts(*args), fast_repeats)  # noqa: B023
        same = all(torch.equal(a, b) for a, b in zip(fast, loop, strict=True))
        print(
            f"   {label:<28}{loop_best:>9.3f} ({loop_median:.3f}){fast_best * 1e3:>10.2f} ({fast_median * 1e3:5.2f})"
            f"{loop_best / fast_best:>8.0f}x ({loop_median / fast_median:3.0f}x){str(same):>11}"
        )


def bench_improved(num_layers: int) -> None:
    print(f"\n2. improved vs exact, lognormal(0, 1) loads, {num_layers} layers x 256 -> 320, 8 nodes / 64 GPUs")
    print(f"   {'layout / mode':<36}{'max/mean (mean)':>16}{'(worst layer)':>14}{'dup layers':>12}{'off-home':>10}")
    weight = lognormal_loads(num_layers, 256, seed=1)
    slot_gpu = torch.repeat_interleave(torch.arange(64), gpu_slot_counts(320, 64, 8))
    for label, num_groups in (("groups == nodes (8)", 8), ("global (4 groups / 8 nodes)", 4)):
        exact, _, _ = rebalance_experts(weight, 320, num_groups, 8, 64)
        improved_s, _, plan = timed(lambda: plan_rebalance(weight, 320, num_groups, 8, 64), 1)  # noqa: B023
        for mode, phy2log, off_home in (("exact", exact, "-"), ("improved", plan.phy2log, plan.cross_node_load_share)):
            ratio = gpu_max_over_mean(phy2log, weight, slot_gpu)
            share = "-" if off_home in ("-", None) else f"{off_home:.1%}"
            print(
                f"   {label + ', ' + mode:<36}{float(ratio.mean()):>16.3f}{float(ratio.max()):>14.3f}"
                f"{duplicate_layer_share(phy2log, slot_gpu):>12.0%}{share:>10}"
            )
        print(f"   {'':<36}improved planner time: {improved_s * 1e3:.0f} ms")


def bench_replicas(repeats: int) -> None:
    print("\n3. replica planner (torch, CPU): 256 experts, K = 2, 8 ranks per node, 131072 routed tokens, 70 % skew")
    print(
        f"   {'EP':>4}{'best (ms)':>11}{'before':>9}{'after':>9}{'slots used':>12}"
        f"{'x-node copies':>15}{'x-node tokens':>15}"
    )
    for num_ranks in (16, 32, 64):
        load = synthetic_load(num_ranks, 256, 131072, 1.70, seed=0)
        seconds, _, plan = timed(
            lambda: plan_replicas(load, spare_slots_per_rank=2, ranks_per_node=8, backend="torch"),  # noqa: B023
            repeats,
        )
        used = int((plan.slot_expert >= 0).sum())
        print(
            f"   {num_ranks:>4}{seconds * 1e3:>11.1f}{plan.imbalance_before:>9.1%}{plan.imbalance_after:>9.2%}"
            f"{used:>7}/{plan.slot_expert.numel():<4}{plan.cross_node_copy_share:>15.1%}"
            f"{plan.cross_node_token_share:>15.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer layers and repeats (a smoke run)")
    options = parser.parse_args()
    torch.set_num_threads(1)
    num_layers = 8 if options.quick else 58
    bench_exact(num_layers, fast_repeats=5 if options.quick else 21, loop_repeats=1 if options.quick else 3)
    bench_improved(num_layers)
    bench_replicas(repeats=3 if options.quick else 21)


if __name__ == "__main__":
    main()
