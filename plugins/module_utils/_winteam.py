# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NIC-team plan for Windows hosts: desired + gathered state -> the smallest change list behind its gates, a verdict.

Why this lives in Python: the PowerShell side is kept thin on purpose. ``win_nic_team_gather`` only reports what the
cmdlets say (parsed by ``_winteam_state``), ``win_nic_team_apply`` only runs the commands of a given change list
(rendered by ``_wincommand``). Every decision (is it safe to team these cards, can this change cut the controller off,
what is the smallest change, is the team healthy) is made here, on the controller.

The rooms, in the order of a run: ``_winteam_state`` (gathered state), ``_winteam_desired`` (the task),
``_winteam_findings`` (preflight), this file (changes, the plan and its management gate from ``_winteam_safety``,
verdict, diff).
Windows' rules the plan keeps (each modelled in ``_winteam_model`` and checked by an idempotence property test):

- a standby member exists only in SwitchIndependent mode; Static and Lacp make every member active
  (NIC Teaming settings, learn.microsoft.com/windows-server/networking/technologies/nic-teaming/nic-teaming-settings);
- tagging the primary team NIC renames it "<team> - VLAN <id>", so the plan tags first and renames after;
  ``Set-NetLbfoTeamNic -Default`` (not ``-VlanID 0``) returns it to the untagged Default mode (Set-NetLbfoTeamNic);
