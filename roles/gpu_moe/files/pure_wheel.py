"""Write a pure-Python wheel (py3-none-any) from a PEP 621 pyproject.toml with the standard library alone.

Why: a stock controller Python has no `wheel` package, and setuptools before 70.1 cannot build a wheel without it
(`error: invalid command 'bdist_wheel'`), so `pip wheel --no-build-isolation --no-index` fails there and nothing
can be fetched. moe_balance is pure Python with a static PEP 621 table and a src/ layout, so the wheel is a zip of
src/ plus four metadata files, written here by the rules of the binary distribution format
(packaging.python.org/en/latest/specifications/binary-distribution-format/) and the core metadata
specification (.../core-metadata/). tomllib is in every Python that ansible-core 2.19 runs on (3.11+).

Only what moe_balance's pyproject.toml uses is supported; anything else (dynamic fields, another layout, package
data) raises WheelError, which points at the pip build (gpu_moe_build_isolation) instead of guessing.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
import zipfile
from pathlib import Path

# The fields of [project] this writer turns into metadata; any other field is refused.
SUPPORTED_FIELDS = frozenset(
    {
        "name",
        "version",
        "description",
        "readme",
        "requires-python",
        "license",
        "dependencies",
        "optional-dependencies",
        "scripts",
    }
)
README_TYPES = {".md": "text/markdown", ".rst": "text/x-rst", ".txt": "text/plain"}
# The earliest time a zip entry can carry (1980-01-01): the same sources give the same bytes.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class WheelError(Exception):
    """The project uses something this writer does not support; the message names it."""


def _normalise(name: str) -> str:
    """Distribution name as wheel file and .dist-info folder names spell it (PEP 503 form, `_` for runs of -_.)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _read_project(root: Path) -> dict:
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = data.get("project")
    if not isinstance(project, dict):
        raise WheelError("pyproject.toml has no [project] table")
    unsupported = sorted(set(project) - SUPPORTED_FIELDS) + sorted(project.get("dynamic", []))
    if unsupported:
        raise WheelError(f"[project] uses {', '.join(unsupported)}, which this writer does not support")
    setuptools_table = data.get("tool", {}).get("setuptools", {})
    if setuptools_table not in ({}, {"packages": {"find": {"where": ["src"]}}}):
        raise WheelError(f"[tool.setuptools] {setuptools_table} is more than a src/ layout")
    return project


def _metadata(root: Path, project: dict) -> str:
    """Core metadata 2.1: the same fields setuptools writes for the same table."""
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    license_text = project.get("license", {})
    if isinstance(license_text, dict) and "text" in license_text:
        lines.append(f"License: {license_text['text']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    body = ""
    if "readme" in project:
        if not isinstance(project["readme"], str) or Path(project["readme"]).suffix not in README_TYPES:
            raise WheelError(f"readme {project['readme']!r} is not a .md, .rst or .txt file name")
        readme = root / project["readme"]
        lines.append(f"Description-Content-Type: {README_TYPES[readme.suffix]}")
        body = readme.read_text(encoding="utf-8")
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for requirement in requirements:
            base, has_marker, marker = requirement.partition(";")
            condition = f'({marker.strip()}) and extra == "{extra}"' if has_marker else f'extra == "{extra}"'
            lines.append(f"Requires-Dist: {base.strip()}; {condition}")
    return "\n".join(lines) + "\n\n" + body


def _entry_points(project: dict) -> str:
    scripts = project.get("scripts", {})
    if not scripts:
        return ""
    return "[console_scripts]\n" + "".join(f"{name} = {target}\n" for name, target in scripts.items())


def _package_files(root: Path) -> list[tuple[str, bytes]]:
    src = root / "src"
    if not src.is_dir():
        raise WheelError(f"no src/ folder in {root}")
    files = []
    for path in sorted(src.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc" or ".egg-info" in str(path):
            continue
        if path.suffix != ".py":
            raise WheelError(f"{path.relative_to(root)} is package data, which this writer does not support")
        files.append((path.relative_to(src).as_posix(), path.read_bytes()))
    return files


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def write_wheel(root: Path, dest: Path) -> Path:
    """Write ROOT's wheel into DEST and return its path. Same sources, same bytes."""
    project = _read_project(root)
    name, version = _normalise(project["name"]), str(project["version"])
    dist_info = f"{name}-{version}.dist-info"
    members = _package_files(root)
    metadata_files = {
        "METADATA": _metadata(root, project),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: hpc.balance gpu_moe\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "entry_points.txt": _entry_points(project),
        "top_level.txt": "".join(f"{top}\n" for top in sorted({member[0].split("/")[0] for member in members})),
    }
    members += [(f"{dist_info}/{file}", text.encode("utf-8")) for file, text in metadata_files.items() if text]
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in members)
    members.append((f"{dist_info}/RECORD", (record + f"{dist_info}/RECORD,,\n").encode("utf-8")))
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in members:
            info = zipfile.ZipInfo(path, date_time=ZIP_DATE)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return target
