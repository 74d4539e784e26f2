"""playbooks/tasks/lvs_drain_wait.yml, run by the real ansible-playbook against a /proc/net/ip_vs snapshot.

The snapshot is the recorded kernel output the ipvs_spread tests use (tests/unit/plugins/module_utils/fixtures,
ip_vs_ctl.c's ip_vs_info_seq_show format), read through ipvs_spread's proc_net_path: 198.18.0.11 (C612000B) holds 12
active connections at weight 1 on TCP 198.18.0.100:80 and weight 2 on UDP :53. The drained state is the same file
with that real server's weights and active connections set to 0, and its ESTABLISHED entries ended (FIN_WAIT). The
snapshot after a reboot is real: the lab's director (kernel 6.1.176) 20 s after 198.18.0.153 rebooted under a client
connecting every 0.25 s, ActiveConn 18 from the SYN_RECV entries of connections it never answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
WAIT = ROOT / "playbooks" / "tasks" / "lvs_drain_wait.yml"
SNAPSHOT = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "proc_ip_vs_dr.txt"
# The connection entries behind SNAPSHOT's counters (ip_vs_conn.c's format; see test__ipvs.py).
CONNECTIONS = SNAPSHOT.with_name("proc_ip_vs_conn_dr.txt")
AFTER_REBOOT = SNAPSHOT.with_name("proc_ip_vs_dr_after_reboot.txt")
AFTER_REBOOT_CONNECTIONS = SNAPSHOT.with_name("proc_ip_vs_conn_dr_after_reboot.txt")

PLAY = """
- name: Wait for a drain as lvs_drain.yml does
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    hpc.balance.ipvs_spread:
      proc_net_path: {proc_net}
  vars:
    lvs_drain_addresses: [{address}]
    lvs_drain_name: rs1
    lvs_drain_action: drain
    lvs_drain_timeout_s: {timeout_s}
    lvs_drain_poll_s: {poll_s}
    lvs_drain_ipvs_before: {{services: []}}
    lvs_director_resolved: {{virtual_servers: []}}
  tasks:
    - name: The wait
      ansible.builtin.import_tasks: {wait}
"""


def run_wait(tmp_path, proc_text, timeout_s, poll_s=1, connections=None, address="198.18.0.11"):
    proc_net = tmp_path / "net"
    proc_net.mkdir()
    (proc_net / "ip_vs").write_text(proc_text)
    (proc_net / "ip_vs_conn").write_text(CONNECTIONS.read_text() if connections is None else connections)
    playbook = tmp_path / "wait.yml"
    playbook.write_text(PLAY.format(proc_net=proc_net, timeout_s=timeout_s, poll_s=poll_s, wait=WAIT,
                                    address=address))
    return run_playbook(playbook, "localhost,", "-e", f"ansible_python_interpreter={sys.executable}")


def test_a_drained_real_server_without_active_connections_ends_the_wait(tmp_path):
    drained = SNAPSHOT.read_text().replace(
        "  -> C612000B:0050      Route   1      12         40        ",
        "  -> C612000B:0050      Route   0      0          52        ",
    ).replace("  -> C612000B:0035      Masq    2      0          3         ",
              "  -> C612000B:0035      Masq    0      0          3         ")
    assert drained != SNAPSHOT.read_text()
    ended = "\n".join(line.replace("ESTABLISHED", "FIN_WAIT   ") if " C612000B " in line else line
                      for line in CONNECTIONS.read_text().splitlines()) + "\n"
    done = run_wait(tmp_path, drained, timeout_s=30, connections=ended)
    assert done.returncode == 0, done.stdout
    assert "localhost drain rs1 (198.18.0.11): active connections 0 -> 0 live after" in " ".join(done.stdout.split())


def test_handshakes_a_rebooted_real_server_never_answered_do_not_hold_the_drain(tmp_path):
    """ActiveConn 18 and weight 0 on 198.18.0.153; its 18 SYN_RECV entries expire 41 to 50 s later. The drain is done
    at once: counting ActiveConn it would wait for them, up to a minute after the reboot."""
    done = run_wait(tmp_path, AFTER_REBOOT.read_text(), timeout_s=30, connections=AFTER_REBOOT_CONNECTIONS.read_text(),
                    address="198.18.0.153")
    assert done.returncode == 0, done.stdout
    assert "localhost drain rs1 (198.18.0.153): active connections 0 -> 0 live after" in " ".join(done.stdout.split())
    assert "FAILED - RETRYING" not in done.stdout


def test_a_handshake_begun_within_3_s_holds_the_drain(tmp_path):
    """The same table with one SYN_RECV entry refreshed 1 s ago (expires in 59 s): a client still connecting."""
    lines = AFTER_REBOOT_CONNECTIONS.read_text().splitlines()
    young = next(number for number, line in enumerate(lines) if "SYN_RECV" in line)
    lines[young] = lines[young][:-2] + "59"
    done = run_wait(tmp_path, AFTER_REBOOT.read_text(), timeout_s=3, connections="\n".join(lines) + "\n",
                    address="198.18.0.153")
    assert done.returncode == 2, done.stdout
    assert "still has 1 live connection(s), weights [0], after 3 s" in " ".join(done.stdout.split())


def test_active_connections_past_the_timeout_fail_the_wait_naming_them(tmp_path):
    done = run_wait(tmp_path, SNAPSHOT.read_text(), timeout_s=3)
    assert done.returncode == 2, done.stdout
    message = " ".join(done.stdout.split())
    assert ("localhost: rs1 (198.18.0.11) still has 12 live connection(s), weights [1, 2], after 3 s "
            "(lvs_drain_timeout_s)") in message
    # The entries that hold it: 55 to 198.18.0.11 in proc_ip_vs_conn_dr.txt, the 3 that expire last listed.
    assert "IPVS holds 55 entries to it (8 CLOSE, 12 ESTABLISHED, 32 FIN_WAIT, 3 UDP); those that expire last:" \
        in message
    assert ("198.18.0.10:40022 -> 198.18.0.100:80 ESTABLISHED expires in 896 s; 198.18.0.10:40016 -> "
            "198.18.0.100:80 ESTABLISHED expires in 848 s; 198.18.0.10:40010 -> 198.18.0.100:80 ESTABLISHED expires "
            "in 704 s. An ESTABLISHED entry whose expiry only counts down") in message


def test_the_clock_ends_the_wait_when_each_read_takes_longer_than_the_poll(tmp_path):
    """timeout 3 s / poll 0.01 s allows 301 reads; each read (a module run) takes far more than 0.01 s, so counting
    retries alone would wait minutes. The clock stops it after the reads that fit in 3 s."""
    done = run_wait(tmp_path, SNAPSHOT.read_text(), timeout_s=3, poll_s=0.01)
    assert done.returncode == 2, done.stdout
    # On a loaded machine one read may take the whole 3 s (no retry at all); counted retries alone make 300.
    retries = done.stdout.count("FAILED - RETRYING: [localhost]: Wait until IPVS shows the change for rs1")
    assert retries <= 100, done.stdout
