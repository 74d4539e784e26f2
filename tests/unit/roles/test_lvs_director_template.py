"""keepalived.conf as lvs_director writes it: never a deprecated key, always reload_check_config, and accepted by
the real `keepalived --config-test` for every kind of block the role can write (skipped where keepalived is absent).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_resolve

KEEPALIVED = shutil.which("keepalived") or (
    "/usr/sbin/keepalived" if shutil.which("keepalived", path="/usr/sbin") else None
)


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
        "vrrp_instances": [
            {"name": "VI_V3", "virtual_router_id": 51, "virtual_ipaddresses": ["198.18.0.100", "198.18.0.101/24"],
             "track_scripts": ["chk_true"], "track_interfaces": ["lo"],
             "unicast_src_ip": "198.18.0.11", "unicast_peers": ["198.18.0.12"],
             "notify_master": "/bin/true master", "notify": "/bin/true"},
            {"name": "VI_V2", "virtual_router_id": 52, "vrrp_version": 2, "advert_int_s": 1, "state": "BACKUP",
             "nopreempt": True, "auth_pass": "s3cret", "virtual_ipaddresses": ["198.18.0.102"]},
            {"name": "VI_DELAY", "virtual_router_id": 53, "state": "BACKUP", "preempt_delay_s": 5,
             "virtual_ipaddresses": ["198.18.0.103"]},
        ],
        "virtual_servers": [
            {"address": "198.18.0.100", "port": 80, "lvs_sched": "wrr", "persistence_timeout_s": 300, "quorum": 2,
             "sorry_server": {"address": "198.18.0.30"},
             "check": {"type": "HTTP_GET", "url_path": "/health", "status_code": 204, "connect_port": 8080},
             "real_servers": [{"address": "198.18.0.21", "weight": 3}, {"address": "198.18.0.22",
                              "check": {"type": "TCP_CHECK", "retry": 5}}]},
            {"address": "198.18.0.100", "port": 53, "protocol": "UDP", "lvs_sched": "rr",
             "check": {"type": "MISC_CHECK", "misc_path": "/bin/true", "misc_timeout_s": 4},
             "real_servers": [{"address": "198.18.0.21"}]},
            {"address": "198.18.0.101", "port": 443, "lvs_method": "NAT", "check": {"type": "none"},
             "real_servers": [{"address": "198.18.0.21", "port": 8443}]},
        ],
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
    assert "        auth_pass s3cret\n" in text


def test_vips_are_bound_to_the_instance_interface(render):
    text = render_config(render, everything())
    assert "        198.18.0.100/32 dev eth0\n" in text
    assert "        198.18.0.101/24 dev eth0\n" in text


def test_no_check_block_for_check_type_none(render):
    text = render_config(render, everything())
    server = text[text.index("virtual_server 198.18.0.101 443"):]
    assert "_CHECK" not in server and "HTTP_GET" not in server


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_accepts_every_block_the_template_writes(render, tmp_path):
    config = tmp_path / "keepalived.conf"
    config.write_text(render_config(render, everything()))
    result = subprocess.run([KEEPALIVED, "--config-test", "--all-config", "--use-file", str(config)],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_rejects_an_unknown_keyword_so_the_check_can_fail(render, tmp_path):
    config = tmp_path / "keepalived.conf"
    config.write_text(render_config(render, everything(), extra=["vrrp_garp_master_refreshh 60"]))
    result = subprocess.run([KEEPALIVED, "--config-test", "--all-config", "--use-file", str(config)],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode != 0
    assert "Unknown keyword 'vrrp_garp_master_refreshh'" in result.stderr
