"""NIC-team decisions on JSON in the documented shape of the NetLbfo / NetAdapter / Hyper-V cmdlets' output.

Windows cannot run here: these fixtures replay what win_nic_team_gather reports (see tests/unit/fixtures/windows).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._wincommand import commands_for
from ansible_collections.hpc.balance.plugins.module_utils._winteam import (
    desired_summary,
    plan,
    plan_changes,
    summary,
    verdict,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import TeamDesired
from ansible_collections.hpc.balance.plugins.module_utils._winteam_findings import preflight
from ansible_collections.hpc.balance.plugins.module_utils._winteam_safety import recorded_desired
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    TEAMING_MODES,
    PcieLink,
    enum_name,
    parse_host_state,
    vendor_driver_file_patterns,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "windows"


def raw(name):
    return json.loads((FIXTURES / (f"nic_team_gather_{name}.json")).read_text())


def state(name):
    return parse_host_state(raw(name))


def desired(**args):
    return TeamDesired.from_args(dict({"name": "Storage", "members": ["NIC1", "NIC2"]}, **args))


def codes(findings, severity):
    return sorted(finding.code for finding in findings if finding.severity == severity)


# ---------------------------------------------------------------------------------------------------- parsing
def test_enum_numbers_and_enum_names_parse_to_the_same_state():
    by_number = state("team_up")
    by_name = state("team_up_enum_names")
    assert by_number.teams == by_name.teams
    assert by_number.members == by_name.members
    assert by_number.adapters == by_name.adapters


def test_team_record_is_typed():
    team = state("team_up").teams["Storage"]
    assert (team.teaming_mode, team.load_balancing_algorithm, team.status) == ("SwitchIndependent", "Dynamic", "Up")
    assert sorted(team.members) == ["NIC1", "NIC2"]
    assert team.team_nics == ("Storage",)  # ConvertTo-Json wrote the one-element array as a scalar


def test_members_fall_back_to_get_netlbfoteammember_when_the_team_record_lacks_them():
    data = raw("team_up")
    del data["teams"][0]["Members"]
    assert parse_host_state(data).teams["Storage"].members == ("NIC1", "NIC2")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, "Static"), (1, "SwitchIndependent"), (2, "Lacp"), ("2", "Lacp"), ("lacp", "Lacp"), ("LACP", "Lacp")],
)
def test_enum_name_accepts_number_or_name(value, expected):
    assert enum_name(value, TEAMING_MODES, "TeamingMode") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (7, "TeamingMode is 7: not a documented value"),
        ("Bonded", "TeamingMode is 'Bonded': expected one of ['Lacp', 'Static', 'SwitchIndependent']"),
        (True, "TeamingMode is True"),
    ],
)
def test_enum_name_refuses_undocumented_values_naming_the_field(value, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        enum_name(value, TEAMING_MODES, "TeamingMode")


def test_vendor_patterns_for_the_gather_module_come_from_the_vendor_table():
    assert vendor_driver_file_patterns() == ["basp*.sys", "cpqteam*.sys", "ians*.sys", "qlasp*.sys"]


# ---------------------------------------------------------------------------------------------------- desired state
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"members": []}, "members is empty"),
        ({"members": ["NIC1", "NIC1"]}, "members lists 'NIC1' more than once"),
        ({"standby_member": "NIC3"}, "standby_member 'NIC3' is not in members ('NIC1', 'NIC2')"),
        ({"members": ["NIC1"], "standby_member": "NIC1"}, "needs at least one other, active member"),
        ({"vlan_id": 5000}, "vlan_id is 5000: use 1-4094"),
        ({"kind": "set", "teaming_mode": "Lacp"}, "SET is SwitchIndependent only"),
        ({"kind": "set", "load_balancing_algorithm": "IPAddresses"}, "use HyperVPort or Dynamic"),
        ({"kind": "set", "standby_member": "NIC2"}, "standby_member is not available with Switch Embedded Teaming"),
        ({"teaming_mode": "Bonded"}, "teaming_mode is 'Bonded': expected one of Static, SwitchIndependent, Lacp"),
        ({"name": " "}, "name is empty"),
    ],
)
def test_desired_state_refuses_inconsistent_arguments(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        desired(**args)


def test_absent_needs_no_members():
    assert desired(state="absent", members=[]).members == ()


# ---------------------------------------------------------------------------------------------------- change lists
PLAN_CASES = [
    # (id, fixture, desired args, expected change list)
    ("already_in_state", "team_up", {}, []),
    ("already_in_state_enum_names", "team_up_enum_names", {}, []),
    ("members_in_other_order", "team_up", {"members": ["NIC2", "NIC1"]}, []),
    (
        "member_added",
        "team_up",
        {"members": ["NIC1", "NIC2", "NIC3"]},
        [{"action": "add_member", "team": "Storage", "member": "NIC3", "administrative_mode": "Active"}],
    ),
    (
        "member_removed",
        "team_up",
        {"members": ["NIC1"]},
        [{"action": "remove_member", "team": "Storage", "member": "NIC2"}],
    ),
    (
        "member_swapped_adds_before_removing",
        "team_up",
        {"members": ["NIC1", "NIC3"]},
        [
            {"action": "add_member", "team": "Storage", "member": "NIC3", "administrative_mode": "Active"},
            {"action": "remove_member", "team": "Storage", "member": "NIC2"},
        ],
    ),
    (
        "teaming_mode_drift",
        "team_up",
        {"teaming_mode": "Lacp"},
        [{"action": "set_team", "team": "Storage", "teaming_mode": "Lacp"}],
    ),
    (
        "algorithm_drift",
        "team_up",
        {"load_balancing_algorithm": "HyperVPort"},
        [{"action": "set_team", "team": "Storage", "load_balancing_algorithm": "HyperVPort"}],
    ),
    (
        "mode_and_algorithm_drift_in_one_call",
        "team_up",
        {"teaming_mode": "Static", "load_balancing_algorithm": "TransportPorts"},
        [
            {
                "action": "set_team",
                "team": "Storage",
                "teaming_mode": "Static",
                "load_balancing_algorithm": "TransportPorts",
            }
        ],
    ),
    (
        "standby_member_set",
        "team_up",
        {"standby_member": "NIC2"},
        [{"action": "set_member_mode", "team": "Storage", "member": "NIC2", "administrative_mode": "Standby"}],
    ),
    (
        "standby_member_added",
        "team_up",
        {"members": ["NIC1", "NIC2", "NIC3"], "standby_member": "NIC3"},
        [{"action": "add_member", "team": "Storage", "member": "NIC3", "administrative_mode": "Standby"}],
    ),
    (
        "vlan_set_on_primary_team_nic",
        "team_up",
        {"vlan_id": 120},
        [{"action": "set_team_nic_vlan", "team": "Storage", "team_nic": "Storage", "vlan_id": 120}],
    ),
    ("vlan_zero_is_the_untagged_default", "team_up", {"vlan_id": 0}, []),
    (
        # Tagging renames the primary team NIC ("Storage - VLAN 120"): tag first, then rename, or the name won't last.
        "team_nic_tagged_then_renamed",
        "team_up",
        {"team_nic_name": "Storage-10G", "vlan_id": 120},
        [
            {"action": "set_team_nic_vlan", "team": "Storage", "team_nic": "Storage", "vlan_id": 120},
            {
                "action": "rename_team_nic",
                "team": "Storage",
                "primary": True,
                "team_nic": "Storage - VLAN 120",
                "new_name": "Storage-10G",
            },
        ],
    ),
    (
        "new_team",
        "no_team",
        {},
        [
            {
                "action": "new_team",
                "team": "Storage",
                "members": ["NIC1", "NIC2"],
                "teaming_mode": "SwitchIndependent",
                "load_balancing_algorithm": "Dynamic",
            },
            {"action": "wait_adapter", "interface": "Storage"},
        ],
    ),
    (
        # A standby member exists only in SwitchIndependent mode (Lacp/Static make every member active).
        "new_switch_independent_team_with_standby_vlan_and_nic_name",
        "no_team",
        {"members": ["NIC1", "NIC3"], "standby_member": "NIC3", "vlan_id": 30, "team_nic_name": "Storage-30"},
        [
            {
                "action": "new_team",
                "team": "Storage",
                "members": ["NIC1", "NIC3"],
                "teaming_mode": "SwitchIndependent",
                "load_balancing_algorithm": "Dynamic",
                "team_nic_name": "Storage-30",
            },
            {"action": "set_member_mode", "team": "Storage", "member": "NIC3", "administrative_mode": "Standby"},
            {"action": "wait_adapter", "interface": "Storage-30"},
            {"action": "set_team_nic_vlan", "team": "Storage", "team_nic": "Storage-30", "vlan_id": 30},
            {
                "action": "rename_team_nic",
                "team": "Storage",
                "primary": True,
                "team_nic": "Storage - VLAN 30",
                "new_name": "Storage-30",
            },
        ],
    ),
    ("absent_removes_the_team", "team_up", {"state": "absent"}, [{"action": "remove_team", "team": "Storage"}]),
    ("absent_already", "no_team", {"state": "absent"}, []),
    (
        "set_already_in_state",
        "set_switch",
        {"name": "SETswitch", "kind": "set", "members": ["NIC3", "NIC4"], "load_balancing_algorithm": "HyperVPort"},
        [],
    ),
    (
        "set_algorithm_drift",
        "set_switch",
        {"name": "SETswitch", "kind": "set", "members": ["NIC3", "NIC4"]},
        [{"action": "set_set_team", "switch": "SETswitch", "load_balancing_algorithm": "Dynamic"}],
    ),
    (
        "set_member_added",
        "set_switch",
        {
            "name": "SETswitch",
            "kind": "set",
            "members": ["NIC1", "NIC3", "NIC4"],
            "load_balancing_algorithm": "HyperVPort",
        },
        [{"action": "set_set_team", "switch": "SETswitch", "members": ["NIC1", "NIC3", "NIC4"]}],
    ),
    (
        "set_new_switch",
        "hyperv_no_switch",
        {"name": "SETswitch", "kind": "set", "members": ["NIC3", "NIC4"]},
        [
            {
                "action": "new_set_switch",
                "switch": "SETswitch",
                "members": ["NIC3", "NIC4"],
                "allow_management_os": False,
            },
            {"action": "set_set_team", "switch": "SETswitch", "load_balancing_algorithm": "Dynamic"},
        ],
    ),
    (
        "set_absent",
        "set_switch",
        {"name": "SETswitch", "kind": "set", "state": "absent"},
        [{"action": "remove_set_switch", "switch": "SETswitch"}],
    ),
]


@pytest.mark.parametrize(
    ("fixture", "args", "expected"), [case[1:] for case in PLAN_CASES], ids=[c[0] for c in PLAN_CASES]
)
def test_plan_is_the_smallest_change(fixture, args, expected):
    result = plan(desired(**args), state(fixture))
    assert codes(result.findings, "refuse") == []
    assert result.changes == expected


@pytest.mark.parametrize(
    "args",
    [{"teaming_mode": "Lacp"}, {"teaming_mode": "Static"}, {"load_balancing_algorithm": "IPAddresses"}],
)
def test_mode_drift_is_converged_with_set_netlbfoteam_never_by_re_creating(args):
    actions = [change["action"] for change in plan_changes(desired(**args), state("team_up"))]
    assert actions == ["set_team"]


def test_standby_moves_to_another_member_activating_first():
    data = raw("team_up")
    data["team_members"][1].update({"AdministrativeMode": 1, "OperationalStatus": 1})  # NIC2 on standby
    changes = plan_changes(desired(standby_member="NIC1"), parse_host_state(data))
    assert changes == [
        {"action": "set_member_mode", "team": "Storage", "member": "NIC2", "administrative_mode": "Active"},
        {"action": "set_member_mode", "team": "Storage", "member": "NIC1", "administrative_mode": "Standby"},
    ]


# ---------------------------------------------------------------------------------------------------- preflight
def test_mixed_speeds_and_vendors_are_refused_and_nothing_is_planned():
    result = plan(desired(members=["NIC1", "MGMT"]), state("no_team"))
    assert codes(result.findings, "refuse") == ["mixed_link_speeds", "mixed_vendors"]
    assert result.changes == []
    speeds = next(f for f in result.findings if f.code == "mixed_link_speeds")
    assert "'NIC1' 10 Gbit/s, 'MGMT' 1 Gbit/s" in speeds.message
    assert "set force: true" in speeds.message


def test_force_turns_the_mix_into_warnings_and_plans_the_team():
    # MGMT carries the management address: the opt-in is needed as well, so the team comes behind a rollback.
    result = plan(desired(members=["NIC1", "MGMT"], force=True, allow_management_change=True), state("no_team"))
    assert codes(result.findings, "refuse") == []
    assert {"mixed_link_speeds", "mixed_vendors"} <= set(codes(result.findings, "warn"))
    assert [change["action"] for change in result.changes] == [
        "arm_rollback",
        "new_team",
        "wait_adapter",
        "disarm_rollback",
    ]


def test_same_card_model_on_two_cards_is_uniform():
    result = preflight(desired(members=["NIC1", "NIC3"]), state("no_team"))
    assert codes(result, "refuse") == []
    assert "mixed_models" not in codes(result, "warn")


def test_different_driver_versions_are_refused():
    data = raw("no_team")
    data["adapters"][2]["DriverVersionString"] = "1.9.0.0"  # NIC3
    result = preflight(desired(members=["NIC1", "NIC3"]), parse_host_state(data))
    assert codes(result, "refuse") == ["mixed_drivers"]
    assert "'NIC1' 1.12.101.0, 'NIC3' 1.9.0.0" in next(f.message for f in result if f.code == "mixed_drivers")


# Jumbo packet size. Get-NetAdapterAdvancedProperty (learn.microsoft.com/powershell/module/netadapter/
# get-netadapteradvancedproperty) reads an adapter's advanced property by -RegistryKeyword: "The standardized keywords
# have a RegistryKeyword name that begins with an asterisk". *JumboPacket is one of them (Keywords That Can Be Edited,
# learn.microsoft.com/windows-hardware/drivers/network/keywords-that-can-be-edited): "The size, in bytes, of the
# largest supported Jumbo Packet (an Ethernet frame that is greater than 1514 bytes) that the hardware can support",
# default 1514. RegistryValue is a string array (MSFT_NetAdapterAdvancedPropertySettingData).
def jumbo_packets(data, sizes):
    """The gather's jumbo_packets records for {adapter name: RegistryValue}."""
    by_name = {adapter["Name"]: adapter for adapter in data["adapters"]}
    data["jumbo_packets"] = [
        {
            "Name": name,
            "InterfaceDescription": by_name[name]["InterfaceDescription"],
            "RegistryKeyword": "*JumboPacket",
            "RegistryValue": value,
        }
        for name, value in sizes.items()
    ]
    return data


