"""Windows' rules as a model of each apply step, and the idempotence property: plan(apply(plan(state))) is empty.

The model (module_utils/_winteam_model.py) says what each step does to the recorded state, after the cmdlets' Learn
pages: a VLAN tag renames the primary team NIC, Static and Lacp make a standby member active, a NIC that joins a team
loses its TCP/IP binding, and so on. A step Windows refuses raises ForbiddenByWindows. For every recorded fixture and
every kind of change, applying the plan in the model and planning again must plan nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._winteam import plan, plan_changes, summary
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import TeamDesired
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import parse_host_state

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "windows"
# A fixture of a state Windows refuses (it names the rule, windows_rules.py) proves nothing about convergence.
FIXTURE_NAMES = sorted(
    path.stem.replace("nic_team_gather_", "")
    for path in FIXTURES.glob("nic_team_gather_*.json")
    if not json.loads(path.read_text()).get("_refused_by_windows")
)


def state(name):
    return parse_host_state(json.loads((FIXTURES / f"nic_team_gather_{name}.json").read_text()))


LBFO = {"name": "Storage", "members": ["NIC1", "NIC2"]}
SET = {"name": "SETswitch", "kind": "set", "members": ["NIC3", "NIC4"], "load_balancing_algorithm": "HyperVPort"}

# Every kind of change the planner makes, as the task arguments that ask for it.
CHANGE_KINDS = {
    "nothing": dict(LBFO),
    "add_member": dict(LBFO, members=["NIC1", "NIC2", "NIC3"]),
    "remove_member": dict(LBFO, members=["NIC1"]),
    "swap_member": dict(LBFO, members=["NIC1", "NIC3"]),
    "lacp_with_slow_timer": dict(LBFO, teaming_mode="Lacp", lacp_timer="Slow"),
    "static_mode": dict(LBFO, teaming_mode="Static"),
    "algorithm": dict(LBFO, load_balancing_algorithm="HyperVPort"),
    "standby": dict(LBFO, standby_member="NIC2"),
    "standby_added": dict(LBFO, members=["NIC1", "NIC2", "NIC3"], standby_member="NIC3"),
    "vlan_tag": dict(LBFO, vlan_id=120),
    "vlan_untag": dict(LBFO, vlan_id=0),
    "team_nic_name": dict(LBFO, team_nic_name="Storage-10G"),
    "vlan_and_name": dict(LBFO, vlan_id=120, team_nic_name="Storage-10G"),
    "extra_vlan_nics": dict(LBFO, vlan_team_nics=[{"vlan_id": 20}, {"vlan_id": 30, "name": "Storage-30"}]),
    "no_extra_vlan_nics": dict(LBFO, vlan_team_nics=[]),
    "static_ip": dict(LBFO, team_nic_ip={"address": "192.168.10.50", "prefix_length": 24, "dns_servers": ["1.1.1.1"]}),
    "static_ip_second_gateway": dict(
        LBFO,
        allow_second_default_gateway=True,
        team_nic_ip={
            "address": "192.168.10.50",
            "prefix_length": 24,
            "gateway": "192.168.10.1",
            "interface_metric": 500,
            "skip_as_source": True,
            "register_in_dns": False,
        },
    ),
    "dhcp_ip": dict(LBFO, team_nic_ip={"source": "dhcp"}),
    "ip_from_members": dict(LBFO, team_nic_ip={"source": "members"}),
    "rename_team": dict(LBFO, name="Storage2", rename_from="Storage"),
    "absent": dict(LBFO, state="absent"),
    "set_nothing": dict(SET),
    "set_algorithm": dict(SET, load_balancing_algorithm="Dynamic"),
    "set_member_added": dict(SET, members=["NIC2", "NIC3", "NIC4"]),
    "set_management_os_on": dict(SET, allow_management_os=True),
    "set_management_os_off": dict(SET, allow_management_os=False),
    "set_host_vnics": dict(
        SET, allow_management_os=True, host_vnics=[{"name": "SMB1", "vlan_id": 12, "rdma": True}, {"name": "SMB2"}]
    ),
    "set_absent": dict(SET, state="absent"),
}


def converges(fixture, args):
    """plan -> model apply -> plan again; the second plan must be empty. Returns the first plan's changes."""
    recorded = state(fixture)
    wanted = TeamDesired.from_args(args)
    first = plan(wanted, recorded)
    after = model.apply(recorded, first.changes)  # raises ForbiddenByWindows for a step Windows refuses
    assert plan(wanted, after).changes == []
    if not first.refused:  # a refused plan changes nothing; a plan that ran must leave nothing to do, gate or not
        assert plan_changes(wanted, after) == [], f"{fixture}: not converged after {first.changes}"
    return first.changes


