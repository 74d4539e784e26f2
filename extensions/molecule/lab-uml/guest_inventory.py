#!/usr/bin/env python
"""Ansible inventory script: the lab guests' inventory (.lab/$LAB_PREFIX/inventory-uml.yml), or none before create.

molecule links its inventory sources before `create` runs, so a link to the generated file would not exist yet;
this script always exists and reads the file only when Ansible asks for hosts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY") or Path(__file__).resolve().parents[3])
DEFAULT_PREFIX = "hbm"


def inventory_path() -> Path:
    return PROJECT / ".lab" / (os.environ.get("LAB_PREFIX") or DEFAULT_PREFIX) / "inventory-uml.yml"


def to_script_inventory(data: dict) -> dict:
    """YAML inventory (all.vars + all.children.GROUP.hosts) -> the JSON shape of `--list`."""
    everything = data.get("all") or {}
    result = {"all": {"vars": everything.get("vars") or {}, "children": []}, "_meta": {"hostvars": {}}}
    for group, body in (everything.get("children") or {}).items():
        hosts = (body or {}).get("hosts") or {}
        result["all"]["children"].append(group)
        result[group] = {"hosts": sorted(hosts)}
        for host, host_vars in hosts.items():
            result["_meta"]["hostvars"][host] = host_vars or {}
    return result


def main(argv: list[str]) -> int:
    if "--host" in argv:
        print(json.dumps({}))
        return 0
    path = inventory_path()
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    print(json.dumps(to_script_inventory(data or {}), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
