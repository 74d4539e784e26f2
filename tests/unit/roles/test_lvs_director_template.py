"""keepalived.conf as lvs_director writes it: never a deprecated key, always reload_check_config, and accepted by
the real `keepalived --config-test` for every kind of block the role can write (skipped where keepalived is absent).
"""

from __future__ import annotations

import subprocess

import pytest
from lvs_role_files import KEEPALIVED, keepalived_config_test

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_resolve


def everything():
    """One director using every block and option the template can write."""
    return lvs_director_resolve({
        "host": "dir1",
        "interface": "eth0",
        "state": "MASTER",
        "priority": 150,
        "vrrp_version": 3,
        "advert_int_s": 0.1,
        "vrrp_scripts": [{"name": "chk_true", "script": "/bin/true", "interval_s": 2, "timeout_s": 1, "fall": 2,
                          "rise": 2, "weight": -20}],
        # keepalived.conf(5), "Track files": weight 0 faults on a non-zero number; another weight multiplies it.
        "track_files": [{"name": "maintenance", "file": "/run/hpc-balance-maintenance", "weight": 0, "init_value": 0},
                        {"name": "lower_by", "file": "/run/hpc-balance-lower-by", "weight": -50, "init_value": 0,
                         "init_overwrite": True}],
        # keepalived.conf(5), "VRRP track processes": weight 0 faults outside quorum..quorum_max; another weight moves
        # the priority; parameters (quoted words, "quotes removed") and param_match match the command line.
        "track_processes": [{"name": "haproxy", "process": "haproxy", "weight": 0, "quorum": 1, "quorum_max": 0,
                             "delay_s": 0.5},
                            {"name": "nginx", "process": ["/usr/sbin/nginx", "-g", "daemon off;"],
                             "param_match": "partial", "weight": -30, "reverse": True, "quorum": 2, "quorum_max": 4,
                             "delay_s": 2, "fork_delay_s": 0.000002, "terminate_delay_s": 1.5, "full_command": True}],
        "vrrp_instances": [
            {"name": "VI_V3", "virtual_router_id": 51, "virtual_ipaddresses": ["198.18.0.100", "198.18.0.101/24"],
             "track_scripts": ["chk_true"], "track_files": ["lower_by"], "track_interfaces": ["lo"],
             "track_processes": ["nginx", {"name": "haproxy", "weight": -40}],
             "unicast_src_ip": "198.18.0.11", "unicast_peers": ["198.18.0.12"],
             "notify_master": "/bin/true master", "notify_stop": "/bin/true stop", "notify": "/bin/true"},
            {"name": "VI_V2", "virtual_router_id": 52, "vrrp_version": 2, "advert_int_s": 1, "state": "BACKUP",
             "nopreempt": True, "auth_pass": "s3cret", "virtual_ipaddresses": ["198.18.0.102"]},
            {"name": "VI_DELAY", "virtual_router_id": 53, "state": "BACKUP", "preempt_delay_s": 5,
             "virtual_ipaddresses": ["198.18.0.103"]},
            # An IPv4 and an IPv6 instance on one VRID, moved together by a sync group.
            {"name": "VI_V4", "virtual_router_id": 54, "virtual_ipaddresses": ["198.18.0.104"],
             "track_files": ["maintenance"], "track_processes": ["haproxy"]},
            {"name": "VI_V6", "virtual_router_id": 54, "virtual_ipaddresses": ["2001:db8::100"]},
        ],
        "vrrp_sync_groups": [{"name": "G_LVS", "instances": ["VI_V4", "VI_V6"], "notify_master": "/bin/true master",
                              "notify_stop": "/bin/true stop", "notify": "/bin/true"}],
        "virtual_servers": [
            {"address": "198.18.0.100", "port": 80, "lvs_sched": "wrr", "persistence_timeout_s": 300, "quorum": 2,
             "sorry_server": {"address": "198.18.0.30"},
             "check": {"type": "HTTP_GET", "url_path": "/health", "status_code": 204, "connect_port": 8080},
             "real_servers": [{"address": "198.18.0.21", "weight": 3}, {"address": "198.18.0.22",
                              "check": {"type": "TCP_CHECK", "retry": 5}}]},
            {"address": "198.18.0.100", "port": 53, "protocol": "UDP", "lvs_sched": "rr",
             "check": {"type": "MISC_CHECK", "misc_path": "/bin/true", "misc_timeout_s": 4},
             "real_servers": [{"address": "198.18.0.21"}]},
            # Several checks per real server (keepalived.conf(5): "healthcheckers. Can be multiple of each type"), one
            # with the page's MD5 as genhash prints it.
            {"address": "198.18.0.102", "port": 80,
             "checks": [{"type": "TCP_CHECK"},
                        {"type": "HTTP_GET", "url_path": "/health", "connect_port": 8080,
                         "digest": "9b3a0c85a887a256d6939da88aabd8cd"}],
             "real_servers": [{"address": "198.18.0.21"},
                              {"address": "198.18.0.22", "checks": [{"type": "MISC_CHECK", "misc_path": "/bin/true"},
                                                                    {"type": "PING_CHECK"}]}]},
            {"address": "198.18.0.101", "port": 443, "check": {"type": "none"}, "alpha": True,
             "real_servers": [{"address": "198.18.0.21"}]},
            {"address": "198.18.0.101", "port": 444, "lvs_sched": "sh", "scheduler_flags": ["sh-port", "sh-fallback"],
             "check": {"type": "none"}, "real_servers": [{"address": "198.18.0.21"}]},
            {"address": "198.18.0.101", "port": 445, "lvs_sched": "mh", "scheduler_flags": ["mh-port", "mh-fallback"],
             "check": {"type": "none"}, "real_servers": [{"address": "198.18.0.21"}]},
            {"address": "198.18.0.101", "port": 8443, "persistence_timeout_s": 60,
             "persistence_granularity": "255.255.255.0", "quorum": 2, "hysteresis": 1,
             "quorum_up": "/bin/true up", "quorum_down": "/bin/true down",
             "sorry_server": {"address": "198.18.0.30"}, "sorry_server_inhibit": True, "virtualhost": "www.lab#1",
             "check": {"type": "SSL_GET", "url_path": "/health", "status_code": "200-299 301", "virtualhost": "api"},
             "real_servers": [{"address": "198.18.0.21", "weight": 2, "notify_up": "/bin/true up",
                               "notify_down": "/bin/true down"}]},
            {"address": "198.18.0.101", "port": 7, "protocol": "UDP", "inhibit_on_failure": False,
             "check": {"type": "UDP_CHECK", "payload_hex": "6869", "require_reply": True},
             "real_servers": [{"address": "198.18.0.21"},
                              {"address": "198.18.0.22", "check": {"type": "PING_CHECK"}},
                              {"address": "198.18.0.23", "check": {"type": "DNS_CHECK", "dns_type": "A",
                                                                   "dns_name": "lab."}}]},
        ],
        "lvs_timeouts": {"tcp_s": 900, "tcpfin_s": 120, "udp_s": 300},
        "max_auto_priority": 50,
    })


