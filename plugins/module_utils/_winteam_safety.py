# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The management path: which change can cut the controller off, and the state a rollback converges back to.

The management addresses are ansible_host (when it is an address) and the local addresses of the host's established
connections on the port Ansible connects to (IPv4 and IPv6). The path is every interface carrying one, with its LBFO
team and members, or its Hyper-V switch and the switch's members. A change touching the path is refused unless
allow_management_change; opted in, the planner wraps it in a rollback (``_winrollback``) that converges back to
``recorded_desired``. When no interface carries a management address (NAT, a proxy, a name that resolves elsewhere,
a port forwarded to another one) the path is unknown and every change is refused: the gate fails closed.
"""

from __future__ import annotations

from ansible_collections.hpc.balance.plugins.module_utils._winplan import REFUSE, WARN, Finding
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import (
    HostVnicDesired,
    TeamDesired,
    rename_change,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    HostState,
    host_vnic_adapter_name,
    lacp_timer_settable,
    normal_address,
)

OPT_IN_VARIABLE = "win_nic_team_allow_management_change"


def management_addresses(desired: TeamDesired, state: HostState) -> list[str]:
    """Addresses the controller reaches the host by: ansible_host (if an address) and the WinRM sessions' own."""
    given = {address for address in map(normal_address, desired.management_addresses) if address is not None}
    return sorted(given | set(state.winrm_local_addresses))


def management_path(desired: TeamDesired, state: HostState) -> dict:
    """Object name (adapter, team, switch) -> (management interface, address) for everything the connection uses."""
    path = {}
    for address in management_addresses(desired, state):
        for interface in state.interfaces_carrying(address):
            path[interface] = (interface, address)
            nic = next((n for n in state.team_nics if n.name == interface), None)
            if nic is not None:
                team = state.teams.get(nic.team)
                for name in (nic.team, *(team.members if team else ())):
                    path.setdefault(name, (interface, address))
            vnic = next((v for v in state.host_vnics if v.adapter_name == interface), None)
            if vnic is not None:
                path.setdefault(vnic.switch_name, (interface, address))
                team = state.vm_switch_teams.get(vnic.switch_name)
                for description in team.adapter_descriptions if team else ():
                    path.setdefault(state.adapter_name_for_description(description), (interface, address))
    return path


def _touches(change: dict) -> set:
    names = {change.get(key) for key in ("team", "member", "team_nic", "interface", "switch", "adapter")}
    names |= set(change.get("members") or ())
    if change.get("vnic"):
        names.add(host_vnic_adapter_name(change["vnic"]))
    return names - {None}


def management_findings(desired: TeamDesired, state: HostState, changes: list[dict]) -> list[Finding]:
    """Refuse (or, opted in, note) every change that can cut the controller off from the host."""
    if not changes:
        return []
    if not state.ip_gathered:
        return [
            Finding(
                REFUSE,
                "management_unknown",
                "the gather reported no IP configuration, so it is unknown whether this change cuts the controller "
                "off: update the collection on the controller (win_nic_team_gather reports it)",
            )
        ]
    path = management_path(desired, state)
    if not path:
        return [_unmapped_management_path(desired, state)]
    findings = []
    for change in changes:
        hit = sorted(_touches(change) & set(path))
        if not hit:
            continue
        interface, address = path[hit[0]]
        what = f"change '{change['action']}' touches '{hit[0]}'"
        if hit[0] != interface:
            what += f" under '{interface}'"
        if desired.allow_management_change:
            findings.append(
                Finding(
                    WARN,
                    "management_change_with_rollback",
                    f"{what}, which carries the management address {address}: it runs behind a scheduled-task "
                    f"rollback that restores the recorded state unless the controller reconnects within "
                    f"{desired.rollback_timeout_s} s",
                )
            )
        else:
            findings.append(
                Finding(
                    REFUSE,
                    "management_path",
                    f"{what}, and NIC '{interface}' carries the management address {address} (the address Ansible "
                    f"reaches this host by over WinRM): the change can cut the controller off for good. Make it out of "
                    f"band, or set {OPT_IN_VARIABLE}: true (option allow_management_change) to run it behind a "
                    f"scheduled-task rollback armed for rollback_timeout_s={desired.rollback_timeout_s}",
                )
            )
    return findings


