"""The Windows fixtures hold states Windows allows, judged by a rules table written from Microsoft's pages
(windows_rules.py), not by the planner's model. A fixture of a state Windows refuses says so (``_refused_by_windows``
names the rule) and is kept only to show that the role refuses to build on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._winteam import plan
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import TeamDesired
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import parse_host_state

sys.path.insert(0, str(Path(__file__).resolve().parent))
from windows_rules import RULES, broken_rules  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "windows"
GATHERS = sorted(FIXTURES.glob("nic_team_gather_*.json"))


def raw(path):
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", GATHERS, ids=[path.stem for path in GATHERS])
def test_a_fixture_breaks_no_rule_unless_it_says_which(path):
    data = raw(path)
    declared = set(data.get("_refused_by_windows") or [])
    assert declared <= {rule.name for rule in RULES}
    assert set(broken_rules(data)) == declared, broken_rules(data)


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (
            {
                "os": {"build_number": 20348},
                "team_nics": [{"InterfaceDescription": "Microsoft Network Adapter Multiplexor Driver"}],
                "vm_switches": [{"Name": "v", "EmbeddedTeamingEnabled": False,
                                 "NetAdapterInterfaceDescription": "Microsoft Network Adapter Multiplexor Driver"}],
            },
            "no_vswitch_on_an_lbfo_team_nic_from_windows_server_2022",
        ),
        ({"vm_switch_teams": [{"Name": "s", "TeamingMode": 2, "LoadBalancingAlgorithm": 4,
          "NetAdapterInterfaceDescription": ["a"]}]}, "set_is_switch_independent"),
        ({"vm_switch_teams": [{"Name": "s", "TeamingMode": 1, "LoadBalancingAlgorithm": 0,
          "NetAdapterInterfaceDescription": ["a"]}]}, "set_balances_by_hyperv_port_or_dynamic"),
        ({"vm_switch_teams": [{"Name": "s", "TeamingMode": 1, "LoadBalancingAlgorithm": 5,
          "NetAdapterInterfaceDescription": [str(n) for n in range(9)]}]}, "set_has_one_to_eight_members"),
        ({"teams": [{"Name": "T", "TeamingMode": 2}], "team_members": [{"Name": "A", "Team": "T",
          "AdministrativeMode": 1}, {"Name": "B", "Team": "T", "AdministrativeMode": 0}]},
         "standby_only_in_switch_independent_mode"),
    ],
    ids=["vswitch_on_lbfo_2022", "set_lacp", "set_transport_ports", "set_nine_members", "standby_in_lacp"],
)  # fmt: skip
def test_each_rule_refuses_the_state_its_page_forbids(data, rule):
    assert rule in broken_rules(data)


def test_each_rule_cites_a_microsoft_page():
    for rule in RULES:
        assert rule.says and ("learn.microsoft.com" in rule.page or "github.com/microsoft/" in rule.page), rule.name


def test_each_rule_quotes_its_page_or_says_why_it_cannot():
    for rule in RULES:
        assert bool(rule.quote) != bool(rule.unquoted), rule.name
    # A rule without a quoted sentence is our reading, not Microsoft's: the list stays short and named.
    assert [rule.name for rule in RULES if rule.unquoted] == ["standby_only_in_switch_independent_mode"]


ALL_FIXTURES = sorted(FIXTURES.glob("*.json"))


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=[path.stem for path in ALL_FIXTURES])
def test_a_fixture_cites_the_page_and_the_sentence_that_allow_its_state(path):
    """``_sources`` names the page each record list follows; ``_allowed_by`` the sentences that allow the state the
    records add up to (a team of two, a switch on a team, a failed member, ...), each quoted from its page."""
    cited = raw(path).get("_allowed_by")
    assert isinstance(cited, list) and cited, "no _allowed_by"
    for entry in cited:
        assert set(entry) == {"page", "quote", "allows"}, entry
        assert entry["page"].startswith(("https://learn.microsoft.com/", "https://github.com/microsoft/")), entry
        assert len(entry["quote"].split()) >= 5 and entry["allows"], entry


@pytest.mark.parametrize(
    "path", [path for path in GATHERS if raw(path).get("_refused_by_windows")], ids=lambda path: path.stem
)
def test_a_refused_fixture_cites_the_sentence_of_the_rule_that_refuses_it(path):
    data = raw(path)
    quotes = {entry["quote"] for entry in data["_allowed_by"]}
    for name in data["_refused_by_windows"]:
        assert next(rule.quote for rule in RULES if rule.name == name) in quotes


@pytest.mark.parametrize(
    "path",
    [path for path in GATHERS if raw(path).get("_refused_by_windows")],
    ids=lambda path: path.stem,
)
def test_the_role_refuses_to_build_an_lbfo_team_on_a_state_windows_refuses(path):
    data = raw(path)
    team = data["teams"][0]
    members = sorted(member["Name"] for member in data["team_members"] if member["Team"] == team["Name"])
    result = plan(TeamDesired.from_args({"name": team["Name"], "members": members}), parse_host_state(data))
    assert result.changes == [] and result.refused
    assert "lbfo_under_vswitch" in [f.code for f in result.findings if f.severity == "refuse"]
