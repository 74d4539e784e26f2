"""The management path: a change that can cut the controller off is refused, or run behind a timed rollback.

The rollback script is rendered in Python (module_utils/_winrollback.py), parsed here with tree-sitter-powershell,
and its steps are checked with the apply model: run after the change, they restore the recorded team and IPv4 state.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._wincommand import commands_for, render_command
from ansible_collections.hpc.balance.plugins.module_utils._winrollback import render_rollback_script
from ansible_collections.hpc.balance.plugins.module_utils._winteam import plan, summary
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import TeamDesired
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import parse_host_state

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests" / "ps1"))
from check_ps1_parse import parse_errors  # noqa: E402

FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "windows"


def state(name):
    return parse_host_state(json.loads((FIXTURES / f"nic_team_gather_{name}.json").read_text()))


def desired(**args):
    return TeamDesired.from_args(dict({"name": "Storage", "members": ["NIC1", "NIC2"]}, **args))


def refusal(result):
    return [f for f in result.findings if f.severity == "refuse"]


# ------------------------------------------------------------------------------------------------ refused by default
def test_teaming_the_nic_that_carries_winrm_is_refused_naming_nic_address_and_opt_in():
    result = plan(desired(), state("winrm_on_member"))
    assert result.changes == []
    [finding] = refusal(result)
    assert finding.code == "management_path"
    assert "NIC 'NIC1' carries the management address 192.168.10.21" in finding.message
    assert "win_nic_team_allow_management_change: true" in finding.message


def test_ansible_host_marks_the_management_nic_without_a_winrm_record():
    data = json.loads((FIXTURES / "nic_team_gather_no_team.json").read_text())
    data["winrm_connections"] = []
    result = plan(desired(management_addresses=["192.168.10.21"]), parse_host_state(data))
    assert [f.code for f in refusal(result)] == ["management_path"]


def test_a_team_away_from_the_management_nic_needs_no_opt_in():
    result = plan(desired(members=["NIC3", "NIC4"]), state("no_team"))
    assert refusal(result) == [] and result.changes[0]["action"] == "new_team"


def test_removing_the_switch_whose_host_vnic_carries_management_is_refused():
    result = plan(desired(name="SETswitch", kind="set", state="absent"), state("set_switch_management_vnic"))
    [finding] = refusal(result)
    assert "change 'remove_set_switch' touches 'SETswitch' under 'vEthernet (SETswitch)'" in finding.message
    assert "10.0.1.21" in finding.message


def test_taking_the_management_os_off_the_switch_is_refused():
    wanted = desired(
        name="SETswitch",
        kind="set",
        members=["NIC3", "NIC4"],
        load_balancing_algorithm="HyperVPort",
        allow_management_os=False,
    )
    assert [f.code for f in refusal(plan(wanted, state("set_switch_management_vnic")))] == ["management_path"]


def test_a_gather_without_ip_records_cannot_be_judged_and_is_refused():
    data = json.loads((FIXTURES / "nic_team_gather_team_up.json").read_text())
    for key in ("ip_addresses", "ip_interfaces", "routes", "dns_servers", "winrm_connections"):
        del data[key]
    assert [f.code for f in refusal(plan(desired(vlan_id=5), parse_host_state(data)))] == ["management_unknown"]


# ---------------------------------------------------------------------------------------------------- opted in
def test_with_the_opt_in_the_change_is_wrapped_by_arm_and_disarm():
    result = plan(desired(allow_management_change=True, team_nic_ip={"source": "members"}), state("winrm_on_member"))
    assert refusal(result) == []
    assert [c["action"] for c in result.changes] == [
        "arm_rollback",
        "new_team",
        "wait_adapter",
        "set_ip",
        "disarm_rollback",
    ]
    arm, disarm = result.changes[0], result.changes[-1]
    assert arm["task_name"] == disarm["task_name"] == "hpc.balance rollback lbfo Storage"
    assert arm["timeout_s"] == 300
    assert result.changes[3] == {
        "action": "set_ip",
        "interface": "Storage",
        "address": "192.168.10.21",
        "prefix_length": 24,
    }


MANAGEMENT_CASES = {
    "team_the_winrm_nic": ("winrm_on_member", dict(team_nic_ip={"source": "members"})),
    "team_the_winrm_nic_without_moving_its_address": ("winrm_on_member", {}),
    "team_mgmt_with_force": ("no_team", dict(members=["NIC1", "MGMT"], force=True)),
    "remove_the_management_switch": ("set_switch_management_vnic", dict(name="SETswitch", kind="set", state="absent")),
    "retag_the_management_team": ("winrm_on_member", dict(vlan_id=0)),
    "management_os_off": (
        "set_switch_management_vnic",
        dict(
            name="SETswitch",
            kind="set",
            members=["NIC3", "NIC4"],
            allow_management_os=False,
            load_balancing_algorithm="HyperVPort",
        ),
    ),
    "member_out_of_the_management_switch": (
        "set_switch_management_vnic",
        dict(name="SETswitch", kind="set", members=["NIC3"], load_balancing_algorithm="HyperVPort"),
    ),
}


def _recorded_view(wanted, recorded, after):
    """Team/switch summary and the IPv4 settings of every recorded interface, read from `after`."""
    return summary(wanted, after), {
        name: (after.ip_configs[name].settings if name in after.ip_configs else None) for name in recorded.ip_configs
    }


@pytest.mark.parametrize("case", sorted(MANAGEMENT_CASES))
def test_the_rollback_steps_restore_the_recorded_team_and_ip_state(case):
    fixture, args = MANAGEMENT_CASES[case]
    recorded = state(fixture)
    wanted = desired(**dict(args, allow_management_change=True))
    result = plan(wanted, recorded)
    if not result.changes:
        pytest.skip("nothing to change")
    arm = result.changes[0]
    assert arm["action"] == "arm_rollback"
    after_change = model.apply(recorded, result.changes)
    rolled_back = model.apply(after_change, arm["steps"])
    assert _recorded_view(wanted, recorded, rolled_back) == _recorded_view(wanted, recorded, recorded)


@pytest.mark.parametrize("case", sorted(MANAGEMENT_CASES))
def test_the_rendered_rollback_script_parses_as_powershell(case):
    fixture, args = MANAGEMENT_CASES[case]
    result = plan(desired(**dict(args, allow_management_change=True)), state(fixture))
    script = result.changes[0]["script"]
    assert parse_errors(script.encode("utf-8")) == []
    assert script.rstrip().endswith("Write-RollbackLog -Message 'rollback finished'")


def test_the_rollback_script_runs_each_step_and_unregisters_its_task():
    script = render_rollback_script(
        "hpc.balance rollback lbfo Storage",
        [
            {"action": "remove_team", "team": "Storage"},
            {
                "action": "set_ip",
                "interface": "NIC1",
                "address": "192.168.10.21",
                "prefix_length": 24,
                "gateway": "192.168.10.1",
                "dns_servers": ["10.0.0.2"],
            },
        ],
    )
    assert (
        "Invoke-RollbackStep -Description 'remove_team Storage' -Step {\n"
        "    Remove-NetLbfoTeam -Name:'Storage' -Confirm:$false -ErrorAction:'Stop'\n}"
    ) in script
    assert (
        "    New-NetIPAddress -InterfaceAlias:'NIC1' -AddressFamily:'IPv4' -IPAddress:'192.168.10.21' "
        "-PrefixLength:24 -DefaultGateway:'192.168.10.1'"
    ) in script
    assert "    Set-DnsClientServerAddress -InterfaceAlias:'NIC1' -ServerAddresses:@('10.0.0.2')" in script
    assert "Unregister-ScheduledTask -TaskName:'hpc.balance rollback lbfo Storage' -Confirm:$false" in script
    assert parse_errors(script.encode("utf-8")) == []


def test_names_with_quotes_cannot_break_out_of_the_script():
    script = render_rollback_script("t'x", [{"action": "remove_team", "team": "Team'; Remove-Item C:\\ -Recurse; '"}])
    assert "Remove-NetLbfoTeam -Name:'Team''; Remove-Item C:\\ -Recurse; '''" in script
    assert parse_errors(script.encode("utf-8")) == []


# ------------------------------------------------------------------------------------------------ the gate fails closed
@pytest.mark.parametrize("allow_management_change", [False, True], ids=["refused_by_default", "opted_in"])
def test_a_change_is_refused_when_no_interface_carries_the_management_address(allow_management_change):
    """Over SSH, a forwarded port or a NAT, no gathered connection and no interface carries the address Ansible
    reaches the host by: the management NIC is unknown, so no change runs, opted in or not (no rollback could know
    what to protect)."""
    data = json.loads((FIXTURES / "nic_team_gather_no_team.json").read_text())
    data["winrm_connections"] = []  # nothing established on the port the connection uses
    wanted = desired(members=["NIC3", "NIC4"], management_addresses=["203.0.113.7"])
    wanted = replace(wanted, management_ports=(2222,), allow_management_change=allow_management_change)
    result = plan(wanted, parse_host_state(data))
    assert result.changes == []
    [finding] = refusal(result)
    assert finding.code == "management_unknown"
    assert "connections on port 2222: 203.0.113.7" in finding.message
    assert "Set ansible_host to an IPv4 or IPv6 address of the host's management NIC" in finding.message


# Get-NetIPAddress -AddressFamily IPv6 (learn.microsoft.com/powershell/module/nettcpip/get-netipaddress) reports the
# IPv6 addresses; Get-NetTCPConnection (learn.microsoft.com/powershell/module/nettcpip/get-nettcpconnection) reports
# LocalAddress as the socket has it: IPv6, a link-local one with its zone index, or an IPv4 address mapped into IPv6
# on a dual-stack socket (RFC 4291 section 2.5.5.2).
@pytest.mark.parametrize(
    ("ipv6_record", "local_address"),
    [
        ("2001:db8:10::21", "2001:DB8:10:0::21"),
        ("fe80::21%12", "fe80::21%12"),
        (None, "::ffff:192.168.10.21"),
    ],
    ids=["ipv6", "ipv6_link_local_with_zone", "ipv4_mapped"],
)
def test_a_management_address_written_the_ipv6_way_marks_its_nic(ipv6_record, local_address):
    data = json.loads((FIXTURES / "nic_team_gather_no_team.json").read_text())
    if ipv6_record:
        data["ipv6_addresses"] = [
            {"InterfaceAlias": "NIC1", "IPAddress": ipv6_record, "PrefixLength": 64, "PrefixOrigin": 1}
        ]
    data["winrm_connections"] = [{"LocalAddress": local_address, "LocalPort": 5986, "State": 5}]
    result = plan(desired(), parse_host_state(data))
    assert result.changes == []
    assert [f.code for f in refusal(result)] == ["management_path"]
    assert "NIC 'NIC1' carries the management address" in refusal(result)[0].message


# ------------------------------------------------------------------------------------------------ renamed at run time
def _team_nic_named(name):
    """team_up with its primary team NIC renamed, reached over that NIC's address (the management path)."""
    data = json.loads((FIXTURES / "nic_team_gather_team_up.json").read_text())
    data["teams"][0]["TeamNics"] = name
    for key in ("team_nics", "adapters", "ip_addresses", "ip_interfaces", "dns_servers", "routes"):
        for record in data.get(key) or []:
            for field in ("Name", "InterfaceAlias"):
                if record.get(field) == "Storage":
                    record[field] = name
    data["winrm_connections"][0]["LocalAddress"] = "192.168.10.21"
    return parse_host_state(data)


