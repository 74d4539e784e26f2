"""lvs_director_track_files: keepalived's track_file blocks, and the preflight's refusals for them.

The rules come from keepalived.conf(5) of keepalived 2.2.7 (Debian 12's package), section "Track files": a number is
read from the file whenever it changes; with weight 0 a non-zero number faults the instances that track it, otherwise
the number times the weight is added to their priority; the weight of a track_file block is -254..254 for VRRP; an
instance in a sync group, and an address owner (priority 255), take weight 0 only. The oracle tests run the real
`keepalived --config-test` on the smallest config that shows each rule (skipped where keepalived is absent).
"""

from __future__ import annotations

import pytest
from lvs_director_pair import KEEPALIVED, VIP, VIP6, keepalived_pair_test, pair_errors, pair_settings

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_problems, lvs_director_resolve


def track(weight=0, file="/run/hpc-balance-maintenance", **fields):
    return [{"name": "maintenance", "file": file, "weight": weight, **fields}]


def tracked(**instance):
    return [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "track_files": ["maintenance"],
             **instance}]


def in_sync_group():
    instances = [{"name": "VI_4", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                  "track_files": ["maintenance"]},
                 {"name": "VI_6", "virtual_router_id": 51, "virtual_ipaddresses": [VIP6]}]
    return {"vrrp_instances": instances, "vrrp_sync_groups": [{"name": "G_LVS", "instances": ["VI_4", "VI_6"]}]}


def keepalived_verdict(tmp_path, weight, sync_group):
    """keepalived --config-test on one track_file tracked by VI_4, with VI_6 beside it in a sync group or not."""
    block = f'track_file maintenance {{\n    file "{tmp_path}/maintenance"\n    weight {weight}\n}}\n'
    return keepalived_pair_test(tmp_path, block, "    track_file {\n        maintenance\n    }\n", sync_group)


def test_a_maintenance_switch_and_a_weighted_file_pass():
    assert pair_errors(track_files=track(0, init_value=0), vrrp_instances=tracked()) == []
    assert pair_errors(track_files=track(-60), vrrp_instances=tracked()) == []


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
@pytest.mark.parametrize(("weight", "sync_group", "accepted"),
                         [(0, True, True), (-50, True, False), (-50, False, True)])
def test_the_oracle_keepalived_refuses_a_weighted_track_file_in_a_sync_group_only(
        tmp_path, weight, sync_group, accepted):
    result = keepalived_verdict(tmp_path, weight, sync_group)
    assert (result.returncode == 0) == accepted, result.stderr
    if not accepted:
        assert "ignoring tracked file maintenance with weight -50 due to SYNC group" in result.stderr


def test_a_weighted_track_file_in_a_sync_group_is_refused_as_keepalived_config_test_fails_on_it():
    assert pair_errors(track_files=track(-50), **in_sync_group()) == [
        f"{host}: lvs_director_vrrp_sync_groups[G_LVS] has VI_4, which tracks the track file(s) maintenance with a "
        "weight, and keepalived.conf(5) requires weight 0 for a track file of an instance in a sync group; set "
        "weight 0 (a non-zero number in the file then faults the whole group)"
        for host in ("dir1", "dir2")
    ]
    assert pair_errors(track_files=track(0), **in_sync_group()) == []


def test_an_address_owner_takes_weight_0_only():
    def owner_errors(weight):
        configs = [lvs_director_resolve(pair_settings("dir1", track_files=track(weight),
                                                      vrrp_instances=tracked(priority=255))),
                   lvs_director_resolve(pair_settings("dir2", track_files=track(weight), vrrp_instances=tracked()))]
        return [entry["message"] for entry in lvs_director_problems(configs)["errors"]]

    assert owner_errors(-50) == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].priority is 255 (address owner) with the track file "
        "'maintenance' of weight -50, and keepalived.conf(5) requires weight 0 for an address owner; use a priority "
        "of 254 or less, or weight 0 (a non-zero number in the file then faults the instance)"
    ]
    assert owner_errors(0) == []


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_the_oracle_keepalived_ignores_a_weight_out_of_range(tmp_path):
    result = keepalived_verdict(tmp_path, 300, sync_group=False)
    assert "Weight (300) for track_file maintenance must be between [-254..254] inclusive" in result.stderr


@pytest.mark.parametrize(("entry", "message"), [
    (track(300), "dir{n}: lvs_director_track_files[maintenance].weight is 300; a VRRP instance takes -254 to 254"),
    (track(0, file="run/maintenance"),
     "dir{n}: lvs_director_track_files[maintenance].file is 'run/maintenance', a relative path, which keepalived "
     "resolves against its own working folder; give an absolute path"),
    (track(0, file='/run/"m"'),
     "dir{n}: lvs_director_track_files[maintenance].file is '/run/\"m\"', which holds a double quote, a backslash or "
     "a line break that keepalived cannot read inside a quoted value; use a wrapper script without them"),
    (track(0) + track(0), "dir{n}: lvs_director_track_files has two entries named 'maintenance'; rename one"),
    ([{"name": "main tenance", "file": "/run/m"}],
     "dir{n}: lvs_director_track_files[main tenance].name is 'main tenance', which keepalived cannot read as one "
     "word (a blank, #, !, a brace or a quote splits or ends it); use letters, digits, '_', '-' and '.'"),
], ids=["weight", "relative", "quote", "twice", "name"])
def test_a_track_file_keepalived_cannot_use_is_refused(entry, message):
    found = pair_errors(track_files=entry)
    assert [message.format(n=1), message.format(n=2)] == [text for text in found if "track_files" in text]


def test_an_instance_tracking_an_undefined_file_is_refused():
    assert pair_errors(vrrp_instances=tracked()) == [
        f"{host}: lvs_director_vrrp_instances[VI_LVS].track_files names 'maintenance', which lvs_director_track_files "
        "does not define; define it there or remove it"
        for host in ("dir1", "dir2")
    ]


def test_a_track_file_without_a_file_is_an_error_naming_it():
    with pytest.raises(Exception, match=r"lvs_director_track_files\[0\] needs name and file"):
        lvs_director_resolve(pair_settings("dir1", track_files=[{"name": "maintenance"}]))