@pytest.mark.parametrize("value", [["9014"], "9014", 9014], ids=["list", "string", "number"])
def test_the_jumbo_packet_size_is_read_from_registry_value_as_list_or_scalar(value):
    adapters = parse_host_state(jumbo_packets(raw("no_team"), {"NIC1": value})).adapters
    assert adapters["NIC1"].jumbo_packet_bytes == 9014


def test_a_gather_without_jumbo_packet_records_leaves_the_size_unknown():
    assert {adapter.jumbo_packet_bytes for adapter in state("no_team").adapters.values()} == {None}


def test_the_recorded_jumbo_packet_sizes_are_read_per_adapter():
    adapters = state("team_up").adapters
    assert {name: adapter.jumbo_packet_bytes for name, adapter in adapters.items()} == {
        "NIC1": 9014,
        "NIC2": 9014,
        "NIC3": 9014,
        "NIC4": 9014,
        "MGMT": None,  # no record: unknown
        "Storage": None,
    }


def test_a_jumbo_packet_size_that_is_not_a_number_names_the_adapter():
    with pytest.raises(ValueError, match=r"adapter 'NIC1' \*JumboPacket RegistryValue is \['9K'\]: expected a size"):
        parse_host_state(jumbo_packets(raw("no_team"), {"NIC1": ["9K"]}))


