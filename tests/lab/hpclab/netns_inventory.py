"""The Ansible inventory of a running lab (YAML, written without a YAML library).

Strings are written as JSON strings, which YAML reads as double-quoted scalars. Connection settings are host
variables so a playbook's group_vars cannot silently replace them; lab facts are variables of `all`.
"""

from __future__ import annotations

import json
from pathlib import Path

from .files import control_path, lab_key_path
from .topology import (
    GROUPS,
    GUEST_RANGE,
    HOST_INTERFACE,
    HOSTS,
    PREFIX_LENGTH,
    SUBNET,
    SUBNET6,
    SWITCH_ADDRESS,
    VIP_RANGE,
    address6,
    host_netns,
    switch_netns,
)


def _scalar(value: object) -> str:
    return json.dumps(value)


def ssh_common_args(prefix: str, state_dir: Path) -> str:
    """ssh options that reach a host through the switch namespace and keep one connection per host."""
    return (
        f'-o ProxyCommand="ip netns exec {switch_netns(prefix)} nc %h %p" '
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o IdentitiesOnly=yes "
        f"-o ControlMaster=auto -o ControlPersist=60s -o ControlPath={control_path(state_dir)}"
    )


def lab_vars(prefix: str, state_dir: Path) -> dict[str, object]:
    """Facts about the lab that plays and checks may use."""
    return {
        "lab_kind": "netns",
        "lab_prefix": prefix,
        "lab_state_dir": str(state_dir),
        "lab_interface": HOST_INTERFACE,
        "lab_subnet": SUBNET,
        "lab_prefix_length": PREFIX_LENGTH,
        "lab_gateway": SWITCH_ADDRESS,
        "lab_switch_netns": switch_netns(prefix),
        "lab_vip_range": f"{VIP_RANGE[0]}-{VIP_RANGE[1]}",
        "lab_vip_first": VIP_RANGE[0],
        "lab_vip_last": VIP_RANGE[1],
        # IPv6: the lab's unique-local prefix; every address above has its twin there (fd..::100 for 198.18.0.100).
        "lab_subnet6": SUBNET6,
        "lab_vip6_first": address6(VIP_RANGE[0]),
        "lab_guest_range": f"{GUEST_RANGE[0]}-{GUEST_RANGE[1]}",
    }


def render(prefix: str, state_dir: Path) -> str:
    """The inventory text: the architecture's groups under all.children, every lab host in its group."""
    connection = {
        "ansible_connection": "ssh",
        "ansible_user": "root",
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_private_key_file": str(lab_key_path(state_dir)),
        # One ssh round trip per task instead of several: a user-mode guest pays dearly for each.
        "ansible_pipelining": True,
        "ansible_ssh_common_args": ssh_common_args(prefix, state_dir),
    }
    lines = [
        f"# Inventory of the hpc.balance lab {prefix!r}, written by tests/lab/lab.py up; lab.py down removes it.",
        "all:",
        "  vars:",
    ]
    lines += [f"    {key}: {_scalar(value)}" for key, value in lab_vars(prefix, state_dir).items()]
    lines.append("  children:")
    for group in GROUPS:
        members = [host for host in HOSTS if host.group == group]
        if not members:
            lines.append(f"    {group}:")
            lines.append("      hosts: {}")
            continue
        lines.append(f"    {group}:")
        lines.append("      hosts:")
        for host in members:
            lines.append(f"        {host.name}:")
            host_vars = {
                "ansible_host": host.address,
                **connection,
                "lab_netns": host_netns(prefix, host),
                "lab_address6": address6(host.address),
            }
            lines += [f"          {key}: {_scalar(value)}" for key, value in host_vars.items()]
    return "\n".join(lines) + "\n"
