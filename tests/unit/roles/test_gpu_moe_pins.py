"""triton follows torch: the pins in requirements/, the gpu_moe role and the lab agree with the torch -> triton table.

pip installs torch and triton together only when triton is the version torch itself requires (torch 2.13.0 on Linux
requires triton==3.7.1; pinning 3.9.0 beside it is ResolutionImpossible). The table
roles/gpu_moe/files/torch_builds.json records what PyPI's torch wheels declare; these tests fail when a pin moves
without it, before `make setup` or the role fails on a fresh machine.

numpy follows the Python version: 2.4.6 has no CPython 3.10 wheel (Requires-Python >=3.11), so requirements/moe.txt
pins 2.2.6, the last release with one, behind a `python_version < "3.11"` marker. The wheel lists of both releases are
recorded from PyPI in tests/unit/fixtures/pip_report/.
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


# The Python versions the role accepts (vars/main.yml gpu_moe_min_python) up to the newest the matrix resolves.
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
NUMPY_FILES = json.loads(
    (REPO / "tests" / "unit" / "fixtures" / "pip_report" / "numpy-2.2.6-2.4.6-files.json").read_text()
)


def pins(path: Path, python_version: str = "3.11") -> dict[str, str]:
    """name -> version for every `name==version` line of a pip requirements file whose marker holds for that Python."""
    environment = {"python_version": python_version, "python_full_version": f"{python_version}.0"}
    found = {}
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        requirement = Requirement(text) if text else None
        if requirement and (requirement.marker is None or requirement.marker.evaluate(environment)):
            [specifier] = requirement.specifier
            assert specifier.operator == "==", f"{path.name}: {text} is not an exact pin"
            assert requirement.name.lower() not in found, f"{path.name} pins {requirement.name} twice"
            found[requirement.name.lower()] = specifier.version
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
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("no torch here (the ansible-core lines of make core-matrix test the collection without it)")
    declared = [Requirement(text) for text in importlib.metadata.requires("torch") or []]
    triton = [req for req in declared if req.name == "triton" and (req.marker is None or req.marker.evaluate())]
    if not triton:
        pytest.skip(f"the installed torch {torch_version} declares no triton (a local CPU build such as +cpu does not)")
    assert str(triton[0].specifier) == f"=={triton_for(torch_version)}"


@pytest.mark.parametrize("python_version", PYTHONS)
@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_moe_txt_pins_a_numpy_with_a_wheel_for_each_python_the_role_accepts(python_version, machine):
    numpy = pins(REPO / "requirements" / "moe.txt", python_version)["numpy"]
    assert numpy in NUMPY_FILES, f"numpy {numpy}: record its wheels in tests/unit/fixtures/pip_report/ from PyPI"
    tag = "cp" + python_version.replace(".", "")
    wheels = [name for name in NUMPY_FILES[numpy]["linux_wheels"] if f"-{tag}-{tag}-" in name and machine in name]
    assert wheels, f"numpy {numpy} has no {tag} wheel for {machine} on PyPI; requirements/moe.txt must pin another"


def test_moe_txt_pins_the_same_numpy_as_the_project_venv_for_its_python():
    """The project venv is Debian 12's Python 3.11; constraints.txt is its freeze."""
    assert (
        pins(REPO / "requirements" / "moe.txt", "3.11")["numpy"]
        == pins(REPO / "requirements" / "constraints.txt")["numpy"]
    )


def test_lab_pins_the_numpy_of_moe_txt_for_the_labs_python():
    """The lab's hosts and its controller run Debian 12's Python 3.11 (tests/lab)."""
    lab = yaml.safe_load((REPO / "tests" / "lab" / "site" / "group_vars" / "all.yml").read_text())
    assert lab["gpu_moe_lab_numpy_version"] == pins(REPO / "requirements" / "moe.txt", "3.11")["numpy"]
