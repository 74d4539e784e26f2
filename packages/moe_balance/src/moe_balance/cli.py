"""Command line: ``python -m moe_balance smoke [--json] [--records-out PATH]`` and ``report PATH [--json]``.

``smoke`` prints one JSON object with ``--json`` (keys: ok, version, device, checks, timings_s, records, devices,
runtime) and exits non-zero when any check fails. ``--device`` chooses where it runs (auto: every GPU torch sees, else
the CPU); ``--require-gpu`` fails instead of falling back to the CPU, ``--expect-gpus N`` fails unless torch sees N
GPUs (those visible to it: after ``CUDA_VISIBLE_DEVICES``, MIG instances as torch counts them), ``--allreduce``
all-reduces across the devices (one process each). ``--report-out`` writes the same object without its records to a
file. ``report`` summarises a JSONL file of tokens-per-expert records per layer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path


def _smoke(args: argparse.Namespace) -> int:
    from moe_balance.metrics import write_records
    from moe_balance.smoke import run_smoke

    result = run_smoke(
        device=args.device,
        seed=args.seed,
        require_gpu=args.require_gpu,
        expect_gpus=args.expect_gpus,
        allreduce=args.allreduce,
        allreduce_ranks=args.allreduce_ranks,
        allreduce_timeout_s=args.allreduce_timeout_s,
    )
    if args.records_out:
        write_records(args.records_out, result["records"])
    if args.report_out:
        report = {key: value for key, value in result.items() if key != "records"}
        Path(args.report_out).write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(result))
    else:
        device = result["device"]
        print(f"moe_balance {result['version']} on {device['device']} (kernel backend: {device['kernel_backend']})")
        for check in result["checks"]:
            print(f"  {'ok  ' if check['ok'] else 'FAIL'} {check['name']:<22} {json.dumps(check['detail'])}")
        for summary in result["devices"][1:]:
            print(f"  {'ok  ' if summary['ok'] else 'FAIL'} {summary['device']:<22} {summary.get('name', '')}")
        print(f"  total {result['timings_s']['total']:.2f} s: {'ok' if result['ok'] else 'FAILED'}")
    return 0 if result["ok"] else 1


def _report(args: argparse.Namespace) -> int:
    from moe_balance.metrics import balance_stats, read_records

    try:
        records, skipped = read_records(args.path)
    except OSError as error:
        print(f"cannot read {args.path}: {error.strerror}", file=sys.stderr)
        return 2
    latest: dict[int, dict] = {}
    for record in records:  # the latest window of each layer
        if record["layer"] not in latest or record["step"] >= latest[record["layer"]]["step"]:
            latest[record["layer"]] = record
    layers = []
    for layer, record in sorted(latest.items()):
        if sum(record["tokens_per_expert"]) == 0:
            continue
        stats = balance_stats(record["tokens_per_expert"])
        layers.append({"layer": layer, "step": record["step"], **stats})
    summary = {"records": len(records), "skipped_lines": skipped, "layers": layers}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{len(records)} records, {skipped} skipped lines")
        for s in layers:
            print(
                f"  layer {s['layer']:>3} step {s['step']:>8}  max/mean {s['max_over_mean']:.3f}  cv {s['cv']:.3f} "
                f"({s['grade']})  idle {s['idle_share']:.1%}  hot {s['hot_share']:.1%}"
            )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m moe_balance", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    smoke = commands.add_parser("smoke", help="check this host: kernel vs reference, losses, bias balancing")
    smoke.add_argument("--json", action="store_true", help="print one JSON object")
    smoke.add_argument("--records-out", metavar="PATH", help="append the synthetic run's records as JSONL")
    smoke.add_argument(
        "--device", default="auto", help="auto (every GPU torch sees, else cpu), all (every GPU), cpu, cuda:1, 0,2"
    )
    smoke.add_argument("--seed", type=int, default=0)
    smoke.add_argument("--require-gpu", action="store_true", help="fail when a device is not a GPU")
    smoke.add_argument(
        "--expect-gpus",
        type=int,
        metavar="N",
        help="fail unless torch sees N GPUs: the GPUs visible to torch (after CUDA_VISIBLE_DEVICES, MIG instances "
        "as torch counts them), not the physical count",
    )
    smoke.add_argument("--allreduce", action="store_true", help="all-reduce across the devices, one process each")
    smoke.add_argument("--allreduce-ranks", type=int, metavar="N", help="N ranks on the first device (gloo on a CPU)")
    smoke.add_argument("--allreduce-timeout-s", type=float, default=120.0)
    smoke.add_argument("--report-out", metavar="PATH", help="write the JSON result without its records to PATH")
    smoke.set_defaults(handler=_smoke)
    report = commands.add_parser("report", help="summarise a tokens-per-expert JSONL file")
    report.add_argument("path")
    report.add_argument("--json", action="store_true")
    report.set_defaults(handler=_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)
