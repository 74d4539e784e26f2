"""The execution environment definition takes the collection from galaxy.yml's tarball, never a version of its own.

The install step must run in a stage that has the build files: ansible-builder 3 copies `_build` to /build in its
galaxy stage only (see the Containerfile that `make ee` writes), and the final image takes /usr/share/ansible from
that stage.
"""
from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


def test_the_tarball_is_matched_by_the_galaxy_name_without_a_version():
    galaxy = _load("galaxy.yml")
    ee = _load("execution-environment.yml")
    sources = [item["src"] for item in ee["additional_build_files"] if item["src"].endswith(".tar.gz")]
    assert sources == [f"dist/{galaxy['namespace']}-{galaxy['name']}-*.tar.gz"]


def test_no_collection_version_is_spelled_in_the_definition():
    text = (ROOT / "execution-environment.yml").read_text()
    assert not re.search(r"hpc-balance-\d", text)


def test_the_collection_is_installed_in_the_stage_that_holds_the_build_files():
    steps = _load("execution-environment.yml")["additional_build_steps"]
    assert list(steps) == ["append_galaxy"]
    install = "ansible-galaxy collection install /build/collections/hpc-balance-*.tar.gz"
    install += " -p /usr/share/ansible/collections"
    assert steps["append_galaxy"] == [f"RUN {install}"]


def test_dist_stays_out_of_git_and_of_the_collection_tarball():
    assert "/dist/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "dist" in _load("galaxy.yml")["build_ignore"]


def test_ansible_core_and_ansible_runner_are_the_versions_the_constraints_pin():
    """The image runs what CI tests: the same pins as requirements/constraints.txt."""
    constraints = dict(
        line.split("==", 1) for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    dependencies = _load("execution-environment.yml")["dependencies"]
    for name in ("ansible_core", "ansible_runner"):
        package, version = dependencies[name]["package_pip"].split("==")
        assert constraints[package] == version, (name, version, constraints[package])
