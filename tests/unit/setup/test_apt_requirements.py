"""requirements/apt.txt installs Debian packages by name; a version constraint there must be a declared floor.

Why: Debian's security updates replace package builds within days (bookworm-security served chromium .114 two days
after .108 was tested), and an exact `name=version` pin then stops `apt-get install` on every fresh machine.
"""
from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
APT_REQUIREMENTS = ROOT / "requirements" / "apt.txt"
APT_TESTED = ROOT / "requirements" / "apt-tested.txt"
# `name` or `name >= version`: Debian package names and version strings (epoch:upstream-revision).
ENTRY = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]+)(\s+>=\s+(?P<floor>[0-9][A-Za-z0-9.+~:-]*))?$")


def _entries(text: str) -> list[tuple[int, str, str]]:
    """(line number, entry, comment block right above it) for every non-comment line."""
    entries = []
    comment: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("#"):
            comment.append(line)
            continue
        if line:
            entries.append((number, line, "\n".join(comment)))
        comment = []
    return entries


def apt_requirement_problems(text: str) -> list[str]:
    """Everything in an apt requirements text that is not `name` or a floor with its reason."""
    problems = []
    for number, line, comment in _entries(text):
        match = ENTRY.match(line)
        if not match:
            problems.append(f"line {number}: '{line}' is not 'name' or 'name >= version' (no exact pins)")
        elif match.group("floor") and "# floor:" not in comment:
            problems.append(f"line {number}: floor '{line}' has no '# floor: why' comment right above it")
    return problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("keepalived\n", []),
        ("# floor: the parser the template was checked against\nkeepalived >= 1:2.2.7\n", []),
        ("chromium=156.0.8078.108-1~deb12u1\n",
         ["line 1: 'chromium=156.0.8078.108-1~deb12u1' is not 'name' or 'name >= version' (no exact pins)"]),
        ("chromium == 156.0\n", ["line 1: 'chromium == 156.0' is not 'name' or 'name >= version' (no exact pins)"]),
        ("keepalived >= 1:2.2.7\n",
         ["line 1: floor 'keepalived >= 1:2.2.7' has no '# floor: why' comment right above it"]),
        ("# floor: why\n\nkeepalived >= 1:2.2.7\n",
         ["line 3: floor 'keepalived >= 1:2.2.7' has no '# floor: why' comment right above it"]),
    ],
)
def test_apt_requirement_rules(text, expected):
    assert apt_requirement_problems(text) == expected


def test_apt_requirements_hold_no_exact_pin():
    assert apt_requirement_problems(APT_REQUIREMENTS.read_text()) == []


def test_every_apt_requirement_has_a_tested_version():
    names = [ENTRY.match(entry[1]).group("name") for entry in _entries(APT_REQUIREMENTS.read_text())]
    tested = [entry[1].split()[0] for entry in _entries(APT_TESTED.read_text())]
    assert sorted(names) == sorted(tested)