@pytest.mark.parametrize("force", [False, True])
def test_members_with_different_jumbo_packet_sizes_are_refused_naming_each_member_and_size(force):
    """A frame larger than one member's setting is dropped on that member only, whichever flows the team puts there:
    members carry one size, even with force."""
    data = jumbo_packets(raw("no_team"), {"NIC1": ["9014"], "NIC2": ["1514"]})
    result = plan(desired(force=force), parse_host_state(data))
    assert codes(result.findings, "refuse") == ["member_mtu_mismatch"]
    message = next(f.message for f in result.findings if f.code == "member_mtu_mismatch")
    assert "'NIC1' 9014 bytes, 'NIC2' 1514 bytes" in message
    assert "Set-NetAdapterAdvancedProperty -Name <member> -RegistryKeyword '*JumboPacket'" in message
    assert result.changes == []


def test_set_members_with_different_jumbo_packet_sizes_are_refused():
    data = jumbo_packets(raw("hyperv_no_switch"), {"NIC3": ["9014"], "NIC4": ["4088"]})
    wanted = desired(kind="set", name="vSwitch-Storage", members=["NIC3", "NIC4"])
    result = plan(wanted, parse_host_state(data))
    assert codes(result.findings, "refuse") == ["member_mtu_mismatch"]
    assert result.changes == []


