# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight findings for a NIC team: what must be looked at before any change; a 'refuse' finding stops the run.

Members exist and are free, are alike (speed, vendor, model, driver; force turns a mix into warnings), carry one
jumbo packet size (refused even with force), no vendor teaming tool, the Hyper-V rules (SET needs Hyper-V; LBFO under a
switch is refused from Windows Server 2022), PCIe links, a standby member, host vNICs, the team NIC address to move,
and RDMA cards that LBFO would cut off SMB Direct.
"""

from __future__ import annotations

import fnmatch
import ntpath

from ansible_collections.hpc.balance.plugins.module_utils import _winteam_model as model
from ansible_collections.hpc.balance.plugins.module_utils._units import format_bits_per_second
from ansible_collections.hpc.balance.plugins.module_utils._winplan import INFO, REFUSE, WARN, Finding
from ansible_collections.hpc.balance.plugins.module_utils._winplan import quoted_names as _names
from ansible_collections.hpc.balance.plugins.module_utils._winteam_desired import (
    TeamDesired,
    member_static_ip,
    rename_change,
    state_after_rename,
)
from ansible_collections.hpc.balance.plugins.module_utils._winteam_state import (
    LACP_TIMER_MIN_BUILD,
    PCIE_LINK_SPEEDS,
    VENDOR_TEAMING_TOOLS,
    WINDOWS_SERVER_2022_BUILD,
    Adapter,
    HostState,
    VmSwitch,
    card_model,
    lacp_timer_settable,
)


# ---------------------------------------------------------------------------------------------------- findings
def _vendor_teaming_evidence(state: HostState) -> list[tuple[str, list[str]]]:
    """[(tool name, evidence)] for every vendor teaming manager found on the host."""
    found: list[tuple[str, list[str]]] = []
    for tool in VENDOR_TEAMING_TOOLS:
        evidence = []
        for driver in state.teaming_drivers:
            file_name = ntpath.basename(driver.get("PathName") or "").lower()
            if any(fnmatch.fnmatch(file_name, pattern) for pattern in tool["driver_files"]):
                evidence.append("driver {} ({}, {})".format(driver.get("Name"), file_name, driver.get("State") or "?"))
        for adapter in state.adapters.values():
            by_file = any(fnmatch.fnmatch(adapter.driver_file.lower(), pattern) for pattern in tool["driver_files"])
            by_description = any(
                fnmatch.fnmatch(adapter.description.lower(), pattern.lower())
                for pattern in tool["adapter_descriptions"]
            )
            if by_file or by_description:
                evidence.append(f"adapter '{adapter.name}' ({adapter.description})")
        if evidence:
            found.append((tool["name"], evidence))
    return found


def _check_members_exist(desired: TeamDesired, state: HostState) -> list[Finding]:
    findings = []
    missing = [member for member in desired.members if member not in state.adapters]
    if missing:
        physical = sorted(name for name, adapter in state.adapters.items() if not adapter.hidden)
        findings.append(
            Finding(
                REFUSE,
                "member_missing",
                f"member{'s' if len(missing) > 1 else ''} {_names(missing)} not found on the host; "
                f"adapters present: {_names(physical)}. Fix the names in members (Get-NetAdapter)",
            )
        )
    return findings


def _check_members_free(desired: TeamDesired, state: HostState) -> list[Finding]:
    """A member of another LBFO team or of another SET switch cannot join this one."""
    findings = []
    for member in desired.members:
        owner = state.members.get(member)
        if owner is not None and (desired.kind == "set" or owner.team != desired.name):
            findings.append(
                Finding(
                    REFUSE,
                    "member_in_other_team",
                    f"member '{member}' already belongs to LBFO team '{owner.team}': remove it there first",
                )
            )
        adapter = state.adapters.get(member)
        if adapter is None:
            continue
        for switch in state.vm_switches:
            if adapter.description in switch.adapter_descriptions and not (
                desired.kind == "set" and switch.name == desired.name
            ):
                findings.append(
                    Finding(
                        REFUSE,
                        "member_in_vswitch",
                        f"member '{member}' is bound to Hyper-V switch '{switch.name}': "
                        "remove it from that switch first",
                    )
                )
    return findings


def _check_uniform(desired: TeamDesired, state: HostState) -> list[Finding]:
    """Same link speed, same vendor/model/driver: refused unless force (then a warning)."""
    findings = []
    present = [state.adapters[member] for member in desired.members if member in state.adapters]
    severity = WARN if desired.force else REFUSE
    hint = "the team proceeds because force is set" if desired.force else "team equal cards, or set force: true"
    connected = [a for a in present if a.media_connect_state != "Disconnected" and a.speed_bits_per_second]
    for adapter in present:
        if adapter not in connected:
            findings.append(
                Finding(
                    WARN,
                    "member_disconnected",
                    f"member '{adapter.name}' has no link ({adapter.status or adapter.media_connect_state}): "
                    "its speed cannot be compared, and the team will not be Up until it links",
                )
            )
    speeds = sorted({adapter.speed_bits_per_second for adapter in connected})
    if len(speeds) > 1:
        findings.append(
            Finding(
                severity,
                "mixed_link_speeds",
                "members have mixed link speeds ({}): every flow is pinned to one member, so flows on the slower "
                "member run at its speed; {}".format(
                    ", ".join(f"'{a.name}' {format_bits_per_second(a.speed_bits_per_second)}" for a in connected),
                    hint,
                ),
            )
        )
    for code, label, key in (
        ("mixed_vendors", "vendors", lambda a: a.driver_provider),
        ("mixed_models", "models", lambda a: card_model(a.description)),
        ("mixed_drivers", "driver versions", lambda a: a.driver_version),
    ):
        values = {key(adapter) for adapter in present}
        if len(values) > 1:
            findings.append(
                Finding(
                    severity,
                    code,
                    "members differ in {} ({}): offloads and RSS behave differently per card; {}".format(
                        label, ", ".join(f"'{a.name}' {key(a)}" for a in present), hint
                    ),
                )
            )
            break  # one model/driver finding is enough: a different vendor is also a different model and driver
    return findings


def _check_jumbo_packets(desired: TeamDesired, state: HostState) -> list[Finding]:
    """One jumbo packet size on every member, refused even with force: a frame larger than one member's size is
    dropped on that member alone, so a flow fails only while the team sends it there. A member whose size is unknown
    (the driver has no *JumboPacket keyword, or an older gather) is not compared."""
    present = [state.adapters[member] for member in desired.members if member in state.adapters]
    if len({a.jumbo_packet_bytes for a in present if a.jumbo_packet_bytes is not None}) < 2:
        return []
    sizes = ", ".join(
        f"'{a.name}' {a.jumbo_packet_bytes} bytes" if a.jumbo_packet_bytes is not None else f"'{a.name}' unknown"
        for a in present
    )
    return [
        Finding(
            REFUSE,
            "member_mtu_mismatch",
            f"members carry different jumbo packet sizes (*JumboPacket: {sizes}): a frame larger than one member's "
            "size is dropped on that member only, whenever the team sends a flow there. Set one size on every member "
            "(Set-NetAdapterAdvancedProperty -Name <member> -RegistryKeyword '*JumboPacket' -RegistryValue <bytes>) "
            "and the same on their switch ports, then run again",
        )
    ]


def _check_vendor_tools(state: HostState) -> list[Finding]:
    return [
        Finding(
            REFUSE,
            "vendor_teaming_tool",
            "{} is installed ({}): one teaming manager per machine. Remove the vendor teaming software (and its "
            "teams) before teaming with Windows".format(tool, "; ".join(evidence)),
        )
        for tool, evidence in _vendor_teaming_evidence(state)
    ]


def pcie_report(desired: TeamDesired, state: HostState) -> list[dict]:
    """Per member: PCIe link trained, usable bits per second, and what the card's ports in this team need."""
    report = []
    demand_by_card: dict[tuple, list[Adapter]] = {}
    for member in desired.members:
        link = state.pcie.get(member)
        adapter = state.adapters.get(member)
        if link is None or adapter is None or None in link.location:
            continue
        demand_by_card.setdefault(link.location, []).append(adapter)
    for member in desired.members:
        link = state.pcie.get(member)
        if link is None:
            continue
        sharing = demand_by_card.get(link.location, [])
        report.append(
            {
                "name": member,
                "link": link.describe(),
                "max_link": "x{} at {} GT/s".format(
                    link.max_width, PCIE_LINK_SPEEDS.get(link.max_speed_encoded, (None,))[0] or "?"
                ),
                "usable_bits_per_second": link.current_bits_per_second,
                "ports_sharing_link": sorted(adapter.name for adapter in sharing),
                "needed_bits_per_second": sum(adapter.speed_bits_per_second or 0 for adapter in sharing) or None,
            }
        )
    return report


