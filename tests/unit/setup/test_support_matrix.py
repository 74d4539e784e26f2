"""The support matrix is said once per place and the same everywhere: the ansible-core lines CI tests.

The lines are what the pins say: .venv's ansible-core (requirements/controller.txt) and one
requirements/matrix-X.Y.txt per further line, which the Makefile's CORE_MATRIX runs in make test. Every other place
that names a line must name exactly these: requires_ansible's floor (meta/runtime.yml), each role's
min_ansible_version, the sanity ignore files, README.md's support sentence and each role README's controller line.
The Makefile's variables are read from make itself (--eval), as make test expands them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
REQUIREMENTS = ROOT / "requirements"
SANITY = ROOT / "tests" / "sanity"
ROLES = sorted(path.parent.parent.name for path in (ROOT / "roles").glob("*/meta/main.yml"))


def _core_pin(path: Path) -> str:
    (pin,) = re.findall(r"^ansible-core==(\S+)$", path.read_text(), flags=re.M)
    return pin


def _line(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _spelled(lines: list[str], conjunction: str) -> str:
    """['2.19', '2.20', '2.21'] -> '2.19, 2.20 and 2.21' (or '... or 2.21')."""
    return lines[0] if len(lines) == 1 else f"{', '.join(lines[:-1])} {conjunction} {lines[-1]}"


def _version_key(line: str) -> tuple[int, ...]:
    return tuple(int(part) for part in line.split("."))


CONTROLLER_PIN = _core_pin(REQUIREMENTS / "controller.txt")
FURTHER_PINS = {path.name[len("matrix-"):-len(".txt")]: _core_pin(path)
                for path in REQUIREMENTS.glob("matrix-*.txt") if re.fullmatch(r"matrix-\d+\.\d+\.txt", path.name)}
LINES = sorted({_line(CONTROLLER_PIN), *FURTHER_PINS}, key=_version_key)


def _make_value(variable: str) -> str:
    """A Makefile variable as make expands it (no target runs)."""
    done = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), "--eval",
                           f"print-value: ; @echo '$({variable})'", "print-value"],
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


def test_there_is_more_than_one_line_and_each_file_pins_a_release_of_its_own_line():
    assert len(LINES) > 1, LINES
    for line, pin in FURTHER_PINS.items():
        assert _line(pin) == line, (line, pin)
        assert re.fullmatch(r"\d+\.\d+\.\d+", pin), f"matrix-{line}.txt pins a pre-release: {pin}"


def test_make_test_runs_sanity_and_units_on_each_further_line():
    assert _make_value("CORE_MATRIX").split() == sorted(FURTHER_PINS, key=_version_key)
    steps = [step.removeprefix("bg:") for step in _make_value("TEST_STEPS").split()]
    for line in FURTHER_PINS:
        assert f"sanity-{line}" in steps and f"units-{line}" in steps, steps
    assert "sanity" in steps and "units" in steps


def test_the_matrix_tools_are_pinned_by_the_constraints_less_ansible_core():
    """matrix-common.txt names packages; their versions come from constraints.txt, so every line tests alike."""
    constraints = {line.split("==")[0].lower() for line in (REQUIREMENTS / "constraints.txt").read_text().splitlines()
                   if "==" in line and not line.startswith("#")}
    names = [line.split("==")[0].lower() for line in (REQUIREMENTS / "matrix-common.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert "ansible-core" not in names and "pytest" in names
    for name in names:
        assert name in constraints or name == "setuptools", f"{name}: not pinned by requirements/constraints.txt"


def test_requires_ansible_and_every_role_start_at_the_oldest_line():
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"] == f">={LINES[0]}.0"
    assert ROLES
    for role in ROLES:
        meta = yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text())
        assert str(meta["galaxy_info"]["min_ansible_version"]) == LINES[0], role


def test_each_line_has_the_oldest_lines_sanity_ignores_and_no_other_line_has_any():
    """The oldest line's entries hold for every line; a newer line's own entry is explained in the README."""
    files = {path.name[len("ignore-"):-len(".txt")]: path.read_text() for path in SANITY.glob("ignore-*.txt")}
    assert sorted(files, key=_version_key) == LINES
    oldest = set(files[LINES[0]].splitlines())
    readme = (SANITY / "README.md").read_text()
    for line, text in files.items():
        entries = set(text.splitlines())
        assert oldest <= entries, f"ignore-{line}.txt lacks entries of ignore-{LINES[0]}.txt"
        for extra in entries - oldest:
            assert extra.split()[0] in readme and f"ignore-{line}.txt" in readme, f"{extra}: say why in README.md"
    lint_ignores = (ROOT / ".ansible-lint-ignore").read_text()
    for line in LINES:
        assert f"tests/sanity/ignore-{line}.txt sanity[cannot-ignore]" in lint_ignores, line


def test_readme_says_the_lines_in_its_support_sentence():
    sentences = [s for s in re.split(r"(?<=\.)\s", (ROOT / "README.md").read_text()) if "supports ansible-core" in s]
    assert len(sentences) == 1, sentences
    assert f"supports ansible-core {_spelled(LINES, 'and')} " in sentences[0]


@pytest.mark.parametrize("role", ROLES)
def test_each_role_readme_names_the_lines_for_the_controller(role):
    text = (ROOT / "roles" / role / "README.md").read_text()
    assert re.search(rf"Controller: ansible-core {re.escape(_spelled(LINES, 'or'))}[^.\d]", text)