def test_members_with_one_jumbo_packet_size_are_teamed():
    data = jumbo_packets(raw("no_team"), {"NIC1": ["9014"], "NIC2": ["9014"], "MGMT": ["1514"]})
    result = plan(desired(), parse_host_state(data))
    assert codes(result.findings, "refuse") == []
    assert "new_team" in [change["action"] for change in result.changes]


def test_a_member_whose_size_is_unknown_is_not_refused():
    """A driver without the keyword, or a gather from before it was read, gives no size: nothing to compare."""
    data = jumbo_packets(raw("no_team"), {"NIC1": ["9014"]})
    result = plan(desired(), parse_host_state(data))
    assert "member_mtu_mismatch" not in codes(result.findings, "refuse")


@pytest.mark.parametrize("force", [False, True])
def test_vendor_teaming_tool_is_refused_even_with_force(force):
    result = plan(desired(force=force), state("vendor_intel_ans"))
    refused = [f for f in result.findings if f.severity == "refuse"]
    assert [f.code for f in refused] == ["vendor_teaming_tool"]
    assert refused[0].message.startswith("Intel Advanced Network Services (ANS) is installed (driver iANSMiniport")
    assert "one teaming manager per machine" in refused[0].message
    assert result.changes == []


def test_hyperv_switch_on_the_team_refuses_lbfo_and_offers_set():
    result = plan(desired(), state("hyperv_vswitch_on_team"))
    refused = [f for f in result.findings if f.severity == "refuse"]
    assert [f.code for f in refused] == ["lbfo_under_vswitch"]
    message = refused[0].message
    assert "Hyper-V switch 'vSwitch-Storage' sits on team 'Storage'" in message
    assert "unsupported from Windows Server 2022 (this host: build 20348)" in message
    assert "kind: set" in message and "-EnableEmbeddedTeaming $true -NetAdapterName NIC1,NIC2" in message
    assert result.changes == []


def test_a_hyperv_switch_on_a_team_about_to_be_renamed_refuses_lbfo():
    """The switch sits on the team under the name the host has now (rename_from), not the one the task asks for."""
    result = plan(desired(name="Storage2", rename_from="Storage"), state("hyperv_vswitch_on_team"))
    refused = [f for f in result.findings if f.severity == "refuse"]
    assert [f.code for f in refused] == ["lbfo_under_vswitch"]
    message = refused[0].message
    assert "Hyper-V switch 'vSwitch-Storage' sits on team 'Storage' (renamed 'Storage2' by this run)" in message
    assert result.changes == []


def test_a_hyperv_switch_on_a_renamed_team_refuses_lbfo_on_the_next_run():
    wanted = desired(name="Storage2", rename_from="Storage")
    renamed = model.apply(state("hyperv_vswitch_on_team"), [rename_change_for(wanted)])
    result = plan(wanted, renamed)
    assert codes(result.findings, "refuse") == ["lbfo_under_vswitch"]
    assert "Hyper-V switch 'vSwitch-Storage' sits on team 'Storage2'." in next(
        f.message for f in result.findings if f.code == "lbfo_under_vswitch"
    )


def test_a_hyperv_switch_on_a_team_about_to_be_renamed_warns_on_windows_server_2019():
    result = plan(desired(name="Storage2", rename_from="Storage"), state("hyperv_vswitch_on_team_2019"))
    assert codes(result.findings, "refuse") == []
    assert codes(result.findings, "warn") == ["lbfo_under_vswitch_deprecated"]


def rename_change_for(wanted):
    return {"action": "rename_team", "team": wanted.rename_from, "new_name": wanted.name}


def test_a_team_meant_for_a_vswitch_is_refused_before_it_exists():
    result = plan(desired(for_vswitch=True), state("hyperv_no_switch"))
    assert codes(result.findings, "refuse") == ["lbfo_under_vswitch"]


def test_set_is_planned_where_lbfo_is_refused():
    result = plan(desired(kind="set", name="vSwitch-Storage", members=["NIC3", "NIC4"]), state("hyperv_no_switch"))
    assert codes(result.findings, "refuse") == []
    assert [change["action"] for change in result.changes] == ["new_set_switch", "set_set_team"]


def test_set_without_hyperv_is_refused():
    result = plan(desired(kind="set", name="SETswitch"), state("no_team"))
    assert codes(result.findings, "refuse") == ["hyperv_missing"]


def test_set_refuses_members_of_an_lbfo_team():
    result = plan(desired(kind="set", name="SETswitch", members=["NIC1", "NIC2"]), state("hyperv_vswitch_on_team"))
    assert codes(result.findings, "refuse") == ["member_in_other_team", "member_in_other_team"]


def test_missing_member_is_refused_and_named():
    result = plan(desired(members=["NIC1", "NIC9"]), state("no_team"))
    missing = [f for f in result.findings if f.code == "member_missing"]
    assert missing[0].severity == "refuse"
    assert missing[0].message.startswith("member 'NIC9' not found on the host; adapters present: 'MGMT', 'NIC1'")