def _check_pcie(desired: TeamDesired, state: HostState) -> list[Finding]:
    findings = []
    for entry in pcie_report(desired, state):
        link = state.pcie[entry["name"]]
        usable = entry["usable_bits_per_second"]
        needed = entry["needed_bits_per_second"]
        if usable is not None and needed is not None and usable < needed:
            findings.append(
                Finding(
                    WARN,
                    "pcie_bottleneck",
                    "member '{}': its PCIe link ({}, about {} usable) cannot carry the nominal {} of {}; move the "
                    "card to a wider or faster slot".format(
                        entry["name"],
                        entry["link"],
                        format_bits_per_second(usable),
                        format_bits_per_second(needed),
                        " + ".join(entry["ports_sharing_link"]),
                    ),
                )
            )
        degraded_width = link.max_width and link.current_width and link.current_width < link.max_width
        degraded_speed = (
            link.max_speed_encoded
            and link.current_speed_encoded
            and link.current_speed_encoded < link.max_speed_encoded
        )
        if degraded_width or degraded_speed:
            findings.append(
                Finding(
                    WARN,
                    "pcie_link_degraded",
                    "member '{}': PCIe link trained at {}, below the card's {} (slot, riser or BIOS setting)".format(
                        entry["name"], entry["link"], entry["max_link"]
                    ),
                )
            )
        findings.append(
            Finding(
                INFO,
                "pcie_link",
                "member '{}': PCIe {}, about {} usable".format(
                    entry["name"], entry["link"], format_bits_per_second(usable)
                ),
            )
        )
    return findings


