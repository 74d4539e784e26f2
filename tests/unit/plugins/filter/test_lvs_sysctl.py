"""lvs_sysctl_plan applies only settings that differ, and reports keys the kernel lacks instead of changing them."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_sysctl import (
    lvs_sysctl_plan,
    parse_sysctl_output,
    sysctl_value_text,
)

# What `sysctl -e net.ipv4.vs.expire_nodest_conn net.ipv4.conf.all.arp_ignore net.ipv4.conf.eth0/100.arp_ignore`
# prints on a kernel without IPVS: the missing key is left out.
OUTPUT = "net.ipv4.conf.all.arp_ignore = 0\nnet.ipv4.conf.eth0/100.arp_ignore = 1\n"


def test_only_differing_settings_are_assigned_and_missing_keys_reported():
    wanted = {"net.ipv4.vs.expire_nodest_conn": 1, "net.ipv4.conf.all.arp_ignore": 1,
              "net.ipv4.conf.eth0/100.arp_ignore": 1}
    assert lvs_sysctl_plan(wanted, OUTPUT) == {
        "assignments": ["net.ipv4.conf.all.arp_ignore=1"],
        "missing": ["net.ipv4.vs.expire_nodest_conn"],
    }


def test_equal_settings_need_nothing():
    assert lvs_sysctl_plan({"net.ipv4.conf.all.arp_ignore": "0"}, OUTPUT) == {"assignments": [], "missing": []}


def test_multi_value_settings_compare_by_fields():
    output = "net.ipv4.ip_local_port_range = 32768\t60999\n"
    assert lvs_sysctl_plan({"net.ipv4.ip_local_port_range": [32768, 60999]}, output)["assignments"] == []
    assert lvs_sysctl_plan({"net.ipv4.ip_local_port_range": "1024 65000"}, output)["assignments"] == [
        "net.ipv4.ip_local_port_range=1024 65000"
    ]


@pytest.mark.parametrize(("value", "text"), [(True, "1"), (False, "0"), (2, "2"), (" 1 ", "1"), ([1, 2], "1 2")])
def test_values_are_written_as_sysctl_prints_them(value, text):
    assert sysctl_value_text(value) == text


def test_lines_other_than_assignments_are_ignored():
    assert parse_sysctl_output("sysctl: cannot stat /proc/sys/x: No such file\na = b\n") == {"a": "b"}


def test_wanted_settings_must_be_a_mapping():
    with pytest.raises(AnsibleFilterError, match="lvs_sysctl_plan: wanted settings must be a dict"):
        lvs_sysctl_plan(["net.ipv4.conf.all.arp_ignore"], OUTPUT)
