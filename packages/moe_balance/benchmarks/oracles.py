"""The tests' oracles (``tests/*.py`` of this package) loaded by their file for a benchmark or a GPU check step.

They are test code and not part of the installed package; loading one by path keeps ``tests/`` off ``sys.path``.
Each imports torch (and numpy) only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parents[1] / "tests"


def load_test_oracle(name: str) -> ModuleType:
    """``tests/<name>.py`` as a module; a checkout without ``tests/`` gets a message that says so."""
    path = TESTS / f"{name}.py"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: this compares against the tests' oracle; run it from a checkout of "
            "packages/moe_balance that has its tests/ folder"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