def render_config(render, resolved, extra=()):
    return render("lvs_director", "keepalived.conf.j2", lvs_director_resolved=resolved,
                  lvs_director_global_defs_extra=list(extra))


def test_never_renders_the_deprecated_nb_get_retry(render):
    text = render_config(render, everything())
    assert "nb_get_retry" not in text
    assert "            retry 3\n" in text
    assert "            retry 5\n" in text


def test_sets_reload_check_config(render):
    assert "\n    reload_check_config\n" in render_config(render, everything())


def test_authentication_only_where_a_secret_is_set(render):
    text = render_config(render, everything())
    assert text.count("authentication {") == 1
    assert '        auth_pass "s3cret"\n' in text


def test_vips_are_bound_to_the_instance_interface(render):
    text = render_config(render, everything())
    assert "        198.18.0.100/32 dev eth0\n" in text
    assert "        198.18.0.101/24 dev eth0\n" in text


def test_no_check_block_for_check_type_none(render):
    text = render_config(render, everything())
    server = text[text.index("virtual_server 198.18.0.101 443"):text.index("virtual_server 198.18.0.101 8443")]
    assert "_CHECK" not in server and "HTTP_GET" not in server


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_accepts_every_block_the_template_writes(render, tmp_path):
    result = keepalived_config_test(render_config(render, everything()), tmp_path)
    assert result.returncode == 0, result.stderr


