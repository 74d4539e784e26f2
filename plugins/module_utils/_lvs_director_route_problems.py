# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's checks of the VRRP instances' virtual routes, on one director and across directors.

keepalived adds an instance's virtual routes when it becomes MASTER and deletes them when it leaves MASTER
(keepalived.conf(5), "virtual_routes"). Its config test passes routes the kernel then refuses, so the VIP moves and the
route does not: a destination with host bits (198.18.0.225/28: "Invalid prefix for given prefix length"), a blackhole
with a gateway or a device ("Gateway, device and multipath can not be specified for this route type"), the same route
twice ("File exists"). Seen on Linux 6.1 with iproute2 6.1 and keepalived 2.2.7. Directors that share an instance must
add the same routes, or a failover changes where traffic goes.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import address_family
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import finding, out_of_range

# The kernel's route table ids and metrics are 32-bit (rtnetlink's RTA_TABLE, RTA_PRIORITY).
ROUTE_NUMBER_RANGE = (0, 2**32 - 1)


def _destination_problem(route: dict[str, Any], key: str) -> str | None:
    try:
        ipaddress.ip_network(route["to"], strict=True)
    except ValueError:
        try:
            network = ipaddress.ip_interface(route["to"]).network
        except ValueError:
            return f"{key}.to is {route['to']!r}, which is not an address or a network; write e.g. 198.18.0.240/28"
        return (
            f"{key}.to is {route['to']}, which has host bits set: keepalived's config test passes it, and the kernel "
            f"refuses the route (\"Invalid prefix for given prefix length\") when the instance becomes MASTER; write "
            f"{network}"
        )
    return None


def _destination(route: dict[str, Any]) -> str:
    """The destination as the kernel keys it: 198.18.0.240 and 198.18.0.240/32 are one route."""
    try:
        return str(ipaddress.ip_network(route["to"], strict=False))
    except ValueError:
        return route["to"]


def _route_problems(route: dict[str, Any], key: str, known: list[str] | None) -> list[str]:
    """One route: what keepalived's config test or the kernel refuses, and what keepalived cannot track."""
    found = []
    destination = _destination_problem(route, key)
    if destination:
        return [destination]
    for field in ("via", "src"):
        if route[field] is not None and address_family(route[field]) != route["family"]:
            found.append(
                f"{key}.{field} is {route[field]}, which is not an address of the family of {route['to']} (keepalived: "
                f"\"Cannot mix IPv4 and IPv6 addresses for route\"); use an IPv{route['family']} address"
            )
    if route["blackhole"]:
        given = [field for field in ("via", "dev", "src") if route[field] is not None]
        if given:
            found.append(
                f"{key} is a blackhole with {' and '.join(given)}, which the kernel refuses for a blackhole "
                "(\"Gateway, device and multipath can not be specified for this route type\"); drop them"
            )
    if route["track"] and route["dev"] is None:
        found.append(
            f"{key} has no dev, and keepalived can track only a route with an interface (its config test fails: "
            "\"cannot track route ... with no interface specified\"); set dev, or track: false"
        )
    if route["dev"] is not None and known is not None and route["dev"] not in known:
        found.append(
            f"{key}.dev is {route['dev']}, which this host does not have ({', '.join(sorted(known))}); name one of its "
            "interfaces"
        )
    for field in ("table", "metric"):
        value = route[field]
        if out_of_range(value, *ROUTE_NUMBER_RANGE):
            found.append(f"{key}.{field} is {value}; use 0 to {ROUTE_NUMBER_RANGE[1]}")
    return found


def route_problems(host: str, config: dict[str, Any]) -> list[str]:
    """Every virtual route of this director: each on its own, and no route twice (the kernel's key: destination,
    table and metric; "File exists" for the second)."""
    found = []
    seen: dict[tuple, str] = {}
    for instance in config["vrrp_instances"]:
        for position, route in enumerate(instance["virtual_routes"]):
            key = f"{host}: lvs_director_vrrp_instances[{instance['name']}].virtual_routes[{position}]"
            found += _route_problems(route, key, config["known_interfaces"])
            identity = (_destination(route), route["table"] or 0, route["metric"] or 0)
            if identity in seen:
                found.append(
                    f"{key} is {route['to']} again (table {identity[1] or 'main'}, metric {identity[2]}), also in "
                    f"{seen[identity]}: the kernel refuses the second (\"File exists\"); keep one"
                )
            else:
                seen[identity] = f"lvs_director_vrrp_instances[{instance['name']}].virtual_routes[{position}]"
    return found


def _route_view(instance: dict[str, Any]) -> list[str]:
    return sorted(route["line"] for route in instance["virtual_routes"])


def _route_identities(instance: dict[str, Any]) -> list[tuple]:
    """What keepalived asks the kernel for, whatever the spelling of the destination."""
    fields = ("via", "dev", "src", "table", "metric", "blackhole", "track")
    return sorted((_destination(route), *(str(route[field]) for field in fields))
                  for route in instance["virtual_routes"])


def peer_route_problems(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Peers of one instance (the same name) that would add different routes as MASTER."""
    errors = []
    by_name = defaultdict(list)
    for config in configs:
        for instance in config["vrrp_instances"]:
            by_name[instance["name"]].append((config["host"], _route_view(instance), _route_identities(instance)))
    for name, members in sorted(by_name.items()):
        if len({tuple(identities) for _host, _view, identities in members}) > 1:
            listing = "; ".join(f"{host}: {', '.join(view) or 'none'}" for host, view, _identities in members)
            errors.append(
                finding(
                    [host for host, _view, _identities in members],
                    f"lvs_director_vrrp_instances[{name}].virtual_routes differs between peers ({listing}), so a "
                    "failover changes the routes the VIP's holder adds; list the same routes on every director",
                )
            )
    return errors
