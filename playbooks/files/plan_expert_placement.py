# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan an expert placement from tokens_per_expert records and write the file a training job loads.

Run by playbooks/rebalance.yml with the GPU node's interpreter that has moe_balance installed (the collection's
modules never import the package). Uses only the public API of ``moe_balance.placement``.

Movement-aware:
- hysteresis: a layer keeps the placement in service unless re-planning lowers its predicted max/mean GPU load by at
  least ``--min-gain`` (so the same records twice move nothing);
- a budget: when the moves would exceed ``--max-bytes-moved``, only the layers with the best gain per byte move.

Prints one JSON object (the report: predicted max/mean before and after, bytes moved, per-layer changes). With
``--check`` it plans and reports but writes nothing. The file format is documented in docs/expert-placement.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

SCHEMA = "hpc.balance.expert_placement/1"
RECORD_SCHEMA = "moe_balance.tokens_per_expert/1"


class PlanError(Exception):
    """Input that cannot be planned; the message names the value and the fix."""


def read_weights(path: Path, window: str) -> tuple[list[int], list[list[float]], dict]:
    """(layers, tokens per expert per layer, source summary) from a JSONL file; torn or foreign lines are skipped.

    ``last``: per layer, the records of its latest step (summed over ranks); ``all``: every step summed.
    """
    per_layer: dict[int, dict] = {}
    skipped = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if record.get("schema") != RECORD_SCHEMA:
                    raise ValueError(record.get("schema"))
                layer, step, counts = int(record["layer"]), int(record["step"]), record["tokens_per_expert"]
            except (ValueError, KeyError, TypeError, AttributeError):
                skipped += 1
                continue
            state = per_layer.get(layer)
            if state is None or (window == "last" and step > state["step"]):
                state = per_layer[layer] = {"step": step, "counts": [0] * len(counts), "steps": set()}
            elif window == "last" and step < state["step"]:
                continue
            if len(counts) != len(state["counts"]):
                raise PlanError(f"{path}: layer {layer} has records with {len(counts)} and {len(state['counts'])} "
                                f"experts; give the records of one model")
            state["counts"] = [a + b for a, b in zip(state["counts"], counts, strict=True)]
            state["steps"].add(step)
    if not per_layer:
        raise PlanError(f"{path} holds no {RECORD_SCHEMA} records ({skipped} lines skipped): point the rebalance at "
                        f"the JSONL the training monitor writes")
    layers = sorted(per_layer)
    widths = {len(per_layer[layer]["counts"]) for layer in layers}
    if len(widths) != 1:
        raise PlanError(f"{path}: layers have different expert counts {sorted(widths)}; give the records of one model")
    source = {"records": str(path), "window": window, "skipped_lines": skipped,
              "steps": sorted({step for layer in layers for step in per_layer[layer]["steps"]})[-3:]}
    return layers, [per_layer[layer]["counts"] for layer in layers], source


def read_placement(path: Path, layers: list[int], num_experts: int, num_replicas: int, num_gpus: int):
    """The phy2log in service from an earlier placement file, or None when there is none or it no longer fits."""
    if not path.exists():
        return None, "no placement file yet: the default layout (slot s holds expert s mod experts)"
    try:
        document = json.loads(path.read_text())
    except ValueError as exc:
        raise PlanError(f"{path} is not a placement file ({exc}); move it away or give another placement path") from exc
    fits = (document.get("schema") == SCHEMA and document.get("layers") == layers
            and document.get("num_experts") == num_experts and document.get("num_replicas") == num_replicas
            and document.get("num_gpus") == num_gpus)
    if not fits:
        return None, f"{path} was planned for another shape: the default layout"
    return document["phy2log"], f"the placement in {path}"


def default_layout(num_layers: int, num_experts: int, num_replicas: int) -> list[list[int]]:
    return [[slot % num_experts for slot in range(num_replicas)] for _layer in range(num_layers)]


def log2phy_of(phy2log: list[list[int]], num_experts: int, width: int) -> list[list[list[int]]]:
    result = []
    for row in phy2log:
        slots: list[list[int]] = [[] for _expert in range(num_experts)]
        for slot, expert in enumerate(row):
            slots[expert].append(slot)
        result.append([found + [-1] * (width - len(found)) for found in slots])
    return result


def choose_within_budget(gains: list[float], moved_bytes: list[int], budget: int | None) -> list[bool]:
    """Which re-planned layers move: all when within budget, else the best gain per byte first until it is spent."""
    moving = [moved > 0 for moved in moved_bytes]
    if budget is None or sum(moved_bytes) <= budget:
        return moving
    chosen = [False] * len(gains)
    spent = 0
    order = sorted((index for index, moved in enumerate(moved_bytes) if moved > 0),
                   key=lambda index: (-gains[index] / moved_bytes[index], index))
    for index in order:
        if spent + moved_bytes[index] <= budget:
            chosen[index] = True
            spent += moved_bytes[index]
    return chosen


