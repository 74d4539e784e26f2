#!/usr/bin/env python
"""Ansible inventory script for molecule scenarios: the running lab's inventory, or an empty one.

Molecule resolves its inventory links before `create` has brought the lab up, so a scenario cannot link the lab's
inventory file directly. This script stands in its place: it reads `<repo>/.lab/$LAB_PREFIX/inventory.yml` when
the lab is up and answers Ansible's `--list` with it (script inventory JSON); before that, with no hosts.
A scenario on the real-kernel guests sets LAB_INVENTORY_FILE=inventory-uml.yml (provisioner.env) to read theirs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


def _walk(name, group, result):
    """Flatten one YAML inventory group (and its children) into script-inventory JSON."""
    entry = result.setdefault(name, {"hosts": [], "vars": {}, "children": []})
    for host, host_vars in ((group or {}).get("hosts") or {}).items():
        entry["hosts"].append(host)
        result["_meta"]["hostvars"].setdefault(host, {}).update(host_vars or {})
    entry["vars"].update((group or {}).get("vars") or {})
    for child, child_group in ((group or {}).get("children") or {}).items():
        entry["children"].append(child)
        _walk(child, child_group, result)


def lab_inventory(prefix, file_name="inventory.yml"):
    result = {"_meta": {"hostvars": {}}}
    path = REPO_ROOT / ".lab" / prefix / file_name
    if path.is_file():
        data = yaml.safe_load(path.read_text()) or {}
        _walk("all", data.get("all"), result)
    return result


def main(argv):
    if "--host" in argv:
        print(json.dumps({}))
        return 0
    prefix = os.environ.get("LAB_PREFIX") or "hbm"
    print(json.dumps(lab_inventory(prefix, os.environ.get("LAB_INVENTORY_FILE") or "inventory.yml"), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