def _team_label(desired: TeamDesired, state: HostState) -> str:
    """The team as the host names it now: 'Storage', or 'Old' (renamed 'Storage' by this run) before a rename."""
    if rename_change(desired, state) is None:
        return f"'{desired.name}'"
    return f"'{desired.rename_from}' (renamed '{desired.name}' by this run)"


def _vswitches_on_team(desired: TeamDesired, state: HostState) -> list[VmSwitch]:
    """Hyper-V switches bound to this team's NIC, the team found as the host has it: under its name, or under
    rename_from before the rename runs (a switch binds to the team NIC's description, which a rename keeps)."""
    descriptions = set()
    state = state_after_rename(desired, state)
    team = state.teams.get(desired.name)
    if team is not None:
        for nic_name in team.team_nics:
            nic = state.adapters.get(nic_name)
            if nic is not None:
                descriptions.add(nic.description)
    return [switch for switch in state.vm_switches if descriptions & set(switch.adapter_descriptions)]


def _check_hyperv(desired: TeamDesired, state: HostState) -> list[Finding]:
    if desired.kind != "lbfo":
        if not state.hyperv_present:
            return [
                Finding(
                    REFUSE,
                    "hyperv_missing",
                    "kind is 'set' but Hyper-V is not installed: Switch Embedded Teaming is a Hyper-V switch. "
                    "Install the Hyper-V role, or use kind: lbfo",
                )
            ]
        existing = [switch for switch in state.vm_switches if switch.name == desired.name]
        if existing and not existing[0].embedded_teaming:
            return [
                Finding(
                    REFUSE,
                    "vswitch_not_set",
                    f"Hyper-V switch '{desired.name}' exists without embedded teaming: rename it or pick another name",
                )
            ]
        return []
    on_team = _vswitches_on_team(desired, state)
    if not (desired.for_vswitch or on_team):
        return []
    team = _team_label(desired, state)
    if on_team:
        reason = f"Hyper-V switch {_names([s.name for s in on_team])} sits on team {team}"
    else:
        reason = f"for_vswitch is set: a Hyper-V switch would sit on team {team}"
    if desired.for_vswitch and not state.hyperv_present:
        reason += " (Hyper-V is not installed yet)"
    offer = (
        "use Switch Embedded Teaming instead: kind: set (New-VMSwitch -EnableEmbeddedTeaming $true -NetAdapterName {})"
    )
    offer = offer.format(",".join(desired.members))
    if state.os_build is not None and state.os_build < WINDOWS_SERVER_2022_BUILD:
        return [
            Finding(
                WARN,
                "lbfo_under_vswitch_deprecated",
                f"{reason}. This host (build {state.os_build}) still allows it, but a Hyper-V switch on an LBFO team "
                f"is deprecated and refused from Windows Server 2022 (build {WINDOWS_SERVER_2022_BUILD}): {offer}",
            )
        ]
    return [
        Finding(
            REFUSE,
            "lbfo_under_vswitch",
            "{}. A Hyper-V switch on an LBFO team is unsupported from Windows Server 2022 (this host: build {}): "
            "{}".format(reason, state.os_build if state.os_build is not None else "unknown", offer),
        )
    ]


