"""tools/moe_pins.py: the pins it reads, and the role README's wheelhouse commands, which must be exactly its output.

The recorded resolution (tests/unit/fixtures/pip_report/) is pip's real answer for torch 2.13.0 from PyPI: every wheel
in it must carry one of the tags the commands name, or `pip download` with those tags cannot fetch it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
import moe_pins  # noqa: E402

FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "pip_report"
RECORDED = json.loads((FIXTURES / "role-py3.10-x86_64.json").read_text())
ROLE_README = ROOT / "roles" / "gpu_moe" / "README.md"


def readme_download_block() -> str:
    """The ```sh block of the role's README that holds the wheelhouse's pip download commands."""
    blocks = re.findall(r"```sh\n(.*?)```", ROLE_README.read_text(), flags=re.S)
    found = [block for block in blocks if "pip download" in block]
    assert len(found) == 1, f"{ROLE_README} has {len(found)} sh blocks with pip download; expected one"
    return found[0]


def expand(command: str) -> list[str]:
    """The argv bash gives pip for one README command (its $(...) loop expanded)."""
    assert command.startswith("pip download ")
    script = "printf '%s\\n' " + command[len("pip download ") :]
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()


def readme_commands() -> list[tuple[str, list[str]]]:
    """(comment, argv) of each command in the README block."""
    commands = re.findall(r"^# (.*)\n(pip download (?:.*\\\n)*.*)$", readme_download_block(), flags=re.M)
    return [(comment, expand(text)) for comment, text in commands]


def wheel_platforms(url: str) -> set[str]:
    """The platform tags of a wheel file name (compressed tag sets split)."""
    return set(url.rsplit("/", 1)[1][: -len(".whl")].split("-")[-1].split("."))


def test_the_role_readme_shows_exactly_the_commands_moe_pins_prints():
    assert readme_download_block() == moe_pins.download_commands()


@pytest.mark.parametrize("python_version, machine", moe_pins.README_EXAMPLES)
def test_each_readme_command_gives_pip_the_role_planners_tags_and_the_target_python(python_version, machine):
    [argv] = [argv for comment, argv in readme_commands() if comment == f"{machine} hosts with Python {python_version}"]
    options = dict(zip(argv, argv[1:], strict=False))  # each word -> the word after it
    assert "--only-binary=:all:" in argv and options["--implementation"] == "cp"
    assert options["--python-version"] == python_version
    assert options["--abi"] == "cp" + python_version.replace(".", "")
    platforms = [argv[index + 1] for index, word in enumerate(argv) if word == "--platform"]
    assert platforms == moe_pins.plan_wheelhouse().download_platform_tags(machine, "2.36")


@pytest.mark.parametrize("python_version, machine", moe_pins.README_EXAMPLES)
def test_each_readme_command_downloads_the_pins_of_moe_txt_for_its_python(python_version, machine):
    [argv] = [argv for comment, argv in readme_commands() if comment == f"{machine} hosts with Python {python_version}"]
    wanted = [
        f"{name}=={version}"
        for name, version in moe_pins.requirement_pins(moe_pins.MOE_REQUIREMENTS, python_version).items()
    ]
    assert argv[-len(wanted) :] == wanted


def test_the_wheelhouse_tags_take_every_wheel_of_the_recorded_resolution():
    """A wheel none of whose tags is named is one pip download would not fetch: the resolution fails."""
    tags = set(moe_pins.platform_tags("x86_64")) | {"any"}
    missed = [
        item["download_info"]["url"].rsplit("/", 1)[1]
        for item in RECORDED["install"]
        if not wheel_platforms(item["download_info"]["url"]) & tags
    ]
    assert missed == []


def test_the_recorded_resolution_needs_tags_below_manylinux_2_17():
    """What the former tag list (2_28 down to 2_17) missed, so the test above would catch a return to it."""
    former = {f"manylinux_2_{minor}_x86_64" for minor in range(28, 16, -1)} | {"any"}
    missed = sorted(
        item["metadata"]["name"]
        for item in RECORDED["install"]
        if not wheel_platforms(item["download_info"]["url"]) & former
    )
    assert missed == ["nvidia-cuda-nvrtc", "nvidia-cusparselt-cu13", "nvidia-nvjitlink", "nvidia-nvtx"]


@pytest.mark.parametrize("python_version", ["3.9", "3.10", "3.11", "3.12", "3.13"])
def test_moe_pins_reads_moe_txt_as_packaging_evaluates_its_markers(python_version):
    environment = {"python_version": python_version, "python_full_version": f"{python_version}.0"}
    expected = {}
    for line in moe_pins.MOE_REQUIREMENTS.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        requirement = Requirement(text) if text else None
        if requirement and (requirement.marker is None or requirement.marker.evaluate(environment)):
            expected[requirement.name.lower()] = str(requirement.specifier).removeprefix("==")
    assert moe_pins.requirement_pins(moe_pins.MOE_REQUIREMENTS, python_version) == expected


@pytest.mark.parametrize(
    "marker, python_version, holds",
    [
        ('python_version >= "3.11"', "3.10", False),
        ('python_version >= "3.11"', "3.11", True),
        ("python_version < '3.11'", "3.10", True),
        ('python_version >= "3.10" and python_version < "3.12"', "3.12", False),
        ('python_version != "3.9"', "3.10", True),
    ],
)
def test_a_python_version_marker_holds_as_pep_508_says(marker, python_version, holds):
    assert moe_pins.marker_holds(marker, python_version) is holds


def test_a_marker_on_anything_but_python_version_is_refused_with_the_clause():
    with pytest.raises(ValueError, match="sys_platform == 'linux'"):
        moe_pins.marker_holds("sys_platform == 'linux'", "3.11")


def test_moe_pins_reads_the_role_files_as_yaml_does():
    for path, names in [
        (
            moe_pins.ROLE / "defaults" / "main.yml",
            ["gpu_moe_torch_version", "gpu_moe_triton_version", "gpu_moe_pinned_packages"],
        ),
        (moe_pins.ROLE / "vars" / "main.yml", ["gpu_moe_min_python"]),
    ]:
        loaded = yaml.safe_load(path.read_text())
        read = moe_pins.role_variables(path)
        assert {name: read[name] for name in names} == {name: loaded[name] for name in names}


def test_a_flow_mapping_of_pins_is_read_as_a_mapping(tmp_path):
    defaults = tmp_path / "main.yml"
    defaults.write_text('gpu_moe_pinned_packages: {numpy: "2.4.6", sympy: 1.14.0}\ngpu_moe_smoke: on_change\n')
    assert moe_pins.role_variables(defaults) == {
        "gpu_moe_pinned_packages": {"numpy": "2.4.6", "sympy": "1.14.0"},
        "gpu_moe_smoke": "on_change",
    }


@pytest.mark.parametrize("python_version, numpy", [("3.10", "2.2.6"), ("3.11", "2.4.6"), ("3.13", "2.4.6")])
def test_the_pin_command_prints_the_numpy_of_moe_txt_for_a_python(python_version, numpy):
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "moe_pins.py"), "pin", "numpy", "--python-version", python_version],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"{numpy}\n"


def test_gpu_site_check_takes_the_numpy_pin_from_moe_pins():
    """The site check's host may be Ubuntu 22.04's Python 3.10: its numpy must follow moe.txt's markers."""
    script = (ROOT / "tools" / "gpu_site_check.sh").read_text()
    assert 'tools/moe_pins.py" pin numpy --python-version "$HOST_PYTHON_VERSION"' in script
    assert 'numpy: "$NUMPY_VERSION"' in script
    assert not re.search(r'numpy: "\d', script)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_wheelhouse_documentation_names_the_newest_and_oldest_tag_of_each_architecture(machine):
    specs = yaml.safe_load((moe_pins.ROLE / "meta" / "argument_specs.yml").read_text())
    text = specs["argument_specs"]["main"]["options"]["gpu_moe_wheelhouse"]["description"]
    tags = moe_pins.platform_tags(machine)
    assert f"C({tags[0].removesuffix('_' + machine)})" in text and f"C({tags[-1].removesuffix('_' + machine)})" in text