def test_the_apply_and_the_rollback_rename_the_primary_team_nic_the_host_reports_not_a_predicted_name():
    """Set-NetLbfoTeamNic -VlanID renames the primary team NIC; the name it takes is not part of the cmdlet's
    documented syntax (learn.microsoft.com/powershell/module/netlbfo/set-netlbfoteamnic). Get-NetLbfoTeamNic -Team
    (learn.microsoft.com/powershell/module/netlbfo/get-netlbfoteamnic) lists the team's NICs with their Primary
    property (MSFT_NetLbfoTeamNic), so the rename finds the NIC when it runs."""
    result = plan(
        desired(vlan_id=130, team_nic_name="Storage-10G", allow_management_change=True), _team_nic_named("Storage-10G")
    )
    script = result.changes[0]["script"]
    rendered = [render_command(c) for change in result.changes[1:-1] for c in commands_for(change)]
    rename = "Rename-HpcPrimaryTeamNic -Team:'Storage' -NewName:'Storage-10G' -Confirm:$false -ErrorAction:'Stop'"
    assert rename in rendered and rename in script
    assert not any(line.startswith("Rename-NetAdapter") for line in rendered)
    assert "Rename-NetAdapter -Name:" not in script  # only the function's own call, by the name found at run time
    assert parse_errors(script.encode("utf-8")) == []


