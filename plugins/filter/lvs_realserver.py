"""Mistakes in one LVS real server's settings, found before the lvs_realserver role changes anything.

In DR mode a real server holds each VIP on ``lo`` and must never answer or announce ARP for it; a wrong value here
does not fail loudly, it poisons the switch's and the clients' ARP tables and the service goes dark. So the values that
keep the host quiet are checked, and every message names the host, the variable and the fix.
"""

from __future__ import annotations

import ipaddress
import json

# arp_ignore 1: answer only for addresses on the interface asked; 2: and only from the same subnet.
ARP_IGNORE_QUIET = (1, 2)
# arp_announce 2: always use the best local address of the outgoing interface, never a VIP on lo.
ARP_ANNOUNCE_QUIET = (2,)
PORT_RANGE = (1, 65535)


def _as_int(value):
    """Whole numbers given as text (extra vars, templated values) count as numbers."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _vip_problem(host, vip):
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


def _vips_elsewhere(host, vips, addresses):
    """A VIP held on another interface (left there by a former director, say) makes this host answer ARP for it."""
    if addresses is None:
        return []
    interfaces = json.loads(addresses) if isinstance(addresses, str) else addresses
    found = []
    for interface in interfaces or []:
        name = interface.get("ifname")
        for address in interface.get("addr_info", []):
            if address.get("local") not in vips or name == "lo":
                continue
            found.append(
                f"{host}: {address['local']} (lvs_realserver_vips) is also on {name} as "
                f"{address['local']}/{address['prefixlen']}, so this host answers ARP for it there and takes the "
                f"VIP's traffic from the director; remove it (ip addr del {address['local']}/{address['prefixlen']} "
                f"dev {name}) and keep it only on lo"
            )
    return found


def lvs_realserver_problems(settings):
    """One real server's settings -> a list of sentences, each naming the host, the variable and the fix.

    settings -- host, vips, interface, known_interfaces (None when facts are not gathered), own_addresses,
                arp_ignore, arp_announce, check_ports, addresses (``ip -j addr show`` as text or parsed; None when
                not read)
    """
    host = settings.get("host", "?")
    problems = []
    vips = [str(vip) for vip in settings.get("vips") or []]
    if not vips:
        problems.append(f"{host}: lvs_realserver_vips is empty; list the VIPs the directors send to this host")
    for vip in vips:
        problem = _vip_problem(host, vip)
        if problem:
            problems.append(problem)
    bare = [vip.split("/")[0] for vip in vips]
    for vip in sorted({vip for vip in bare if bare.count(vip) > 1}):
        problems.append(f"{host}: lvs_realserver_vips lists {vip} more than once; keep one entry")
    own = sorted(set(bare).intersection(str(a) for a in settings.get("own_addresses") or []))
    if own:
        problems.append(
            f"{host}: lvs_realserver_vips has {', '.join(own)}, which is this host's own address; a VIP is the "
            "service address the directors hold, not a real server's address"
        )
    interface = str(settings.get("interface") or "")
    known = settings.get("known_interfaces")
    if not interface:
        problems.append(
            f"{host}: lvs_realserver_interface is empty (no default IPv4 route in the facts); set it to the NIC "
            "that faces the directors and clients"
        )
    elif known is not None and interface not in known:
        problems.append(
            f"{host}: lvs_realserver_interface is {interface}, which this host does not have "
            f"({', '.join(sorted(known))}); set it to the NIC that faces the directors and clients"
        )
    for name, value, quiet in (
        ("arp_ignore", settings.get("arp_ignore"), ARP_IGNORE_QUIET),
        ("arp_announce", settings.get("arp_announce"), ARP_ANNOUNCE_QUIET),
    ):
        if _as_int(value) not in quiet:
            problems.append(
                f"{host}: lvs_realserver_{name} is {value!r}, which lets this host answer or announce ARP for the "
                f"VIPs on lo and steal their traffic; use {' or '.join(str(v) for v in quiet)}"
            )
    problems += _vips_elsewhere(host, bare, settings.get("addresses"))
    for port in settings.get("check_ports") or []:
        port = _as_int(port)
        if not isinstance(port, int) or not PORT_RANGE[0] <= port <= PORT_RANGE[1]:
            problems.append(f"{host}: lvs_realserver_check_ports has {port!r}; use TCP port numbers from 1 to 65535")
    return problems


def lvs_realserver_vip_plan(ip_json, wanted, label):
    """What to change on lo, from ``ip -j addr show dev lo``: ``{"add": [cidr, ...], "remove": [cidr, ...]}``.

    ip_json -- the JSON text (or parsed list) ``ip -j addr show dev lo`` printed
    wanted  -- the VIPs as CIDRs (198.18.0.100/32)
    label   -- the label the role gives its VIPs; only addresses with it are ever removed, so addresses that others
               put on lo stay
    """
    interfaces = json.loads(ip_json) if isinstance(ip_json, str) else ip_json
    present, ours = set(), set()
    for interface in interfaces or []:
        for address in interface.get("addr_info", []):
            cidr = f"{address['local']}/{address['prefixlen']}"
            present.add(cidr)
            if address.get("label") == label:
                ours.add(cidr)
    wanted = [str(cidr) for cidr in wanted]
    return {
        "add": [cidr for cidr in wanted if cidr not in present],
        "remove": sorted(ours - set(wanted)),
    }


class FilterModule:
    """Filters of the lvs_realserver role."""

    def filters(self):
        return {"lvs_realserver_problems": lvs_realserver_problems, "lvs_realserver_vip_plan": lvs_realserver_vip_plan}