@pytest.mark.parametrize("kind", sorted(CHANGE_KINDS))
@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_plan_of_the_applied_plan_is_empty(fixture, kind):
    converges(fixture, dict(CHANGE_KINDS[kind], allow_management_change=True))


def _outcomes() -> dict:
    """(fixture, change kind) -> 'changes' (a plan that runs and changes something), 'refused' or 'nothing'."""
    outcomes = {}
    for fixture in FIXTURE_NAMES:
        for kind in CHANGE_KINDS:
            wanted = TeamDesired.from_args(dict(CHANGE_KINDS[kind], allow_management_change=True))
            result = plan(wanted, state(fixture))
            outcomes[fixture, kind] = "refused" if result.refused else ("changes" if result.changes else "nothing")
    return outcomes


def test_the_property_is_exercised_on_real_changes():
    """A refused plan converges trivially: only plans that run and change something count. The table per fixture
    (changes / refused / nothing) and per change kind is printed (pytest -s, or -rP)."""
    outcomes = _outcomes()
    for fixture in FIXTURE_NAMES:
        row = [outcomes[fixture, kind] for kind in CHANGE_KINDS]
        print(
            f"{fixture}: {row.count('changes')} change, {row.count('refused')} refused, {row.count('nothing')} nothing"
        )
    for kind in CHANGE_KINDS:
        column = [fixture for fixture in FIXTURE_NAMES if outcomes[fixture, kind] == "changes"]
        print(f"{kind}: changes on {len(column)} fixture(s): {', '.join(column)}")
    changed = [key for key, outcome in outcomes.items() if outcome == "changes"]
    print(f"plans that change something: {len(changed)} of {len(outcomes)}")
    assert len(changed) >= 100
    assert set(CHANGE_KINDS) - {"nothing", "set_nothing"} <= {kind for _fixture, kind in changed}


MEMBERS = ["NIC1", "NIC2", "NIC3", "NIC4"]


@st.composite
def lbfo_args(draw):
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=4, unique=True))
    mode = draw(st.sampled_from(["SwitchIndependent", "Static", "Lacp"]))
    args = dict(
        name=draw(st.sampled_from(["Storage", "Storage2"])),
        members=members,
        teaming_mode=mode,
        load_balancing_algorithm=draw(st.sampled_from(["Dynamic", "HyperVPort", "TransportPorts", "IPAddresses"])),
        allow_management_change=draw(st.booleans()),
    )
    if args["name"] == "Storage2":
        args["rename_from"] = "Storage"
    if mode == "SwitchIndependent" and len(members) > 1 and draw(st.booleans()):
        args["standby_member"] = draw(st.sampled_from(members))
    if mode == "Lacp":
        args["lacp_timer"] = draw(st.sampled_from([None, "Fast", "Slow"]))
    args["vlan_id"] = draw(st.sampled_from([None, 0, 5, 120]))
    args["team_nic_name"] = draw(st.sampled_from([None, "Storage-10G"]))
    vlans = draw(st.lists(st.sampled_from([20, 30, 120]), max_size=2, unique=True))
    args["vlan_team_nics"] = draw(st.sampled_from([None, [{"vlan_id": v} for v in vlans if v != args["vlan_id"]]]))
    args["team_nic_ip"] = draw(
        st.sampled_from(
            [None, {"source": "dhcp"}, {"source": "members"}, {"address": "192.168.10.60", "prefix_length": 24}]
        )
    )
    return args