# ------------------------------------------------------------------------------------------------ converged SET host
def _converged_switch_removal():
    """set_converged: SET switch 'SETswitch' whose host vNICs are 'SETswitch' (management, VLAN 10, two IPv4
    addresses, an IPv6 address, both default gateways, DNS servers of both families), 'SMB1' (VLAN 12, RDMA) and
    'SMB2' (VLAN 13, RDMA). The change removes the switch; opted in, it runs behind a rollback."""
    recorded = state("set_converged")
    wanted = desired(name="SETswitch", kind="set", state="absent", allow_management_change=True)
    return recorded, plan(wanted, recorded)


def test_the_switch_rollback_restores_every_host_vnic_with_its_vlan_and_rdma():
    """New-VMSwitch -AllowManagementOS (learn.microsoft.com/powershell/module/hyper-v/new-vmswitch) gives back one
    untagged host vNIC named after the switch; the VLAN of each vNIC (Set-VMNetworkAdapterVlan -ManagementOS -Access,
    learn.microsoft.com/powershell/module/hyper-v/set-vmnetworkadaptervlan), the other vNICs (Add-VMNetworkAdapter
    -ManagementOS) and their RDMA (Enable-NetAdapterRdma) come back only from the rollback's record."""
    recorded, result = _converged_switch_removal()
    arm = result.changes[0]
    rolled_back = model.apply(model.apply(recorded, result.changes), arm["steps"])
    rdma = rolled_back.rdma_enabled
    vnics = sorted((v.name, v.vlan_id, bool(rdma.get(v.adapter_name))) for v in rolled_back.host_vnics)
    assert vnics == [("SETswitch", 10, False), ("SMB1", 12, True), ("SMB2", 13, True)]


