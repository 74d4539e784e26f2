# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SMB Multichannel decisions for Windows hosts: desired + gathered state -> findings, changes, a channel verdict.

One TCP connection only ever uses one team member (and, without RSS, one CPU core for receive), so a single large
copy runs at one card's speed. SMB Multichannel opens several connections per session: over several interfaces, or
several on one RSS-capable interface (a team NIC included). This module decides what to change and whether a share
really connects over more than one channel; ``win_smb_multichannel_gather`` / ``_apply`` only gather and apply.

Gathered records follow MSFT_SmbMultichannelConnection, MSFT_SmbMultichannelConstraint,
MSFT_SmbClientNetworkInterface, MSFT_SmbServerNetworkInterface, MSFT_NetAdapterRssSettingData,
MSFT_NetAdapterRdmaSettingData, MSFT_NetLbfoTeamMember and Get-SmbServerConfiguration / Get-SmbClientConfiguration
(selected properties, one list per cmdlet).

Opening the share to verify it happens on the host, in the WinRM logon. Under NTLM, or Kerberos without delegation,
that logon cannot present credentials to a second machine (the double hop), so the check fails for reasons that
have nothing to do with multichannel. The plan refuses verify_share unless the task has a credential path that
reaches the file server: ``become: true`` with ``become_method: runas`` and a become password (an interactive logon
with the account's credentials), CredSSP, or Kerberos with delegation.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from ansible_collections.hpc.balance.plugins.module_utils._winplan import REFUSE, WARN, Finding, Plan, gated_plan
from ansible_collections.hpc.balance.plugins.module_utils._winplan import as_list as _as_list
from ansible_collections.hpc.balance.plugins.module_utils._winplan import quoted_names as _names

CREDENTIAL_PATHS = ("become_runas", "credssp", "kerberos_delegation", "become_runas_without_password", "none")
# ansible.builtin.runas by each name a task or an inventory may give it (a become plugin reports its short name).
RUNAS_NAMES = ("runas", "ansible.builtin.runas", "ansible.legacy.runas")
MULTIPLEXOR = "Microsoft Network Adapter Multiplexor Driver"


IPV6_LITERAL_SUFFIX = ".ipv6-literal.net"  # how a UNC path writes an IPv6 address: 2001-db8--5.ipv6-literal.net


def _server_address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address a server name is written as (IPv4, IPv6, or a UNC ipv6-literal.net name); None for a name."""
    text = name.strip("[]")
    if text.endswith(IPV6_LITERAL_SUFFIX):
        text = text[: -len(IPV6_LITERAL_SUFFIX)].replace("-", ":").replace("s", "%")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _same_server(left: str, right: str) -> bool:
    """Do two server names, as SMB shows them (the name the client used), name one server?

    - An IP address matches the same address only (10.9.9.9 is not 10.0.0.5); never a name: nothing here resolves.
    - Names match whole, case-insensitive, without a trailing dot: fs01.site-a and fs01.site-b are two servers.
    - A short name (no dot) matches an FQDN whose first label it is: its domain is unknown here (the client's DNS
      suffix search list decides it), so 'fs01' and 'fs01.hpc.example' are taken as one server. Two FQDNs are never
      matched by their first label.
    """
    a, b = (left or "").strip().lower().rstrip("."), (right or "").strip().lower().rstrip(".")
    if not a or not b:
        return False
    address_a, address_b = _server_address(a), _server_address(b)
    if address_a is not None or address_b is not None:
        return address_a is not None and address_a == address_b
    if a == b:
        return True
    if "." in a and "." in b:
        return False
    return a.split(".")[0] == b.split(".")[0]


def _same_constraint(left: str, right: str) -> bool:
    """Constraints are kept per ServerName string: 'fs01' and 'fs01.hpc.example' are two constraints."""
    return (left or "").lower() == (right or "").lower()


def credential_path(
    become_method: str | None, become_password: bool, transports: list[str] | tuple, delegation: bool
) -> str:
    """How the host's logon reaches a file server: become_runas, credssp, kerberos_delegation, or no path.

    become_method is the method Ansible resolved for this task and host (None without become), become_password
    whether a become password is set; transports and delegation are the connection's own options.
    runas without a password is an S4U logon, which has no network credentials (Ansible.Become.cs: "use S4U to
    generate one without network credentials"): no path to the file server, whatever the transport.
    """
    if become_method is not None and become_method.lower() in RUNAS_NAMES:
        return "become_runas" if become_password else "become_runas_without_password"
    names = [str(transport).strip().lower() for transport in transports]
    if "credssp" in names:
        return "credssp"
    if "kerberos" in names and delegation:
        return "kerberos_delegation"
    return "none"


# ---------------------------------------------------------------------------------------------------- state
@dataclass(frozen=True)
class Connection:
    server_name: str
    client_interface_index: int
    client_interface: str
    client_ip: str
    server_ip: str
    selected: bool
    failed: bool
    current_channels: int
    max_channels: int
    client_rss_capable: bool
    client_rdma_capable: bool
    client_link_speed_bits_per_second: int


@dataclass(frozen=True)
class SmbState:
    server_multichannel: bool
    client_multichannel: bool
    constraints: dict  # server name -> sorted tuple of interface aliases
    connections: tuple
    client_interfaces: dict  # interface index -> record
    rss_enabled: dict  # adapter name -> bool
    adapters: tuple  # adapter names
    share_probe: dict
    server_interfaces: tuple = ()  # Get-SmbServerNetworkInterface records
    rdma_enabled: dict = field(default_factory=dict)  # adapter name -> bool (Get-NetAdapterRdma)
    adapter_descriptions: dict = field(default_factory=dict)  # adapter name -> InterfaceDescription
    team_members: dict = field(default_factory=dict)  # LBFO team name -> member names


def parse_smb_state(raw: dict) -> SmbState:
    constraints: dict[str, set[str]] = {}
    for record in _as_list(raw.get("constraints")):
        server = record.get("ServerName") or ""
        constraints.setdefault(server, set()).add(record.get("InterfaceAlias") or "")
    connections = tuple(
        Connection(
            server_name=record.get("ServerName") or "",
            client_interface_index=int(record.get("ClientInterfaceIndex") or 0),
            client_interface=record.get("ClientInterfaceFriendlyName") or "",
            client_ip=record.get("ClientIpAddress") or "",
            server_ip=record.get("ServerIpAddress") or "",
            selected=bool(record.get("Selected")),
            failed=bool(record.get("Failed")),
            current_channels=int(record.get("CurrentChannels") or 0),
            max_channels=int(record.get("MaxChannels") or 0),
            client_rss_capable=bool(record.get("ClientRSSCapable")),
            client_rdma_capable=bool(record.get("ClientRdmaCapable")),
            client_link_speed_bits_per_second=int(record.get("ClientLinkSpeed") or 0),
        )
        for record in _as_list(raw.get("connections"))
    )
    return SmbState(
        server_multichannel=bool((raw.get("server_configuration") or {}).get("EnableMultiChannel")),
        client_multichannel=bool((raw.get("client_configuration") or {}).get("EnableMultiChannel")),
        constraints={server: tuple(sorted(aliases)) for server, aliases in constraints.items()},
        connections=connections,
        client_interfaces={
            int(record.get("InterfaceIndex") or 0): record for record in _as_list(raw.get("client_interfaces"))
        },
        rss_enabled={record.get("Name"): bool(record.get("Enabled")) for record in _as_list(raw.get("rss"))},
        adapters=tuple(record.get("Name") for record in _as_list(raw.get("adapters"))),
        share_probe=raw.get("share_probe") or {},
        server_interfaces=tuple(_as_list(raw.get("server_interfaces"))),
        rdma_enabled={record.get("Name"): bool(record.get("Enabled")) for record in _as_list(raw.get("rdma"))},
        adapter_descriptions={
            record.get("Name"): record.get("InterfaceDescription") or "" for record in _as_list(raw.get("adapters"))
        },
        team_members=_team_members(raw),
    )


def _team_members(raw: dict) -> dict:
    teams: dict = {}
    for record in _as_list(raw.get("team_members")):
        teams.setdefault(record.get("Team") or "", []).append(record.get("Name"))
    return {team: tuple(sorted(names)) for team, names in teams.items()}


# ---------------------------------------------------------------------------------------------------- desired
def share_server(path: str | None) -> str:
    r"""'\\fs01\scratch' -> 'fs01'; ValueError for anything that is not a UNC share path."""
    text = (path or "").replace("/", "\\")
    parts = [part for part in text.split("\\") if part]
    if not text.startswith("\\\\") or len(parts) < 2:
        raise ValueError(f"verify_share is {path!r}: give a UNC share path such as \\\\fs01\\scratch")
    return parts[0]


@dataclass(frozen=True)
class SmbDesired:
    server_enabled: bool = True
    client_enabled: bool = True
    constraints: tuple = ()  # ((server name, (interface aliases...)), ...)
    verify_share: str | None = None
    min_channels: int = 2
    rss_interfaces: tuple = ()
    exclusive_constraints: bool = False
    credential_path: str = "none"  # set by the action plugin from become / the WinRM transport
    settle_s: int = 10

    @classmethod
    def from_args(cls, args: dict) -> SmbDesired:
        constraints = []
        seen = set()
        for index, entry in enumerate(args.get("constraints") or []):
            server = (entry.get("server_name") or "").strip()
            interfaces = tuple(entry.get("interfaces") or ())
            if not server:
                raise ValueError(f"constraints[{index}].server_name is empty: name the SMB server")
            if not interfaces:
                raise ValueError(
                    f"constraints[{index}] for {server!r} lists no interfaces: name at least one, or drop the entry"
                )
            if server.lower() in seen:
                raise ValueError(f"constraints name server {server!r} twice: merge its interfaces into one entry")
            seen.add(server.lower())
            constraints.append((server, interfaces))
        verify_share = args.get("verify_share") or None
        if verify_share:
            share_server(verify_share)
        min_channels = int(args["min_channels"] if args.get("min_channels") is not None else 2)
        if min_channels < 2:
            raise ValueError(f"min_channels is {min_channels}: multichannel means at least 2 channels")
        return cls(
            server_enabled=bool(args.get("server_enabled", True)),
            client_enabled=bool(args.get("client_enabled", True)),
            constraints=tuple(constraints),
            verify_share=verify_share,
            min_channels=min_channels,
            rss_interfaces=tuple(args.get("rss_interfaces") or ()),
            exclusive_constraints=bool(args.get("exclusive_constraints")),
            settle_s=int(args["settle_s"] if args.get("settle_s") is not None else 10),
        )


# ---------------------------------------------------------------------------------------------------- preflight
def _current_constraint(state: SmbState, server: str) -> tuple[str, tuple]:
    for name, aliases in state.constraints.items():
        if _same_constraint(name, server):
            return name, aliases
    return server, ()


def rss_findings(state: SmbState, interface_names: list[str] | tuple) -> list[Finding]:
    """Warnings for interfaces that cannot spread SMB channels (no RSS): one channel per such interface."""
    findings = []
    by_name = {record.get("FriendlyName"): record for record in state.client_interfaces.values()}
    for name in interface_names:
        record = by_name.get(name)
        if record is not None and not record.get("RssCapable"):
            findings.append(
                Finding(
                    WARN,
                    "interface_not_rss_capable",
                    f"interface '{name}' is not RSS-capable: SMB opens one channel on it, so one copy stays on one "
                    "member and one core; enable RSS on its adapters (Enable-NetAdapterRss)",
                )
            )
        if state.rss_enabled.get(name) is False:
            findings.append(
                Finding(WARN, "rss_disabled", f"RSS is disabled on '{name}': Enable-NetAdapterRss -Name '{name}'")
            )
    return findings


def _double_hop_findings(desired: SmbDesired) -> list[Finding]:
    if not desired.verify_share or desired.credential_path not in ("none", "become_runas_without_password"):
        return []
    if desired.credential_path == "become_runas_without_password":
        return [
            Finding(
                REFUSE,
                "verify_double_hop",
                f"verify_share {desired.verify_share} is opened as the become user, but no become password is set: "
                "runas without a password is an S4U logon, which has no network credentials, so the file server "
                "would refuse it (the double hop). Set ansible_become_password for the become_user (vault), or "
                "connect with ansible_winrm_transport: credssp or Kerberos delegation and set "
                "win_smb_multichannel_verify_become: false",
            )
        ]
    return [
        Finding(
            REFUSE,
            "verify_double_hop",
            f"verify_share {desired.verify_share} is opened on the host inside the WinRM logon, which under NTLM or "
            "Kerberos without delegation cannot authenticate to the file server (the double hop), so the check "
            "would fail whatever multichannel does. Run the task with become: true and become_method: runas "
            "(become_user: an account the share admits, with ansible_become_password), or connect with "
            "ansible_winrm_transport: credssp, or Kerberos with ansible_winrm_kerberos_delegation: true; or drop "
            "verify_share",
        )
    ]


def _name_variant_findings(desired: SmbDesired, state: SmbState) -> list[Finding]:
    findings = []
    for server, _interfaces in desired.constraints:
        for name in state.constraints:
            if not _same_constraint(name, server) and _same_server(name, server):
                findings.append(
                    Finding(
                        WARN,
                        "constraint_name_variant",
                        f"a constraint exists for '{name}' and one is asked for '{server}': constraints are kept per "
                        "ServerName string and apply to connections made by that name only; use the name clients "
                        "use (the UNC paths), and list each variant if clients use both",
                    )
                )
    if desired.verify_share and desired.constraints:
        server = share_server(desired.verify_share)
        listed = [name for name, _i in desired.constraints]
        if not any(_same_constraint(name, server) for name in listed) and any(
            _same_server(name, server) for name in listed
        ):
            findings.append(
                Finding(
                    WARN,
                    "verify_name_not_constrained",
                    f"verify_share names server '{server}', but the constraint is for "
                    f"{_names([n for n in listed if _same_server(n, server)])}: the check connects by another name, "
                    "so the constraint does not apply to it",
                )
            )
    return findings


def server_interface_findings(state: SmbState) -> list[Finding]:
    """What the server side offers SMB clients (Get-SmbServerNetworkInterface): channels need RSS or RDMA there."""
    findings = []
    for record in state.server_interfaces:
        if not record.get("RssCapable") and not record.get("RdmaCapable"):
            findings.append(
                Finding(
                    WARN,
                    "server_interface_single_channel",
                    "server interface {} ({}) is neither RSS- nor RDMA-capable: clients open one channel to it".format(
                        record.get("InterfaceIndex"), record.get("IpAddress") or "no address"
                    ),
                )
            )
    return findings


def rdma_findings(state: SmbState, interface_names: list[str] | tuple) -> list[Finding]:
    """An LBFO team NIC has no RDMA: SMB Direct over its RDMA-enabled members is lost (SMB falls back to TCP)."""
    findings = []
    for name in interface_names:
        if not state.adapter_descriptions.get(name, "").startswith(MULTIPLEXOR):
            continue
        members = state.team_members.get(name, ())
        rdma = [member for member in members if state.rdma_enabled.get(member)]
        if rdma:
            findings.append(
                Finding(
                    WARN,
                    "lbfo_no_smb_direct",
                    f"interface '{name}' is an LBFO team NIC over RDMA-enabled {_names(rdma)}: a team NIC exposes no "
                    "RDMA, so SMB Direct is not used through it; constrain SMB to the member cards themselves, or "
                    "use a SET switch with RDMA-enabled host vNICs",
                )
            )
    return findings


def preflight(desired: SmbDesired, state: SmbState) -> list[Finding]:
    findings = _double_hop_findings(desired)
    for server, interfaces in desired.constraints:
        missing = [alias for alias in interfaces if alias not in state.adapters]
        if missing:
            findings.append(
                Finding(
                    REFUSE,
                    "constraint_interface_missing",
                    "constraint for server '{}' names interface{} {} not on this host; adapters present: {}".format(
                        server, "s" if len(missing) > 1 else "", _names(missing), _names(sorted(state.adapters))
                    ),
                )
            )
    if desired.verify_share and not desired.client_enabled:
        findings.append(
            Finding(
                REFUSE,
                "verify_needs_client",
                f"verify_share {desired.verify_share} needs client multichannel: "
                "set client_enabled: true or drop verify_share",
            )
        )
    findings += rss_findings(state, desired.rss_interfaces)
    findings += _name_variant_findings(desired, state)
    if desired.server_enabled:
        findings += server_interface_findings(state)
    constrained = sorted({alias for _server, aliases in desired.constraints for alias in aliases})
    findings += rdma_findings(state, sorted(set(desired.rss_interfaces) | set(constrained)))
    return findings


# ---------------------------------------------------------------------------------------------------- changes
def plan_changes(desired: SmbDesired, state: SmbState) -> list[dict]:
    """Smallest ordered change list: switches, constraint additions, removals, then a refresh of live sessions.

    Existing SMB sessions keep their channel layout until Update-SmbMultichannelConnection runs, so any change ends
    with it.
    """
    changes = []
    if state.server_multichannel != desired.server_enabled:
        changes.append({"action": "set_server_multichannel", "enable": desired.server_enabled})
    if state.client_multichannel != desired.client_enabled:
        changes.append({"action": "set_client_multichannel", "enable": desired.client_enabled})
    removals: list[dict[str, object]] = []
    for server, interfaces in desired.constraints:
        current_name, current = _current_constraint(state, server)
        add = [alias for alias in interfaces if alias not in current]
        remove = [alias for alias in current if alias not in interfaces]
        if add:
            changes.append({"action": "add_constraint", "server_name": server, "interfaces": add})
        if remove:
            removals.append({"action": "remove_constraint", "server_name": current_name, "interfaces": remove})
    if desired.exclusive_constraints:
        for name, aliases in sorted(state.constraints.items()):
            if not any(_same_constraint(name, server) for server, _i in desired.constraints):
                removals.append({"action": "remove_constraint", "server_name": name, "interfaces": list(aliases)})
    changes += removals
    if changes:
        changes.append({"action": "update_connections"})
    return changes


def plan(desired: SmbDesired, state: SmbState) -> Plan:
    return gated_plan(preflight(desired, state), lambda: plan_changes(desired, state))


# ---------------------------------------------------------------------------------------------------- verdict
@dataclass(frozen=True)
class ChannelVerdict:
    ok: bool
    message: str
    channels: int | None = None
    paths: list = field(default_factory=list)
    findings: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "message": self.message,
            "channels": self.channels,
            "paths": self.paths,
            "findings": [finding.as_dict() for finding in self.findings],
        }


def channel_verdict(desired: SmbDesired, state: SmbState | None) -> ChannelVerdict:
    """Does verify_share connect over at least min_channels channels? The failure says why it may not."""
    if not desired.verify_share:
        return ChannelVerdict(True, "no verify_share given: live multichannel connections not checked")
    share = desired.verify_share
    server = share_server(share)
    if state is None:
        raise ValueError(f"judging the channels to {share} needs this host's gathered state")
    probe = state.share_probe or {}
    if probe and not probe.get("reachable", True):
        return ChannelVerdict(
            False, "share {} is not reachable from this host: {}".format(share, probe.get("error")), 0
        )
    rows = [row for row in state.connections if _same_server(row.server_name, server)]
    used = [row for row in rows if row.selected and not row.failed]
    channels = sum(row.current_channels for row in used)
    paths = [
        {
            "client_interface": row.client_interface,
            "client_ip": row.client_ip,
            "server_ip": row.server_ip,
            "current_channels": row.current_channels,
            "max_channels": row.max_channels,
            "client_rss_capable": row.client_rss_capable,
            "client_rdma_capable": row.client_rdma_capable,
            "client_link_speed_bits_per_second": row.client_link_speed_bits_per_second,
        }
        for row in used
    ]
    findings = rss_findings(state, sorted({row.client_interface for row in used}))
    findings += rdma_findings(state, sorted({row.client_interface for row in used}))
    if not state.client_multichannel:
        findings.append(Finding(WARN, "client_multichannel_off", "client multichannel is disabled on this host"))
    if not used:
        return ChannelVerdict(
            False,
            f"no SMB multichannel connection to '{server}' after opening {share}: "
            "check the server's multichannel setting and that the share is reached by SMB 3",
            0,
            paths,
            findings,
        )
    description = ", ".join(
        f"'{row.client_interface}' {row.client_ip} -> {row.server_ip} x{row.current_channels}" for row in used
    )
    if channels < desired.min_channels:
        reasons = "; ".join(finding.message for finding in findings) or "check RSS and the server's interfaces"
        return ChannelVerdict(
            False,
            f"share {share} connects over {channels} channel{'' if channels == 1 else 's'} ({description}), "
            f"fewer than {desired.min_channels}: multichannel is not in effect; {reasons}",
            channels,
            paths,
            findings,
        )
    return ChannelVerdict(
        True, f"share {share} connects over {channels} channels ({description})", channels, paths, findings
    )
