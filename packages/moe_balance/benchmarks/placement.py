"""Placement benchmark: exact EPLB planner vs the per-layer loop version, improved mode, and the replica planner.

Run from packages/moe_balance:  PYTHONPATH=src python benchmarks/placement.py  [--quick]

Prints, in one run:
1. exact mode (all layers at once) vs two other implementations of the same algorithm, side by side, best of n:
   the per-layer loop (the tests' ``eplb_reference.py``, DeepSeek ``eplb.py``'s structure) and a numpy
   transcription of vLLM's policy (``vllm_numpy_rebalance`` below), 58 layers x 256 experts -> 320 slots on 8 nodes /
   64 GPUs, for the hierarchical policy (8 groups on 8 nodes) and the global policy (4 groups, which do not divide
   over 8 nodes); the loop must give identical tensors, vLLM's float64 pack weights may break rare ties otherwise;
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
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch
from oracles import load_test_oracle

from moe_balance.placement import gpu_slot_counts, plan_rebalance, plan_replicas, rebalance_experts

rebalance_experts_reference = load_test_oracle("eplb_reference").rebalance_experts_reference

# A transcription, written for this benchmark, of vLLM's numpy EPLB policy: vllm-project/vllm,
# vllm/distributed/eplb/policy/default.py at commit 02c1119c578212d6d51339bc88ad6d12f96e08c2
# (DefaultEplbPolicy.balanced_packing / replicate_experts / rebalance_experts_hierarchical / rebalance_experts).
# Same algorithm as DeepSeek's eplb.py; packing loops over layers and items in Python with numpy argmin.


def _vllm_balanced_packing(weight: np.ndarray, num_packs: int) -> tuple[np.ndarray, np.ndarray]:
    num_layers, num_items = weight.shape
    per_pack = num_items // num_packs
    if per_pack == 1:
        pack_index = np.tile(np.arange(num_items, dtype=np.int64), (num_layers, 1))
        return pack_index, np.zeros_like(pack_index)
    order = np.argsort(-weight, axis=-1)
    pack_index = np.full((num_layers, num_items), -1, dtype=np.int64)
    rank_in_pack = np.full((num_layers, num_items), -1, dtype=np.int64)
    pack_weights = np.zeros((num_layers, num_packs), dtype=np.float64)
    pack_items = np.zeros((num_layers, num_packs), dtype=np.int64)
    for layer in range(num_layers):
        weights_row, items_row = pack_weights[layer], pack_items[layer]
        for item in order[layer]:
            pack = int(np.argmin(weights_row))  # full packs hold inf
            pack_index[layer, item] = pack
            rank_in_pack[layer, item] = items_row[pack]
            weights_row[pack] += weight[layer, item]
            items_row[pack] += 1
            if items_row[pack] == per_pack:
                weights_row[pack] = np.inf
    return pack_index, rank_in_pack


def _vllm_replicate(weight: np.ndarray, num_slots: int) -> tuple[np.ndarray, np.ndarray]:
    num_rows, num_experts = weight.shape
    phy2log = np.tile(np.arange(num_slots, dtype=np.int64), (num_rows, 1))
    logcnt = np.ones((num_rows, num_experts), dtype=np.int64)
    rows = np.arange(num_rows)
    for slot in range(num_experts, num_slots):
        expert = np.argmax(weight / logcnt, axis=-1)
        phy2log[:, slot] = expert
        logcnt[rows, expert] += 1
    return phy2log, logcnt


def _inverse(permutation: np.ndarray) -> np.ndarray:
    inverse = np.empty_like(permutation)
    inverse[np.arange(permutation.shape[0])[:, None], permutation] = np.arange(permutation.shape[1])
    return inverse


def vllm_numpy_rebalance(
    weight: torch.Tensor, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> torch.Tensor:
    """phy2log (layers, replicas) of vLLM's numpy policy: hierarchical when groups divide over nodes, else global."""
    values = weight.float().cpu().numpy()
    if num_groups % num_nodes != 0:
        num_groups, num_nodes = 1, 1
    num_layers, num_experts = values.shape
    group_size = num_experts // num_groups
    groups_per_node = num_groups // num_nodes
    slots_per_gpu = num_replicas // num_gpus
    group_pack, group_rank = _vllm_balanced_packing(values.reshape(num_layers, num_groups, -1).sum(-1), num_nodes)
    log2mlog = (group_pack * groups_per_node + group_rank)[..., None] * group_size + np.arange(group_size)
    mlog2log = _inverse(log2mlog.reshape(num_layers, num_experts))
    tokens_per_mlog = np.take_along_axis(values, mlog2log, axis=1).reshape(-1, num_experts // num_nodes)
    phy2mlog, mlogcnt = _vllm_replicate(tokens_per_mlog, num_replicas // num_nodes)
    tokens_per_phy = np.take_along_axis(tokens_per_mlog / mlogcnt, phy2mlog, axis=1)
    pack, rank = _vllm_balanced_packing(tokens_per_phy, num_gpus // num_nodes)
    pphy2phy = _inverse(pack * slots_per_gpu + rank)
    pphy2mlog = np.take_along_axis(phy2mlog, pphy2phy, axis=1).reshape(num_layers, num_nodes, -1)
    pphy2mlog = (pphy2mlog + np.arange(0, num_experts, num_experts // num_nodes)[None, :, None]).reshape(num_layers, -1)
    return torch.from_numpy(np.take_along_axis(mlog2log, pphy2mlog, axis=1))


Result = TypeVar("Result")


def timed(function: Callable[[], Result], repeats: int) -> tuple[float, float, Result, float]:
    """Best and median wall time in seconds over repeats (after one warm-up call), the last result, and the best
    CPU time of this process (``time.process_time``: on a shared host it moves less than wall time)."""
    result = function()
    times, cpu_times = [], []
    for _repeat in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        result = function()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return min(times), statistics.median(times), result, min(cpu_times)


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


def synthetic_load(
    num_ranks: int, num_experts: int, num_tokens: int, peak_over_mean: float, seed: int
) -> torch.Tensor:
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


def bench_exact(num_layers: int, fast_repeats: int, loop_repeats: int, vllm_repeats: int = 7) -> dict:
    print(f"1. exact mode vs other implementations: {num_layers} layers x 256 experts -> 320 slots, 8 nodes / 64 GPUs")
    print(
        f"   {'policy: best of n':<28}{'DeepSeek loop (ms)':>19}{'vLLM numpy (ms)':>17}{'vLLM CPU (ms)':>15}"
        f"{'exact (ms)':>12}{'exact CPU (ms)':>16}{'vs loop':>9}{'vs vLLM':>9}{'(CPU)':>7}{'same as loop':>14}"
        f"{'same as vLLM':>14}"
    )
    weight = lognormal_loads(num_layers, 256, seed=0)
    figures = {}
    for label, num_groups in (("hierarchical (8 groups)", 8), ("global (4 groups / 8 nodes)", 4)):
        args = (weight, 320, num_groups, 8, 64)
        loop_best, _loop_median, loop, _loop_cpu = timed(lambda: rebalance_experts_reference(*args), loop_repeats)  # noqa: B023
        vllm_best, _vllm_median, vllm_phy2log, vllm_cpu = timed(lambda: vllm_numpy_rebalance(*args), vllm_repeats)  # noqa: B023
        fast_best, _fast_median, fast, fast_cpu = timed(lambda: rebalance_experts(*args), fast_repeats)  # noqa: B023
        same = all(torch.equal(a, b) for a, b in zip(fast, loop, strict=True))
        same_vllm = torch.equal(fast[0], vllm_phy2log)
        print(
            f"   {label:<28}{loop_best * 1e3:>19.1f}{vllm_best * 1e3:>17.1f}{vllm_cpu * 1e3:>15.1f}"
            f"{fast_best * 1e3:>12.2f}{fast_cpu * 1e3:>16.2f}{loop_best / fast_best:>8.0f}x"
            f"{vllm_best / fast_best:>8.1f}x{vllm_cpu / fast_cpu:>6.1f}x{str(same):>14}{str(same_vllm):>14}"
        )
        figures[label.split()[0]] = {
            "deepseek_loop_ms": loop_best * 1e3,
            "vllm_numpy_ms": vllm_best * 1e3,
            "vllm_numpy_cpu_ms": vllm_cpu * 1e3,
            "exact_ms": fast_best * 1e3,
            "exact_cpu_ms": fast_cpu * 1e3,
            "speedup_vs_vllm": vllm_best / fast_best,
            "cpu_speedup_vs_vllm": vllm_cpu / fast_cpu,
            "identical_to_loop": same,
        }
    return figures


def bench_improved(num_layers: int, repeats: int) -> None:
    print(f"\n2. improved vs exact, lognormal(0, 1) loads, {num_layers} layers x 256 -> 320, 8 nodes / 64 GPUs")
    print(f"   {'layout / mode':<36}{'max/mean (mean)':>16}{'(worst layer)':>14}{'dup layers':>12}{'off-home':>10}")
    weight = lognormal_loads(num_layers, 256, seed=1)
    slot_gpu = torch.repeat_interleave(torch.arange(64), gpu_slot_counts(320, 64, 8))
    for label, num_groups in (("groups == nodes (8)", 8), ("global (4 groups / 8 nodes)", 4)):
        exact, _log2phy, _logcnt = rebalance_experts(weight, 320, num_groups, 8, 64)
        improved_s, _improved_median, plan, improved_cpu_s = timed(
            lambda: plan_rebalance(weight, 320, num_groups, 8, 64, compare_exact=False),  # noqa: B023
            repeats,
        )
        for mode, phy2log, off_home in (("exact", exact, "-"), ("improved", plan.phy2log, plan.cross_node_load_share)):
            ratio = gpu_max_over_mean(phy2log, weight, slot_gpu)
            share = "-" if off_home in ("-", None) else f"{off_home:.1%}"
            print(
                f"   {label + ', ' + mode:<36}{float(ratio.mean()):>16.3f}{float(ratio.max()):>14.3f}"
                f"{duplicate_layer_share(phy2log, slot_gpu):>12.0%}{share:>10}"
            )
        print(
            f"   {'':<36}improved planner time, best of {repeats}: {improved_s * 1e3:.1f} ms wall, "
            f"{improved_cpu_s * 1e3:.1f} ms CPU"
        )


def bench_replicas(repeats: int) -> None:
    print("\n3. replica planner (torch, CPU): 256 experts, K = 2, 8 ranks per node, 131072 routed tokens, 70 % skew")
    print(
        f"   {'EP':>4}{'best (ms)':>11}{'before':>9}{'after':>9}{'slots used':>12}"
        f"{'x-node copies':>15}{'x-node tokens':>15}"
    )
    for num_ranks in (16, 32, 64):
        load = synthetic_load(num_ranks, 256, 131072, 1.70, seed=0)
        seconds, _median_s, plan, _cpu_s = timed(
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
    bench_exact(
        num_layers,
        fast_repeats=5 if options.quick else 21,
        loop_repeats=1 if options.quick else 3,
        vllm_repeats=2 if options.quick else 7,
    )
    bench_improved(num_layers, repeats=3 if options.quick else 11)
    bench_replicas(repeats=3 if options.quick else 21)


if __name__ == "__main__":
    main()
