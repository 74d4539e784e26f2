"""What the built collection tarball holds: what a user's controller and targets run, the licence, and nothing of the
checkout's own lab, tools or linter config (galaxy.yml build_ignore).

The tarball is built for real with ``ansible-galaxy collection build``, as Galaxy's importer receives it.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
GALAXY = pathlib.Path(sys.executable).with_name("ansible-galaxy")


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([str(GALAXY), "collection", "build", "--output-path", str(out), str(ROOT)], check=True,
                   capture_output=True, text=True)
    (tarball,) = out.glob("hpc-balance-*.tar.gz")
    with tarfile.open(tarball) as archive:
        return set(archive.getnames())


@pytest.mark.parametrize("path", ["tests/lab", "tools", "Makefile", "ruff.toml", ".ansible-lint", ".yamllint",
                                  ".gitignore", ".venv", ".work"])
def test_what_only_the_checkout_uses_is_not_shipped(members, path):
    assert not any(name == path or name.startswith(path + "/") for name in members)


@pytest.mark.parametrize("path", ["COPYING", "MANIFEST.json", "FILES.json", "playbooks/site.yml",
                                  "roles/lvs_director/tasks/main.yml", "plugins/modules/ipvs_spread.py",
                                  "packages/moe_balance/pyproject.toml", "tests/sanity/ignore-2.19.txt"])
def test_what_users_run_and_the_licence_are_shipped(members, path):
    assert path in members


def test_every_plugin_file_carries_the_licence_header():
    missing = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "plugins").rglob("*.py"))
               if "GNU General Public License" not in path.read_text(encoding="utf-8")[:400]]
    assert missing == []
