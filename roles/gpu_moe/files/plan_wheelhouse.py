"""Check, on the controller, that a wheelhouse can install the pinned stack on a host, and list the wheels it needs.

Runs on the Ansible controller before anything is copied or created on the host. It asks the controller's pip to
resolve the requirements (torch==X, triton==Y, pins, the moe_balance wheel) from the wheelhouse alone, for the
host's Python version, CPU architecture and glibc (`pip install --dry-run --report` with --platform/--python-version),
so a missing wheel, a wrong version or a wheel built for another Python fails here, with the reason, instead of
half-way through an install on the host. The answer also tells the role which files to copy: only those, not the
whole wheelhouse.

Usage: plan_wheelhouse.py --wheelhouse DIR --python-version 3.11 --machine x86_64 --glibc 2.36
                          --require torch==2.13.0 [--require ...] [--wheel moe_balance-0.1.0-py3-none-any.whl]
                          [--hashes] [--gpu]
Exit 0 with one JSON object on stdout: {"wheels": [{"filename", "path", "name", "version", "size_bytes"[, "sha256"]}],
"total_bytes"}; exit 2 with a one-line explanation on stderr. With --hashes every wheel carries its sha256, which the
role writes into a hash-locked requirements file for `pip install --require-hashes` on the host (a wheel altered
between plan and install is refused). With --gpu a CPU build of torch (+cpu) in the plan is refused.

The Python version, architecture and glibc are those of the interpreter that will own the venv (gpu_moe_python,
which creates it; the role rebuilds the venv when that interpreter's version changes), never the controller's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

# PEP 600 aliases: manylinux2014 = manylinux_2_17 (every architecture it names); manylinux2010 = manylinux_2_12 and
# manylinux1 = manylinux_2_5 (x86_64 and i686 only).
LEGACY_MANYLINUX = {
    17: ("manylinux2014", {"x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x"}),
    12: ("manylinux2010", {"x86_64", "i686"}),
    5: ("manylinux1", {"x86_64", "i686"}),
}


class PlanError(Exception):
    """A problem the user can fix; the message says what and how."""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def platform_tags(machine: str, glibc: str) -> list[str]:
    """Every platform tag a glibc-based Linux host of this architecture accepts, newest first."""
    major, minor = (int(part) for part in glibc.split(".")[:2])
    if major != 2:
        raise PlanError(f"glibc {glibc} is not a 2.x release; pass the host's glibc version (e.g. 2.36)")
    tags = []
    for glibc_minor in range(minor, 4, -1):
        tags.append(f"manylinux_2_{glibc_minor}_{machine}")
        alias, arches = LEGACY_MANYLINUX.get(glibc_minor, ("", set()))
        if machine in arches:
            tags.append(f"{alias}_{machine}")
    tags.append(f"linux_{machine}")
    return tags


def download_platform_tags(machine: str, glibc: str) -> list[str]:
    """The `--platform` tags for pip download: each manylinux_2_N tag from the host's glibc (at most 2_28) down to the
    oldest of its architecture (2_5 on x86_64 and i686, 2_17 elsewhere), then the legacy aliases among them.

    pip matches a `--platform` tag literally: `manylinux_2_28_x86_64` takes no wheel tagged for an older glibc only
    (pip/_internal/utils/compatibility_tags.py expands manylinux2014 and manylinux2010 alone). torch 2.13.0's CUDA
    wheels are tagged from manylinux_2_28 (torch) down to manylinux1 (nvidia-nvtx, x86_64), and nvidia-cusparselt-cu13
    0.8.1 is tagged manylinux2014 only, so a shorter list leaves one out and the resolution fails.
    """
    newest = min(int(glibc.split(".")[1]), 28)
    oldest = 5 if machine in ("x86_64", "i686") else 17
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(newest, oldest - 1, -1)]
    aliases = [
        f"{alias}_{machine}"
        for minor, (alias, arches) in LEGACY_MANYLINUX.items()
        if machine in arches and minor <= newest
    ]
    return tags + aliases


def download_platforms(machine: str, glibc: str) -> str:
    """`--platform` options for pip download (download_platform_tags)."""
    return " ".join(f"--platform {tag}" for tag in download_platform_tags(machine, glibc))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_versions(wheelhouse: Path, project: str) -> list[str]:
    """Versions of one project found in the wheelhouse, from the wheel file names."""
    found = set()
    for path in wheelhouse.glob("*.whl"):
        parts = path.name.split("-")
        if len(parts) >= 5 and normalize(parts[0]) == normalize(project):
            found.add(parts[1])
    return sorted(found)


def check_pins(wheelhouse: Path, requirements: list[str]) -> None:
    """Exact pins (name==version) must have a wheel of that version; say which versions there are instead."""
    for requirement in requirements:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)\s*", requirement)
        if not match:
            continue
        project, wanted = match.groups()
        present = wheel_versions(wheelhouse, project)
        if not any(version == wanted or version.split("+")[0] == wanted for version in present):
            have = ", ".join(present) if present else "no wheel of it at all"
            raise PlanError(
                f"{project}=={wanted} is not in the wheelhouse {wheelhouse} (it holds {have}); add it on the "
                f"controller with `pip download --only-binary=:all: -d {wheelhouse} {project}=={wanted}` or pin a "
                "version the wheelhouse has"
            )


def resolve(args: argparse.Namespace) -> dict:
    wheelhouse = args.wheelhouse
    if not wheelhouse.is_dir():
        raise PlanError(
            f"the wheelhouse {wheelhouse} does not exist on the controller; build it there with "
            f"`pip download --only-binary=:all: -d {wheelhouse} {' '.join(args.require)}` or set gpu_moe_wheelhouse"
        )
    check_pins(wheelhouse, args.require)
    version = args.python_version.split(".")
    python_tag = f"cp{version[0]}{version[1]}"
    with tempfile.TemporaryDirectory(prefix="gpu_moe_plan_") as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        command += ["--target", str(Path(tmp) / "never-created"), "--report", str(report)]
        command += ["--no-index", "--find-links", str(wheelhouse), "--only-binary=:all:"]
        command += ["--python-version", ".".join(version[:2]), "--implementation", "cp", "--abi", python_tag]
        for tag in platform_tags(args.machine, args.glibc):
            command += ["--platform", tag]
        command += args.require + ([str(args.wheel)] if args.wheel else [])
        # The wheelhouse alone must be enough: no pip.conf, no PIP_* variables (find-links, indexes, constraints).
        env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            reasons = [line for line in (done.stderr or done.stdout).splitlines() if line.startswith("ERROR")]
            raise PlanError(
                f"the wheelhouse {wheelhouse} cannot install {' '.join(args.require)} for Python "
                f"{'.'.join(version[:2])} on {args.machine} (glibc {args.glibc}): {' | '.join(reasons[-4:])}; add "
                f"the missing wheels with `pip download --only-binary=:all: --python-version {'.'.join(version[:2])} "
                f"{download_platforms(args.machine, args.glibc)} "
                f"-d {wheelhouse} ...` (every manylinux tag the host accepts: the CUDA wheels are tagged from "
                "manylinux1 to manylinux_2_28)"
            )
        installs = json.loads(report.read_text())["install"]
    wheels = []
    own = args.wheel.resolve() if args.wheel else None
    for item in installs:
        path = Path(unquote(urlparse(item["download_info"]["url"]).path))
        if own is not None and path.resolve() == own:
            continue
        wheel = {
            "filename": path.name,
            "path": str(path),
            "name": item["metadata"]["name"],
            "version": item["metadata"]["version"],
            "size_bytes": path.stat().st_size,
        }
        if args.gpu and normalize(wheel["name"]) == "torch" and "+cpu" in wheel["version"]:
            raise PlanError(
                f"the wheelhouse {wheelhouse} gives torch {wheel['version']}, a CPU build, and this host has a GPU: "
                f"put the CUDA build in the wheelhouse (`pip download --only-binary=:all: -d {wheelhouse} "
                f"torch=={wheel['version'].split('+')[0]}` from PyPI) and remove {path.name}"
            )
        if args.hashes:
            wheel["sha256"] = sha256_of(path)
        wheels.append(wheel)
    return {"wheels": wheels, "total_bytes": sum(wheel["size_bytes"] for wheel in wheels)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheelhouse", required=True, type=Path)
    parser.add_argument("--python-version", required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--glibc", required=True)
    parser.add_argument("--require", action="append", default=[])
    parser.add_argument("--wheel", type=Path)
    parser.add_argument("--hashes", action="store_true", help="add each wheel's sha256 (for --require-hashes)")
    parser.add_argument("--gpu", action="store_true", help="refuse a CPU build of torch")
    args = parser.parse_args(argv)
    try:
        result = resolve(args)
    except PlanError as error:
        print(error, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
