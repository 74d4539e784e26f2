"""Every PowerShell module parses, and its Ansible.Basic argument spec matches the DOCUMENTATION beside it.

No PowerShell runtime exists on these machines: parsing is done by tree-sitter-powershell, and the spec is read
from the syntax tree (ps1_spec.py). A .ps1 that does not parse, or whose options drift from its .py, fails here.
The DOCUMENTATION is read as ansible-doc reads it, doc fragments merged (ansible's own get_docstring).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible.parsing.plugin_docs import read_docstring
from ansible.utils.plugin_docs import get_docstring
from check_ps1_parse import main as check_tree
from check_ps1_parse import parse_errors, powershell_files
from ps1_spec import SpecError, module_spec, normalise_documented, normalise_options

from ansible_collections.hpc.balance.plugins.doc_fragments import windows

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "plugins" / "modules").glob("*.ps1"))
HPCWIN = ROOT / "plugins" / "module_utils" / "HpcWin.psm1"


def test_there_are_powershell_modules_to_check():
    assert [path.name for path in MODULES] == [
        "win_nic_team_apply.ps1",
        "win_nic_team_gather.ps1",
        "win_smb_multichannel_apply.ps1",
        "win_smb_multichannel_gather.ps1",
    ]


def test_every_powershell_file_in_the_tree_parses(capsys):
    assert check_tree(["check_ps1_parse.py", str(ROOT)]) == 0
    count = len(powershell_files(ROOT))
    assert capsys.readouterr().out.startswith(f"checked {count} PowerShell files, 0 parse errors")


@pytest.mark.parametrize(
    "source",
    [
        b"$spec = @{\n    options = @{\n        name = @{ type = 'str' }\n}\n",  # unclosed hashtable
        b"if ($x {\n    Write-Output 'x'\n}\n",  # unclosed condition
        b"Function Get-Thing {\n    param(\n        [string] $Name\n}\n",  # unclosed param block
        b"$x = 'unterminated\n",  # unterminated string
        b"switch ($a) {\n    'x' {\n}\n",  # unclosed switch clause
        b"$module.Result.x = @(Get-Thing | ForEach-Object { $_.Name }\n",  # unclosed array expression
    ],
)
def test_broken_powershell_is_reported(source):
    assert parse_errors(source) != []


def test_broken_file_fails_the_tree_check(tmp_path, capsys):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "good.ps1").write_text("$a = 1\n")
    (tmp_path / "plugins" / "bad.ps1").write_text("$a = @{\n")
    assert check_tree(["check_ps1_parse.py", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("plugins/bad.ps1:")
    assert "checked 2 PowerShell files, 1 parse error" in out


@pytest.mark.parametrize("module", MODULES, ids=[path.stem for path in MODULES])
def test_argument_spec_matches_documentation(module):
    spec = module_spec(module.read_bytes(), library=HPCWIN.read_bytes())
    documentation = _documentation(module.with_suffix(".py"))
    documented = normalise_documented(documentation.get("options"))
    if module.stem.endswith("_apply"):
        # The shared fragment documents the command without choices; the module's description lists them.
        command = documented["changes"]["options"]["commands"]["options"]["command"]
        assert command["choices"] is None
        command["choices"] = _allowed_commands(documentation)
    assert normalise_options(spec["options"]) == documented
    check_mode = documentation["attributes"]["check_mode"]["support"] in ("full", "partial")
    assert spec.get("supports_check_mode", False) is check_mode
    assert documentation["attributes"]["platform"]["platforms"] == "windows"


class _CollectionFragments:
    """Stands in for the fragment loader ansible-doc passes to get_docstring (no collection loader is set up in these
    tests): it finds this collection's one fragment file."""

    def get(self, name):
        if name != "hpc.balance.windows":
            return None
        return type("windows", (windows.ModuleDocFragment,), {"ansible_name": name})


def _documentation(path):
    documentation, _examples, _returns, _metadata = get_docstring(
        str(path), _CollectionFragments(), collection_name="hpc.balance", is_module=True
    )
    return documentation


ALLOWED = re.compile(r"^The only commands it runs \(O\(changes\[\]\.commands\[\]\.command\)\) are (.*)\.$")


def _allowed_commands(documentation):
    """The cmdlets an apply module's description lists, in order."""
    listed = [match[1] for match in map(ALLOWED.match, documentation["description"]) if match]
    assert len(listed) == 1, "the description lists the allowed commands once"
    return re.findall(r"C\(([^)]+)\)", listed[0])


