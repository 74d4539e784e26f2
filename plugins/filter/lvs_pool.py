# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters across directors and real servers: who the real servers of the directors' services are, whether each of
them is a managed host with the VIP on lo, and whether the live IPVS table can spare the ones to drain or remove.
The models are ``module_utils/_lvs_pool_problems.py`` and ``module_utils/_lvs_drain.py``; each filter's
documentation is in the .yml file of its name beside this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.module_utils._ipvs import IpvsParseError, parse_proc_ip_vs
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import finding
from ansible_collections.hpc.balance.plugins.module_utils._lvs_drain import drain_problems, removal_problems
from ansible_collections.hpc.balance.plugins.module_utils._lvs_pool_problems import (
    pool_problems,
    real_server_addresses,
    values_by_address,
)


def _listed(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise AnsibleFilterError(f"{what} must be a list of addresses, got {value!r}")
    return [str(item) for item in value]


def lvs_pool_real_servers(hosts: list[str], hostvars: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The hosts of lvs_realservers as ``{host, addresses, vips}``: the addresses the directors may list them under
    (lvs_realserver_service_addresses where set, else ansible_host and every gathered address)."""
    entries = []
    for host in hosts or []:
        host_vars = hostvars[host]
        service = host_vars.get("lvs_realserver_service_addresses")
        if service:
            addresses = _listed(service, f"{host}: lvs_realserver_service_addresses")
        else:
            facts = host_vars.get("ansible_facts") or {}
            addresses = [str(host_vars.get("ansible_host") or host)]
            for key in ("all_ipv4_addresses", "all_ipv6_addresses"):
                addresses += [str(address) for address in facts.get(key) or []]
        vips = _listed(host_vars.get("lvs_realserver_vips"), f"{host}: lvs_realserver_vips")
        entries.append({"host": str(host), "addresses": addresses, "vips": vips})
    return entries


def lvs_pool_problems(configs: list[dict[str, Any] | None], real_servers: list[dict[str, Any]],
                      unmanaged: list[str] | None = None) -> list[dict[str, Any]]:
    """Errors ``{hosts, message}`` where a director's DR real server is not a managed host with the VIP on lo."""
    return pool_problems([config for config in configs or [] if config], real_servers or [],
                         _listed(unmanaged, "lvs_director_unmanaged_real_servers"))


def lvs_pool_real_server_addresses(entry: dict[str, Any], configs: list[dict[str, Any] | None]) -> list[str]:
    """The addresses under which the directors' virtual servers list one real-server host."""
    return real_server_addresses(entry, [config for config in configs or [] if config])


def lvs_drain_problems(services: list[dict[str, Any]], addresses: list[str],
                       virtual_servers: list[dict[str, Any]] | None = None) -> list[str]:
    """Why draining ``addresses`` now would leave a live service without a serving real server or below quorum."""
    if not isinstance(services, list):
        raise AnsibleFilterError(f"lvs_drain_problems: expects ipvs_spread's services (a list), got {services!r}")
    return drain_problems(services, _listed(addresses, "lvs_drain_problems: addresses"), virtual_servers or [])


def lvs_removal_problems(proc_ip_vs: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    """Errors ``{hosts, message}`` for the real servers the live table (the text of /proc/net/ip_vs) shows serving
    that the director's new config no longer lists. An empty text (no IPVS table to read) finds nothing."""
    if not str(proc_ip_vs or "").strip():
        return []
    try:
        services = parse_proc_ip_vs(str(proc_ip_vs))["services"]
    except (IpvsParseError, ValueError) as error:
        raise AnsibleFilterError(f"lvs_removal_problems: /proc/net/ip_vs could not be read: {error}") from None
    host = str(config.get("host", ""))
    return [finding([host], message) for message in removal_problems(host, config, services)]


def lvs_pool_values_by_address(values: dict[str, Any], real_servers: list[dict[str, Any]],
                               configs: list[dict[str, Any] | None]) -> dict[str, Any]:
    """{host: value} -> {address: value}, under every address the directors' virtual servers list each host by."""
    if not isinstance(values, Mapping):
        raise AnsibleFilterError(f"lvs_pool_values_by_address: expects {{host: value}}, got {values!r}")
    try:
        return values_by_address(dict(values), real_servers or [], [config for config in configs or [] if config])
    except ValueError as error:
        raise AnsibleFilterError(f"lvs_pool_values_by_address: {error}") from None


class FilterModule:
    """Directors against their real servers."""

    def filters(self) -> dict[str, Any]:
        return {
            "lvs_pool_real_servers": lvs_pool_real_servers,
            "lvs_pool_problems": lvs_pool_problems,
            "lvs_pool_real_server_addresses": lvs_pool_real_server_addresses,
            "lvs_drain_problems": lvs_drain_problems,
            "lvs_pool_values_by_address": lvs_pool_values_by_address,
            "lvs_removal_problems": lvs_removal_problems,
        }