- Windows Server 2022 (build 20348) and later refuse a Hyper-V switch on an LBFO team; 2016/2019 allow it, deprecated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._winplan import Plan, refusals
from ansible_collections.hpc.balance.plugins.module_utils._winplan import quoted_names as _names
from ansible_collections.hpc.balance.plugins.module_utils._winrollback import render_rollback_script, rollback_steps
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import (
    TeamDesired,
    member_static_ip,
    rename_change,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_findings import (
    preflight,
    second_gateway_findings,
    switch_removal_findings,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_safety import (
    management_findings,
    recorded_desired,
    rollback_task_name,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    HostState,
    TeamMember,
    host_vnic_adapter_name,
)


# ---------------------------------------------------------------------------------------------------- changes
def _new_team_changes(desired: TeamDesired) -> list[dict]:
    new_team = {
        "action": "new_team",
        "team": desired.name,
        "members": list(desired.members),
        "teaming_mode": desired.teaming_mode,
        "load_balancing_algorithm": desired.load_balancing_algorithm,
    }
    if desired.lacp_timer:
        new_team["lacp_timer"] = desired.lacp_timer
    if desired.team_nic_name:
        new_team["team_nic_name"] = desired.team_nic_name
    changes = [new_team]
    if desired.standby_member:
        changes.append(
            {
                "action": "set_member_mode",
                "team": desired.name,
                "member": desired.standby_member,
                "administrative_mode": "Standby",
            }
        )
    return changes


def _team_settings_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    team = state.teams[desired.name]
    changes = []
    set_team = {}
    if team.teaming_mode != desired.teaming_mode:
        set_team["teaming_mode"] = desired.teaming_mode
    if team.load_balancing_algorithm != desired.load_balancing_algorithm:
        set_team["load_balancing_algorithm"] = desired.load_balancing_algorithm
    if desired.lacp_timer and team.lacp_timer != desired.lacp_timer:
        set_team["lacp_timer"] = desired.lacp_timer
    if set_team.get("teaming_mode") and desired.teaming_mode != "SwitchIndependent":
        # Only SwitchIndependent has a standby member, and Set-NetLbfoTeam does not document activating it when the
        # mode changes: activate it first, with the documented Set-NetLbfoTeamMember -AdministrativeMode Active.
        for member in team.members:
            record = state.members.get(member)
            if record is not None and record.administrative_mode == "Standby":
                activate = {"action": "set_member_mode", "team": desired.name, "member": member}
                changes.append(dict(activate, administrative_mode="Active"))
    if set_team:
        changes.append(dict({"action": "set_team", "team": desired.name}, **set_team))
    current = set(team.members)
    # Add before remove: the team keeps at least one member throughout.
    for member in desired.members:
        if member not in current:
            mode = "Standby" if member == desired.standby_member else "Active"
            changes.append(
                {"action": "add_member", "team": desired.name, "member": member, "administrative_mode": mode}
            )
    for member in team.members:
        if member not in desired.members:
            changes.append({"action": "remove_member", "team": desired.name, "member": member})
    if desired.teaming_mode != "SwitchIndependent":
        return changes  # Static and Lacp make every member active: there is no mode to set
    # Activate before putting another member on standby: a team allows at most one standby member.
    mode_changes = []
    for member in desired.members:
        record = state.members.get(member)
        if member not in current or record is None:
            continue
        wanted = "Standby" if member == desired.standby_member else "Active"
        if record.administrative_mode != wanted:
            mode_changes.append(
                {"action": "set_member_mode", "team": desired.name, "member": member, "administrative_mode": wanted}
            )
    return changes + sorted(mode_changes, key=lambda change: change["administrative_mode"] != "Active")


def _primary_nic_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    """VLAN first, then the name: tagging renames the primary team NIC, so a rename before it would not last."""
    primary = state.primary_team_nic(desired.name)
    if primary is None:
        return []
    changes: list[dict[str, Any]] = []
    name = primary.name
    if desired.vlan_id is not None and primary.vlan_id != desired.vlan_id:
        if desired.vlan_id == 0:
            changes.append({"action": "set_team_nic_default", "team": desired.name, "team_nic": name})
        else:
            changes.append(
                {"action": "set_team_nic_vlan", "team": desired.name, "team_nic": name, "vlan_id": desired.vlan_id}
            )
        name = model.primary_name_after_vlan(desired.name, desired.vlan_id)
    if desired.team_nic_name and name != desired.team_nic_name:
        # primary: the command finds the team's primary team NIC on the host when it runs (its name after tagging is
        # Windows' to choose); team_nic is the name the model expects, for the model and the messages only.
        changes.append(
            {
                "action": "rename_team_nic",
                "team": desired.name,
                "primary": True,
                "team_nic": name,
                "new_name": desired.team_nic_name,
            }
        )
    return changes


def _vlan_nic_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    if desired.vlan_team_nics is None:
        return []
    extra = {nic.vlan_id: nic for nic in state.team_nics if nic.team == desired.name and not nic.primary}
    changes = []
    for vlan, name in desired.vlan_team_nics:
        current = extra.get(vlan)
        if current is None:
            changes.append(
                {
                    "action": "add_team_nic",
                    "team": desired.name,
                    "vlan_id": vlan,
                    "team_nic": name or model.vlan_nic_default_name(desired.name, vlan),
                }
            )
        elif name and current.name != name:
            changes.append({"action": "rename_team_nic", "team_nic": current.name, "new_name": name})
    wanted = {vlan for vlan, _name in desired.vlan_team_nics}
    for vlan, nic in sorted(extra.items()):
        if vlan not in wanted:
            changes.append({"action": "remove_team_nic", "team": desired.name, "vlan_id": vlan, "team_nic": nic.name})
    return changes


def _ip_changes(desired: TeamDesired, before: HostState, state: HostState) -> list[dict]:
    """The team NIC's IPv4 configuration; `state` is the host as the earlier changes leave it."""
    wanted = desired.team_nic_ip
    primary = state.primary_team_nic(desired.name)
    if wanted is None or primary is None:
        return []
    current = state.ip_configs.get(primary.name)
    if wanted.source == "dhcp":
        if current is not None and current.dhcp:
            return []
        return [{"action": "set_ip_dhcp", "interface": primary.name}]
    if wanted.source == "members":
        moved = member_static_ip(desired, before) if desired.name not in before.teams else None
        if moved is None:
            return []  # the team exists: the address moved when it was made, and stays where it is
        (address, prefix), gateway, dns = moved.static_addresses[0], moved.gateway, moved.dns_servers
    else:
        address, prefix, gateway, dns = wanted.address, wanted.prefix_length, wanted.gateway, wanted.dns_servers
    if (
        current is not None
        and not current.dhcp
        and current.static_addresses == ((address, prefix),)
        and current.gateway == gateway
        and tuple(current.dns_servers) == tuple(dns)
    ):
        return []
    change = {"action": "set_ip", "interface": primary.name, "address": address, "prefix_length": prefix}
    if gateway:
        change["gateway"] = gateway
    if dns:
        change["dns_servers"] = list(dns)
    return [change]


def _ip_option_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    """Route metric, SkipAsSource and DNS registration of the primary team NIC where the task names them and the
    host (as the earlier changes leave it) differs."""
    wanted = desired.team_nic_ip
    primary = state.primary_team_nic(desired.name)
    if wanted is None or primary is None:
        return []
    config = state.ip_configs.get(primary.name)
    if config is None:
        return []
    change: dict = {}
    if wanted.interface_metric is not None and config.interface_metric != wanted.interface_metric:
        change["interface_metric"] = wanted.interface_metric
    if wanted.skip_as_source is not None and config.static_addresses:
        address = config.static_addresses[0][0]
        if (address in config.skip_as_source) != wanted.skip_as_source:
            change.update(address=address, skip_as_source=wanted.skip_as_source)
    if wanted.register_in_dns is not None and config.register_in_dns != wanted.register_in_dns:
        change["register_in_dns"] = wanted.register_in_dns
    return [dict({"action": "set_ip_options", "interface": primary.name}, **change)] if change else []


def _lbfo_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    rename = rename_change(desired, state)
    changes = [rename] if rename else []
    current = model.apply(state, changes)
    if desired.state == "absent":
        return changes + ([{"action": "remove_team", "team": desired.name}] if desired.name in current.teams else [])
    if desired.name not in current.teams:
        changes += _new_team_changes(desired)
        changes.append({"action": "wait_adapter", "interface": desired.team_nic_name or desired.name})
    else:
        changes += _team_settings_changes(desired, current)
    current = model.apply(state, changes)
    for step in (_primary_nic_changes, _vlan_nic_changes):
        more = step(desired, current)
        changes += more
        current = model.apply(current, more)
    changes += _ip_changes(desired, state, current)
    return changes + _ip_option_changes(desired, model.apply(state, changes))


def _set_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    switch = next((s for s in state.vm_switches if s.name == desired.name), None)
    if desired.state == "absent":
        return [{"action": "remove_set_switch", "switch": desired.name}] if switch is not None else []
    changes = []
    if switch is None:
        changes.append(
            {
                "action": "new_set_switch",
                "switch": desired.name,
                "members": list(desired.members),
                "allow_management_os": bool(desired.allow_management_os),
            }
        )
        # New-VMSwitch has no load-balancing parameter: the algorithm is set on the new SET team.
        changes.append(
            {
                "action": "set_set_team",
                "switch": desired.name,
                "load_balancing_algorithm": desired.load_balancing_algorithm,
            }
        )
    else:
        team = state.vm_switch_teams.get(desired.name)
        change: dict[str, Any] = {}
        current = {state.adapter_name_for_description(d) for d in team.adapter_descriptions} if team else set()
        if current != set(desired.members):
            change["members"] = list(desired.members)
        if team is None or team.load_balancing_algorithm != desired.load_balancing_algorithm:
            change["load_balancing_algorithm"] = desired.load_balancing_algorithm
        if change:
            changes.append(dict({"action": "set_set_team", "switch": desired.name}, **change))
        if desired.allow_management_os is not None and switch.allow_management_os != desired.allow_management_os:
            changes.append(
                {"action": "set_vm_switch", "switch": desired.name, "allow_management_os": desired.allow_management_os}
            )
    return changes + _host_vnic_changes(desired, model.apply(state, changes))


def _host_vnic_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    changes = []
    current = {vnic.name: vnic for vnic in state.host_vnics if vnic.switch_name == desired.name}
    for vnic in desired.host_vnics:
        adapter = host_vnic_adapter_name(vnic.name)
        if vnic.name not in current:
            changes.append({"action": "add_host_vnic", "switch": desired.name, "vnic": vnic.name})
        if (
            current.get(vnic.name) is None
            and vnic.vlan_id
            or (vnic.name in current and current[vnic.name].vlan_id != vnic.vlan_id)
        ):
            changes.append({"action": "set_host_vnic_vlan", "vnic": vnic.name, "vlan_id": vnic.vlan_id})
        if vnic.rdma is not None and bool(state.rdma_enabled.get(adapter)) != vnic.rdma:
            changes.append({"action": "set_rdma", "adapter": adapter, "enabled": vnic.rdma})
    return changes


def plan_changes(desired: TeamDesired, state: HostState) -> list[dict]:
    """The smallest ordered list of changes that takes the host from `state` to `desired` (empty: nothing to do)."""
    if desired.kind == "set":
        return _set_changes(desired, state)
    return _lbfo_changes(desired, state)


# ---------------------------------------------------------------------------------------------------- plan
def plan(desired: TeamDesired, state: HostState) -> Plan:
    """Preflight findings, then the change list behind the management gate (empty when anything is refused).

    Opted in, a change on the management path is wrapped: arm a rollback task first, disarm it last (the action
    plugin runs the disarm step only once it has reconnected).
    """
    findings = preflight(desired, state)
    if refusals(findings):
        return Plan(findings, [])
    changes = plan_changes(desired, state)
    findings = findings + switch_removal_findings(state, changes)
    if refusals(findings):
        return Plan(findings, [])
    gate = management_findings(desired, state, changes)
    findings = findings + second_gateway_findings(desired, state, changes) + gate
    if refusals(findings):
        return Plan(findings, [])
    if gate:
        recorded = recorded_desired(desired, state)
        steps = rollback_steps(recorded, state, model.apply(state, changes), plan_changes)
        name = rollback_task_name(desired)
        arm = {
            "action": "arm_rollback",
            "task_name": name,
            "timeout_s": desired.rollback_timeout_s,
            "steps": steps,
            "script": render_rollback_script(name, steps),
        }
        changes = [arm, *changes, {"action": "disarm_rollback", "task_name": name}]
    return Plan(findings, changes)


# ---------------------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str
    status: str | None = None
    members: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"ok": self.ok, "message": self.message, "status": self.status, "members": self.members}


def _member_report(record: TeamMember) -> dict:
    return {
        "name": record.name,
        "administrative_mode": record.administrative_mode,
        "operational_status": record.operational_status,
        "failure_reason": record.failure_reason,
        "transmit_link_speed_bits_per_second": record.transmit_link_speed_bits_per_second,
    }


def _lbfo_verdict(desired: TeamDesired, state: HostState) -> Verdict:
    team = state.teams.get(desired.name)
    if desired.state == "absent":
        if team is None:
            return Verdict(True, f"team '{desired.name}' is absent", None)
        return Verdict(False, f"team '{desired.name}' still exists (status {team.status})", team.status)
    if team is None:
        return Verdict(False, f"team '{desired.name}' not found on the host")
    records = [state.members[name] for name in team.members if name in state.members]
    members = [_member_report(record) for record in records]
    if set(team.members) != set(desired.members):
        return Verdict(
            False,
            f"team '{desired.name}' has members {_names(sorted(team.members))}, expected {_names(desired.members)}",
            team.status,
            members,
        )
    not_active = [
        record for record in records if record.name != desired.standby_member and record.operational_status != "Active"
    ]
    detail = "; ".join(
        f"member '{record.name}' is {record.operational_status} ({record.failure_reason})" for record in not_active
    )
    if team.status != "Up":
        return Verdict(
            False,
            "team '{}' is {}: {}".format(desired.name, team.status, detail or "no member reports a failure yet"),
            team.status,
            members,
        )
    if not_active:
        return Verdict(False, f"team '{desired.name}' is Up but {detail}", team.status, members)
    wrong = _lbfo_configuration_mismatches(desired, state)
    if wrong:
        return Verdict(False, "team '{}' is Up but {}".format(desired.name, "; ".join(wrong)), team.status, members)
    return Verdict(
        True,
        "team '{}' is Up: {}".format(
            desired.name,
            ", ".join(f"'{record.name}' {record.operational_status}" for record in records),
        ),
        team.status,
        members,
    )


def _lbfo_configuration_mismatches(desired: TeamDesired, state: HostState) -> list[str]:
    """What the host shows that the task did not ask for: the primary team NIC's VLAN and name, the VLAN team NICs,
    the team NIC's IPv4 address, gateway and DNS servers (static) or DHCP. Up members alone do not make it right."""
    primary = state.primary_team_nic(desired.name)
    if primary is None:
        return [f"team '{desired.name}' has no primary team NIC"]
    wrong = []
    if desired.vlan_id is not None and primary.vlan_id != desired.vlan_id:
        wrong.append(
            f"team NIC '{primary.name}' is on VLAN {primary.vlan_id or 'untagged'}, "
            f"expected {desired.vlan_id or 'untagged'}"
        )
    if desired.team_nic_name and primary.name != desired.team_nic_name:
        wrong.append(f"the primary team NIC is named '{primary.name}', expected '{desired.team_nic_name}'")
    if desired.vlan_team_nics is not None:
        present = sorted(nic.vlan_id for nic in state.team_nics if nic.team == desired.name and not nic.primary)
        expected = sorted(vlan for vlan, _name in desired.vlan_team_nics)
        if present != expected:
            wrong.append(f"VLAN team NICs on VLANs {present}, expected {expected}")
    wanted = desired.team_nic_ip
    config = state.ip_configs.get(primary.name)
    if wanted is not None and wanted.source == "dhcp" and not (config and config.dhcp):
        wrong.append(f"team NIC '{primary.name}' does not use DHCP")
    if wanted is not None and wanted.source == "static":
        have = config.static_addresses if config else ()
        if (wanted.address, wanted.prefix_length) not in have:
            addresses = ", ".join(f"{a}/{p}" for a, p in have) or "no static address"
            wrong.append(f"team NIC '{primary.name}' has {addresses}, expected {wanted.address}/{wanted.prefix_length}")
        if wanted.gateway and (config is None or config.gateway != wanted.gateway):
            wrong.append(
                f"team NIC '{primary.name}' has gateway {config.gateway if config else None}, expected {wanted.gateway}"
            )
        if wanted.dns_servers and (config is None or tuple(config.dns_servers) != tuple(wanted.dns_servers)):
            wrong.append(f"team NIC '{primary.name}' has DNS servers {list(config.dns_servers) if config else []}")
    return wrong


def _set_configuration_mismatches(desired: TeamDesired, state: HostState) -> list[str]:
    """Each host vNIC the task names: present on the switch, its access VLAN, its RDMA where asked."""
    current = {vnic.name: vnic for vnic in state.host_vnics if vnic.switch_name == desired.name}
    wrong = []
    for vnic in desired.host_vnics:
        found = current.get(vnic.name)
        if found is None:
            wrong.append(f"host vNIC '{vnic.name}' not found")
            continue
        if found.vlan_id != vnic.vlan_id:
            wrong.append(
                f"host vNIC '{vnic.name}' is on VLAN {found.vlan_id or 'untagged'}, "
                f"expected {vnic.vlan_id or 'untagged'}"
            )
        if vnic.rdma is not None and bool(state.rdma_enabled.get(found.adapter_name)) != vnic.rdma:
            wrong.append(f"host vNIC '{vnic.name}' has RDMA {'off' if vnic.rdma else 'on'}")
    return wrong


def _set_verdict(desired: TeamDesired, state: HostState) -> Verdict:
    switch = next((s for s in state.vm_switches if s.name == desired.name), None)
    if desired.state == "absent":
        if switch is None:
            return Verdict(True, f"SET switch '{desired.name}' is absent")
        return Verdict(False, f"SET switch '{desired.name}' still exists")
    team = state.vm_switch_teams.get(desired.name)
    if switch is None or team is None:
        return Verdict(False, f"SET switch '{desired.name}' not found on the host")
    names = sorted(state.adapter_name_for_description(d) for d in team.adapter_descriptions)
    members = []
    down = []
    for name in names:
        adapter = state.adapters.get(name)
        status = adapter.status if adapter is not None else "missing"
        members.append({"name": name, "status": status})
        if status != "Up":
            down.append(f"member '{name}' is {status}")
    if set(names) != set(desired.members):
        return Verdict(
            False,
            f"SET switch '{desired.name}' has members {_names(names)}, expected {_names(desired.members)}",
            None,
            members,
        )
    if down:
        return Verdict(False, "SET switch '{}': {}".format(desired.name, "; ".join(down)), "Degraded", members)
    wrong = _set_configuration_mismatches(desired, state)
    if wrong:
        return Verdict(False, "SET switch '{}' is Up but {}".format(desired.name, "; ".join(wrong)), "Up", members)
    return Verdict(True, f"SET switch '{desired.name}' is Up: {_names(names)}", "Up", members)


def verdict(desired: TeamDesired, state: HostState) -> Verdict:
    """Is the host where `desired` wants it, and healthy? A failure names the member at fault."""
    if desired.kind == "set":
        return _set_verdict(desired, state)
    return _lbfo_verdict(desired, state)


# ---------------------------------------------------------------------------------------------------- diff
def summary(desired: TeamDesired, state: HostState) -> dict:
    """Short before/after view of the team used for --diff."""
    if desired.kind == "set":
        team = state.vm_switch_teams.get(desired.name)
        switch = next((s for s in state.vm_switches if s.name == desired.name), None)
        if team is None or switch is None:
            return {"kind": "set", "name": desired.name, "present": False}
        return {
            "kind": "set",
            "name": desired.name,
            "present": True,
            "members": sorted(state.adapter_name_for_description(d) for d in team.adapter_descriptions),
            "load_balancing_algorithm": team.load_balancing_algorithm,
            "allow_management_os": switch.allow_management_os,
            "host_vnics": sorted(
                [v.name, v.vlan_id, bool(state.rdma_enabled.get(v.adapter_name))]
                for v in state.host_vnics
                if v.switch_name == desired.name
            ),
        }
    team = state.teams.get(desired.name)
    if team is None:
        return {"kind": "lbfo", "name": desired.name, "present": False}
    primary = state.primary_team_nic(desired.name)
    standby = sorted(
        name for name in team.members if name in state.members and state.members[name].administrative_mode == "Standby"
    )
    ip = state.ip_configs.get(primary.name) if primary is not None else None
    return {
        "kind": "lbfo",
        "name": desired.name,
        "present": True,
        "members": sorted(team.members),
        "standby_member": standby[0] if standby else None,
        "teaming_mode": team.teaming_mode,
        "load_balancing_algorithm": team.load_balancing_algorithm,
        "lacp_timer": team.lacp_timer,
        "team_nic_name": primary.name if primary is not None else None,
        "vlan_id": primary.vlan_id if primary is not None else None,
        "vlan_team_nics": sorted(
            [nic.vlan_id, nic.name] for nic in state.team_nics if nic.team == desired.name and not nic.primary
        ),
        "team_nic_ip": None
        if ip is None
        else {"dhcp": ip.dhcp, "addresses": [f"{a}/{p}" for a, p in ip.static_addresses], "gateway": ip.gateway},
    }


def desired_summary(desired: TeamDesired, state: HostState, changes: list[dict]) -> dict:
    """The summary the host should show once the changes are applied (the 'after' side of --diff), by the model."""
    return summary(desired, model.apply(state, changes))