@st.composite
def set_args(draw):
    allow = draw(st.sampled_from([None, True, False]))
    vnics = draw(
        st.lists(
            st.builds(
                lambda name, vlan, rdma: {"name": name, "vlan_id": vlan, "rdma": rdma},
                st.sampled_from(["SMB1", "SMB2"]),
                st.sampled_from([0, 12]),
                st.sampled_from([None, True, False]),
            ),
            max_size=2,
            unique_by=lambda vnic: vnic["name"],
        )
    )
    return dict(
        name="SETswitch",
        kind="set",
        members=draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=4, unique=True)),
        load_balancing_algorithm=draw(st.sampled_from(["HyperVPort", "Dynamic"])),
        allow_management_os=allow,
        host_vnics=vnics if allow is not False else [],
        allow_management_change=draw(st.booleans()),
    )


# derandomize: the same 300 examples on every run, so a failure in CI reproduces here; no example database.
@settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(fixture=st.sampled_from(FIXTURE_NAMES), args=st.one_of(lbfo_args(), set_args()))
def test_any_plan_converges_in_one_run(fixture, args):
    try:
        TeamDesired.from_args(args)
    except ValueError:
        return  # refused before the host is touched
    converges(fixture, args)


# ---------------------------------------------------------------------------------------------------- Windows' rules
def test_a_vlan_tag_renames_the_primary_team_nic():
    after = model.apply(state("team_up"), [{"action": "set_team_nic_vlan", "team_nic": "Storage", "vlan_id": 5}])
    assert [(nic.name, nic.vlan_id, nic.default) for nic in after.team_nics] == [("Storage - VLAN 5", 5, False)]


def test_default_mode_untags_and_restores_the_team_name():
    tagged = model.apply(state("team_up"), [{"action": "set_team_nic_vlan", "team_nic": "Storage", "vlan_id": 5}])
    after = model.apply(tagged, [{"action": "set_team_nic_default", "team_nic": "Storage - VLAN 5"}])
    assert [(nic.name, nic.vlan_id, nic.default) for nic in after.team_nics] == [("Storage", 0, True)]


def test_renaming_a_team_renames_its_default_named_team_interfaces():
    """Rename-NetLbfoTeam "Also updates the team interface names accordingly, if they use default values."
    (learn.microsoft.com/powershell/module/netlbfo/rename-netlbfoteam)."""
    tagged = model.apply(
        state("team_up"),
        [
            {"action": "add_team_nic", "team": "Storage", "vlan_id": 20, "team_nic": "Storage - VLAN 20"},
            {"action": "add_team_nic", "team": "Storage", "vlan_id": 30, "team_nic": "Storage-30"},
        ],
    )
    after = model.apply(tagged, [{"action": "rename_team", "team": "Storage", "new_name": "Storage2"}])
    assert sorted(nic.name for nic in after.team_nics) == ["Storage-30", "Storage2", "Storage2 - VLAN 20"]
    assert "Storage2" in after.ip_configs and "Storage" not in after.adapters


def test_a_renamed_team_gets_its_address_on_the_renamed_team_interface():
    wanted = TeamDesired.from_args(
        dict(LBFO, name="Storage2", rename_from="Storage", allow_management_change=True, team_nic_ip={"source": "dhcp"})
    )
    changes = plan(wanted, state("team_up")).changes
    assert [change["interface"] for change in changes if change["action"] == "set_ip_dhcp"] == ["Storage2"]