def test_the_apply_modules_take_their_options_from_one_fragment():
    apply_modules = [path.with_suffix(".py") for path in MODULES if path.stem.endswith("_apply")]
    assert [read_docstring(str(path))["doc"].get("options") for path in apply_modules] == [None, None]
    assert _documentation(apply_modules[0])["options"] == _documentation(apply_modules[1])["options"]


def test_the_allowed_commands_are_read_from_the_description():
    documentation = {
        "description": ["Runs.", "The only commands it runs (O(changes[].commands[].command)) are C(Set-A), C(New-B)."]
    }
    assert _allowed_commands(documentation) == ["Set-A", "New-B"]


def test_spec_reader_sees_nested_options_choices_and_defaults():
    spec = module_spec(
        b"$spec = @{\n"
        b"    options = @{\n"
        b"        mode = @{ type = 'str'; default = \"Lacp\"; choices = 'Static', 'Lacp' }\n"
        b"        n = @{ type = 'int'; default = 5 }\n"
        b"        items = @{ type = 'list'; elements = 'dict'; options = @{ a = @{ required = $true } } }\n"
        b"        none = @{ type = 'list'; elements = 'str'; default = @() }\n"
        b"    }\n"
        b"    supports_check_mode = $false\n"
        b"}\n"
    )
    assert spec == {
        "options": {
            "mode": {"type": "str", "default": "Lacp", "choices": ["Static", "Lacp"]},
            "n": {"type": "int", "default": 5},
            "items": {"type": "list", "elements": "dict", "options": {"a": {"required": True}}},
            "none": {"type": "list", "elements": "str", "default": []},
        },
        "supports_check_mode": False,
    }


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"$spec = @{ options = @{ a = @{ default = $env } } }\n", "variable \\$env"),
        (b'$spec = @{ options = @{ a = @{ default = "x$y" } } }\n', "interpolated string"),
        (b"$other = 1\n", "no \\$spec"),
    ],
)
def test_spec_reader_refuses_what_it_cannot_compare(source, message):
    with pytest.raises(SpecError, match=message):
        module_spec(source)


LIBRARY = (
    b"Function Get-Spec {\n"
    b"    param(\n"
    b"        [string[]] $Command\n"
    b"    )\n"
    b"\n"
    b"    $spec = @{ options = @{ command = @{ type = 'str'; choices = @($Command) } } }\n"
    b"    $spec\n"
    b"}\n"
)


def test_spec_reader_evaluates_a_library_function_with_the_modules_literal_arguments():
    source = b"$commands = @(\n    'Set-A',\n    'Set-B'\n)\n$spec = Get-Spec -Command $commands\n"
    assert module_spec(source, library=LIBRARY) == {
        "options": {"command": {"type": "str", "choices": ["Set-A", "Set-B"]}}
    }
    literal = module_spec(b"$spec = Get-Spec -Command 'Set-A'\n", library=LIBRARY)
    assert literal["options"]["command"]["choices"] == ["Set-A"]


@pytest.mark.parametrize(
    ("source", "library", "message"),
    [
        (b"$spec = Get-Spec -Command 'Set-A'\n", None, "built by Get-Spec: pass the library"),
        (b"$spec = Get-Other -Command 'Set-A'\n", LIBRARY, "no function Get-Other"),
        (b"$spec = Get-Spec 'Set-A'\n", LIBRARY, "only named arguments"),
        (b"$spec = Get-Spec -Command $unset\n", LIBRARY, "variable \\$unset"),
        (b"$spec = Get-Spec -Other 'Set-A'\n", LIBRARY, "variable \\$Command"),
        (b"$commands = Get-Commands\n$spec = Get-Spec -Command $commands\n", LIBRARY, "unsupported command"),
    ],
)
def test_spec_reader_refuses_a_library_call_it_cannot_bind(source, library, message):
    with pytest.raises(SpecError, match=message):
        module_spec(source, library=library)


def test_a_drifted_option_is_caught():
    documented = normalise_documented(
        {
            "changes": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "suboptions": {"action": {"type": "str", "required": True}},
            }
        }
    )
    spec = normalise_options(
        {"changes": {"type": "list", "elements": "dict", "required": True, "options": {"action": {"type": "str"}}}}
    )
    assert spec != documented


def test_the_team_gather_skips_a_driver_without_a_path():
    """Split-Path on an empty PathName stops the whole gather; the filter checks the path first (static check:
    no PowerShell runs here)."""
    source = (ROOT / "plugins" / "modules" / "win_nic_team_gather.ps1").read_text()
    assert "Split-Path -Path ([string]$_.PathName)" not in source
    guard = source.index("if ($path) {")
    assert source.index("$path = [string]$_.PathName") < guard < source.index("[System.IO.Path]::GetFileName($path)")
    assert parse_errors(source.encode("utf-8")) == []
