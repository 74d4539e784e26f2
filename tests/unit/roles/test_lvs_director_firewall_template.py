"""The lvs_director role's own nftables table as the template module writes it, loaded by the real `nft -c -f` in a
throwaway network namespace (skipped where nft or ip is missing or the user is not root), and the lvs_sync_daemon
line of keepalived.conf (accepted by the real `keepalived --config-test` where keepalived is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest
from lvs_role_files import KEEPALIVED, keepalived_config_test

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_resolve
from ansible_collections.hpc.balance.plugins.filter.lvs_director_firewall import lvs_director_firewall_rules

NFT = shutil.which("nft") or shutil.which("nft", path="/usr/sbin")
IP = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
CAN_NETNS = NFT is not None and IP is not None and hasattr(os, "geteuid") and os.geteuid() == 0
SYNC = {"interface": "eth0", "instance": "VI_LVS", "sync_id": 51, "maxlen_bytes": 1472, "port": 8848, "ttl": 1,
        "group": "224.0.0.81"}


def lab_director(**changes):
    """The lab's director (tests/lab/site/group_vars/lvs_directors.yml): one instance, one wrr service on port 80."""
    config = {
        "host": "dir1", "router_id": "dir1", "max_auto_priority": None, "lvs_timeouts": {}, "vrrp_scripts": [],
        "vrrp_instances": [{"name": "VI_LVS", "interface": "eth0", "virtual_ipaddresses": ["198.18.0.100/32"],
                            "unicast_peers": None}],
        "virtual_servers": [{"address": "198.18.0.100", "port": 80, "protocol": "TCP"}],
    }
    config.update(changes)
    return config


def render_table(render, config, sync_daemon=None):
    return render("lvs_director", "nftables-hpc-balance-lvs.nft.j2", lvs_director_resolved=config,
                  lvs_director_firewall_table="hpc_balance_lvs",
                  lvs_director_firewall_plan=lvs_director_firewall_rules(config, sync_daemon))


def nft_check_in_netns(path):
    """`nft -c -f path` inside a network namespace of its own, deleted afterwards."""
    namespace = f"fw-test-{uuid.uuid4().hex[:8]}"
    subprocess.run([IP, "netns", "add", namespace], check=True, timeout=30)
    try:
        return subprocess.run([IP, "netns", "exec", namespace, NFT, "-c", "-f", str(path)],
                              capture_output=True, text=True, timeout=30, check=False)
    finally:
        subprocess.run([IP, "netns", "delete", namespace], check=False, timeout=30)


def test_the_table_replaces_itself_only(render):
    text = render_table(render, lab_director())
    assert "flush ruleset" not in text
    assert "table inet hpc_balance_lvs {}\ndelete table inet hpc_balance_lvs\n" in text


def test_the_chain_runs_before_the_filter_chains_and_accepts_each_flow(render):
    text = render_table(render, lab_director())
    assert "\t\ttype filter hook input priority filter - 10; policy accept;\n" in text
    assert ('\t\tiifname "eth0" meta nfproto ipv4 meta l4proto 112 accept comment "VRRP (IP protocol 112) of '
            'instance VI_LVS"\n') in text
    assert '\t\tip daddr 198.18.0.100 tcp dport 80 accept comment "tcp port 80 of virtual server 198.18.0.100:80"\n' \
        in text


@pytest.mark.skipif(not CAN_NETNS, reason="needs nft, ip and root for a network namespace")
@pytest.mark.parametrize("sync_daemon", [None, SYNC], ids=["services", "services-and-sync"])
def test_nft_accepts_the_table_the_template_writes(render, tmp_path, sync_daemon):
    path = tmp_path / "hpc-balance-lvs.nft"
    path.write_text(render_table(render, lab_director(), sync_daemon))
    result = nft_check_in_netns(path)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(not CAN_NETNS, reason="needs nft, ip and root for a network namespace")
def test_nft_accepts_the_table_for_unicast_peers_and_ipv6(render, tmp_path):
    config = lab_director(
        vrrp_instances=[{"name": "VI_V4", "interface": "eth0", "virtual_ipaddresses": ["198.18.0.100/32"],
                         "unicast_peers": ["198.18.0.12"]},
                        {"name": "VI_V6", "interface": "eth0", "virtual_ipaddresses": ["2001:db8::100/128"],
                         "unicast_peers": None}],
        virtual_servers=[{"address": "2001:db8::100", "port": 53, "protocol": "UDP"},
                         {"address": "198.18.0.100", "port": 9000, "protocol": "SCTP"}])
    path = tmp_path / "hpc-balance-lvs.nft"
    path.write_text(render_table(render, config))
    result = nft_check_in_netns(path)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(not CAN_NETNS, reason="needs nft, ip and root for a network namespace")
def test_nft_check_fails_on_a_broken_rule_so_the_validation_can_fail(render, tmp_path):
    path = tmp_path / "hpc-balance-lvs.nft"
    path.write_text(render_table(render, lab_director()).replace("tcp dport 80", "tcp dport eighty"))
    assert nft_check_in_netns(path).returncode != 0


def render_keepalived(render, sync_daemon):
    config = lvs_director_resolve({
        "host": "dir1", "interface": "eth0", "state": "MASTER", "priority": 150,
        "vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": ["198.18.0.100"]}],
    })
    return render("lvs_director", "keepalived.conf.j2", lvs_director_resolved=config,
                  lvs_director_global_defs_extra=[], lvs_director_sync_daemon=sync_daemon)


def test_keepalived_conf_has_the_sync_daemon_line_in_global_defs(render):
    text = render_keepalived(render, SYNC)
    global_defs = text[text.index("global_defs {"):text.index("\n}\n") + 1]
    assert "    lvs_sync_daemon eth0 VI_LVS id 51 maxlen 1472 port 8848 ttl 1 group 224.0.0.81\n" in global_defs


def test_keepalived_conf_leaves_out_the_sync_options_not_set(render):
    text = render_keepalived(render, {"interface": "eth0", "instance": "VI_LVS"})
    assert "    lvs_sync_daemon eth0 VI_LVS\n" in text


def test_keepalived_conf_has_no_sync_daemon_when_it_is_off(render):
    assert "lvs_sync_daemon" not in render_keepalived(render, None)


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_accepts_the_sync_daemon_line(render, tmp_path):
    result = keepalived_config_test(render_keepalived(render, SYNC), tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_check_passes_an_unknown_sync_instance_so_the_preflight_must_catch_it(render, tmp_path):
    result = keepalived_config_test(render_keepalived(render, dict(SYNC, instance="VI_NOPE")), tmp_path)
    assert result.returncode == 0, result.stderr
