"""Fail on any PowerShell file in the tree that does not parse (tree-sitter-powershell grammar).

No PowerShell runtime installs on these machines, so this is the syntax gate for the Windows modules: a .ps1 that
fails to parse fails `make lint` / `make test`. The grammar is stricter than PowerShell in a few corners (it rejects
e.g. a `param(...)` block followed by a statement on the same line), so the modules keep to plain, conventional
layout.

Usage: python tests/ps1/check_ps1_parse.py [ROOT]   (exit 1 and one line per error when any file fails)
"""

from __future__ import annotations

import sys
from pathlib import Path

import tree_sitter
import tree_sitter_powershell

SKIP_DIRS = {".git", ".venv", ".venv-tools", ".work", ".lab", "collections", "node_modules", "output", "__pycache__"}
SUFFIXES = (".ps1", ".psm1")


def parser():
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_powershell.language()))


def powershell_files(root):
    """Every .ps1/.psm1 under root, skipping tool state and the collections link tree."""
    found = []
    for path in sorted(Path(root).rglob("*")):
        if path.suffix.lower() in SUFFIXES and path.is_file():
            if not SKIP_DIRS.intersection(part for part in path.relative_to(root).parts[:-1]):
                found.append(path)
    return found


def parse_errors(source, ps_parser=None):
    """[(line, column, text)] of every ERROR or MISSING node (1-based line and column); [] when the file parses."""
    tree = (ps_parser or parser()).parse(source)
    errors = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            row, column = node.start_point
            text = node.text.decode("utf-8", "replace").splitlines()[0][:60] if node.text else node.type
            errors.append((row + 1, column + 1, ("missing " + node.type) if node.is_missing else text))
        elif node.has_error:
            stack.extend(reversed(node.children))
    return sorted(errors)


def main(argv):
    root = Path(argv[1] if len(argv) > 1 else ".").resolve()
    ps_parser = parser()
    files = powershell_files(root)
    failures = 0
    for path in files:
        for line, column, text in parse_errors(path.read_bytes(), ps_parser):
            failures += 1
            print(f"{path.relative_to(root)}:{line}:{column}: PowerShell parse error near {text!r}")
    file_s = "" if len(files) == 1 else "s"
    error_s = "" if failures == 1 else "s"
    print(f"checked {len(files)} PowerShell file{file_s}, {failures} parse error{error_s}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
