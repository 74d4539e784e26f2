"""Build the moe_balance wheel on the controller, reproducibly, and print where it is and its sha256 as JSON.

Runs on the Ansible controller with the controller's own Python (it never imports moe_balance). The source tree is
copied to a scratch folder first (only pyproject.toml, the top-level metadata files and src/, without caches or
*.egg-info), so the collection's own tree is never written to and stale build/ folders cannot leak into the wheel.
By default pure_wheel.py writes the wheel with the standard library alone, so a stock controller (no `wheel`
package, setuptools older than 70.1, no index) builds it; --build-isolation has pip build it with setuptools fetched
from an index instead. Fixed timestamps (SOURCE_DATE_EPOCH for pip) and file modes: the same source gives the same
bytes, so the role can tell "already installed" from "changed" by comparing hashes instead of timestamps.

Usage: build_wheel.py --source DIR --dest DIR [--build-isolation]
Exit 0 with one JSON object on stdout: {"path", "filename", "name", "version", "sha256", "size_bytes"};
exit 2 with a one-line explanation on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Run by path, so this folder is on sys.path: one sha256 helper for the wheel and the wheelhouse plan.
from plan_wheelhouse import sha256_of
from pure_wheel import WheelError, write_wheel

# 1980-01-01, the earliest time a zip entry can carry.
FIXED_SOURCE_DATE_EPOCH = "315532800"
TOP_LEVEL_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "MANIFEST.in", "README.md", "README.rst", "LICENSE")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache", ".hypothesis")


class BuildError(Exception):
    """A problem the user can fix; the message says what and how."""


def copy_sources(source: Path, scratch: Path) -> None:
    if not (source / "pyproject.toml").is_file():
        raise BuildError(
            f"no pyproject.toml in {source}: gpu_moe_package_source must point at the moe_balance project "
            "(the collection's packages/moe_balance)"
        )
    for name in TOP_LEVEL_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, scratch / name)
    if (source / "src").is_dir():
        shutil.copytree(source / "src", scratch / "src", ignore=IGNORED)
    # File modes go into the wheel too: make them independent of the checkout's umask.
    for path in scratch.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def build_with_pip(source: Path, scratch: Path, out: Path) -> None:
    """pip wheel in an isolated build environment: setuptools and wheel come from the index pip is configured for."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(scratch)]
    env = dict(os.environ, SOURCE_DATE_EPOCH=FIXED_SOURCE_DATE_EPOCH, PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-8:]
        raise BuildError(
            f"pip could not build the moe_balance wheel from {source} in an isolated environment (it needs pip "
            f"and a package index that serves setuptools and wheel; gpu_moe_build_isolation: false needs "
            f"neither): {' | '.join(tail)}"
        )


def build(source: Path, dest: Path, build_isolation: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpu_moe_build_") as tmp:
        scratch, out = Path(tmp) / "src", Path(tmp) / "out"
        scratch.mkdir()
        copy_sources(source, scratch)
        if build_isolation:
            build_with_pip(source, scratch, out)
        else:
            try:
                write_wheel(scratch, out)
            except WheelError as error:
                raise BuildError(
                    f"cannot write the moe_balance wheel from {source} with the standard library: {error}; "
                    "set gpu_moe_build_isolation: true where the controller reaches a package index"
                ) from error
        wheels = sorted(out.glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"the build left {len(wheels)} wheels in {out}, expected exactly one")
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / wheels[0].name
        # Atomic replace: a parallel run reading the same wheel never sees half of it.
        partial = dest / f".{target.name}.{os.getpid()}.partial"
        shutil.copyfile(wheels[0], partial)
        os.replace(partial, target)
    name, version = target.name.split("-")[:2]
    return {
        "path": str(target),
        "filename": target.name,
        "name": name,
        "version": version,
        "sha256": sha256_of(target),
        "size_bytes": target.stat().st_size,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--dest", required=True, type=Path)
    parser.add_argument("--build-isolation", action="store_true")
    args = parser.parse_args(argv)
    try:
        result = build(args.source.resolve(), args.dest.expanduser().resolve(), args.build_isolation)
    except BuildError as error:
        print(error, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
