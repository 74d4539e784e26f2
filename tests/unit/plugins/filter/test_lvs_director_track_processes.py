"""lvs_director_track_processes: keepalived's vrrp_track_process blocks, and the preflight's refusals for them.

The rules come from keepalived.conf(5) of keepalived 2.2.7 (Debian 12's package), section "VRRP track processes":
keepalived counts the running processes that match `process`, and quorum to quorum_max of them is an OK status; a
weight is -254..254 in the vrrp_track_process block and in an instance's track_process block ("weight defaults to
weight configured in vrrp_track_process"); "If a vrrp instance using a track_process is a member of a sync group,
unless sync_group_tracking_weight is set on the group weight 0 must be set. Likewise, if the vrrp instance is the
address owner, weight 0 must also be set."; without parameters or full_command the process string is matched against
the process name, "the contents of /proc/PID/comm" (which proc(5) cuts to TASK_COMM_LEN - 1 = 15 bytes). The oracle
tests run the real `keepalived --config-test` on the smallest config that shows each rule (skipped where keepalived is
absent): it refuses values off range with the messages quoted below, and lets a weight the man page forbids pass, so
for those the preflight is the only check.
"""

from __future__ import annotations

import subprocess

import pytest
from lvs_director_pair import KEEPALIVED, VIP, VIP6, keepalived_pair_test, pair_errors, pair_settings

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_problems, lvs_director_resolve

KEY = "dir{n}: lvs_director_track_processes[haproxy]"


def track(weight=0, process="haproxy", **fields):
    return [{"name": "haproxy", "process": process, "weight": weight, **fields}]


def tracked(*entries, **instance):
    return [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
             "track_processes": list(entries) or ["haproxy"], **instance}]


def in_sync_group(entry="haproxy"):
    instances = [{"name": "VI_4", "virtual_router_id": 51, "virtual_ipaddresses": [VIP], "track_processes": [entry]},
                 {"name": "VI_6", "virtual_router_id": 51, "virtual_ipaddresses": [VIP6]}]
    return {"vrrp_instances": instances, "vrrp_sync_groups": [{"name": "G_LVS", "instances": ["VI_4", "VI_6"]}]}


def keepalived_verdict(tmp_path, block="    weight 0\n", tracks="        haproxy\n", sync_group=False, priority=100):
    """keepalived --config-test on one vrrp_track_process haproxy (`block` after its process line) tracked by VI_4 as
    `tracks`, with VI_6 beside it in a sync group or not."""
    return keepalived_pair_test(tmp_path, f'vrrp_track_process haproxy {{\n    process "haproxy"\n{block}}}\n',
                                f"    track_process {{\n{tracks}    }}\n", sync_group, priority)


def test_a_process_that_faults_and_a_weighted_process_pass():
    assert pair_errors(track_processes=track(0, delay_s=2), vrrp_instances=tracked()) == []
    assert pair_errors(track_processes=track(-60, quorum=2, quorum_max=8), vrrp_instances=tracked()) == []
    assert pair_errors(track_processes=track(0, process=["/usr/sbin/haproxy", "-f", "/etc/haproxy/haproxy.cfg"],
                                             param_match="initial"), vrrp_instances=tracked()) == []


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
@pytest.mark.parametrize(("block", "tracks", "sync_group", "priority"), [
    ("    weight -50\n", "        haproxy\n", True, 100),
    ("    weight 0\n", "        haproxy weight -30\n", True, 100),
    ("    weight -50\n", "        haproxy\n", False, 255),
], ids=["sync-group", "sync-group-instance-weight", "address-owner"])
def test_the_oracle_keepalived_config_test_passes_the_weights_keepalived_conf_5_forbids(
        tmp_path, block, tracks, sync_group, priority):
    result = keepalived_verdict(tmp_path, block, tracks, sync_group, priority)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_a_weighted_track_process_in_a_sync_group_is_refused_as_keepalived_conf_5_requires_weight_0():
    message = [
        f"{host}: lvs_director_vrrp_sync_groups[G_LVS] has VI_4, which tracks the track process(es) haproxy with a "
        "weight, and keepalived.conf(5) requires weight 0 for a track process of an instance in a sync group "
        "(keepalived's config test passes it, and the members' priorities then differ); set weight 0 (a lost quorum "
        "then faults the whole group)"
        for host in ("dir1", "dir2")
    ]
    assert pair_errors(track_processes=track(-50), **in_sync_group()) == message
    assert pair_errors(track_processes=track(0), **in_sync_group({"name": "haproxy", "weight": -30})) == message
    assert pair_errors(track_processes=track(-50), **in_sync_group({"name": "haproxy", "weight": 0})) == []
    assert pair_errors(track_processes=track(0), **in_sync_group()) == []