def test_scheduler_flags_follow_the_scheduler_line(render):  # issue 28, defect 20
    text = render_config(render, everything())
    assert "    lvs_sched sh\n    sh-port\n    sh-fallback\n" in text
    assert "    lvs_sched mh\n    mh-port\n    mh-fallback\n" in text


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_refuses_a_flag_of_another_scheduler_as_the_preflight_does(render, tmp_path):
    config = everything()
    config["virtual_servers"][0]["scheduler_flags"] = ["sh-port"]  # a wrr service
    result = keepalived_config_test(render_config(render, config), tmp_path)
    assert result.returncode != 0
    assert "sh-port only applies to sh scheduler" in result.stderr


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_rejects_an_unknown_keyword_so_the_check_can_fail(render, tmp_path):
    text = render_config(render, everything(), extra=["vrrp_garp_master_refreshh 60"])
    result = keepalived_config_test(text, tmp_path)
    assert result.returncode != 0
    assert "Unknown keyword 'vrrp_garp_master_refreshh'" in result.stderr


def test_a_udp_service_gets_udp_checks_and_the_options_operators_expect(render):  # issue 18: 2 and options
    text = render_config(render, everything())
    udp = text[text.index("virtual_server 198.18.0.101 7 {"):]
    assert "        UDP_CHECK {\n            payload 6869\n            require_reply\n" in udp
    assert "        PING_CHECK {\n" in udp and "            type A\n            name \"lab.\"\n" in udp
    assert "TCP_CHECK" not in udp and "inhibit_on_failure" not in udp
    assert "    lvs_timeouts tcp 900 tcpfin 120 udp 300\n" in text
    assert "    max_auto_priority 50\n" in text
    assert "                status_code 200-299 301\n                virtualhost \"api\"\n" in text
    assert '    virtualhost "www.lab#1"\n' in text


def test_inhibit_on_failure_is_written_by_default(render):  # issue 18: 7
    text = render_config(render, everything())
    http = text[text.index("virtual_server 198.18.0.100 80 {"):text.index("virtual_server 198.18.0.100 53 {")]
    assert "    inhibit_on_failure\n" in http


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
@pytest.mark.parametrize(("line", "read_whole"), [('auth_pass "ab#cdefghij"', True), ("auth_pass ab#cdefghij", False)])
def test_keepalived_reads_a_hash_inside_quotes_and_a_comment_outside(tmp_path, line, read_whole):  # issue 18: 6
    """keepalived 2.2.7 warns "Truncating auth_pass to 8 characters" only when it read all 11: the quoted form."""
    config = tmp_path / "keepalived.conf"
    config.write_text(
        "vrrp_instance VI {\n state BACKUP\n interface eth0\n virtual_router_id 51\n priority 100\n version 2\n"
        f" authentication {{\n  auth_type PASS\n  {line}\n }}\n virtual_ipaddress {{\n  198.18.0.250/32\n }}\n}}\n"
    )
    result = subprocess.run([KEEPALIVED, "--config-test", "--use-file", str(config)], capture_output=True, text=True,
                            timeout=30, check=False)
    assert ("Truncating auth_pass to 8 characters" in result.stderr) is read_whole, result.stderr


def test_the_template_quotes_every_value_that_can_hold_a_comment_character(render):  # issue 18: 6
    resolved = everything()
    resolved["router_id"] = "dir#1"
    resolved["vrrp_instances"][1]["auth_pass"] = "ab#c!d"
    text = render_config(render, resolved)
    assert '    router_id "dir#1"\n' in text
    assert '        auth_pass "ab#c!d"\n' in text
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or not any(char in stripped for char in "#!"):
            continue
        # Anything after a # or ! outside quotes would be a comment to keepalived.
        outside = stripped.split('"')[0::2]
        assert not any(char in part for part in outside for char in "#!"), line


