"""Expert-parallel executor benchmark: what the per-micro-batch replica plan does to a skewed routing, measured.

Run from packages/moe_balance:  PYTHONPATH=src python benchmarks/expert_parallel.py  [--quick] [--json PATH]

4 ranks as 2 nodes x 2 (gloo on this host's CPU, one process per rank), 16 experts (4 per rank), top-2, 70 % of the
token-expert pairs on a quarter of the experts. Two layouts of that hot quarter: on one rank (experts 0-3, the worst
case) and spread (experts 0, 4, 8, 12, one per rank). For each, without replicas (K = 0) and with K = 2 spare slots
per rank, it runs micro-batches forward and backward through ``ExpertParallelMoE`` and prints, averaged over them:
tokens computed per rank max/mean (measured from the exchange) against the plan's prediction, spare slots used, and
the bytes sent between ranks within and across nodes (activations: dispatch + combine, forward; guest weights,
forward; backward moves as much again). Wall time per micro-batch is gloo on a shared CPU: an illustration only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE, RANKS_PER_NODE, EXPERTS, TOP_K, SPARE_SLOTS = 4, 2, 16, 2, 2
HOT_SHARE = 0.7
LAYOUTS = {"hot on one rank": [0, 1, 2, 3], "hot spread": [0, 4, 8, 12]}


def skewed_topk(tokens: int, hot: list[int], generator: torch.Generator) -> torch.Tensor:
    """(tokens, TOP_K) distinct experts per token; HOT_SHARE of the pairs on ``hot``, in expectation."""
    weight = torch.full((EXPERTS,), (1 - HOT_SHARE) / (EXPERTS - len(hot)))
    weight[hot] = HOT_SHARE / len(hot)
    return torch.stack([torch.multinomial(weight, TOP_K, generator=generator) for _token in range(tokens)])


def _rank(rank: int, store_path: str, sizes: dict, out_path: str) -> None:
    from moe_balance.expert_parallel import ExpertParallelConfig, ExpertParallelMoE, gather_execution_record

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    store = dist.FileStore(store_path, WORLD_SIZE)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, store=store, timeout=timedelta(seconds=60))
    rows = []
    for layout, hot in LAYOUTS.items():
        for spares in (0, SPARE_SLOTS):
            config = ExpertParallelConfig(
                num_experts=EXPERTS,
                slots_per_rank=EXPERTS // WORLD_SIZE,
                d_model=sizes["d_model"],
                d_ff=sizes["d_ff"],
                ranks_per_node=RANKS_PER_NODE,
                spare_slots_per_rank=spares,
            )
            layer = ExpertParallelMoE(config)
            generator = torch.Generator().manual_seed(rank)
            records, seconds = [], []
            for step in range(sizes["micro_batches"]):
                x = torch.randn(sizes["tokens"], sizes["d_model"], generator=generator, requires_grad=True)
                topk_idx = skewed_topk(sizes["tokens"], hot, generator)
                gates = torch.softmax(torch.randn(sizes["tokens"], TOP_K, generator=generator), dim=-1)
                dist.barrier()
                start = time.perf_counter()
                layer(x, topk_idx, gates).square().sum().backward()
                seconds.append(time.perf_counter() - start)
                stats = layer.last_stats
                if stats is None:  # not reached: every forward sets it
                    raise RuntimeError("the layer kept no stats of its forward")
                records.append(
                    gather_execution_record(
                        stats,
                        step=step,
                        layer=0,
                        ranks_per_node=RANKS_PER_NODE,
                        spare_slots_per_rank=spares,
                    )
                )
            rows.append({"layout": layout, "spare_slots_per_rank": spares, "records": records, "seconds": seconds})
    if rank == 0:
        with open(out_path, "w", encoding="utf-8") as handle:
            json.dump(rows, handle)
    dist.destroy_process_group()


def summarise(row: dict) -> dict:
    records = row["records"]

    def mean(key: str) -> float:
        return statistics.fmean(record[key] for record in records)

    return {
        "layout": row["layout"],
        "spare_slots_per_rank": row["spare_slots_per_rank"],
        "routed_max_over_mean": round(mean("routed_max_over_mean"), 3),
        "computed_max_over_mean": round(mean("computed_max_over_mean"), 3),
        "predicted_max_over_mean": round(mean("predicted_max_over_mean"), 3),
        "computed_equals_predicted": all(
            r["tokens_computed_per_rank"] == r["tokens_predicted_per_rank"] for r in records
        ),
        "replicas": round(mean("replicas"), 2),
        "token_bytes_within_node": round(mean("token_bytes_within_node")),
        "token_bytes_across_nodes": round(mean("token_bytes_across_nodes")),
        "weight_bytes_within_node": round(mean("weight_bytes_within_node")),
        "weight_bytes_across_nodes": round(mean("weight_bytes_across_nodes")),
        "seconds_per_micro_batch": round(statistics.median(row["seconds"]), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller layer, fewer micro-batches (a smoke run)")
    parser.add_argument("--json", help="also write the summary rows to this file")
    args = parser.parse_args()
    sizes = {"d_model": 64, "d_ff": 128, "tokens": 512, "micro_batches": 8}
    if args.quick:
        sizes = {"d_model": 32, "d_ff": 64, "tokens": 128, "micro_batches": 3}
    with tempfile.TemporaryDirectory() as folder:
        out_path = os.path.join(folder, "rows.json")
        mp.spawn(_rank, args=(os.path.join(folder, "store"), sizes, out_path), nprocs=WORLD_SIZE, join=True)
        with open(out_path, encoding="utf-8") as handle:
            summary = [summarise(row) for row in json.load(handle)]
    print(
        f"{WORLD_SIZE} ranks ({WORLD_SIZE // RANKS_PER_NODE} nodes x {RANKS_PER_NODE}), {EXPERTS} experts, "
        f"top-{TOP_K}, "
        f"{sizes['tokens']} tokens per rank, d_model {sizes['d_model']}, d_ff {sizes['d_ff']}, float32, "
        f"{sizes['micro_batches']} micro-batches; {HOT_SHARE:.0%} of pairs on a quarter of the experts"
    )
    header = (
        f"{'layout':<16} {'K':>2} {'routed':>7} {'computed':>9} {'predicted':>10} {'=plan':>6} {'replicas':>9} "
        f"{'tok B in-node':>14} {'tok B x-node':>13} {'wt B in-node':>13} {'wt B x-node':>12} {'s/mb':>7}"
    )
    print("max/mean tokens computed per rank; bytes per micro-batch, forward (backward moves as much again)")
    print(header)
    for row in summary:
        print(
            f"{row['layout']:<16} {row['spare_slots_per_rank']:>2} {row['routed_max_over_mean']:>7.3f} "
            f"{row['computed_max_over_mean']:>9.3f} {row['predicted_max_over_mean']:>10.3f} "
            f"{'yes' if row['computed_equals_predicted'] else 'NO':>6} {row['replicas']:>9} "
            f"{row['token_bytes_within_node']:>14} {row['token_bytes_across_nodes']:>13} "
            f"{row['weight_bytes_within_node']:>13} {row['weight_bytes_across_nodes']:>12} "
            f"{row['seconds_per_micro_batch']:>7.4f}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"sizes": sizes, "rows": summary}, handle, indent=1)


if __name__ == "__main__":
    main()