def test_member_of_another_team_is_refused():
    result = plan(desired(name="Backup", members=["NIC1", "NIC3"]), state("team_up"))
    assert codes(result.findings, "refuse") == ["member_in_other_team"]
    assert "member 'NIC1' already belongs to LBFO team 'Storage'" in result.refusal_message()


def test_disconnected_member_is_a_warning_not_a_speed_mismatch():
    result = preflight(desired(), state("team_degraded"))
    assert codes(result, "refuse") == []
    assert "member_disconnected" in codes(result, "warn")


def test_standby_member_is_warned_about():
    result = preflight(desired(standby_member="NIC2"), state("team_up"))
    assert "standby_member" in codes(result, "warn")


def test_lbfo_unavailable_is_refused():
    data = raw("no_team")
    data["lbfo_available"] = False
    assert codes(preflight(desired(), parse_host_state(data)), "refuse") == ["lbfo_unavailable"]


def test_absent_has_no_preflight_refusals():
    assert preflight(desired(state="absent"), state("vendor_intel_ans")) == []


# ---------------------------------------------------------------------------------------------------- PCIe
def test_pcie_link_that_cannot_carry_both_ports_is_warned_about():
    result = preflight(desired(members=["SLOT3-P1", "SLOT3-P2"]), state("pcie_narrow_slot"))
    assert codes(result, "refuse") == []
    bottleneck = [f.message for f in result if f.code == "pcie_bottleneck"]
    assert bottleneck[0] == (
        "member 'SLOT3-P1': its PCIe link (x4 at 8.0 GT/s, about 31.51 Gbit/s usable) cannot carry the nominal "
        "50 Gbit/s of SLOT3-P1 + SLOT3-P2; move the card to a wider or faster slot"
    )
    assert codes(result, "warn").count("pcie_link_degraded") == 2


def test_pcie_link_wide_enough_gives_only_information():
    result = preflight(desired(), state("no_team"))
    assert codes(result, "warn") == []
    assert codes(result, "info") == ["pcie_link", "pcie_link"]


@pytest.mark.parametrize(
    ("speed_encoded", "width", "gigabits_per_second"),
    [
        (1, 1, 2.0),  # Gen1: 2.5 GT/s, 8b/10b
        (2, 4, 16.0),  # Gen2: 5 GT/s, 8b/10b
        (3, 8, 63.015),  # Gen3: 8 GT/s, 128b/130b
        (4, 16, 252.062),  # Gen4
        (5, 16, 504.123),  # Gen5
        (9, 8, None),  # not a documented encoding
        (3, 0, None),  # no link
    ],
)
def test_pcie_usable_rate_per_generation(speed_encoded, width, gigabits_per_second):
    usable = PcieLink.usable_bits_per_second(speed_encoded, width)
    if gigabits_per_second is None:
        assert usable is None
    else:
        assert usable / 1e9 == pytest.approx(gigabits_per_second, abs=1e-3)


# ---------------------------------------------------------------------------------------------------- verdicts
VERDICT_CASES = [
    # (id, fixture, desired args, ok, message)
    ("team_up", "team_up", {}, True, "team 'Storage' is Up: 'NIC2' Active, 'NIC1' Active"),
    (
        "team_degraded_names_the_member",
        "team_degraded",
        {},
        False,
        "team 'Storage' is Degraded: member 'NIC2' is Failed (PhysicalMediaDisconnected)",
    ),
    (
        "lacp_not_negotiated_names_the_member",
        "lacp_negotiating",
        {"teaming_mode": "Lacp"},
        False,
        "team 'Storage' is Degraded: member 'NIC2' is Failed (LacpNegotiationIssue)",
    ),
    ("team_missing", "no_team", {}, False, "team 'Storage' not found on the host"),
    (
        "members_differ",
        "team_up",
        {"members": ["NIC1", "NIC2", "NIC3"]},
        False,
        "team 'Storage' has members 'NIC1', 'NIC2', expected 'NIC1', 'NIC2', 'NIC3'",
    ),
    ("absent", "no_team", {"state": "absent"}, True, "team 'Storage' is absent"),
    ("absent_still_there", "team_up", {"state": "absent"}, False, "team 'Storage' still exists (status Up)"),
    (
        "set_up",
        "set_switch",
        {"name": "SETswitch", "kind": "set", "members": ["NIC3", "NIC4"]},
        True,
        "SET switch 'SETswitch' is Up: 'NIC3', 'NIC4'",
    ),
]


@pytest.mark.parametrize(
    ("fixture", "args", "ok", "message"), [case[1:] for case in VERDICT_CASES], ids=[c[0] for c in VERDICT_CASES]
)
def test_verdict(fixture, args, ok, message):
    result = verdict(desired(**args), state(fixture))
    assert (result.ok, result.message) == (ok, message)


def test_verdict_reports_the_real_members_and_their_state():
    result = verdict(desired(), state("team_degraded"))
    assert result.status == "Degraded"
    assert {m["name"]: (m["operational_status"], m["failure_reason"]) for m in result.members} == {
        "NIC1": ("Active", "NoFailure"),
        "NIC2": ("Failed", "PhysicalMediaDisconnected"),
    }


def test_standby_member_on_standby_is_healthy():
    data = raw("team_up")
    data["team_members"][1].update({"AdministrativeMode": 1, "OperationalStatus": 1})
    result = verdict(desired(standby_member="NIC2"), parse_host_state(data))
    assert result.ok, result.message


