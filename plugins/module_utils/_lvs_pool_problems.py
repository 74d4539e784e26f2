# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Directors against their real servers: every real server of a DR service is a managed host with the VIP on lo.

In DR mode the director only rewrites the frame's MAC address: the packet still goes to the VIP, and a real server
without the VIP on an interface drops it. keepalived's health checks connect to the real server's own address
(``connect_ip`` defaults to it, keepalived.conf(5)), so they pass, and the pool loses that server's share of every
client without a word in any log. The lvs_director role's config and the lvs_realserver role's VIPs live in two
roles on two groups of hosts; this room checks that they agree, before either changes anything.

A real server is found by its address among the hosts of ``lvs_realservers``: the host's
``lvs_realserver_service_addresses`` where set (when ``ansible_host`` is a management address), else its
``ansible_host`` and every address its gathered facts list.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._addresses import address_spelling as _normal
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import finding, vip_address


def real_server_hosts(real_servers: list[dict[str, Any]]) -> dict[str, list[str]]:
    """{address: [hosts that have it]} over the hosts of lvs_realservers (``{host, addresses, vips}`` each)."""
    owners: dict[str, list[str]] = {}
    for entry in real_servers:
        for address in {_normal(a) for a in entry["addresses"] if a}:
            owners.setdefault(address, []).append(entry["host"])
    return owners


def real_server_addresses(entry: dict[str, Any], configs: list[dict[str, Any]]) -> list[str]:
    """The addresses under which the directors' virtual servers list this real-server host (sorted, as written)."""
    own = {_normal(a) for a in entry["addresses"] if a}
    return sorted({real["address"] for config in configs for server in config["virtual_servers"]
                   for real in server["real_servers"] if _normal(real["address"]) in own})


def pool_problems(configs: list[dict[str, Any]], real_servers: list[dict[str, Any]],
                  unmanaged: list[str] | None = None) -> list[dict[str, Any]]:
    """Errors where a director's DR real server is not a host of lvs_realservers, or is one without the VIP.

    configs     -- resolved director configs (``_lvs_director_config.resolve``)
    real_servers -- ``{host, addresses, vips}`` per host of lvs_realservers
    unmanaged   -- real-server addresses whose VIP on lo the operator keeps by other means
    """
    owners = real_server_hosts(real_servers)
    vips_of = {entry["host"]: {_normal(vip_address(str(v))) for v in entry["vips"] or []} for entry in real_servers}
    skip = {_normal(address) for address in unmanaged or []}
    errors = []
    for config in configs:
        host = config["host"]
        for server in config["virtual_servers"]:
            if server["lvs_method"] != "DR":
                continue
            vip = _normal(server["address"])
            key = f"lvs_director_virtual_servers[{server['address']}:{server['port']}]"
            for real in server["real_servers"]:
                address = _normal(real["address"])
                if address in skip:
                    continue
                hosts = owners.get(address, [])
                if not hosts:
                    errors.append(finding([host], (
                        f"{host}: {key}.real_servers[{real['address']}] is no host of lvs_realservers (none has that "
                        "address; a host this run gathered no facts for is known only by its ansible_host and "
                        f"lvs_realserver_service_addresses), so nothing puts {vip} on its lo: in DR it drops every "
                        f"packet for {vip} while "
                        "keepalived's check of its own address passes; add it to lvs_realservers with "
                        f"lvs_realserver_vips listing {vip} (and lvs_realserver_service_addresses when its "
                        "ansible_host is another address), or list it in lvs_director_unmanaged_real_servers if its "
                        "VIP is kept by other means")))
                    continue
                lacking = [name for name in hosts if vip not in vips_of[name]]
                for name in lacking:
                    errors.append(finding([host], (
                        f"{host}: {key}.real_servers[{real['address']}] is {name}, whose lvs_realserver_vips "
                        f"({', '.join(sorted(vips_of[name])) or 'none'}) lacks {vip}: in DR it would drop every "
                        f"packet for {vip} while keepalived's check passes; add {vip} to lvs_realserver_vips of "
                        f"{name}")))
    return errors


def values_by_address(values: dict[str, Any], real_servers: list[dict[str, Any]],
                      configs: list[dict[str, Any]]) -> dict[str, Any]:
    """{host: value} -> {address: value} for every address under which the configs list each host.

    Raises ValueError naming each host the virtual servers list under none of its addresses: a value keyed by a
    management address would match no real server, and nothing it decides would be applied.
    """
    by_address: dict[str, Any] = {}
    unlisted = []
    for entry in real_servers:
        if entry["host"] not in values:
            continue
        addresses = real_server_addresses(entry, configs)
        if not addresses:
            unlisted.append(f"{entry['host']} ({', '.join(entry['addresses'])})")
        for address in addresses:
            by_address[address] = values[entry["host"]]
    if unlisted:
        raise ValueError(
            f"{'; '.join(unlisted)}: no virtual server lists {'this host' if len(unlisted) == 1 else 'these hosts'} "
            "under any of these addresses; list the addresses the directors use in lvs_realserver_service_addresses"
        )
    return by_address
