# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warnings about connection sync that only the VRRP settings around it reveal.

A director that comes back after a crash starts keepalived with an empty IPVS connection table. When its instance
preempts without a delay, it takes the VIPs back within about a second (``vrrp_init_state`` and the advert interval,
keepalived's vrrp_scheduler.c), before the sync daemon of the director that held them meanwhile has sent it those
connections, so every connection opened during the outage breaks at the return: the new master's TCP stack answers
their next segment with a reset, as without sync. ``preempt_delay`` (keepalived.conf(5): the instance waits that long
after start before it preempts a lower-priority master) lets it receive them as a backup first; ``nopreempt`` never
takes the VIPs back.
"""

from __future__ import annotations

from typing import Any


def lvs_director_sync_daemon_warnings(config: dict[str, Any], sync_daemon: dict[str, Any] | None) -> list[str]:
    """One sentence per warning ([] when sync is off, its instance unknown, or the instance waits or never preempts)."""
    if not isinstance(sync_daemon, dict) or not isinstance(config, dict):
        return []
    host = str(config.get("host", ""))
    name = sync_daemon.get("instance")
    instance = next((item for item in config.get("vrrp_instances") or [] if item.get("name") == name), None)
    if instance is None or instance.get("nopreempt") or (instance.get("preempt_delay_s") or 0) > 0:
        return []
    return [
        f"{host}: lvs_director_sync_daemon follows instance {name}, which preempts without a delay: a director that "
        "comes back after a crash takes the VIPs back about a second after keepalived starts, before the sync daemon "
        "has sent it the connections opened meanwhile, and those connections break then. Set preempt_delay_s on "
        f"{name} (a few seconds more than keepalived takes to start; state BACKUP on every peer), or nopreempt"
    ]


class FilterModule:
    """Connection-sync warnings from the VRRP settings."""

    def filters(self) -> dict[str, Any]:
        return {"lvs_director_sync_daemon_warnings": lvs_director_sync_daemon_warnings}