def test_set_member_down_is_named():
    data = raw("set_switch")
    data["adapters"][3].update({"Status": "Disconnected", "MediaConnectState": 2})
    result = verdict(desired(name="SETswitch", kind="set", members=["NIC3", "NIC4"]), parse_host_state(data))
    assert (result.ok, result.message) == (False, "SET switch 'SETswitch': member 'NIC4' is Disconnected")


# ---------------------------------------------------------------------------------------------------- diff
def test_diff_summaries_show_the_mode_change_only():
    wanted = desired(teaming_mode="Lacp")
    before = summary(wanted, state("team_up"))
    after = desired_summary(wanted, state("team_up"), plan(wanted, state("team_up")).changes)
    changed = {key for key in before if before[key] != after[key]}
    assert changed == {"teaming_mode"}


def test_diff_of_a_new_team():
    wanted = desired()
    before = summary(wanted, state("no_team"))
    assert before == {"kind": "lbfo", "name": "Storage", "present": False}
    assert (
        desired_summary(wanted, state("no_team"), plan(wanted, state("no_team")).changes)["team_nic_name"] == "Storage"
    )


def test_fixture_is_not_modified_by_parsing():
    data = raw("team_up")
    snapshot = copy.deepcopy(data)
    parse_host_state(data)
    assert data == snapshot


# ---------------------------------------------------------------------------------------------------- Windows' rules
def tagged(name="team_up", vlan_id=120):
    """The fixture with its primary team NIC tagged, as Windows leaves it: renamed, Default false."""
    data = raw(name)
    data["team_nics"][0].update(Name=f"Storage - VLAN {vlan_id}", VlanID=vlan_id, Default=False)
    data["teams"][0]["TeamNics"] = f"Storage - VLAN {vlan_id}"
    for record in data["adapters"]:
        if record["Name"] == "Storage":
            record["Name"] = f"Storage - VLAN {vlan_id}"
    for key in ("ip_addresses", "ip_interfaces"):
        for record in data[key]:
            if record["InterfaceAlias"] == "Storage":
                record["InterfaceAlias"] = f"Storage - VLAN {vlan_id}"
    return parse_host_state(data)


def test_untagging_the_primary_team_nic_uses_default_mode_not_vlan_id_zero():
    changes = plan(desired(vlan_id=0), tagged()).changes
    assert changes == [{"action": "set_team_nic_default", "team": "Storage", "team_nic": "Storage - VLAN 120"}]
    assert commands_for(changes[0]) == [
        {
            "command": "Set-NetLbfoTeamNic",
            "parameters": {"Name": "Storage - VLAN 120", "Default": True, "Confirm": False, "ErrorAction": "Stop"},
        }
    ]


def test_the_default_flag_makes_the_primary_team_nic_untagged_whatever_vlanid_says():
    data = raw("team_up")
    data["team_nics"][0].update(VlanID=0, Default=True)
    assert parse_host_state(data).team_nics[0].vlan_id == 0
    data["team_nics"][0].update(VlanID=120, Default=False)
    assert parse_host_state(data).team_nics[0].vlan_id == 120


def test_a_tagged_and_renamed_team_nic_plans_nothing_on_the_next_run():
    wanted = desired(vlan_id=120, team_nic_name="Storage-10G")
    after = model.apply(state("team_up"), plan(wanted, state("team_up")).changes)
    assert [(nic.name, nic.vlan_id) for nic in after.team_nics] == [("Storage-10G", 120)]
    assert plan(wanted, after).changes == []


@pytest.mark.parametrize("mode", ["Lacp", "Static"])
def test_standby_member_in_a_switch_dependent_mode_is_refused(mode):
    with pytest.raises(ValueError, match=f"standby_member 'NIC2' needs teaming_mode SwitchIndependent: in {mode} mode"):
        desired(teaming_mode=mode, standby_member="NIC2")


@pytest.mark.parametrize("mode", ["Lacp", "Static"])
def test_switching_a_team_with_a_standby_member_to_a_switch_dependent_mode_sets_the_member_active_first(mode):
    """Only SwitchIndependent has a standby member (NIC Teaming settings, learn.microsoft.com/windows-server/
    networking/technologies/nic-teaming/nic-teaming-settings: "Standby adapter ... Switch independent"), and
    Set-NetLbfoTeam (learn.microsoft.com/powershell/module/netlbfo/set-netlbfoteam) says nothing of what becomes of a
    standby member when -TeamingMode leaves it. Set-NetLbfoTeamMember -AdministrativeMode Active
    (learn.microsoft.com/powershell/module/netlbfo/set-netlbfoteammember) is the documented way to activate it."""
    standby = model.apply(
        state("team_up"),
        [{"action": "set_member_mode", "team": "Storage", "member": "NIC2", "administrative_mode": "Standby"}],
    )
    assert plan(desired(teaming_mode=mode), standby).changes == [
        {"action": "set_member_mode", "team": "Storage", "member": "NIC2", "administrative_mode": "Active"},
        {"action": "set_team", "team": "Storage", "teaming_mode": mode},
    ]


def test_lbfo_under_a_vswitch_on_windows_server_2019_is_a_warning_and_verifies():
    result = plan(desired(), state("hyperv_vswitch_on_team_2019"))
    assert codes(result.findings, "refuse") == []
    assert codes(result.findings, "warn") == ["lbfo_under_vswitch_deprecated"]
    assert "still allows it" in next(f.message for f in result.findings if f.code == "lbfo_under_vswitch_deprecated")
    assert verdict(desired(), state("hyperv_vswitch_on_team_2019")).ok


