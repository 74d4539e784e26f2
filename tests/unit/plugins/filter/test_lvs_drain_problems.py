"""A drain is judged on the live IPVS table: never the last serving real server, never below the quorum.

The table rows follow hpc.balance.ipvs_spread's ``services`` (its RETURN), read from a real director in the lvs-uml
scenario. A real server whose check fails is set to weight 0 with ``inhibit_on_failure`` and removed from the table
without it (keepalived.conf(5)). keepalived's ``quorum`` is the least total weight of the live servers a service
needs (keepalived.conf(5)), compared with the sum of the live weights (ipwrapper.c ``update_quorum_state``).
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.lvs_pool import lvs_drain_problems

RS1, RS2, RS3 = "198.18.0.153", "198.18.0.154", "198.18.0.155"


def table(*weights, name="TCP 198.18.0.100:80"):
    reals = [{"address": address, "weight": weight, "active_conns": 0}
             for address, weight in zip((RS1, RS2, RS3), weights, strict=False) if weight is not None]
    return [{"name": name, "protocol": "TCP", "address": "198.18.0.100", "port": 80, "fwmark": None,
             "real_servers": reals}]


def test_draining_one_of_two_serving_servers_is_safe():
    assert lvs_drain_problems(table(3, 1), [RS1]) == []


def test_draining_the_last_serving_server_is_refused():
    (message,) = lvs_drain_problems(table(0, 1), [RS2])
    assert message.startswith("TCP 198.18.0.100:80: draining 198.18.0.154 would leave no real server serving (live "
                              "table: 198.18.0.153 weight 0, 198.18.0.154 weight 1)")


def test_a_server_gone_from_the_table_does_not_count_as_serving():
    assert len(lvs_drain_problems(table(None, 1), [RS2])) == 1


def test_a_server_that_already_serves_nobody_can_be_drained_again():
    assert lvs_drain_problems(table(0, 1), [RS1]) == []


def test_draining_below_the_quorum_is_refused():
    configured = [{"address": "198.18.0.100", "port": 80, "quorum": 3}]
    (message,) = lvs_drain_problems(table(1, 1, 2), [RS3], configured)
    assert "would leave a live weight of 2, below the quorum 3" in message


def test_draining_down_to_the_quorum_is_safe():
    configured = [{"address": "198.18.0.100", "port": 80, "quorum": 2}]
    assert lvs_drain_problems(table(1, 1, 2), [RS3], configured) == []


def test_a_table_that_is_not_a_list_is_refused():
    with pytest.raises(AnsibleFilterError, match="expects ipvs_spread's services"):
        lvs_drain_problems({"services": []}, [RS1])
