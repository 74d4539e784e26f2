# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd or SysV for what the LVS roles start at boot (keepalived; the real server's VIP unit), decided in one place.

An operator's choice ('systemd' or 'sysv') wins. With 'auto', the gathered fact service_mgr answers when facts were
gathered; without facts, the roles stat /run/systemd/system, which exists only while systemd runs the host
(sd_booted(3)), and pass that stat here.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

CHOICES = ("auto", "systemd", "sysv")


def lvs_init_system(choice: Any, service_mgr: Any = None, systemd_dir_stat: Any = None) -> str:
    """'systemd' or 'sysv' from the role's setting, the service_mgr fact (None without facts) and the stat result."""
    if choice not in CHOICES:
        raise AnsibleFilterError(f"lvs_init_system: the setting must be one of {', '.join(CHOICES)}, got {choice!r}")
    if choice != "auto":
        return choice
    if service_mgr:
        return "systemd" if service_mgr == "systemd" else "sysv"
    return "systemd" if isinstance(systemd_dir_stat, dict) and systemd_dir_stat.get("isdir") else "sysv"


class FilterModule:
    """Init-system choice shared by the lvs_director and lvs_realserver roles."""

    def filters(self) -> dict[str, Any]:
        return {"lvs_init_system": lvs_init_system}
