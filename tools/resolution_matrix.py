"""Resolve the gpu_moe stack with pip against a package index for each Python version and machine; print a table.

Why: a pin that resolves on one Python can fail on a host's (numpy 2.4.6 has no CPython 3.10 wheel), and a wheelhouse
download that names too few manylinux tags misses CUDA wheels tagged for an older glibc. pip's own resolver answers
both without installing anything: `pip install --dry-run --ignore-installed --report` with --only-binary=:all:,
--implementation cp, --python-version, --abi and the --platform tags of the wheelhouse download (moe_pins.py, from
the role's plan_wheelhouse.py), the tag rules `pip download` applies too.

Two stacks: `role` (the role's defaults: torch, triton, gpu_moe_pinned_packages and moe_balance's own dependencies)
and `moe.txt` (requirements/moe.txt). A Python below the role's gpu_moe_min_python is not resolved for the role: its
cell is marked refused with preflight's message.

pip evaluates environment markers (the `python_version` of moe.txt) for the interpreter that runs it, not for
--python-version (pypa/pip#11010), so each Python version runs pip under an interpreter of that version (found on
PATH as pythonX.Y, or given with --python X.Y=PATH). Markers on platform_machine are evaluated for this machine in
every column; torch 2.13.0 declares such markers only under extras it does not ask for. --pip-version (default 26.3)
fetches that pip's wheel once, checks its sha256 and runs pip from it under each interpreter, so every cell has the
same resolver; a current pip resolves a dry run from the index's PEP 658 metadata where the index serves it
(pypa/pip#12603) and downloads each wheel it picks where it does not (2.6 to 2.7 GiB a cell).

pip's report names each wheel's URL but not its size: the download size is the sum of a HEAD request's
Content-Length per URL (--no-sizes skips them). Standard library only; needs the network (`make resolution-matrix`).

    resolution_matrix.py [--python 3.10=/usr/bin/python3.10 ...] [--machine x86_64 ...] [--stack role ...]
        [--index-url URL] [--pip-version 26.3] [--timeout-s 600] [--workers 4] [--out FILE] [--no-sizes]

Exit 0 when every cell resolves or is refused, 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import moe_pins

PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MACHINES = ("x86_64", "aarch64")
STACKS = ("role", "moe.txt")
PIP_VERSION = "26.3"
# The words of preflight's "Stop when the interpreter is missing or too old" (roles/gpu_moe/tasks/preflight.yml).
REFUSAL = (
    "gpu_moe_python {interpreter} on HOST is Python {python}; torch {torch} needs Python {minimum} or later. "
    "Nothing was changed."
)


@dataclass
class Cell:
    stack: str
    python_version: str
    machine: str
    status: str = "pending"  # resolved, failed, timed_out, refused, no_interpreter
    interpreter: str = ""
    torch: str | None = None
    triton: str | None = None
    numpy: str | None = None
    packages: int = 0
    download_size_bytes: int | None = None
    wall_s: float = 0.0
    pip_version: str | None = None
    errors: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def summarize_report(report: dict) -> dict:
    """The versions pip picked for torch, triton and numpy, the package count and the wheel URLs of a --report."""
    installs = report["install"]
    versions = {normalize(item["metadata"]["name"]): item["metadata"]["version"] for item in installs}
    return {
        "torch": versions.get("torch"),
        "triton": versions.get("triton"),
        "numpy": versions.get("numpy"),
        "packages": len(installs),
        "urls": [item["download_info"]["url"] for item in installs],
        "pip_version": report.get("pip_version"),
    }


def error_lines(stderr: str) -> list[str]:
    """pip's ERROR lines; the last lines of its output where it printed none (a traceback, a crash)."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return errors or lines[-5:]


def pip_arguments(cell: Cell, requirements: list[str], report: Path, target: Path, index_url: str) -> list[str]:
    """`pip install --dry-run` of the requirements for the cell's Python and machine, with the wheelhouse's tags."""
    arguments = [
        "install",
        "--isolated",
        "--disable-pip-version-check",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--report",
        str(report),
        "--target",
        str(target),
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        cell.python_version,
        "--abi",
        "cp" + cell.python_version.replace(".", ""),
        "--index-url",
        index_url,
    ]
    for tag in moe_pins.platform_tags(cell.machine):
        arguments += ["--platform", tag]
    return arguments + requirements


