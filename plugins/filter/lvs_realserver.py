# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mistakes in one LVS real server's settings, found before the lvs_realserver role changes anything, and the VIPs to
add to or remove from ``lo``.

In DR mode a real server holds each VIP on ``lo`` and must never answer or announce ARP for it; a wrong value here
does not fail loudly, it poisons the switch's and the clients' ARP tables and the service goes dark. So the values that
keep the host quiet are checked, and every message names the host, the variable and the fix.

IPv6 VIPs need no ARP setting: Linux answers a neighbour solicitation only for an address of the interface it came in
on. ``ndisc_recv_ns()`` (net/ipv6/ndisc.c) looks the target up with ``ipv6_get_ifaddr(dev_net(dev), &msg->target,
dev, 1)``, and with ``strict`` set ``ipv6_get_ifaddr()`` (net/ipv6/addrconf.c) matches only an address on ``dev``
itself; the proxy paths after it answer only with ``proxy_ndp`` on or an anycast address. A v6 VIP on ``lo`` is
therefore never answered for on the NIC, and a v6 VIP on another interface is as wrong as a v4 one.

Addresses are compared in ipaddress's normal form: ``fd00:0::1`` is ``fd00::1``, as ``ip`` prints it.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_sysctl import parse_sysctl_output
from ansible_collections.hpc.balance.plugins.module_utils._addresses import Address, parse_address
from ansible_collections.hpc.balance.plugins.module_utils._booleans import BooleanInputError, read_boolean

# arp_ignore 1: answer only for addresses on the interface asked; 2: and only from the same subnet.
ARP_IGNORE_QUIET = (1, 2)
# arp_announce 2: always use the best local address of the outgoing interface, never a VIP on lo.
ARP_ANNOUNCE_QUIET = (2,)
PORT_RANGE = (1, 65535)
# The kernel settings that must allow IPv6 on lo for a v6 VIP (read with sysctl -e; absent without IPv6).
IPV6_SWITCHES = ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.lo.disable_ipv6")


