"""triton follows torch: the pins in requirements/, the gpu_moe role and the lab agree with the torch -> triton table.

pip installs torch and triton together only when triton is the version torch itself requires (torch 2.13.0 on Linux
requires triton==3.7.1; pinning 3.9.0 beside it is ResolutionImpossible). The table
roles/gpu_moe/files/torch_builds.json records what PyPI's torch wheels declare; these tests fail when a pin moves
without it, before `make setup` or the role fails on a fresh machine.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "gpu_moe"
TABLE = json.loads((ROLE / "files" / "torch_builds.json").read_text())["torch"]


def pins(path: Path) -> dict[str, str]:
    """name -> version for every `name==version` line of a pip requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;#]+).*", line)
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


def triton_for(torch_version: str) -> str:
    base = torch_version.split("+")[0]
    assert base in TABLE, f"torch {torch_version} is not in torch_builds.json; add its triton and CUDA from PyPI"
    return TABLE[base]["triton"]


@pytest.mark.parametrize("name", ["moe.txt", "constraints.txt"])
def test_requirements_pin_the_triton_that_torch_requires(name):
    found = pins(REPO / "requirements" / name)
    assert found["triton"] == triton_for(found["torch"]), f"requirements/{name}: {found['torch']} / {found['triton']}"


def test_role_defaults_pin_the_triton_that_torch_requires():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["gpu_moe_triton_version"] == triton_for(defaults["gpu_moe_torch_version"])


def test_role_defaults_match_the_project_venv():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    found = pins(REPO / "requirements" / "moe.txt")
    assert (defaults["gpu_moe_torch_version"], defaults["gpu_moe_triton_version"]) == (found["torch"], found["triton"])


def test_argument_specs_document_the_same_defaults():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    options = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    for name in ("gpu_moe_torch_version", "gpu_moe_triton_version"):
        assert options[name]["default"] == defaults[name], name


def test_lab_pins_the_triton_that_torch_requires():
    lab = yaml.safe_load((REPO / "tests" / "lab" / "site" / "group_vars" / "all.yml").read_text())
    assert lab["gpu_moe_lab_triton_version"] == triton_for(lab["gpu_moe_lab_torch_version"])


def test_every_table_row_names_triton_cuda_and_python_floor():
    for version, row in TABLE.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
        assert re.fullmatch(r"\d+\.\d+\.\d+", row["triton"]), version
        assert re.fullmatch(r"\d+\.\d+", row["cuda"]) and re.fullmatch(r"3\.\d+", row["requires_python"]), version


def test_installed_torch_declares_the_triton_of_the_table():
    """Where the installed torch declares triton (every PyPI Linux wheel), it is the table's version."""
    torch_version = importlib.metadata.version("torch")
    declared = [Requirement(text) for text in importlib.metadata.requires("torch") or []]
    triton = [req for req in declared if req.name == "triton" and (req.marker is None or req.marker.evaluate())]
    if not triton:
        pytest.skip(f"the installed torch {torch_version} declares no triton (a local CPU build such as +cpu does not)")
    assert str(triton[0].specifier) == f"=={triton_for(torch_version)}"