def test_a_sync_group_lists_its_instances_and_quotes_its_notify_scripts(render):
    text = render_config(render, everything())
    assert (
        "vrrp_sync_group G_LVS {\n    group {\n        VI_V4\n        VI_V6\n    }\n"
        '    notify_master "/bin/true master"\n    notify_stop "/bin/true stop"\n    notify "/bin/true"\n}\n'
    ) in text


def test_no_sync_group_block_without_sync_groups(render):
    resolved = everything()
    resolved["vrrp_sync_groups"] = []
    assert "vrrp_sync_group" not in render_config(render, resolved)


def test_track_files_are_declared_once_and_tracked_by_their_instances(render):  # issue 28, operators' list
    text = render_config(render, everything())
    assert ('track_file maintenance {\n    file "/run/hpc-balance-maintenance"\n    weight 0\n    init_file 0\n}'
            in text)
    assert ('track_file lower_by {\n    file "/run/hpc-balance-lower-by"\n    weight -50\n'
            '    init_file 0 overwrite\n}') in text
    instance = text.split("vrrp_instance VI_V4 {", 1)[1].split("\n}", 1)[0]
    assert "    track_file {\n        maintenance\n    }" in instance
    assert "track_file {" not in text.split("vrrp_instance VI_V2 {", 1)[1].split("\n}", 1)[0]


def test_track_processes_are_declared_once_and_tracked_by_their_instances(render):
    text = render_config(render, everything())
    # quorum before quorum_max: keepalived reads "quorum_max 0" only after a quorum of 1 (else "Quorum is greater than
    # quorum_max - ignoring"); every word of the process quoted, as keepalived.conf(5) shows.
    assert ('vrrp_track_process haproxy {\n    process "haproxy"\n    weight 0\n    quorum 1\n    quorum_max 0\n'
            '    delay 0.5\n}') in text
    assert ('vrrp_track_process nginx {\n    process "/usr/sbin/nginx" "-g" "daemon off;"\n    param_match partial\n'
            '    weight -30 reverse\n    quorum 2\n    quorum_max 4\n    delay 2\n    fork_delay 0.000002\n'
            '    terminate_delay 1.5\n    full_command\n}') in text
    instance = text.split("vrrp_instance VI_V3 {", 1)[1].split("\n}", 1)[0]
    assert "    track_process {\n        nginx\n        haproxy weight -40\n    }" in instance
    instance = text.split("vrrp_instance VI_V4 {", 1)[1].split("\n}", 1)[0]
    assert "    track_process {\n        haproxy\n    }" in instance
    assert "track_process {" not in text.split("vrrp_instance VI_V2 {", 1)[1].split("\n}", 1)[0]


def test_a_delay_is_written_in_decimals_keepalived_reads(render, tmp_path):
    """Python writes 0.00005 as 5e-05, which keepalived's config test refuses ("invalid number '5e-05'")."""
    resolved = everything()
    resolved["track_processes"][0]["delay_s"] = 0.00005
    text = render_config(render, resolved)
    assert "    delay 0.00005\n" in text
    if KEEPALIVED is not None:
        result = keepalived_config_test(text, tmp_path)
        assert result.returncode == 0, result.stderr


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_config_test_cannot_check_a_non_root_script_user_so_the_role_keeps_root(render, tmp_path):
    """keepalived 2.2.7's config test ends killed by its own SIGTERM (exit 143) once a script runs as another user:
    the reason the template writes `script_user root` (the role README, "Every script runs as root")."""
    text = render_config(render, everything())
    assert "\n    script_user root\n" in text
    assert keepalived_config_test(text, tmp_path).returncode == 0
    result = keepalived_config_test(text.replace("\n    script_user root\n", "\n    script_user nobody\n"), tmp_path)
    assert result.returncode in (-15, 143), (result.returncode, result.stderr)
