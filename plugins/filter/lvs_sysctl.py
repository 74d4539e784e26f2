# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kernel settings to apply now, from what ``sysctl -e KEY...`` printed.

The LVS roles persist their settings in /etc/sysctl.d and apply only those that differ, so a second run reports no
change. Keys the running kernel lacks (``net.ipv4.vs.*`` before IPVS is loaded) are persisted but cannot be applied;
they are reported apart instead of failing, and never counted as a change.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError


def sysctl_value_text(value: Any) -> str:
    """The text sysctl prints for a wanted value: booleans as 1/0, sequences space-separated."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list | tuple):
        return " ".join(str(item) for item in value)
    return str(value).strip()


def parse_sysctl_output(text: str | None) -> dict[str, str]:
    """``key = value`` lines (sysctl's output) -> {key: value}; other lines are ignored."""
    current: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, separator, value = line.partition(" = ")
        if separator:
            current[key.strip()] = value.strip()
    return current


def lvs_sysctl_plan(wanted: Any, sysctl_output: str | None) -> dict[str, list[str]]:
    """Compare wanted settings with the running kernel.

    wanted        -- {sysctl key: value}, keys in dotted form (an interface name with a dot written with '/')
    sysctl_output -- stdout of ``sysctl -e KEY...`` for the same keys

    Returns ``{"assignments": ["key=value", ...], "missing": ["key", ...]}``: the settings to pass to ``sysctl -w``
    (only those that differ) and the keys the kernel does not have.
    """
    if not isinstance(wanted, dict):
        raise AnsibleFilterError(f"lvs_sysctl_plan: wanted settings must be a dict of key: value, got {wanted!r}")
    current = parse_sysctl_output(sysctl_output)
    assignments: list[str] = []
    missing: list[str] = []
    for key, value in wanted.items():
        text = sysctl_value_text(value)
        if key not in current:
            missing.append(key)
        elif current[key].split() != text.split():
            assignments.append(f"{key}={text}")
    return {"assignments": assignments, "missing": missing}


class FilterModule:
    """Kernel-setting helpers shared by the lvs_director and lvs_realserver roles."""

    def filters(self) -> dict[str, Any]:
        return {"lvs_sysctl_plan": lvs_sysctl_plan, "lvs_sysctl_value": sysctl_value_text}