def test_vlan_zero_is_not_a_tag_windows_accepts():
    with pytest.raises(model.ForbiddenByWindows, match="untag with -Default"):
        model.apply(state("team_up"), [{"action": "set_team_nic_vlan", "team_nic": "Storage", "vlan_id": 0}])


@pytest.mark.parametrize("mode", ["Lacp", "Static"])
def test_leaving_switch_independent_with_a_standby_member_is_not_modelled_as_activating_it(mode):
    """Set-NetLbfoTeam (learn.microsoft.com/powershell/module/netlbfo/set-netlbfoteam) does not say that Windows
    activates a standby member when the mode changes: the model refuses to guess, so a plan must activate it first."""
    standby = model.apply(
        state("team_up"),
        [{"action": "set_member_mode", "team": "Storage", "member": "NIC2", "administrative_mode": "Standby"}],
    )
    with pytest.raises(model.ForbiddenByWindows, match="standby member 'NIC2' still standby"):
        model.apply(standby, [{"action": "set_team", "team": "Storage", "teaming_mode": mode}])


@pytest.mark.parametrize("mode", ["Lacp", "Static"])
def test_standby_in_a_switch_dependent_team_is_forbidden(mode):
    switched = model.apply(state("team_up"), [{"action": "set_team", "team": "Storage", "teaming_mode": mode}])
    with pytest.raises(model.ForbiddenByWindows, match=f"standby member in a {mode} team"):
        model.apply(
            switched,
            [{"action": "set_member_mode", "team": "Storage", "member": "NIC2", "administrative_mode": "Standby"}],
        )


def test_a_member_loses_its_address_to_the_new_team_nic_which_starts_on_dhcp():
    recorded = state("winrm_on_member")
    after = model.apply(
        recorded, plan(TeamDesired.from_args(dict(LBFO, allow_management_change=True)), recorded).changes
    )
    assert "NIC1" not in after.ip_configs
    assert after.ip_configs["Storage"].dhcp and after.ip_configs["Storage"].addresses == ()


def test_ip_from_members_moves_the_static_address_to_the_team_nic():
    recorded = state("winrm_on_member")
    wanted = TeamDesired.from_args(dict(LBFO, allow_management_change=True, team_nic_ip={"source": "members"}))
    after = model.apply(recorded, plan(wanted, recorded).changes)
    assert after.ip_configs["Storage"].static_addresses == (("192.168.10.21", 24),)
    assert summary(wanted, after)["team_nic_ip"]["addresses"] == ["192.168.10.21/24"]


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_every_fixture_is_a_state_windows_allows(fixture):
    recorded = state(fixture)
    for team in recorded.teams.values():
        members = [recorded.members[name] for name in team.members]
        if team.teaming_mode != "SwitchIndependent":
            assert all(member.administrative_mode == "Active" for member in members), team.name
        assert sum(member.administrative_mode == "Standby" for member in members) <= 1
        assert any(member.administrative_mode == "Active" for member in members)
        nics = [nic for nic in recorded.team_nics if nic.team == team.name]
        assert sum(nic.primary for nic in nics) == 1
        assert len({nic.vlan_id for nic in nics}) == len(nics), "one team NIC per VLAN"
        for nic in nics:
            assert nic.default == (nic.primary and nic.vlan_id == 0)
    for vnic in recorded.host_vnics:
        switch = next(s for s in recorded.vm_switches if s.name == vnic.switch_name)
        assert switch.allow_management_os, "a host vNIC needs AllowManagementOS"
    teamed = set(recorded.members)
    for name in teamed:
        assert name not in recorded.ip_configs, f"{name} is teamed: TCP/IP is bound to the team NIC, not to it"
    for switch in recorded.vm_switches:
        for description in switch.adapter_descriptions:
            name = recorded.adapter_name_for_description(description)
            assert name not in recorded.ip_configs, f"{name} is bound to switch {switch.name}: no TCP/IP of its own"