@pytest.mark.parametrize(
    "args", [{"vlan_id": 120}, {"vlan_team_nics": [{"vlan_id": 20}]}, {"vlan_id": 120, "for_vswitch": True}]
)
def test_a_vlan_on_a_team_under_a_vswitch_is_refused(args):
    """NIC Teaming (learn.microsoft.com/windows-server/networking/technologies/nic-teaming/nic-teaming): under a
    Hyper-V switch "all VLAN segregation must be done in the Hyper-V Virtual Switch rather than in NIC Teaming"."""
    result = plan(desired(**args), state("hyperv_vswitch_on_team_2019"))
    assert codes(result.findings, "refuse") == ["team_vlan_under_vswitch"]
    assert result.changes == []


def test_a_vlan_on_a_renamed_team_under_a_vswitch_is_refused():
    result = plan(desired(name="Storage2", rename_from="Storage", vlan_id=120), state("hyperv_vswitch_on_team_2019"))
    assert codes(result.findings, "refuse") == ["team_vlan_under_vswitch"]


def test_a_driver_without_a_path_does_not_stop_the_vendor_check():
    data = raw("no_team")
    data["teaming_drivers"] = [{"Name": "nopath", "PathName": None, "State": "Running"}, {"Name": "e", "PathName": ""}]
    assert codes(preflight(desired(), parse_host_state(data)), "refuse") == []


def test_lacp_timer_is_gathered_and_converged():
    data = raw("lacp_negotiating")
    assert parse_host_state(data).teams["Storage"].lacp_timer == "Fast"
    changes = plan_changes(desired(teaming_mode="Lacp", lacp_timer="Slow"), parse_host_state(data))
    assert changes == [{"action": "set_team", "team": "Storage", "lacp_timer": "Slow"}]
    assert commands_for(changes[0])[0]["parameters"] == {
        "Name": "Storage",
        "LacpTimer": "Slow",
        "Confirm": False,
        "ErrorAction": "Stop",
    }


def test_lacp_timer_needs_lacp_mode():
    with pytest.raises(ValueError, match="lacp_timer 'Slow' applies to teaming_mode Lacp only"):
        desired(lacp_timer="Slow")


# -------------------------------------------------------------------------------------------- operators' additions
def test_additional_vlan_team_nics_are_added_renamed_and_removed():
    changes = plan_changes(
        desired(vlan_team_nics=[{"vlan_id": 20}, {"vlan_id": 30, "name": "Storage-30"}]), state("team_up")
    )
    assert changes == [
        {"action": "add_team_nic", "team": "Storage", "vlan_id": 20, "team_nic": "Storage - VLAN 20"},
        {"action": "add_team_nic", "team": "Storage", "vlan_id": 30, "team_nic": "Storage-30"},
    ]
    after = model.apply(state("team_up"), changes)
    assert plan_changes(desired(vlan_team_nics=[{"vlan_id": 30, "name": "Storage-30"}]), after) == [
        {"action": "remove_team_nic", "team": "Storage", "vlan_id": 20, "team_nic": "Storage - VLAN 20"}
    ]


def test_a_static_team_nic_address_is_set_with_gateway_and_dns():
    args = {"address": "192.168.10.50", "prefix_length": 24, "gateway": "192.168.10.1", "dns_servers": ["10.0.0.2"]}
    changes = plan_changes(desired(team_nic_ip=args), state("team_up"))
    assert changes == [
        {
            "action": "set_ip",
            "interface": "Storage",
            "address": "192.168.10.50",
            "prefix_length": 24,
            "gateway": "192.168.10.1",
            "dns_servers": ["10.0.0.2"],
        }
    ]
    assert [c["command"] for c in commands_for(changes[0])] == [
        "Set-NetIPInterface",
        "Clear-HpcIPv4Address",
        "New-NetIPAddress",
        "Set-DnsClientServerAddress",
    ]


def test_the_team_is_renamed_rather_than_re_created():
    assert plan_changes(desired(name="Storage2", rename_from="Storage"), state("team_up")) == [
        {"action": "rename_team", "team": "Storage", "new_name": "Storage2"}
    ]


def test_set_host_vnics_get_their_vlan_and_rdma():
    changes = plan_changes(
        desired(
            name="SETswitch",
            kind="set",
            members=["NIC3", "NIC4"],
            load_balancing_algorithm="HyperVPort",
            host_vnics=[{"name": "SMB1", "vlan_id": 12, "rdma": True}],
        ),
        state("set_switch"),
    )
    assert changes == [
        {"action": "add_host_vnic", "switch": "SETswitch", "vnic": "SMB1"},
        {"action": "set_host_vnic_vlan", "vnic": "SMB1", "vlan_id": 12},
        {"action": "set_rdma", "adapter": "vEthernet (SMB1)", "enabled": True},
    ]


@pytest.mark.parametrize("allow", [True, False])
def test_new_vmswitch_allow_management_os_follows_the_option(allow):
    changes = plan_changes(
        desired(name="SETswitch", kind="set", members=["NIC3", "NIC4"], allow_management_os=allow),
        state("hyperv_no_switch"),
    )
    assert commands_for(changes[0])[0]["parameters"]["AllowManagementOS"] is allow


def test_rdma_cards_going_into_lbfo_are_warned_about():
    data = raw("no_team")
    for record in data["rdma"]:
        record["Enabled"] = record["Name"] in ("NIC1", "NIC2")
    assert "lbfo_loses_rdma" in codes(preflight(desired(), parse_host_state(data)), "warn")


# ------------------------------------------------------------------------------------------- LACP timer by build
def _on_build(name, build):
    data = raw(name)
    data["os"]["build_number"] = build
    return parse_host_state(data)


