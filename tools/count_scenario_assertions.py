"""Count what the molecule scenarios assert, so a change that folds or speeds them up can show it kept every check.

    python3 tools/count_scenario_assertions.py [extensions/molecule]

Counts, per scenario and in all: each condition of an ``assert`` task's ``that`` (a string counts as one), and each
``fail`` task. Needs PyYAML (the tool environments have it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ASSERT_MODULES = {"assert", "ansible.builtin.assert"}
FAIL_MODULES = {"fail", "ansible.builtin.fail"}


def count_in(node: object) -> int:
    """Conditions asserted and fail tasks anywhere in a parsed playbook or task file."""
    if isinstance(node, list):
        return sum(count_in(item) for item in node)
    if not isinstance(node, dict):
        return 0
    found = 0
    for key, value in node.items():
        if key in ASSERT_MODULES and isinstance(value, dict):
            that = value.get("that")
            found += len(that) if isinstance(that, list) else 1
        elif key in FAIL_MODULES:
            found += 1
        elif isinstance(value, (list, dict)):
            found += count_in(value)
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "extensions/molecule")
    total = 0
    for scenario in sorted(path for path in root.iterdir() if (path / "molecule.yml").is_file()):
        count = sum(count_in(yaml.safe_load(path.read_text(encoding="utf-8")))
                    for path in sorted(scenario.rglob("*.yml")) if path.name != "molecule.yml")
        total += count
        print(f"{scenario.name:<12}{count:>6}")
    print(f"{'total':<12}{total:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
