"""gpu_moe's controller-side wheel build (roles/gpu_moe/files/build_wheel.py, pure_wheel.py) on a stock controller.

A stock `python3 -m venv` has pip and an old setuptools but no `wheel` package; setuptools added its own bdist_wheel
only in 70.1.0 (setuptools' NEWS.rst, v70.1.0: "Adopted the bdist_wheel command from the wheel project"), so
`pip wheel --no-build-isolation --no-index` fails there with "invalid command 'bdist_wheel'". The role's default
build must work in such a venv. The oracle for the wheel's contents is setuptools' own build of the same project,
with the checkout's setuptools.
"""

from __future__ import annotations

import email.parser
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUILD_WHEEL = ROOT / "roles" / "gpu_moe" / "files" / "build_wheel.py"
PACKAGE = ROOT / "packages" / "moe_balance"


def build(python: str, dest: Path, *extra: str, source: Path = PACKAGE) -> subprocess.CompletedProcess:
    argv = [python, str(BUILD_WHEEL), "--source", str(source), "--dest", str(dest), *extra]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture(scope="module")
def stock_venv(tmp_path_factory) -> Path:
    """A venv as `python3 -m venv` makes it: ensurepip's bundled pip and setuptools, nothing else, no index."""
    venv = tmp_path_factory.mktemp("stock") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    return venv


def test_the_stock_venv_cannot_build_a_wheel_with_setuptools(stock_venv):
    """The premise: no `wheel`, and setuptools older than 70.1 or none at all, so nothing here has a bdist_wheel.

    From Python 3.12 on, `python3 -m venv` installs no setuptools (Python 3.12's What's New, ensurepip and venv):
    such a controller is the stock one of ansible-core 2.20 and later, which require Python 3.12.
    """
    probe = (
        "import importlib.util, json; s = importlib.util.find_spec('setuptools'); "
        "v = __import__('setuptools').__version__ if s else None; "
        "print(json.dumps([v, importlib.util.find_spec('wheel') is not None]))"
    )
    done = subprocess.run([str(stock_venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=True)
    version, has_wheel = json.loads(done.stdout)
    assert not has_wheel
    assert version is None or tuple(int(part) for part in version.split(".")[:2]) < (70, 1), version


def test_the_default_build_works_on_a_stock_controller_and_the_wheel_installs(stock_venv, tmp_path):
    python = str(stock_venv / "bin" / "python")
    first, second = build(python, tmp_path / "a"), build(python, tmp_path / "b")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["filename"] == "moe_balance-0.1.0-py3-none-any.whl"
    assert json.loads(second.stdout)["sha256"] == result["sha256"], "the same source must give the same bytes"
    install = [python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", result["path"]]
    subprocess.run(install, check=True, capture_output=True, timeout=120)
    query = (
        "import importlib.metadata as m, json; d = m.distribution('moe_balance'); "
        "print(json.dumps([d.requires, [e.value for e in d.entry_points], d.read_text('RECORD') is not None]))"
    )
    requires, entry_points, has_record = json.loads(
        subprocess.run([python, "-c", query], capture_output=True, text=True, check=True).stdout
    )
    assert "torch>=2.3" in requires and has_record
    assert entry_points == ["moe_balance.cli:main"]
    assert (stock_venv / "bin" / "moe-balance").is_file()


def _wheel(path: Path) -> tuple[dict[str, bytes], email.message.Message]:
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    metadata = next(data for name, data in members.items() if name.endswith(".dist-info/METADATA"))
    return members, email.parser.BytesParser().parsebytes(metadata)


def test_the_wheel_has_what_setuptools_builds_from_the_same_project(tmp_path):
    """Same files, same bytes for the package's modules, same metadata fields (requirements compared parsed)."""
    requirement = pytest.importorskip("packaging.requirements").Requirement
    ours = build(sys.executable, tmp_path / "ours")
    assert ours.returncode == 0, ours.stderr
    # setuptools writes build/ and *.egg-info into the tree it builds: build a copy of the sources, as build_wheel.py
    # does, so the checkout stays clean and no stale build/ leaks into the reference.
    reference_source = tmp_path / "reference-source"
    shutil.copytree(
        PACKAGE / "src", reference_source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PACKAGE / name, reference_source / name)
    reference_argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--quiet",
        "--wheel-dir",
        str(tmp_path / "setuptools"),
        str(reference_source),
    ]
    subprocess.run(reference_argv, check=True, capture_output=True, timeout=300)
    ours_members, ours_metadata = _wheel(Path(json.loads(ours.stdout)["path"]))
    reference_members, reference_metadata = _wheel(next((tmp_path / "setuptools").glob("*.whl")))
    assert sorted(ours_members) == sorted(reference_members)
    for name, data in reference_members.items():
        if not name.startswith("moe_balance-0.1.0.dist-info/"):
            assert ours_members[name] == data, name
    for name in ("entry_points.txt", "top_level.txt"):
        dist_info_file = f"moe_balance-0.1.0.dist-info/{name}"
        assert ours_members[dist_info_file] == reference_members[dist_info_file]
    for field in ("Name", "Version", "Summary", "License", "Requires-Python", "Description-Content-Type"):
        assert ours_metadata[field] == reference_metadata[field], field
    assert sorted(ours_metadata.get_all("Provides-Extra")) == sorted(reference_metadata.get_all("Provides-Extra"))
    assert {str(requirement(text)) for text in ours_metadata.get_all("Requires-Dist")} == {
        str(requirement(text)) for text in reference_metadata.get_all("Requires-Dist")
    }
    assert ours_metadata.get_payload() == reference_metadata.get_payload()


def test_a_project_the_writer_does_not_support_is_refused_with_the_way_out(tmp_path):
    source = tmp_path / "project"
    (source / "src" / "demo").mkdir(parents=True)
    (source / "src" / "demo" / "__init__.py").write_text("")
    (source / "pyproject.toml").write_text('[project]\nname = "demo"\ndynamic = ["version"]\n')
    done = build(sys.executable, tmp_path / "out", source=source)
    assert done.returncode == 2
    assert "dynamic" in done.stderr and "gpu_moe_build_isolation: true" in done.stderr
