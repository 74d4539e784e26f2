"""lvs_init_system: the choice of systemd or SysV that both LVS roles make for what they start at boot.

Sources: sd_booted(3) (/run/systemd/system exists only while systemd runs the host); ansible.builtin.setup's
service_mgr fact (ansible/module_utils/facts/system/service_mgr.py names the init system: systemd, sysvinit,
openrc, upstart, service, ...); ansible.builtin.stat's return value (stat.isdir, stat.exists).
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_init_system import lvs_init_system

# ansible.builtin.stat on /run/systemd/system of a systemd host, and on a host without it (exists false, no isdir).
SYSTEMD_DIR = {"exists": True, "isdir": True, "mode": "0755"}
NO_DIR = {"exists": False}


@pytest.mark.parametrize(
    ("choice", "service_mgr", "systemd_dir_stat", "expected"),
    [
        pytest.param("systemd", "sysvinit", None, "systemd", id="the setting wins over the fact"),
        pytest.param("sysv", "systemd", SYSTEMD_DIR, "sysv", id="the setting wins over fact and stat"),
        pytest.param("auto", "systemd", None, "systemd", id="fact systemd"),
        pytest.param("auto", "sysvinit", None, "sysv", id="fact sysvinit"),
        pytest.param("auto", "openrc", None, "sysv", id="fact openrc"),
        pytest.param("auto", "service", None, "sysv", id="fact service"),
        pytest.param("auto", None, SYSTEMD_DIR, "systemd", id="no facts, the folder exists"),
        pytest.param("auto", None, NO_DIR, "sysv", id="no facts, no folder"),
        pytest.param("auto", None, None, "sysv", id="no facts, no stat"),
        pytest.param("auto", "", SYSTEMD_DIR, "systemd", id="an empty fact counts as none"),
    ],
)
def test_the_setting_then_the_fact_then_the_stat_decide(choice, service_mgr, systemd_dir_stat, expected):
    assert lvs_init_system(choice, service_mgr, systemd_dir_stat) == expected


def test_an_unknown_setting_is_refused_by_name():
    with pytest.raises(AnsibleFilterError, match="one of auto, systemd, sysv, got 'upstart'"):
        lvs_init_system("upstart")