def test_an_address_owner_takes_weight_0_only():
    def owner_errors(weight, entry="haproxy"):
        configs = [lvs_director_resolve(pair_settings("dir1", track_processes=track(weight),
                                                      vrrp_instances=tracked(entry, priority=255))),
                   lvs_director_resolve(pair_settings("dir2", track_processes=track(weight),
                                                      vrrp_instances=tracked()))]
        return [entry["message"] for entry in lvs_director_problems(configs)["errors"]]

    assert owner_errors(-50) == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].priority is 255 (address owner) with the track process 'haproxy' "
        "of weight -50, and keepalived.conf(5) requires weight 0 for an address owner (whose priority track_process "
        "cannot lower, so the weight never moves the VIP; keepalived's config test passes it); use a priority of 254 "
        "or less, or weight 0 (a lost quorum then faults the instance)"
    ]
    assert owner_errors(0) == []
    assert owner_errors(-50, {"name": "haproxy", "weight": 0}) == []


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_the_oracle_keepalived_starts_a_track_process_at_weight_0_so_the_template_writes_the_weight(tmp_path):
    """keepalived.conf(5) says "default weight (default is 1)", but keepalived 2.2.7 refuses a second weight line only
    after a non-zero one, so a block without a weight line has weight 0."""
    assert keepalived_verdict(tmp_path, "    weight 5\n").returncode == 0
    result = keepalived_verdict(tmp_path, "    weight 5\n    weight 6\n")
    assert "Weight already set for track process haproxy - ignoring 6" in result.stderr


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
@pytest.mark.parametrize(("block", "tracks", "message"), [
    ("    weight 300\n", "        haproxy\n",
     "Weight (300) for vrrp_track_process haproxy must be between [-254..254] inclusive"),
    ("    weight 0\n", "        haproxy weight 300\n",
     "(VI_4) weight for track process haproxy must be in [-254..254] inclusive"),
    ("    quorum 0\n", "        haproxy\n", "Quorum (0) for vrrp_track_process haproxy must be between [1..65535]"),
    ("    quorum_max 70000\n", "        haproxy\n",
     "quorum_max (70000) for vrrp_track_process haproxy must be between [0..65535]"),
    ("    quorum 3\n    quorum_max 2\n", "        haproxy\n", "quorum_max is less than quorum - ignoring"),
    ("    quorum 2\n    quorum_max 0\n", "        haproxy\n", "quorum_max is less than quorum - ignoring"),
    ("    delay 0\n", "        haproxy\n",
     "delay (0) for vrrp_track_process haproxy must be between [0.000001..3600] inclusive"),
    ("    fork_delay 1.0000001\n", "        haproxy\n", "number '1.0000001' has too many decimal places"),
    ("    param_match whole\n", "        haproxy\n", "Invalid param_match type whole - ignoring"),
    ("    weight 0\n", "        nginx\n", "(VI_4) track process nginx not found, ignoring..."),
    ("    weight 0\n", "        haproxy\n        haproxy\n", "(VI_4) duplicate track_process haproxy - ignoring"),
], ids=["weight", "instance-weight", "quorum", "quorum-max", "quorum-above-max", "quorum-above-max-0", "delay",
        "microseconds", "param-match", "undefined", "instance-twice"])
def test_the_oracle_keepalived_refuses_what_the_preflight_refuses(tmp_path, block, tracks, message):
    result = keepalived_verdict(tmp_path, block, tracks)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_the_oracle_keepalived_reads_quorum_max_0_after_quorum_1(tmp_path):
    """keepalived.conf(5): "Setting this to 0 would mean failure if the matching process were running at all"."""
    result = keepalived_verdict(tmp_path, "    quorum 1\n    quorum_max 0\n")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("entry", "message"), [
    (track(300), f"{KEY}.weight is 300; a VRRP instance takes -254 to 254"),
    (track(0, quorum=0), f"{KEY}.quorum is 0; keepalived takes 1 to 65535"),
    (track(0, quorum_max=70000), f"{KEY}.quorum_max is 70000; keepalived takes 0 to 65535"),
    (track(0, quorum=3, quorum_max=2),
     f"{KEY}.quorum is 3, above quorum_max 2, and keepalived ignores quorum_max then (\"quorum_max is less than "
     "quorum - ignoring\"); raise quorum_max or lower quorum"),
    (track(0, quorum=2, quorum_max=0),
     f"{KEY}.quorum is 2, above quorum_max 0, and keepalived ignores quorum_max then (\"quorum_max is less than "
     "quorum - ignoring\"); raise quorum_max or lower quorum"),
    (track(0, delay_s=0), f"{KEY}.delay_s is 0; keepalived takes 0.000001 to 3600 seconds in whole microseconds"),
    (track(0, fork_delay_s=1.0000001),
     f"{KEY}.fork_delay_s is 1.0000001; keepalived takes 0.000001 to 3600 seconds in whole microseconds"),
    (track(0, terminate_delay_s=3601),
     f"{KEY}.terminate_delay_s is 3601; keepalived takes 0.000001 to 3600 seconds in whole microseconds"),
    (track(0, param_match="whole"),
     f"{KEY}.param_match is 'whole', which keepalived ignores (\"Invalid param_match type\"); use initial or partial, "
     "or leave it unset"),
    (track(0, process=["haproxy", 'a"b']),
     f"{KEY}.process is 'a\"b', which holds a double quote, a backslash or a line break that keepalived cannot read "
     "inside a quoted value; use a wrapper script without them"),
    (track(0) + track(0),
     "dir{n}: lvs_director_track_processes has two entries named 'haproxy', and keepalived tracks only the first; "
     "rename one"),
    ([{"name": "ha proxy", "process": "haproxy"}],
     "dir{n}: lvs_director_track_processes[ha proxy].name is 'ha proxy', which keepalived cannot read as one word (a "
     "blank, #, !, a brace or a quote splits or ends it); use letters, digits, '_', '-' and '.'"),
], ids=["weight", "quorum", "quorum-max", "quorum-above-max", "quorum-above-max-0", "delay", "microseconds",
        "terminate-delay", "param-match", "quote", "twice", "name"])
