"""The Ansible inventory and ssh client config of the lab's guests (YAML written without a YAML library).

The guests are reached like the netns hosts: ssh through `nc` in the switch namespace, the lab key, one control
connection per address. Groups are the collection's: udir* in lvs_directors, urs* in lvs_realservers, and the
netns hosts `client` in lvs_clients and `gpu1` in gpu_nodes, so a DR test has a client beside the real-kernel
director and servers, and the whole site (make demo) has every layer.
"""

from __future__ import annotations

import json
from pathlib import Path

from .files import lab_key_path, ssh_client_config_text
from .netns_inventory import lab_vars, ssh_common_args
from .topology import GROUPS, GUEST_INTERFACE, GUESTS, HOST_INTERFACE, HOSTS, address6, host_netns, switch_netns

INVENTORY_FILE = "inventory-uml.yml"
SSH_CONFIG_FILE = "ssh_config-uml"
# netns hosts listed beside the guests (by group), so plays have what the guests cannot be.
NETNS_GROUPS_KEPT = ("lvs_clients", "gpu_nodes")
# A rebooting guest may take its network down before its sshd says goodbye: without keepalives an ssh control
# master then waits forever on the dead connection, and so does every command multiplexed on it (a reboot's
# "is it back yet" check included). With these, ssh gives up on a silent guest after 15 s.
GUEST_SSH_KEEPALIVE = "-o ServerAliveInterval=5 -o ServerAliveCountMax=3"
# The same in ssh_config form, beside a connect timeout for a guest that is not up yet.
GUEST_SSH_OPTIONS = ("ConnectTimeout 5", "ServerAliveInterval 5", "ServerAliveCountMax 3")


def _scalar(value: object) -> str:
    return json.dumps(value)


def connection_vars(prefix: str, state_dir: Path, *, guest: bool) -> dict[str, object]:
    """How Ansible reaches a lab host: the netns lab's settings, plus ssh keepalives for a guest."""
    common_args = ssh_common_args(prefix, state_dir)
    return {
        "ansible_connection": "ssh",
        "ansible_user": "root",
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_private_key_file": str(lab_key_path(state_dir)),
        # One ssh round trip per task instead of several: a user-mode guest pays dearly for each.
        "ansible_pipelining": True,
        "ansible_ssh_common_args": f"{common_args} {GUEST_SSH_KEEPALIVE}" if guest else common_args,
    }


def group_members(prefix: str, state_dir: Path, group: str) -> dict[str, dict[str, object]]:
    """Host name -> host variables of one group: its guests, then the netns hosts this inventory keeps."""
    members = {
        guest.name: {
            "ansible_host": guest.address,
            **connection_vars(prefix, state_dir, guest=True),
            "lab_interface": GUEST_INTERFACE,
            "lab_guest": True,
            "lab_address6": address6(guest.address),
        }
        for guest in GUESTS
        if guest.group == group
    }
    if group in NETNS_GROUPS_KEPT:
        for host in HOSTS:
            if host.group == group:
                members[host.name] = {
                    "ansible_host": host.address,
                    **connection_vars(prefix, state_dir, guest=False),
                    "lab_interface": HOST_INTERFACE,
                    "lab_guest": False,
                    "lab_netns": host_netns(prefix, host),
                    "lab_address6": address6(host.address),
                }
    return members


def render(prefix: str, state_dir: Path) -> str:
    """The inventory text: the architecture's groups under all.children; guests and the kept netns hosts."""
    facts = {**lab_vars(prefix, state_dir), "lab_kind": "uml", "lab_interface": GUEST_INTERFACE}
    lines = [
        f"# Inventory of the hpc.balance lab {prefix!r} and its guests, written by lab.py up --flavour uml.",
        "all:",
        "  vars:",
    ]
    lines += [f"    {key}: {_scalar(value)}" for key, value in facts.items()]
    lines.append("  children:")
    for group in GROUPS:
        members = group_members(prefix, state_dir, group)
        lines.append(f"    {group}:")
        if not members:
            lines.append("      hosts: {}")
            continue
        lines.append("      hosts:")
        for name, host_vars in members.items():
            lines.append(f"        {name}:")
            lines += [f"          {key}: {_scalar(value)}" for key, value in host_vars.items()]
    return "\n".join(lines) + "\n"


def ssh_config_text(prefix: str, state_dir: Path) -> str:
    """An ssh client config reaching every guest by name (`ssh -F <state-dir>/ssh_config-uml urs1`)."""
    return ssh_client_config_text(GUESTS, state_dir, switch_netns(prefix), GUEST_SSH_OPTIONS)
