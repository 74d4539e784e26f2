"""Run one playbook once per extra-vars file, several at a time, and print each run's outcome as one JSON object.

Usage: python3 run_cases.py --jobs N PLAYBOOK INVENTORY CASE.yml [CASE.yml ...]

Each run is `ansible-playbook PLAYBOOK -i INVENTORY -e @CASE.yml`, with `--limit` when the case sets
`lvs_verify_limit`, summarised as in run_playbook.py; the result maps each case file's name to
{"rc", "tasks", "failures", "stderr", "seconds"}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_playbook import run  # noqa: E402


def run_case(playbook: str, inventory: str, case: str) -> dict:
    started = time.monotonic()
    limit = (yaml.safe_load(Path(case).read_text(encoding="utf-8")) or {}).get("lvs_verify_limit")
    outcome = run(playbook, ["--inventory", inventory, "--extra-vars", f"@{case}"]
                  + (["--limit", str(limit)] if limit else []))
    outcome["seconds"] = round(time.monotonic() - started, 1)
    return outcome


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("playbook")
    parser.add_argument("inventory")
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args(argv)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = pool.map(lambda case: run_case(args.playbook, args.inventory, case), args.cases)
        print(json.dumps({Path(case).name: outcome for case, outcome in zip(args.cases, outcomes, strict=True)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