def refusal(cell: Cell, minimum: str, torch: str) -> str | None:
    """Preflight's message where the role refuses the cell's Python, else None (only the role's stack is refused)."""
    if cell.stack != "role" or moe_pins.version_tuple(cell.python_version) >= moe_pins.version_tuple(minimum):
        return None
    return REFUSAL.format(
        interpreter=cell.interpreter or f"python{cell.python_version}",
        python=cell.python_version,
        torch=torch,
        minimum=minimum,
    )


class Sizes:
    """Content-Length of each wheel URL, asked once per URL across all cells."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.known: dict[str, int | None] = {}
        self.lock = threading.Lock()

    def size_bytes(self, url: str) -> int | None:
        with self.lock:
            if url in self.known:
                return self.known[url]
        parsed = urllib.parse.urlparse(url)
        try:
            if parsed.scheme == "file":
                size = Path(urllib.parse.unquote(parsed.path)).stat().st_size
            else:
                with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=self.timeout_s) as r:
                    size = int(r.headers["Content-Length"])
        except (OSError, KeyError, TypeError, ValueError):
            size = None
        with self.lock:
            self.known[url] = size
        return size

    def total_bytes(self, urls: list[str]) -> int | None:
        sizes = [self.size_bytes(url) for url in urls]
        return None if None in sizes else sum(sizes)


def fetch_pip(version: str, index_url: str, cache_dir: Path) -> Path:
    """pip's own wheel from the index (PEP 691 JSON), checked against the index's sha256; kept in cache_dir."""
    filename = f"pip-{version}-py3-none-any.whl"
    wheel = cache_dir / filename
    if wheel.is_file():
        return wheel
    request = urllib.request.Request(
        index_url.rstrip("/") + "/pip/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = {item["filename"]: item for item in json.load(response)["files"]}
    if filename not in files:
        raise SystemExit(f"resolution_matrix: {index_url} has no {filename}; give a --pip-version it serves")
    with urllib.request.urlopen(urllib.parse.urljoin(response.url, files[filename]["url"]), timeout=300) as response:
        data = response.read()
    if hashlib.sha256(data).hexdigest() != files[filename]["hashes"]["sha256"]:
        raise SystemExit(f"resolution_matrix: {filename} from {index_url} does not match the index's sha256")
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = wheel.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(wheel)
    return wheel


def find_interpreter(python_version: str, given: dict[str, str]) -> tuple[str, str | None]:
    """(path, problem): the interpreter for a Python version and why it cannot be used, if it cannot."""
    path = given.get(python_version) or shutil.which(f"python{python_version}") or ""
    if not path:
        return "", f"no python{python_version} on PATH; install it or pass --python {python_version}=PATH"
    try:
        done = subprocess.run(
            [path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        said = done.stdout.strip() or (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
    except (OSError, subprocess.TimeoutExpired) as error:
        said = str(error)
    if said != python_version:
        return path, f"{path} is not a working Python {python_version} ({said}); pass --python {python_version}=PATH"
    return path, None


def resolve_cell(cell: Cell, pip: list[str], requirements: list[str], args: argparse.Namespace, sizes: Sizes | None):
    """Run pip for one cell and fill in what it picked, or why it failed."""
    started = time.monotonic()
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    with tempfile.TemporaryDirectory(prefix="resolution_matrix_") as tmp:
        report = Path(tmp) / "report.json"
        arguments = pip_arguments(cell, requirements, report, Path(tmp) / "never-created", args.index_url)
        cell.command = ["python" + cell.python_version, *pip[1:], *arguments]
        try:
            done = subprocess.run(
                [cell.interpreter, *pip[1:], *arguments],
                capture_output=True,
                text=True,
                env=env,
                timeout=args.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            cell.status, cell.errors = "timed_out", [f"pip did not finish within {args.timeout_s} s (--timeout-s)"]
        else:
            if done.returncode == 0 and report.is_file():
                summary = summarize_report(json.loads(report.read_text()))
                cell.status = "resolved"
                cell.torch, cell.triton, cell.numpy = summary["torch"], summary["triton"], summary["numpy"]
                cell.packages, cell.pip_version = summary["packages"], summary["pip_version"]
                cell.download_size_bytes = sizes.total_bytes(summary["urls"]) if sizes else None
            else:
                cell.status, cell.errors = "failed", error_lines(done.stderr or done.stdout)
    cell.wall_s = round(time.monotonic() - started, 1)
    return cell


def gib(size_bytes: int | None) -> str:
    return "-" if size_bytes is None else f"{size_bytes / 2**30:.2f} GiB"


def table(cells: list[Cell]) -> str:
    """The matrix as text: one row per cell, then the reason of each cell that did not resolve."""
    header = ("stack", "python", "machine", "result", "torch", "triton", "numpy", "packages", "download", "wall")
    rows = [header]
    for cell in cells:
        rows.append(
            (
                cell.stack,
                cell.python_version,
                cell.machine,
                cell.status,
                cell.torch or "-",
                cell.triton or "-",
                cell.numpy or "-",
                str(cell.packages) if cell.resolved else "-",
                gib(cell.download_size_bytes),
                f"{cell.wall_s:.1f} s",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    for cell in cells:
        for error in cell.errors:
            lines.append(f"{cell.stack} / Python {cell.python_version} / {cell.machine}: {error}")
    return "\n".join(lines) + "\n"


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="X.Y=PATH",
        help="the interpreter of a Python version (default: pythonX.Y on PATH); repeat for more",
    )
    parser.add_argument("--pythons", default=",".join(PYTHONS), help="the Python versions (default %(default)s)")
    parser.add_argument("--machine", action="append", choices=MACHINES, help="default: both")
    parser.add_argument("--stack", action="append", choices=STACKS, help="default: both")
    parser.add_argument("--index-url", default="https://pypi.org/simple")
    parser.add_argument(
        "--pip-version",
        default=PIP_VERSION,
        help="run this pip from its wheel (default %(default)s); empty = each interpreter's own pip",
    )
    parser.add_argument("--cache-dir", type=Path, default=moe_pins.ROOT / ".work" / "resolution-matrix")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per cell (default %(default)s)")
    parser.add_argument("--workers", type=int, default=4, help="pip runs at once (default %(default)s)")
    parser.add_argument("--out", type=Path, default=moe_pins.ROOT / ".work" / "resolution-matrix.json")
    parser.add_argument("--no-sizes", action="store_true", help="skip the HEAD requests for the download size")
    return parser.parse_args(argv)


def plan_cells(args: argparse.Namespace) -> tuple[list[Cell], list[Cell]]:
    """(every cell, the cells to resolve): a Python the role refuses, or one without an interpreter, is not run."""
    given = dict(item.split("=", 1) for item in args.python)
    minimum = str(moe_pins.role_variables(moe_pins.ROLE / "vars" / "main.yml")["gpu_moe_min_python"])
    torch = str(moe_pins.role_variables(moe_pins.ROLE / "defaults" / "main.yml")["gpu_moe_torch_version"])
    cells, work = [], []
    for stack in args.stack or STACKS:
        for python_version in args.pythons.split(","):
            interpreter, problem = find_interpreter(python_version, given)
            for machine in args.machine or MACHINES:
                cell = Cell(stack, python_version, machine, interpreter=interpreter)
                cells.append(cell)
                message = refusal(cell, minimum, torch)
                if message:
                    cell.status, cell.errors = "refused", [message]
                elif problem:
                    cell.status, cell.errors = "no_interpreter", [problem]
                else:
                    work.append(cell)
    return cells, work


def main(argv: list[str]) -> int:
    args = parse_arguments(argv)
    started = time.monotonic()
    pip = ["python", "-m", "pip"]
    if args.pip_version:
        pip = ["python", str(fetch_pip(args.pip_version, args.index_url, args.cache_dir)) + "/pip"]
    requirements = {"role": moe_pins.role_requirements(), "moe.txt": ["-r", str(moe_pins.MOE_REQUIREMENTS)]}
    cells, work = plan_cells(args)
    sizes = None if args.no_sizes else Sizes(timeout_s=60)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
        list(pool.map(lambda cell: resolve_cell(cell, pip, requirements[cell.stack], args, sizes), work))
    wall_s = round(time.monotonic() - started, 1)
    sys.stdout.write(table(cells))
    print(f"resolution_matrix: {len(cells)} cells in {wall_s} s against {args.index_url}; JSON in {args.out}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "generated_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "index_url": args.index_url,
        "pip_version": args.pip_version or "each interpreter's own",
        "wall_s": wall_s,
        "requirements": requirements,
        "cells": [{**asdict(cell), "resolved": cell.resolved} for cell in cells],
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if all(cell.status in ("resolved", "refused") for cell in cells) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