@pytest.mark.parametrize(
    ("build", "refused"), [(9200, True), (9600, True), (None, True), (14393, False), (17763, False)]
)
def test_lacp_timer_is_refused_below_windows_server_2016(build, refused):
    result = plan(desired(teaming_mode="Lacp", lacp_timer="Slow"), _on_build("lacp_negotiating", build))
    assert ("lacp_timer_unsupported" in codes(result.findings, "refuse")) is refused
    if refused:
        assert result.changes == []
        [finding] = [f for f in result.findings if f.code == "lacp_timer_unsupported"]
        assert "needs Windows Server 2016 (build 14393) or later" in finding.message
        assert "have no -LacpTimer" in finding.message


def test_a_lacp_team_on_windows_server_2012_r2_is_converged_without_the_timer():
    result = plan(desired(teaming_mode="Lacp"), _on_build("lacp_negotiating", 9600))
    assert codes(result.findings, "refuse") == []


def test_the_rollback_of_a_lacp_team_on_windows_server_2012_r2_passes_no_lacp_timer():
    recorded = recorded_desired(desired(teaming_mode="Lacp"), _on_build("lacp_negotiating", 9600))
    assert recorded.teaming_mode == "Lacp" and recorded.lacp_timer is None
    commands = [command for change in plan_changes(recorded, state("no_team")) for command in commands_for(change)]
    new_team = next(command for command in commands if command["command"] == "New-NetLbfoTeam")
    assert "LacpTimer" not in new_team["parameters"]


# ---------------------------------------------------------------------------------------------- verdict: configuration
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (dict(vlan_id=130), "team NIC 'Storage' is on VLAN untagged, expected 130"),
        (dict(team_nic_name="Storage-10G"), "the primary team NIC is named 'Storage', expected 'Storage-10G'"),
        (
            dict(team_nic_ip={"address": "192.168.10.50", "prefix_length": 24}),
            "team NIC 'Storage' has 192.168.10.21/24, expected 192.168.10.50/24",
        ),
        (dict(team_nic_ip={"source": "dhcp"}), "team NIC 'Storage' does not use DHCP"),
        (dict(vlan_team_nics=[{"vlan_id": 20}]), "VLAN team NICs on VLANs [], expected [20]"),
    ],
    ids=["vlan", "name", "address", "dhcp", "vlan_team_nics"],
)
def test_the_verdict_fails_when_an_up_team_has_the_wrong_vlan_name_or_address(args, expected):
    """Team and members Up is not the change done: the verdict reads the VLAN and name of the primary team NIC
    (Get-NetLbfoTeamNic, learn.microsoft.com/powershell/module/netlbfo/get-netlbfoteamnic) and its addresses
    (Get-NetIPAddress, learn.microsoft.com/powershell/module/nettcpip/get-netipaddress)."""
    result = verdict(desired(**args), state("team_up"))
    assert not result.ok
    assert result.message == f"team 'Storage' is Up but {expected}"


def test_the_verdict_fails_when_a_host_vnic_has_the_wrong_vlan():
    wanted = desired(
        name="SETswitch",
        kind="set",
        members=["NIC3", "NIC4"],
        load_balancing_algorithm="HyperVPort",
        host_vnics=[{"name": "SETswitch", "vlan_id": 10}],
    )
    result = verdict(wanted, state("set_switch"))
    assert not result.ok
    assert result.message == "SET switch 'SETswitch' is Up but host vNIC 'SETswitch' is on VLAN untagged, expected 10"


# ------------------------------------------------------------------------------------------- a second default gateway
STATIC_WITH_GATEWAY = {"address": "192.168.10.50", "prefix_length": 24, "gateway": "192.168.10.1"}


def test_a_second_default_gateway_is_refused_naming_both_interfaces_and_the_options():
    """With automatic metrics the faster interface gets the lower metric (learn.microsoft.com/troubleshoot/
    windows-server/networking/automatic-metric-for-ipv4-routes), so the storage team's gateway would win."""
    result = plan(desired(team_nic_ip=STATIC_WITH_GATEWAY), state("team_up"))
    assert result.changes == []
    [finding] = [f for f in result.findings if f.code == "second_default_gateway"]
    assert finding.severity == "refuse"
    assert (
        "adds a default gateway on 'Storage' (192.168.10.1) while 'MGMT' (10.0.0.1) already has one" in finding.message
    )
    for option in (
        "interface_metric",
        "skip_as_source: true",
        "register_in_dns: false",
        "allow_second_default_gateway",
    ):
        assert option in finding.message


def test_with_the_option_a_second_gateway_is_a_warning_and_the_metric_source_and_dns_options_are_set():
    args = dict(STATIC_WITH_GATEWAY, interface_metric=500, skip_as_source=True, register_in_dns=False)
    result = plan(desired(team_nic_ip=args, allow_second_default_gateway=True), state("team_up"))
    assert codes(result.findings, "warn") == ["second_default_gateway"]
    assert result.changes[-1] == {
        "action": "set_ip_options",
        "interface": "Storage",
        "interface_metric": 500,
        "address": "192.168.10.50",
        "skip_as_source": True,
        "register_in_dns": False,
    }
    rendered = [c["command"] for c in commands_for(result.changes[-1])]
    assert rendered == ["Set-NetIPInterface", "Set-NetIPAddress", "Set-DnsClient"]


def test_moving_a_members_gateway_to_the_team_adds_no_second_one():
    result = plan(desired(team_nic_ip={"source": "members"}, allow_management_change=True), state("winrm_on_member"))
    assert "second_default_gateway" not in [f.code for f in result.findings]


def test_a_gateway_where_no_other_interface_has_one_passes():
    data = raw("team_up")
    data["routes"] = []
    result = plan(desired(team_nic_ip=STATIC_WITH_GATEWAY), parse_host_state(data))
    assert "second_default_gateway" not in [f.code for f in result.findings]
