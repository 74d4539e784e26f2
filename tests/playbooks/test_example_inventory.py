"""examples/inventory (the small site the README starts from) with the real ansible-inventory and ansible-playbook.

What these runs show without the site's hosts: the inventory parses into exactly the collection's groups with
documentation addresses only; every role's argument spec (meta/argument_specs.yml) accepts the example's variables
as each host renders them; and site, audit and rebalance, run by FQCN as an installed collection's playbooks with
ansible-core alone (no other collection on the path), pass their inventory check in check mode and reach every
host's connection. Every host points at a closed port on loopback, so each is UNREACHABLE at its first connection
and nothing on this machine is touched. What they cannot show: any preflight that reads a host (keepalived, IPVS,
NICs, the GPU), the rendered keepalived.conf, or a Windows or GPU host's own checks; the lab run of README.md's
newcomer path did those on the lab's hosts.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "inventory"
GROUPS = {
    "lvs_directors": ["lb1", "lb2"],
    "lvs_realservers": ["web1", "web2", "web3", "web4"],
    "lvs_clients": ["probe1"],
    "windows_storage": ["fs1", "fs2"],
    "gpu_nodes": ["gpu1", "gpu2"],
}
# RFC 5737 and RFC 3849: the only addresses an example may carry.
DOCUMENTATION_NETWORKS = [ipaddress.ip_network(net) for net in ("192.0.2.0/24", "198.51.100.0/24", "2001:db8::/32")]
# Each role and the group whose hosts run it (playbooks/lvs.yml, windows.yml, gpu.yml).
ROLE_GROUPS = {
    "lvs_director": "lvs_directors",
    "lvs_realserver": "lvs_realservers",
    "win_nic_team": "windows_storage",
    "win_smb_multichannel": "windows_storage",
    "gpu_moe": "gpu_nodes",
}
# Every host at a closed port of loopback (ssh and WinRM alike): refused at once, so unreachable without a timeout.
UNREACHABLE = ["-e", "ansible_host=127.0.0.1", "-e", "ansible_port=9", "-e", "vault_windows_password=unused"]


@pytest.fixture(scope="module")
def plain_core(tmp_path_factory) -> dict[str, str]:
    """The checkout as the only installed collection: no ansible.windows or other collection from the venv."""
    collections = tmp_path_factory.mktemp("collections")
    (collections / "ansible_collections" / "hpc").mkdir(parents=True)
    (collections / "ansible_collections" / "hpc" / "balance").symlink_to(ROOT)
    return {"ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"}


def is_documentation_address(text: str) -> bool:
    address = ipaddress.ip_address(text)
    return any(address in network for network in DOCUMENTATION_NETWORKS)


def test_the_inventory_has_the_collection_groups_and_documentation_addresses_only(plain_core):
    env = dict(os.environ, **plain_core)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-inventory")), "-i", str(EXAMPLE), "--list"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    listing = json.loads(done.stdout)
    assert {group: listing[group]["hosts"] for group in GROUPS} == GROUPS
    hostvars = listing["_meta"]["hostvars"]
    for host, variables in hostvars.items():
        assert is_documentation_address(variables["ansible_host"]), host
    assert is_documentation_address(hostvars["lb1"]["site_vip4"])
    assert is_documentation_address(hostvars["lb1"]["site_vip6"])
    assert (hostvars["lb1"]["lvs_director_state"], hostvars["lb2"]["lvs_director_state"]) == ("MASTER", "BACKUP")


def test_every_role_accepts_the_example_variables(tmp_path, plain_core):
    """validate_argument_spec is what each role runs first; it runs on the controller and needs no connection."""
    plays = [
        {
            "name": f"Validate {role}",
            "hosts": group,
            "gather_facts": False,
            "tasks": [
                {
                    "name": f"{role} arguments",
                    "ansible.builtin.validate_argument_spec": {
                        "argument_spec": "{{ (lookup('ansible.builtin.file', '%s') | from_yaml)"
                        ".argument_specs.main.options }}" % (ROOT / "roles" / role / "meta" / "argument_specs.yml"),
                    },
                }
            ],
        }
        for role, group in ROLE_GROUPS.items()
    ]
    playbook = tmp_path / "validate.yml"
    playbook.write_text(json.dumps(plays))
    result = run_playbook(playbook, EXAMPLE, "-e", "vault_windows_password=unused", **plain_core)
    assert result.returncode == 0, result.stdout + result.stderr
    for host in sum(GROUPS.values(), []):
        if host != "probe1":
            assert f"ok: [{host}]" in result.stdout, host


# What each run must show before its first connection: the role's own argument and settings checks on the example's
# variables (they run on the controller), for the roles whose hosts are reached without gathering facts first.
CHECK_RUNS = {
    "site": (["hpc.balance.site"], []),
    "site-windows": (
        ["hpc.balance.site", "--limit", "windows_storage"],
        [
            "TASK [hpc.balance.win_nic_team : Validating arguments against arg spec 'main'",
            "TASK [hpc.balance.win_nic_team : Assert the VLAN and the wait are in range]",
        ],
    ),
    "gpu": (
        ["hpc.balance.gpu"],
        [
            "TASK [hpc.balance.gpu_moe : Validating arguments against arg spec 'main'",
            "TASK [hpc.balance.gpu_moe : Find problems in the settings]",
        ],
    ),
    "audit": (["hpc.balance.audit"], []),
    "rebalance": (["hpc.balance.rebalance"], ["TASK [Check the rebalance settings]"]),
}


@pytest.mark.parametrize("run", sorted(CHECK_RUNS))
def test_the_installed_playbooks_run_by_fqcn_in_check_mode_up_to_the_hosts(tmp_path, plain_core, run):
    """Exit 4 (hosts unreachable) and no FAILED: a failed check or an unresolved import would exit 2 and say FAILED;
    a Windows host asked for facts would fail on ansible.windows.setup, which ansible-core alone does not have."""
    arguments, expected = CHECK_RUNS[run]
    result = run_playbook(
        arguments[0],
        EXAMPLE,
        *arguments[1:],
        "--check",
        *UNREACHABLE,
        "-e",
        f"hpc_balance_report_dir={tmp_path / 'report'}",
        timeout_s=120,
        **plain_core,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    assert "FAILED!" not in output, output
    # The inventory check runs on localhost, which a --limit to a group leaves out.
    assert ("TASK [Find inventory problems] ***" in output) == ("--limit" not in arguments), output
    assert "UNREACHABLE!" in output
    for task in expected:
        after = output.split(task, 1)
        assert len(after) == 2 and after[1].split("TASK [", 1)[0].count("ok: [") >= 1, task