def _unmapped_management_path(desired: TeamDesired, state: HostState) -> Finding:
    addresses = ", ".join(management_addresses(desired, state)) or "none"
    ports = ", ".join(str(port) for port in desired.management_ports) or "unknown"
    return Finding(
        REFUSE,
        "management_unknown",
        f"no gathered interface carries an address the controller reaches this host by (ansible_host and the local "
        f"addresses of the connections on port {ports}: {addresses}), so it is unknown whether this change cuts the "
        "controller off; a NAT, a proxy, a port forwarded to another port or a name that resolves elsewhere hides "
        "the path. Set ansible_host to an IPv4 or IPv6 address of the host's management NIC and connect to it "
        "directly, or make the change out of band",
    )


def rollback_task_name(desired: TeamDesired) -> str:
    return f"hpc.balance rollback {desired.kind} {desired.name}"


def recorded_host_vnics(state: HostState, switch: str) -> tuple:
    """The switch's host vNICs as they are: name, access VLAN (Get-VMNetworkAdapterVlan -ManagementOS) and RDMA
    (Get-NetAdapterRdma on 'vEthernet (<name>)'; None where the adapter reports no RDMA record).

    A rollback that re-creates the switch with -AllowManagementOS gets one untagged vNIC named after the switch
    (learn.microsoft.com/powershell/module/hyper-v/new-vmswitch, -AllowManagementOS); the others, the VLAN of each
    (learn.microsoft.com/powershell/module/hyper-v/set-vmnetworkadaptervlan) and RDMA
    (learn.microsoft.com/powershell/module/netadapter/enable-netadapterrdma) come back only from this record.
    """
    return tuple(
        HostVnicDesired(vnic.name, vnic.vlan_id, state.rdma_enabled.get(vnic.adapter_name))
        for vnic in sorted(state.host_vnics, key=lambda vnic: vnic.name)
        if vnic.switch_name == switch
    )


def recorded_desired(desired: TeamDesired, state: HostState) -> TeamDesired:
    """The state the host is in now, as a TeamDesired: what the rollback converges back to."""
    if desired.kind == "set":
        switch = next((s for s in state.vm_switches if s.name == desired.name), None)
        team = state.vm_switch_teams.get(desired.name)
        if switch is None or team is None:
            return TeamDesired(name=desired.name, kind="set", state="absent")
        return TeamDesired(
            name=desired.name,
            kind="set",
            members=tuple(sorted(state.adapter_name_for_description(d) for d in team.adapter_descriptions)),
            load_balancing_algorithm=team.load_balancing_algorithm,
            allow_management_os=switch.allow_management_os,
            host_vnics=recorded_host_vnics(state, desired.name),
        )
    # rename_change is None unless rename_from names a team the host has
    old_name = desired.rename_from if rename_change(desired, state) and desired.rename_from else desired.name
    team = state.teams.get(old_name)
    if team is None:
        return TeamDesired(name=desired.name, state="absent")
    primary = state.primary_team_nic(old_name)
    standby = [m for m in team.members if m in state.members and state.members[m].administrative_mode == "Standby"]
    return TeamDesired(
        name=old_name,
        rename_from=desired.name if old_name != desired.name else None,
        members=tuple(sorted(team.members)),
        teaming_mode=team.teaming_mode,
        load_balancing_algorithm=team.load_balancing_algorithm,
        # Below build 14393 the cmdlets take no -LacpTimer: the rollback re-creates the team without it.
        lacp_timer=team.lacp_timer if team.teaming_mode == "Lacp" and lacp_timer_settable(state.os_build) else None,
        standby_member=standby[0] if standby and team.teaming_mode == "SwitchIndependent" else None,
        team_nic_name=primary.name if primary else None,
        vlan_id=primary.vlan_id if primary else None,
        vlan_team_nics=tuple(
            sorted((nic.vlan_id, nic.name) for nic in state.team_nics if nic.team == old_name and not nic.primary)
        ),
    )