def test_the_switch_rollback_restores_every_address_of_both_families_on_the_tagged_vnics():
    recorded, result = _converged_switch_removal()
    rolled_back = model.apply(model.apply(recorded, result.changes), result.changes[0]["steps"])
    management = rolled_back.ip_configs["vEthernet (SETswitch)"]
    assert management.static_addresses == (("10.0.1.21", 24), ("10.0.1.22", 24))
    assert management.static_ipv6_addresses == (("2001:db8:1::21", 64),)
    assert (management.gateway, management.ipv6_gateway) == ("10.0.1.1", "2001:db8:1::1")
    assert (management.dns_servers, management.ipv6_dns_servers) == (("10.0.0.2", "10.0.0.3"), ("2001:db8:1::53",))
    for name, config in recorded.ip_configs.items():
        assert rolled_back.ip_configs[name].settings == config.settings, name


def test_the_switch_rollback_tags_the_management_vnic_before_it_restores_its_addresses():
    """An address restored on the untagged vNIC that New-VMSwitch makes would sit on the wrong VLAN: the VLAN step
    comes first, and the restore carries every address, both gateways and the DNS servers of both families."""
    _recorded, result = _converged_switch_removal()
    steps = result.changes[0]["steps"]
    tag = steps.index({"action": "set_host_vnic_vlan", "vnic": "SETswitch", "vlan_id": 10})
    restore = next(i for i, s in enumerate(steps) if s["action"] == "restore_ip" and "SETswitch" in s["interface"])
    assert tag < restore
    script = result.changes[0]["script"]
    assert (
        "Set-VMNetworkAdapterVlan -ManagementOS:$true -VMNetworkAdapterName:'SETswitch' -Access:$true -VlanId:10"
    ) in script
    assert (
        "Restore-HpcIPConfiguration -InterfaceAlias:'vEthernet (SETswitch)' -Dhcp:$false "
        "-Address:@('10.0.1.21/24', '10.0.1.22/24', '2001:db8:1::21/64') -Gateway:@('10.0.1.1', '2001:db8:1::1') "
        "-DnsServer:@('10.0.0.2', '10.0.0.3', '2001:db8:1::53')"
    ) in script
    assert parse_errors(script.encode("utf-8")) == []