def _as_int(value: Any) -> Any:
    """Whole numbers given as text (extra vars, templated values) count as numbers."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _address(text: Any) -> Address | None:
    """The address in ``text`` (a prefix is ignored), or None when it is not one."""
    return parse_address(text, prefix_allowed=True)


def _interfaces(listing: Any) -> list[dict[str, Any]]:
    """``ip -j addr show`` as text or already parsed -> one dict per interface."""
    return (json.loads(listing) if isinstance(listing, str) else listing) or []


def _vip_problem(host: str, vip: str) -> str | None:
    try:
        interface = ipaddress.ip_interface(str(vip).strip())
    except ValueError:
        return f"{host}: lvs_realserver_vips has {vip!r}, which is not an IP address; write it as 198.18.0.100"
    if interface.network.prefixlen != interface.max_prefixlen:
        return (
            f"{host}: lvs_realserver_vips has {vip} with a /{interface.network.prefixlen} prefix; a VIP on lo must "
            f"be a single address (/{interface.max_prefixlen}), or lo owns the whole subnet; write {interface.ip}"
        )
    return None


def _vips_elsewhere(host: str, vips: list[Address], addresses: Any) -> list[str]:
    """A VIP held on another interface (left there by a former director, say) makes this host answer ARP (v4) or
    neighbour solicitations (v6) for it there."""
    if addresses is None:
        return []
    found = []
    for interface in _interfaces(addresses):
        name = interface.get("ifname")
        for address in interface.get("addr_info", []):
            if name == "lo" or _address(address.get("local")) not in vips:
                continue
            answers = "neighbour solicitations" if address.get("family") == "inet6" else "ARP"
            cidr = f"{address['local']}/{address['prefixlen']}"
            found.append(
                f"{host}: {address['local']} (lvs_realserver_vips) is also on {name} as {cidr}, so this host answers "
                f"{answers} for it there and takes the VIP's traffic from the director; remove it "
                f"(ip addr del {cidr} dev {name}) and keep it only on lo"
            )
    return found


def _ipv6_problems(host: str, vips: list[Address], ipv6_sysctls: Any) -> list[str]:
    """A v6 VIP on a host whose kernel has no IPv6, or has it switched off on lo, cannot be added."""
    v6 = ", ".join(str(vip) for vip in vips if vip.version == 6)
    if not v6 or ipv6_sysctls is None:
        return []
    # The same read holds the ARP keys: only the switches tell whether the kernel has IPv6.
    current = {key: value for key, value in parse_sysctl_output(ipv6_sysctls).items() if key in IPV6_SWITCHES}
    if not current:
        return [
            f"{host}: lvs_realserver_vips has {v6} (IPv6), but this host's kernel has no IPv6 (no /proc/sys/net/ipv6; "
            "booted with ipv6.disable=1?); enable IPv6 or list only IPv4 VIPs"
        ]
    return [
        f"{host}: lvs_realserver_vips has {v6} (IPv6), but {key} is {current[key]} here; set it to 0 (sysctl -w "
        f"{key}=0, and in /etc/sysctl.d) or list only IPv4 VIPs"
        for key in IPV6_SWITCHES
        if _as_int(current.get(key, 0)) != 0
    ]


def _boolean_problems(host: str, settings: dict[str, Any]) -> list[str]:
    """Booleans the user sets must read as booleans: "false" from -e or an INI inventory is False, "flase" is wrong."""
    problems = []
    for key in ("loose_rp_filter",):
        try:
            read_boolean(settings.get(key), f"{host}: lvs_realserver_{key}")
        except BooleanInputError as error:
            problems.append(str(error))
    return problems


def _interface_problems(host: str, interface: str, known: list[str] | None) -> list[str]:
    if not interface:
        return [
            f"{host}: lvs_realserver_interface is empty (no default IPv4 route in the facts); set it to the NIC "
            "that faces the directors and clients"
        ]
    if known is not None and interface not in known:
        return [
            f"{host}: lvs_realserver_interface is {interface}, which this host does not have "
            f"({', '.join(sorted(known))}); set it to the NIC that faces the directors and clients"
        ]
    return []


def _vip_list_problems(host: str, vips: list[str], own_addresses: list[Any]) -> list[str]:
    """No VIP, a VIP that is no single address, listed twice, or this host's own address."""
    if not vips:
        return [f"{host}: lvs_realserver_vips is empty; list the VIPs the directors send to this host"]
    problems = [problem for problem in (_vip_problem(host, vip) for vip in vips) if problem]
    parsed = [address for address in (_address(vip) for vip in vips) if address]
    for vip in sorted({vip for vip in parsed if parsed.count(vip) > 1}, key=lambda a: (a.version, a)):
        problems.append(f"{host}: lvs_realserver_vips lists {vip} more than once; keep one entry")
    own = {address for address in map(_address, own_addresses) if address is not None}
    mine = sorted(own.intersection(parsed), key=lambda a: (a.version, a))
    if mine:
        problems.append(
            f"{host}: lvs_realserver_vips has {', '.join(str(a) for a in mine)}, which is this host's own address; "
            "a VIP is the service address the directors hold, not a real server's address"
        )
    return problems


def lvs_realserver_problems(settings: dict[str, Any]) -> list[str]:
    """One real server's settings -> a list of sentences, each naming the host, the variable and the fix.

    settings -- host, vips, interface, known_interfaces (None when facts are not gathered), own_addresses,
                arp_ignore, arp_announce, loose_rp_filter, check_ports, addresses (``ip -j addr show`` as text or
                parsed; None when not read), ipv6_sysctls (what ``sysctl -e`` printed for IPV6_SWITCHES, with other
                keys beside them that are ignored here; None when not read)
    """
    host = settings.get("host", "?")
    vips = [str(vip) for vip in settings.get("vips") or []]
    problems = _vip_list_problems(host, vips, settings.get("own_addresses") or [])
    problems += _interface_problems(host, str(settings.get("interface") or ""), settings.get("known_interfaces"))
    for name, value, quiet in (
        ("arp_ignore", settings.get("arp_ignore"), ARP_IGNORE_QUIET),
        ("arp_announce", settings.get("arp_announce"), ARP_ANNOUNCE_QUIET),
    ):
        if _as_int(value) not in quiet:
            problems.append(
                f"{host}: lvs_realserver_{name} is {value!r}, which lets this host answer or announce ARP for the "
                f"VIPs on lo and steal their traffic; use {' or '.join(str(v) for v in quiet)}"
            )
    problems += _boolean_problems(host, settings)
    parsed = [address for address in (_address(vip) for vip in vips) if address]
    problems += _vips_elsewhere(host, parsed, settings.get("addresses"))
    problems += _ipv6_problems(host, parsed, settings.get("ipv6_sysctls"))
    for port in settings.get("check_ports") or []:
        port = _as_int(port)
        if not isinstance(port, int) or not PORT_RANGE[0] <= port <= PORT_RANGE[1]:
            problems.append(f"{host}: lvs_realserver_check_ports has {port!r}; use TCP port numbers from 1 to 65535")
    return problems