def _check_vlan_under_vswitch(desired: TeamDesired, state: HostState) -> list[Finding]:
    """No VLAN on a team interface under a Hyper-V switch. NIC Teaming (learn.microsoft.com/windows-server/networking/
    technologies/nic-teaming/nic-teaming): "When a team connects to a Hyper-V Virtual Switch, all VLAN segregation
    must be done in the Hyper-V Virtual Switch rather than in NIC Teaming." """
    if desired.kind != "lbfo" or not (desired.vlan_id or desired.vlan_team_nics):
        return []
    on_team = _vswitches_on_team(desired, state)
    if not (desired.for_vswitch or on_team):
        return []
    where = f"Hyper-V switch {_names([s.name for s in on_team])}" if on_team else "a Hyper-V switch (for_vswitch)"
    return [
        Finding(
            REFUSE,
            "team_vlan_under_vswitch",
            f"team '{desired.name}' carries {where}: VLANs under a Hyper-V switch are set on the "
            "switch ports (Set-VMNetworkAdapterVlan), never on the team. Leave vlan_id and vlan_team_nics unset",
        )
    ]


def _check_lacp_timer(desired: TeamDesired, state: HostState) -> list[Finding]:
    if desired.lacp_timer is None or lacp_timer_settable(state.os_build):
        return []
    build = "an unknown build" if state.os_build is None else f"build {state.os_build}"
    return [
        Finding(
            REFUSE,
            "lacp_timer_unsupported",
            f"lacp_timer {desired.lacp_timer!r} needs Windows Server 2016 (build {LACP_TIMER_MIN_BUILD}) or later: "
            f"this host runs {build}, whose New-NetLbfoTeam / Set-NetLbfoTeam have no -LacpTimer (Windows Server "
            "2012 and 2012 R2). Leave win_nic_team_lacp_timer empty on this host",
        )
    ]


def _check_standby(desired: TeamDesired) -> list[Finding]:
    if desired.standby_member is None:
        return []
    return [
        Finding(
            WARN,
            "standby_member",
            f"standby member '{desired.standby_member}' carries no traffic and its failed link shows only when an "
            "active member fails; alarm on its state, or make it active for more bandwidth",
        )
    ]


def _check_host_vnics(desired: TeamDesired, state: HostState) -> list[Finding]:
    findings = []
    for vnic in desired.host_vnics:
        for current in state.host_vnics:
            if current.name == vnic.name and current.switch_name != desired.name:
                findings.append(
                    Finding(
                        REFUSE,
                        "host_vnic_elsewhere",
                        f"host vNIC '{vnic.name}' is on Hyper-V switch '{current.switch_name}', not '{desired.name}': "
                        "rename one of them",
                    )
                )
    return findings


def _check_team_nic_ip(desired: TeamDesired, state: HostState) -> list[Finding]:
    if desired.team_nic_ip is None or desired.team_nic_ip.source != "members" or desired.name in state.teams:
        return []
    if member_static_ip(desired, state) is None:
        return [
            Finding(
                REFUSE,
                "no_member_ip",
                "team_nic_ip source is members, but no member carries exactly one static IPv4 address to move: "
                "give team_nic_ip source static with address and prefix_length",
            )
        ]
    return []


def _check_rdma_on_lbfo(desired: TeamDesired, state: HostState) -> list[Finding]:
    """An LBFO team NIC cannot do RDMA: SMB Direct over members with RDMA on is lost once they are teamed."""
    if desired.kind != "lbfo" or desired.state != "present":
        return []
    lost = [m for m in desired.members if state.rdma_enabled.get(m) and m not in state.members]
    if not lost:
        return []
    return [
        Finding(
            WARN,
            "lbfo_loses_rdma",
            f"RDMA is enabled on {_names(lost)}: an LBFO team NIC exposes no RDMA, so SMB Direct over these cards "
            "stops once they are teamed (SMB falls back to TCP). Keep RDMA cards out of LBFO: use kind: set with "
            "host_vnics and rdma: true, or SMB Multichannel over the separate cards",
        )
    ]


def preflight(desired: TeamDesired, state: HostState) -> list[Finding]:
    """Findings that must be looked at before any change. Any 'refuse' finding stops the run."""
    if desired.state == "absent":
        return []
    findings = []
    if desired.kind == "lbfo" and not state.lbfo_available:
        findings.append(
            Finding(
                REFUSE,
                "lbfo_unavailable",
                "the NetLbfo cmdlets are not available on this host: NIC teaming needs Windows Server 2012 or later",
            )
        )
    findings += _check_members_exist(desired, state)
    findings += _check_members_free(desired, state_after_rename(desired, state))
    findings += _check_vendor_tools(state)
    findings += _check_hyperv(desired, state)
    findings += _check_vlan_under_vswitch(desired, state)
    findings += _check_uniform(desired, state)
    findings += _check_jumbo_packets(desired, state)
    findings += _check_pcie(desired, state)
    findings += _check_lacp_timer(desired, state)
    findings += _check_standby(desired)
    findings += _check_host_vnics(desired, state)
    findings += _check_team_nic_ip(desired, state)
    findings += _check_rdma_on_lbfo(desired, state)
    return findings