def plan(args: argparse.Namespace) -> dict:
    # Imported here so that argument errors are reported without loading torch.
    import torch

    from moe_balance.placement import plan_rebalance

    layers, weights, source = read_weights(Path(args.records), args.window)
    num_experts = len(weights[0])
    num_replicas = num_experts + args.redundant_experts
    if num_replicas % args.num_gpus:
        raise PlanError(f"{num_experts} experts + {args.redundant_experts} redundant = {num_replicas} slots do not "
                        f"divide over {args.num_gpus} GPUs; choose redundant experts so that the slots divide evenly")
    placement_path = Path(args.placement)
    previous, previous_source = read_placement(placement_path, layers, num_experts, num_replicas, args.num_gpus)
    in_service = previous if previous is not None else default_layout(len(layers), num_experts, num_replicas)
    result = plan_rebalance(
        torch.tensor(weights, dtype=torch.float32), num_replicas, args.num_groups, args.num_nodes, args.num_gpus,
        previous=torch.tensor(in_service, dtype=torch.int64), min_gain=args.min_gain,
        expert_size_bytes=args.expert_size_bytes, log2phy_layout=args.log2phy_layout)
    before = [float(value) for value in result.previous_max_over_mean]
    planned = [float(value) for value in result.max_over_mean]
    moved_slots = [int(value) for value in result.moved_slots]
    moved_bytes = [slots * args.expert_size_bytes for slots in moved_slots]
    gains = [old - new for old, new in zip(before, planned, strict=True)]
    moving = choose_within_budget(gains, moved_bytes, args.max_bytes_moved)
    new_rows = result.phy2log.tolist()
    phy2log = [new_rows[index] if moving[index] else in_service[index] for index in range(len(layers))]
    after = [planned[index] if moving[index] else before[index] for index in range(len(layers))]
    logcnt = [[row.count(expert) for expert in range(num_experts)] for row in phy2log]
    width = max(max(row) for row in logcnt) if args.log2phy_layout == "eplb" else num_replicas - num_experts + 1
    document = {
        "schema": SCHEMA, "layers": layers, "num_experts": num_experts, "num_replicas": num_replicas,
        "num_gpus": args.num_gpus, "num_nodes": args.num_nodes, "num_groups": args.num_groups,
        "gpu_slot_counts": [num_replicas // args.num_gpus] * args.num_gpus, "log2phy_layout": args.log2phy_layout,
        "phy2log": phy2log, "log2phy": log2phy_of(phy2log, num_experts, width), "logcnt": logcnt,
        "predicted_max_over_mean": [round(value, 6) for value in after], "source": source,
    }
    text = json.dumps(document, indent=None, separators=(",", ":")) + "\n"
    changed = not placement_path.exists() or placement_path.read_text() != text
    if changed and not args.check:
        placement_path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".placement-", dir=str(placement_path.parent))
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, placement_path)
    moved_layers = [layers[index] for index in range(len(layers)) if moving[index]]
    over_budget = [layers[index] for index in range(len(layers)) if moved_bytes[index] and not moving[index]]
    return {
        "changed": changed, "check_mode": args.check, "placement_path": str(placement_path),
        "previous": previous_source, "layers": len(layers), "num_experts": num_experts,
        "num_replicas": num_replicas, "num_gpus": args.num_gpus,
        "max_over_mean_before": round(max(before), 6), "max_over_mean_after": round(max(after), 6),
        "mean_max_over_mean_before": round(sum(before) / len(before), 6),
        "mean_max_over_mean_after": round(sum(after) / len(after), 6),
        "bytes_moved": sum(moved_bytes[index] for index in range(len(layers)) if moving[index]),
        "moved_slots": sum(moved_slots[index] for index in range(len(layers)) if moving[index]),
        "layers_moved": moved_layers, "layers_over_budget": over_budget,
        "layers_kept": len(layers) - len(moved_layers),
        "changes": [f"layer {layers[index]}: max/mean {before[index]:.3f} -> {after[index]:.3f}, "
                    f"{moved_slots[index]} slots ({moved_bytes[index]} bytes) moved"
                    for index in range(len(layers)) if moving[index]],
        "source": source,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", required=True, help="tokens_per_expert JSONL (moe_balance monitor)")
    parser.add_argument("--placement", required=True, help="placement file to read (in service) and write")
    parser.add_argument("--num-gpus", type=int, required=True)
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--num-groups", type=int, default=1)
    parser.add_argument("--redundant-experts", type=int, default=0, help="extra slots for replicas of hot experts")
    parser.add_argument("--min-gain", type=float, default=0.02, help="least max/mean gain for a layer to move")
    parser.add_argument("--expert-size-bytes", type=int, required=True, help="bytes of one expert's weights")
    parser.add_argument("--max-bytes-moved", type=int, default=None, help="most bytes moved per rebalance")
    parser.add_argument("--window", choices=("last", "all"), default="last")
    parser.add_argument("--log2phy-layout", choices=("eplb", "vllm"), default="eplb")
    parser.add_argument("--check", action="store_true", help="plan and report, write nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("num_gpus", "num_nodes", "num_groups", "expert_size_bytes"):
        if getattr(args, name) < 1:
            print(json.dumps({"failed": True, "msg": f"--{name.replace('_', '-')} is {getattr(args, name)}: give a "
                                                     f"whole number of at least 1"}))
            return 2
    negative_budget = args.max_bytes_moved is not None and args.max_bytes_moved < 0
    if args.redundant_experts < 0 or args.min_gain < 0 or negative_budget:
        print(json.dumps({"failed": True, "msg": "--redundant-experts, --min-gain and --max-bytes-moved must not be "
                                                 "negative"}))
        return 2
    try:
        report = plan(args)
    except (PlanError, OSError, ValueError) as exc:
        print(json.dumps({"failed": True, "msg": str(exc)}))
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