def test_a_track_process_keepalived_cannot_use_is_refused(entry, message):
    found = pair_errors(track_processes=entry)
    assert [message.format(n=1), message.format(n=2)] == [text for text in found if "track_processes" in text]


@pytest.mark.parametrize("fields", [{"quorum_max": 0}, {"quorum": 1, "quorum_max": 0}, {"delay_s": 0.000001},
                                    {"fork_delay_s": 0.1, "terminate_delay_s": 3600}])
def test_the_values_keepalived_reads_pass(fields):
    assert pair_errors(track_processes=track(0, **fields)) == []


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_the_oracle_keepalived_config_test_passes_a_name_proc_pid_comm_cannot_hold(tmp_path):
    config = tmp_path / "keepalived.conf"
    config.write_text('vrrp_track_process long {\n    process "/usr/sbin/haproxy-with-a-long-name"\n}\n')
    result = subprocess.run([KEEPALIVED, "--config-test", "--all-config", "--use-file", str(config)],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("process", ["/usr/sbin/haproxy", "haproxy_exporter"])
def test_a_process_name_that_proc_pid_comm_cannot_hold_is_refused_without_full_command(process):
    """/proc/PID/comm of /usr/bin/haproxy_exporter holds 'haproxy_exporte' (proc(5): longer strings are "silently
    truncated" to TASK_COMM_LEN 16 bytes with the null byte)."""
    message = (f"{KEY}.process is {process!r}, but without full_command keepalived compares it with the process name "
               "(/proc/PID/comm), which is the program's file name without its folder and at most 15 bytes, so it "
               "never matches; give that name, or set full_command: true")
    assert pair_errors(track_processes=track(0, process=process)) == [message.format(n=1), message.format(n=2)]
    assert pair_errors(track_processes=track(0, process=process, full_command=True)) == []
    assert pair_errors(track_processes=track(0, process=[process, "-f", "/etc/haproxy/haproxy.cfg"])) == []
    assert pair_errors(track_processes=track(0, process="haproxy_exporte")) == []


def test_an_instance_tracking_an_undefined_process_is_refused():
    assert pair_errors(vrrp_instances=tracked()) == [
        f"{host}: lvs_director_vrrp_instances[VI_LVS].track_processes names 'haproxy', which "
        "lvs_director_track_processes does not define; define it there or remove it"
        for host in ("dir1", "dir2")
    ]


def test_an_instance_listing_a_process_twice_or_with_a_weight_off_range_is_refused():
    twice = tracked("haproxy", {"name": "haproxy", "weight": -20})
    assert pair_errors(track_processes=track(0), vrrp_instances=twice) == [
        f"{host}: lvs_director_vrrp_instances[VI_LVS].track_processes names 'haproxy' twice, which keepalived refuses "
        "(\"duplicate track_process haproxy - ignoring\"); list it once"
        for host in ("dir1", "dir2")
    ]
    assert pair_errors(track_processes=track(0), vrrp_instances=tracked({"name": "haproxy", "weight": -300})) == [
        f"{host}: lvs_director_vrrp_instances[VI_LVS].track_processes gives 'haproxy' weight -300; keepalived takes "
        "-254 to 254"
        for host in ("dir1", "dir2")
    ]


def test_a_track_process_without_a_process_is_an_error_naming_it():
    with pytest.raises(Exception, match=r"lvs_director_track_processes\[0\] needs name and process"):
        lvs_director_resolve(pair_settings("dir1", track_processes=[{"name": "haproxy"}]))
    with pytest.raises(Exception, match=r"lvs_director_vrrp_instances\[VI_LVS\]\.track_processes\[0\] needs a name"):
        lvs_director_resolve(pair_settings("dir1", vrrp_instances=tracked({"weight": -20})))
