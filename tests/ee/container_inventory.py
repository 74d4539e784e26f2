"""Write the lab's inventory as a controller inside the execution environment sees the lab.

Outside, ssh reaches the lab through ``ip netns exec <prefix>-sw nc`` (a ProxyCommand): the switch namespace is the
only way in. The container runs inside that namespace (``podman run --network ns:/run/netns/<prefix>-sw``), so it
connects to each host's address directly: the ProxyCommand goes, and the ssh control sockets move to a folder of
the container's own (the outside ones belong to the outside controller). Every other host variable, the lab key's
path included, stays as the lab wrote it.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shlex
import sys

import yaml

CONTROL_PATH = "/tmp/cp-%h"


def direct_ssh_args(common_args: str) -> str:
    """The same ssh options without the ProxyCommand, with the container's ControlPath."""
    words = shlex.split(common_args)
    kept: list[str] = []
    i = 0
    while i < len(words):
        if words[i] == "-o" and i + 1 < len(words):
            option = words[i + 1]
            name = re.split(r"[ =]", option, maxsplit=1)[0].lower()
            if name == "proxycommand":
                i += 2
                continue
            if name == "controlpath":
                option = f"ControlPath={CONTROL_PATH}"
            kept += ["-o", option]
            i += 2
        else:
            kept.append(words[i])
            i += 1
    return shlex.join(kept)


def rewrite(node: object) -> object:
    """Apply direct_ssh_args to every ansible_ssh_common_args in an inventory tree."""
    if isinstance(node, dict):
        return {key: direct_ssh_args(value) if key == "ansible_ssh_common_args" and isinstance(value, str)
                else rewrite(value) for key, value in node.items()}
    if isinstance(node, list):
        return [rewrite(item) for item in node]
    return node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=pathlib.Path, help="the inventory the lab wrote")
    parser.add_argument("dest", type=pathlib.Path)
    args = parser.parse_args(argv)
    inventory = rewrite(yaml.safe_load(args.source.read_text()))
    args.dest.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
