"""Filter lvs_director_sync_daemon_warnings: connection sync behind an instance that preempts at once.

keepalived.conf(5): ``preempt_delay`` makes an instance wait that many seconds after start before it preempts a
lower-priority master, and ``nopreempt`` never preempts; without either, a returning higher-priority director takes
the VIPs back within about a second (vrrp_scheduler.c), before IPVS's sync daemon has sent it the connections opened
meanwhile (the lvs-uml scenario's sync check shows the reset connections of that case).
"""

from __future__ import annotations

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_director_sync_warnings import (
    lvs_director_sync_daemon_warnings,
)

SYNC = {"interface": "eth0", "instance": "VI_LVS", "sync_id": 51}


def config(**instance):
    return {"host": "dir1", "vrrp_instances": [{"name": "VI_LVS", "nopreempt": False, "preempt_delay_s": None,
                                                **instance}]}


def test_a_preempting_instance_behind_the_sync_daemon_is_named_with_both_fixes():
    warnings = lvs_director_sync_daemon_warnings(config(), SYNC)
    assert len(warnings) == 1
    assert warnings[0].startswith("dir1: lvs_director_sync_daemon follows instance VI_LVS, which preempts without a "
                                  "delay")
    assert "Set preempt_delay_s on VI_LVS" in warnings[0] and warnings[0].endswith("or nopreempt")


@pytest.mark.parametrize(("settings", "sync"), [
    ({"preempt_delay_s": 10}, SYNC),
    ({"nopreempt": True}, SYNC),
    ({}, None),
    ({}, {**SYNC, "instance": "VI_OTHER"}),  # an unknown instance is lvs_director_sync_daemon_problems' error
], ids=["preempt-delay", "nopreempt", "sync-off", "unknown-instance"])
def test_no_warning_when_the_instance_waits_never_preempts_or_sync_is_off(settings, sync):
    assert lvs_director_sync_daemon_warnings(config(**settings), sync) == []


def test_a_zero_delay_is_no_delay():
    assert lvs_director_sync_daemon_warnings(config(preempt_delay_s=0), SYNC)