def switch_removal_findings(state: HostState, changes: list[dict]) -> list[Finding]:
    """Refuse removing a Hyper-V switch that virtual machines are connected to, or when that is unknown.

    Remove-VMSwitch -Force "forces the command to run without asking for user confirmation"
    (learn.microsoft.com/powershell/module/hyper-v/remove-vmswitch): the VMs' adapters lose their network. The
    gather lists the VMs' adapters with Get-VMNetworkAdapter -VMName * (learn.microsoft.com/powershell/module/
    hyper-v/get-vmnetworkadapter), whose SwitchName says where each is connected.
    """
    findings = []
    for change in changes:
        if change["action"] != "remove_set_switch":
            continue
        switch = change["switch"]
        if not state.vm_adapters_gathered:
            findings.append(
                Finding(
                    REFUSE,
                    "vms_unknown",
                    f"the gather did not list the virtual machines' network adapters, so it is unknown whether VMs are "
                    f"connected to switch '{switch}': update the collection on the controller "
                    "(win_nic_team_gather reports them)",
                )
            )
            continue
        vms = state.vms_on_switch(switch)
        if vms:
            findings.append(
                Finding(
                    REFUSE,
                    "vms_on_switch",
                    f"virtual machines {_names(vms)} are connected to switch '{switch}': removing it would cut them "
                    "off. Connect them to another switch (Connect-VMNetworkAdapter -SwitchName) or stop and remove "
                    "them first, then run again",
                )
            )
    return findings


def _gateway_interfaces(state: HostState) -> list[str]:
    return sorted(name for name, config in state.ip_configs.items() if config.gateway)


def second_gateway_findings(desired: TeamDesired, state: HostState, changes: list[dict]) -> list[Finding]:
    """Refuse (or, with allow_second_default_gateway, warn) a plan that adds an IPv4 default gateway while another
    interface has one.

    With automatic metrics the faster interface gets the lower interface metric (learn.microsoft.com/troubleshoot/
    windows-server/networking/automatic-metric-for-ipv4-routes: the metric is chosen by link speed), so the default
    route, and with it DNS, domain controllers and every new outbound connection, moves to the storage team. The
    team NIC also registers its address in DNS unless told not to (Set-DnsClient -RegisterThisConnectionsAddress,
    learn.microsoft.com/powershell/module/dnsclient/set-dnsclient). Offered: a route metric (Set-NetIPInterface
    -InterfaceMetric), SkipAsSource (Set-NetIPAddress, learn.microsoft.com/powershell/module/nettcpip/
    set-netipaddress) and DNS registration off.
    """
    if not changes:
        return []
    before = _gateway_interfaces(state)
    after_state = model.apply(state, changes)
    after = _gateway_interfaces(after_state)
    added = sorted(set(after) - set(before))
    if not added or len(after) <= len(before) or len(after) < 2:
        return []
    others = [name for name in after if name not in added]
    wanted = desired.team_nic_ip
    metric = wanted.interface_metric if wanted else None
    where = ", ".join(f"'{name}' ({after_state.ip_configs[name].gateway})" for name in others)
    message = (
        f"the plan adds a default gateway on '{added[0]}' ({after_state.ip_configs[added[0]].gateway}) while {where} "
        f"already has one: "
    )
    if metric is None:
        message += (
            "with automatic metrics the faster team gets the lower metric, and DNS, the domain and new outbound "
            "traffic leave through it. "
        )
    else:
        message += f"route metric {metric} is set on it. "
    message += (
        "Drop team_nic_ip.gateway (storage needs none), or set team_nic_ip.interface_metric above the other "
        "interface's, team_nic_ip.skip_as_source: true and team_nic_ip.register_in_dns: false"
    )
    if desired.allow_second_default_gateway:
        return [Finding(WARN, "second_default_gateway", message)]
    return [
        Finding(
            REFUSE,
            "second_default_gateway",
            message + ", and set allow_second_default_gateway: true (win_nic_team_allow_second_default_gateway)",
        )
    ]