def _with_a_vm_on(fixture, switch):
    data = json.loads((FIXTURES / f"nic_team_gather_{fixture}.json").read_text())
    data["vm_adapters"] = [{"VMName": "vm01", "Name": "Network Adapter", "SwitchName": switch}]
    return parse_host_state(data)


@pytest.mark.parametrize("allow_management_change", [False, True], ids=["away_from_management", "opted_in"])
def test_removing_a_switch_that_a_vm_is_connected_to_is_refused(allow_management_change):
    """Remove-VMSwitch -Force removes the switch without asking (learn.microsoft.com/powershell/module/hyper-v/
    remove-vmswitch); Get-VMNetworkAdapter -VMName * (learn.microsoft.com/powershell/module/hyper-v/
    get-vmnetworkadapter) names the VMs connected to it."""
    wanted = desired(name="SETswitch", kind="set", state="absent", allow_management_change=allow_management_change)
    result = plan(wanted, _with_a_vm_on("set_switch", "SETswitch"))
    assert result.changes == []
    assert "vms_on_switch" in [f.code for f in refusal(result)]
    message = next(f.message for f in refusal(result) if f.code == "vms_on_switch")
    assert "virtual machines 'vm01' are connected to switch 'SETswitch'" in message


def test_the_switch_is_removed_by_a_command_that_refuses_while_a_vm_is_connected():
    [command] = commands_for({"action": "remove_set_switch", "switch": "S"})
    assert command["command"] == "Remove-HpcVMSwitch"


# ------------------------------------------------------------------------------------------------ the IP restore
def _team_nic_with_two_addresses_and_ipv6():
    """team_up reached over the team NIC, which carries 192.168.10.21/24 and 192.168.10.22/24, 2001:db8:10::21/64,
    default routes of both families and DNS servers of both families."""
    data = json.loads((FIXTURES / "nic_team_gather_team_up.json").read_text())
    data["ip_addresses"].append(
        {"InterfaceAlias": "Storage", "IPAddress": "192.168.10.22", "PrefixLength": 24, "PrefixOrigin": 1}
    )
    data["ipv6_addresses"] = [
        {"InterfaceAlias": "Storage", "IPAddress": "2001:db8:10::21", "PrefixLength": 64, "PrefixOrigin": 1}
    ]
    data["routes"].append({"InterfaceAlias": "Storage", "DestinationPrefix": "::/0", "NextHop": "2001:db8:10::1"})
    data["dns_servers"].append(
        {"InterfaceAlias": "Storage", "AddressFamily": 23, "ServerAddresses": ["2001:db8:10::53"]}
    )
    data["winrm_connections"][0]["LocalAddress"] = "192.168.10.21"
    return parse_host_state(data)


def test_the_rollback_restores_every_static_address_of_both_families_with_gateways_and_dns():
    recorded = _team_nic_with_two_addresses_and_ipv6()
    wanted = desired(allow_management_change=True, team_nic_ip={"address": "192.168.10.50", "prefix_length": 24})
    result = plan(wanted, recorded)
    assert [c["action"] for c in result.changes] == ["arm_rollback", "set_ip", "disarm_rollback"]
    rolled_back = model.apply(model.apply(recorded, result.changes), result.changes[0]["steps"])
    before, after = recorded.ip_configs["Storage"], rolled_back.ip_configs["Storage"]
    assert after.static_addresses == (("192.168.10.21", 24), ("192.168.10.22", 24))
    assert after.static_ipv6_addresses == (("2001:db8:10::21", 64),)
    assert after.ipv6_gateway == "2001:db8:10::1" and after.ipv6_dns_servers == ("2001:db8:10::53",)
    assert after.settings == before.settings


def test_the_rollback_restores_only_the_interfaces_the_change_altered():
    recorded = _team_nic_with_two_addresses_and_ipv6()
    wanted = desired(allow_management_change=True, team_nic_ip={"address": "192.168.10.50", "prefix_length": 24})
    steps = plan(wanted, recorded).changes[0]["steps"]
    assert [(s["action"], s["interface"]) for s in steps] == [("wait_adapter", "Storage"), ("restore_ip", "Storage")]
