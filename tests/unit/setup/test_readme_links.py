"""README.md and docs/*.md: every relative link reaches a file of the checkout (and a heading, for #anchors), and the
README opens with the newcomer's path (install, then the installed playbooks by FQCN), before the lab.

Anchors follow GitHub's heading slugs: lower case, punctuation other than - and _ dropped, spaces to -.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_heading(page):
    for target in relative_links(page):
        path, _hash, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: {target}"


def test_the_readme_opens_with_install_and_the_installed_playbooks():
    text = (ROOT / "README.md").read_text()
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    assert sections[:4] == ["Install", "Run the installed playbooks", "Platforms and maturity", "Developing"]
    for command in (
        "ansible-galaxy collection install hpc-balance-",
        "ansible-galaxy collection install hpc.balance",
        "hpc.balance.site",
        "hpc.balance.audit",
        "hpc.balance.rebalance",
    ):
        assert command in text, command
    assert (ROOT / "examples" / "inventory" / "hosts.yml").is_file()
