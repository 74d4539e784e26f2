"""Names the role writes as bare words: a VRRP instance, script or sync group named so that keepalived cannot read it
as one word is refused in the preflight, with the key to fix.

The oracle is keepalived 2.2.7 itself (skipped where it is absent): parser.c splits a line at blanks, starts a comment
at an unquoted # or !, and reads braces and quotes as a block's and a string's edges, so `keepalived --config-test`
refuses an instance block named with any of them ("vrrp_instance must have a name", "Unknown keyword '}'") and accepts
letters, digits, '_', '-', '.', a backslash or a single quote.
"""

from __future__ import annotations

import subprocess

import pytest
from lvs_director_pair import KEEPALIVED, VIP, pair_errors

BREAKING = ["VI LVS", "VI\tLVS", "VI#LVS", "VI!LVS", "VI{LVS", "VI}LVS", 'VI"LVS']
READABLE = ["VI_LVS", "VI-LVS.1", "VI\\LVS", "VI'LVS"]


def instance_block(name):
    """The smallest instance block keepalived accepts on any host (an interface it need not find, unicast)."""
    return (f"vrrp_instance {name} {{\n    interface eth0\n    virtual_router_id 51\n    priority 100\n"
            f"    unicast_peer {{\n        198.18.0.12\n    }}\n"
            f"    virtual_ipaddress {{\n        {VIP}/32\n    }}\n}}\n")


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
@pytest.mark.parametrize("name", BREAKING + READABLE)
def test_the_oracle_keepalived_refuses_exactly_the_names_the_preflight_refuses(tmp_path, name):
    config = tmp_path / "keepalived.conf"
    config.write_text(instance_block(name))
    result = subprocess.run([KEEPALIVED, "--config-test", "--all-config", "--use-file", str(config)],
                            capture_output=True, text=True, timeout=30, check=False)
    assert (result.returncode != 0) == (name in BREAKING), result.stderr


@pytest.mark.parametrize("name", BREAKING)
def test_an_instance_name_keepalived_cannot_read_is_refused(name):
    instances = [{"name": name, "virtual_router_id": 51, "virtual_ipaddresses": [VIP]}]
    assert pair_errors(vrrp_instances=instances) == [
        f"{host}: lvs_director_vrrp_instances[{name}].name is {name!r}, which keepalived cannot read as one word (a "
        "blank, #, !, a brace or a quote splits or ends it); use letters, digits, '_', '-' and '.'"
        for host in ("dir1", "dir2")
    ]


@pytest.mark.parametrize("name", READABLE)
def test_an_instance_name_keepalived_reads_passes(name):
    assert pair_errors(vrrp_instances=[{"name": name, "virtual_router_id": 51, "virtual_ipaddresses": [VIP]}]) == []


def test_script_and_sync_group_names_are_checked_too():
    scripts = [{"name": "chk web", "script": "/bin/true"}]
    instances = [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                  "track_scripts": ["chk web"]},
                 {"name": "VI_LVS6", "virtual_router_id": 51, "virtual_ipaddresses": ["2001:db8::100"]}]
    groups = [{"name": "G#1", "instances": ["VI_LVS", "VI_LVS6"]}]
    found = pair_errors(vrrp_scripts=scripts, vrrp_instances=instances, vrrp_sync_groups=groups)
    assert [m.split(".name is")[0] for m in found if ".name is" in m] == [
        "dir1: lvs_director_vrrp_scripts[chk web]", "dir1: lvs_director_vrrp_sync_groups[G#1]",
        "dir2: lvs_director_vrrp_scripts[chk web]", "dir2: lvs_director_vrrp_sync_groups[G#1]",
    ]
