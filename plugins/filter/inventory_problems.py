# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory checks that playbooks/site.yml runs before anything changes.

A typo in a group name or a host without an address otherwise surfaces much later, as a play that silently matches
no host or an SSH error on one node; this filter names them up front, with the fix.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

# The groups the collection's playbooks act on (ARCHITECTURE.md, "Inventory groups").
KNOWN_GROUPS = ("lvs_directors", "lvs_realservers", "lvs_clients", "windows_storage", "gpu_nodes")
_IMPLICIT_GROUPS = ("all", "ungrouped")
_ADDRESSLESS_CONNECTIONS = ("local",)


def _is_ip_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _resolves(name: str) -> bool:
    try:
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return True


def host_address_problem(host: str, host_vars: Mapping[str, Any], resolve: Callable[[str], bool] = _resolves
                         ) -> str | None:
    """Return a message when ``host`` has no address Ansible could connect to, else None."""
    if host_vars.get("ansible_connection") in _ADDRESSLESS_CONNECTIONS:
        return None
    address = host_vars.get("ansible_host")
    if address is not None and str(address).strip():
        return None
    if _is_ip_address(host) or resolve(host):
        return None
    return (
        f"host '{host}' has no address: ansible_host is not set and the name does not resolve; "
        f"set ansible_host for it in the inventory"
    )


def inventory_problems(groups: Mapping[str, list[str]], hostvars: Mapping[str, Mapping[str, Any]],
                       required_groups: list[str] | None = None, extra_groups: list[str] | None = None,
                       resolve: Callable[[str], bool] = _resolves) -> list[str]:
    """List every inventory problem as one readable sentence each (empty list = inventory is usable).

    groups          -- Ansible's ``groups`` magic variable: group name -> list of host names
    hostvars        -- Ansible's ``hostvars``: host name -> mapping of that host's variables
    required_groups -- groups this run needs at least one host in
    extra_groups    -- site-specific group names the operator allows beside KNOWN_GROUPS
    """
    required_groups = list(required_groups or [])
    extra_groups = list(extra_groups or [])
    for name, value in (("required_groups", required_groups), ("extra_groups", extra_groups)):
        if not all(isinstance(item, str) for item in value):
            raise AnsibleFilterError(f"inventory_problems: {name} must be a list of group names, got {value!r}")

    allowed = set(KNOWN_GROUPS) | set(_IMPLICIT_GROUPS) | set(extra_groups)
    problems = []
    for group in sorted(set(groups) - allowed):
        problems.append(
            f"unknown inventory group '{group}': the collection acts on {', '.join(KNOWN_GROUPS)}; "
            f"rename it to one of them or list it in hpc_balance_extra_groups"
        )
    for group in required_groups:
        if group not in KNOWN_GROUPS and group not in extra_groups:
            problems.append(f"required group '{group}' is not a group the collection knows ({', '.join(KNOWN_GROUPS)})")
        elif not groups.get(group):
            problems.append(
                f"required group '{group}' has no hosts: add hosts to it or remove it from hpc_balance_required_groups"
            )
    for host in groups.get("all", []):
        problem = host_address_problem(host, hostvars[host], resolve=resolve)
        if problem:
            problems.append(problem)
    return problems


class FilterModule:
    """Inventory sanity filters."""

    def filters(self) -> dict[str, Any]:
        return {"inventory_problems": inventory_problems}
