"""keepalived.conf with lvs_director_drained_real_servers: a drained real server is written with weight 0 in every
virtual server that lists it (keepalived's reload then edits the IPVS weight in place), every other one keeps its
configured weight.
"""

from __future__ import annotations

import re

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_resolve


def pool(drained=()):
    """Two services sharing two real servers, weights 3 and 1 (the lvs-uml scenario's shape); ``drained`` as
    lvs_director_drained_real_servers."""
    return lvs_director_resolve({
        "drained_real_servers": list(drained),
        "host": "dir1",
        "interface": "eth0",
        "state": "MASTER",
        "priority": 150,
        "vrrp_instances": [{"name": "VI_1", "virtual_router_id": 51, "virtual_ipaddresses": ["198.18.0.100"]}],
        "virtual_servers": [
            {"address": "198.18.0.100", "port": 80, "lvs_sched": "wrr",
             "real_servers": [{"address": "198.18.0.21", "weight": 3}, {"address": "198.18.0.22", "weight": 1}]},
            {"address": "198.18.0.100", "port": 8080,
             "real_servers": [{"address": "198.18.0.21", "weight": 3}, {"address": "198.18.0.22"}]},
        ],
    })


def weights(text):
    """{(virtual port, real address): weight} as keepalived will read them."""
    found = {}
    for block in re.split(r"\nvirtual_server ", text)[1:]:
        port = int(block.split()[1])
        for address, weight in re.findall(r"real_server (\S+) \d+ \{\n(?:\s*#.*\n)?\s*weight (\d+)", block):
            found[(port, address)] = int(weight)
    return found


def render_config(render, lvs_director_drained_real_servers=()):
    return render("lvs_director", "keepalived.conf.j2", lvs_director_resolved=pool(lvs_director_drained_real_servers),
                  lvs_director_global_defs_extra=[])


def test_without_the_variable_every_real_server_keeps_its_configured_weight(render):
    assert weights(render_config(render)) == {
        (80, "198.18.0.21"): 3, (80, "198.18.0.22"): 1, (8080, "198.18.0.21"): 3, (8080, "198.18.0.22"): 1,
    }


def test_a_drained_real_server_gets_weight_0_in_every_virtual_server_that_lists_it(render):
    text = render_config(render, lvs_director_drained_real_servers=["198.18.0.21"])
    assert weights(text) == {
        (80, "198.18.0.21"): 0, (80, "198.18.0.22"): 1, (8080, "198.18.0.21"): 0, (8080, "198.18.0.22"): 1,
    }
    assert text.count("# Drained (lvs_director_drained_real_servers)") == 2


@pytest.mark.parametrize("drained", [[], ["198.18.0.99"]], ids=["empty list", "address of no real server"])
def test_a_list_naming_no_real_server_changes_nothing(render, drained):
    assert render_config(render, lvs_director_drained_real_servers=drained) == render_config(render)


def test_undrain_writes_the_file_the_pool_had_before_the_drain(render):
    before = render_config(render, lvs_director_drained_real_servers=[])
    drained = render_config(render, lvs_director_drained_real_servers=["198.18.0.22"])
    assert drained != before
    assert render_config(render, lvs_director_drained_real_servers=[]) == before