def lvs_realserver_vip_cidrs(vips: list[Any]) -> list[str]:
    """The VIPs as ``ip`` writes them on lo: normal form with the full-length prefix (198.18.0.100/32, fd00::1/128)."""
    cidrs = []
    for vip in vips or []:
        address = _address(vip)
        if address is None:
            raise AnsibleFilterError(
                f"lvs_realserver_vip_cidrs: {vip!r} is not an IP address; write it as 198.18.0.100 or fd00::100"
            )
        cidrs.append(f"{address}/{address.max_prefixlen}")
    return cidrs


def _normal_cidr(cidr: str) -> str:
    return ipaddress.ip_interface(str(cidr).strip()).with_prefixlen


def lvs_realserver_vip_plan(ip_json: Any, wanted: list[str], label: str) -> dict[str, list[str]]:
    """What to change on lo, from ``ip -j addr show dev lo``: ``{"add": [cidr, ...], "remove": [cidr, ...]}``.

    ip_json -- the JSON text (or parsed list) ``ip -j addr show dev lo`` printed
    wanted  -- the VIPs as CIDRs (198.18.0.100/32, fd00::100/128)
    label   -- the label the role gives its VIPs; only addresses with it are ever removed, so addresses that others
               put on lo stay. IPv6 addresses carry no label, so a v6 VIP is added but never removed.
    """
    present, ours = set(), set()
    for interface in _interfaces(ip_json):
        for address in interface.get("addr_info", []):
            cidr = _normal_cidr(f"{address['local']}/{address['prefixlen']}")
            present.add(cidr)
            if address.get("label") == label:
                ours.add(cidr)
    try:
        wanted = [_normal_cidr(cidr) for cidr in wanted]
    except ValueError as error:
        raise AnsibleFilterError(f"lvs_realserver_vip_plan: {error}; list the VIPs as 198.18.0.100/32") from None
    return {
        "add": [cidr for cidr in wanted if cidr not in present],
        "remove": sorted(ours - set(wanted)),
    }


def _listeners(ss_lines: list[str]) -> set[tuple[Any, int]]:
    """(address or "*", port) of each listening TCP socket in ``ss -Hltn`` lines; a wildcard socket is "*" for its
    family as ("*4", port) or ("*6", port), and ss's own "*" (any family) as ("*", port)."""
    found: set[tuple[Any, int]] = set()
    for line in ss_lines:
        fields = str(line).split()
        if len(fields) < 4 or ":" not in fields[3]:
            continue
        host, port = fields[3].rsplit(":", 1)
        host = host.split("%")[0]  # fe80::1%eth0
        if not port.isdigit():
            continue
        if host == "*":
            found.add(("*", int(port)))
        elif host in ("0.0.0.0", "[::]"):
            found.add(("*4" if host == "0.0.0.0" else "*6", int(port)))
        elif (address := parse_address(host)) is not None:
            found.add((address, int(port)))
    return found


def lvs_realserver_ports_to_wait(pairs: list[Any], ss_lines: list[str]) -> list[list[Any]]:
    """The (address, port) pairs no listening socket in ``ss -Hltn`` certainly accepts: the role waits on these only.

    pairs    -- [address or CIDR, port] pairs (the VIPs and the host's own address, times the check ports)
    ss_lines -- the lines ``ss -Hltn`` printed (columns State Recv-Q Send-Q Local:Port Peer:Port)

    A pair is taken as accepted when a socket listens on its own address or on the wildcard of its family (0.0.0.0
    for IPv4, [::] for IPv6, or ss's "*"). A [::] socket may or may not take IPv4 (net.ipv6.bindv6only, IPV6_V6ONLY):
    an IPv4 pair behind it is still waited on. Anything unreadable is waited on too.
    """
    listening = _listeners(ss_lines or [])
    waits = []
    for pair in pairs:
        address, port = _address(pair[0]), _as_int(pair[1])
        wildcard = "*4" if address is not None and address.version == 4 else "*6"
        accepted = {(address, port), (wildcard, port), ("*", port)}
        if address is None or not isinstance(port, int) or not listening & accepted:
            waits.append(list(pair))
    return waits


class FilterModule:
    """Filters of the lvs_realserver role."""

    def filters(self) -> dict[str, Any]:
        return {
            "lvs_realserver_ports_to_wait": lvs_realserver_ports_to_wait,
            "lvs_realserver_problems": lvs_realserver_problems,
            "lvs_realserver_vip_cidrs": lvs_realserver_vip_cidrs,
            "lvs_realserver_vip_plan": lvs_realserver_vip_plan,
        }
