"""Command line: ``python -m moe_balance smoke [--json] [--records-out PATH]`` and ``report PATH [--json]``.

``smoke`` prints one JSON object with ``--json`` (keys: ok, version, device, checks, timings_s, records) and exits
non-zero when any check fails. ``report`` summarises a JSONL file of tokens-per-expert records per layer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def _smoke(args: argparse.Namespace) -> int:
    from moe_balance.metrics import write_records
    from moe_balance.smoke import run_smoke

    result = run_smoke(device=args.device, seed=args.seed)
    if args.records_out:
        write_records(args.records_out, result["records"])
    if args.json:
        print(json.dumps(result))
    else:
        device = result["device"]
        print(f"moe_balance {result['version']} on {device['device']} (kernel backend: {device['kernel_backend']})")
        for check in result["checks"]:
            print(f"  {'ok  ' if check['ok'] else 'FAIL'} {check['name']:<22} {json.dumps(check['detail'])}")
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
    smoke.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1, ...")
    smoke.add_argument("--seed", type=int, default=0)
    smoke.set_defaults(handler=_smoke)
    report = commands.add_parser("report", help="summarise a tokens-per-expert JSONL file")
    report.add_argument("path")
    report.add_argument("--json", action="store_true")
    report.set_defaults(handler=_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)
