"""gpu_check's kernel_tests step: the kernel test files under pytest, compiled on a GPU.

Imports no torch itself (pytest's process does): the step costs only the tests.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1]
KERNEL_TESTS = ("tests/test_kernel_router_stats.py", "tests/test_replica_kernels.py", "tests/test_kernel_fallback.py")
OUTPUT_TAIL_CHARS = 3000


def missing_modules(test_file: Path) -> list[str]:
    """Third-party modules a test file imports at its top level that this interpreter cannot import."""
    roots: set[str] = set()
    for node in ast.parse(test_file.read_text()).body:
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return sorted(r for r in roots if r not in sys.stdlib_module_names and importlib.util.find_spec(r) is None)


def kernel_tests(mode: str) -> dict[str, Any]:
    """The kernel test files under pytest (compiled on a GPU, the interpreter in the dry run), from its JUnit XML."""
    if importlib.util.find_spec("pytest") is None:
        return {"ok": True, "skipped": "pytest not installed"}
    files_skipped = {}
    runnable = []
    for name in KERNEL_TESTS:
        missing = missing_modules(PACKAGE / name)
        if missing:
            files_skipped[name] = f"{', '.join(missing)} not installed"
        else:
            runnable.append(name)
    if not runnable:
        return {"ok": True, "skipped": "no kernel test file can be imported here", "files_skipped": files_skipped}
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *runnable]
        start = time.perf_counter()
        completed = subprocess.run(command, cwd=PACKAGE, capture_output=True, text=True)
        wall_s = time.perf_counter() - start
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if report.exists():
            for suite in ElementTree.parse(report).getroot().iter("testsuite"):
                for key in counts:
                    counts[key] += int(suite.get(key, 0))
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    result: dict[str, Any] = {
        "ok": completed.returncode == 0 and passed > 0,
        "interpreter": mode != "gpu",
        "passed": passed,
        "failed": counts["failures"] + counts["errors"],
        "skipped_tests": counts["skipped"],
        "files_skipped": files_skipped,
        "wall_s": round(wall_s, 2),
    }
    if not result["ok"]:
        result["output_tail"] = (completed.stdout + completed.stderr)[-OUTPUT_TAIL_CHARS:]
    return result
