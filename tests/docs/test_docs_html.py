"""The collection's docs site as rendered HTML (make docs-html builds it, then runs this).

antsibull-docs turns a plugin whose documentation it cannot read into an error page ("was malformed": its
data/docsite/ansible-docsite/plugin-error.rst.j2) and Sphinx still exits 0 without -W, so the pages are read back:
no error page, the sections a reader looks for, every option a role's meta/argument_specs.yml declares in its
entry point's table with its type and default, and no Sphinx warning but those that need docs.ansible.com's
inventory, which an offline build cannot fetch.
"""

from __future__ import annotations

import html.parser
import os
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = pathlib.Path(os.environ.get("DOCS_SITE", ROOT / ".work" / "docs" / "site"))
PAGES = SITE / "build" / "html" / "collections" / "hpc" / "balance"
ROLES = ("lvs_director", "lvs_realserver", "win_nic_team", "win_smb_multichannel", "gpu_moe")
# page -> the section ids it must have (antsibull-docs' templates name them).
PLUGIN_PAGES = {
    "ipvs_spread_module.html": ("synopsis", "parameters", "examples", "return-values"),
    "lvs_director_script_stats_filter.html": ("synopsis", "input", "examples", "return-value"),
}
# argument_specs type -> the type line antsibull-docs prints (antsibull_docs' format of option types).
TYPE_NAMES = {"str": "string", "bool": "boolean", "int": "integer", "float": "float", "list": "list",
              "dict": "dictionary", "path": "path", "raw": "any"}
# Labels of docs.ansible.com (intersphinx 'ansible_devel'): defined there, undefined in an offline build.
OUTSIDE_LABELS = re.compile(r"^(common_return_values|ansible_configuration_settings|action_plugins"
                            r"|ansible_collections\.ansible\.builtin\.\w+)$")

pytestmark = pytest.mark.skipif(not PAGES.is_dir(), reason="no docs site built here (make docs-html)")


class OptionRows(html.parser.HTMLParser):
    """Each option row of a page: anchor id -> (type line, whether the row shows a default)."""

    def __init__(self):
        super().__init__()
        self.rows = {}
        self.ids = set()
        self._anchor = None
        self._in_type = False
        self._type = ""
        self._text = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "tr":
            self._close_row()
        elif tag == "div" and "ansibleOptionAnchor" in (attrs.get("class") or "") and self._anchor is None:
            self._anchor = attrs.get("id")
        elif tag == "span" and "ansible-option-type" in (attrs.get("class") or "").split():
            self._in_type = True

    def handle_endtag(self, tag):
        if tag == "span":
            self._in_type = False
        elif tag in ("tr", "table"):
            self._close_row()

    def handle_data(self, data):
        if self._in_type:
            self._type += data
        self._text.append(data)

    def _close_row(self):
        if self._anchor:
            text = "".join(self._text)
            self.rows[self._anchor] = (self._type.strip(), "Default:" in text or "(default)" in text)
        self._anchor, self._type, self._text = None, "", []

    def close(self):
        super().close()
        self._close_row()


def read_page(name):
    path = PAGES / name
    assert path.is_file(), f"{name} was not built"
    text = path.read_text(encoding="utf-8")
    assert "was malformed" not in text, f"{name} is antsibull-docs' error page"
    parser = OptionRows()
    parser.feed(text)
    parser.close()
    return text, parser


def declared_options(options, prefix=""):
    """(path a/b/c, spec) of every option and suboption, as antsibull-docs names their anchors."""
    for name, spec in (options or {}).items():
        path = f"{prefix}{name}"
        yield path, spec
        yield from declared_options(spec.get("options"), f"{path}/")


@pytest.mark.parametrize("page", sorted(PLUGIN_PAGES))
def test_plugin_page_has_its_sections(page):
    _text, parser = read_page(page)
    missing = [section for section in PLUGIN_PAGES[page] if section not in parser.ids]
    assert not missing, f"{page} lacks {missing}"


@pytest.mark.parametrize("role", ROLES)
def test_role_page_lists_every_declared_option(role):
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    _text, parser = read_page(f"{role}_role.html")
    problems = []
    for entry_point, spec in specs.items():
        anchor = f"ansible-collections-hpc-balance-{role}-role-entrypoint-{entry_point}".replace("_", "-")
        assert anchor in parser.ids, f"{role}: entry point {entry_point} not rendered"
        for path, option in declared_options(spec.get("options")):
            row = parser.rows.get(f"parameter-{entry_point}--{path}")
            if row is None:
                problems.append(f"{entry_point}: {path} missing")
                continue
            rendered_type, shows_default = row
            wanted = TYPE_NAMES[option.get("type", "str")]
            if not rendered_type.startswith(wanted):
                problems.append(f"{entry_point}: {path} rendered as {rendered_type!r}, declared {wanted}")
            if option.get("default") is not None and not shows_default:
                problems.append(f"{entry_point}: {path} declares a default the page does not show")
    assert not problems, f"{role}_role.html:\n" + "\n".join(problems)


def test_sphinx_warns_only_about_docs_it_could_not_fetch():
    log = (SITE.parent / "build.log").read_text(encoding="utf-8")
    offline = "failed to reach any of the inventories" in log
    unexpected = []
    for line in log.splitlines():
        if "WARNING:" not in line or "failed to reach any of the inventories" in line:
            continue
        label = re.search(r"undefined label: '([^']+)'", line)
        if offline and label and OUTSIDE_LABELS.match(label.group(1)):
            continue
        unexpected.append(line)
    assert not unexpected, "\n".join(unexpected)
