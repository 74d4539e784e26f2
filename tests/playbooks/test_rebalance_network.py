"""playbooks/rebalance.yml, network part, on this machine (local connection): the capacities are read the way the
playbook reads them (nproc for vcpus, a given map), the plan is made once for every director, shown per real server
before and after, and a plan within the hysteresis changes nothing. Applying the weights through keepalived needs
IPVS: the lvs-uml molecule scenario does that on the user-mode Linux guests."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "rebalance.yml"
LOCAL = f"ansible_connection: local, ansible_python_interpreter: {sys.executable}"


def rebalance(tmp_path, *extra, check=False, rs2="ansible_host: 198.18.0.22"):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"""
all:
  children:
    lvs_realservers:
      hosts:
        rs1: {{ansible_host: 198.18.0.21, {LOCAL}}}
        rs2: {{{rs2}, {LOCAL}}}
    lvs_directors:
      hosts:
        dir1:
          ansible_host: 198.18.0.11
          ansible_connection: local
          ansible_python_interpreter: {sys.executable}
          lvs_director_virtual_servers:
            - address: 198.18.0.100
              port: 80
              real_servers: [{{address: 198.18.0.21, weight: 1}}, {{address: 198.18.0.22, weight: 1}}]
""")
    result = run_playbook(PLAYBOOK, inventory, "--tags", "network", *(["--check"] if check else []), *extra,
                          timeout_s=300, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    return result.returncode, json.loads(result.stdout) if result.stdout.startswith("{") else result.stdout


def results(run, name):
    return [host for play in run["plays"] for item in play["tasks"] if item["task"]["name"] == name
            for host in item["hosts"].values()]


def test_without_a_capacity_source_the_network_layer_is_left_alone(tmp_path):
    rc, run = rebalance(tmp_path)
    assert rc == 0
    assert results(run, "Say that the network layer is left alone")[0]["msg"] == (
        "network: no capacity source (set hpc_balance_rebalance_lvs_capacity_source to iperf3, vcpus or given)")
    assert run["stats"]["dir1"]["changed"] == 0


def test_equal_vcpu_counts_keep_equal_weights(tmp_path):
    rc, run = rebalance(tmp_path, "-e", "hpc_balance_rebalance_lvs_capacity_source=vcpus")
    assert rc == 0, run
    planned = results(run, "Plan the weights (the same plan for every director)")
    (plan,) = [result["ansible_facts"]["hpc_balance_rebalance_lvs_plan"] for result in planned]
    cpus = os.cpu_count()
    assert plan["capacities"] == {"198.18.0.21": cpus, "198.18.0.22": cpus}
    assert (plan["changed"], plan["weights"]) == (False, {"198.18.0.21": 1, "198.18.0.22": 1})
    shown = results(run, "Show each real server's capacity, share and weight, before and after")[0]["results"]
    lines = [item["msg"] for item in shown]
    assert lines == [f"rs1 (198.18.0.21): capacity {cpus} vCPUs, share 50.0 % -> 50.0 %, weight 1",
                     f"rs2 (198.18.0.22): capacity {cpus} vCPUs, share 50.0 % -> 50.0 %, weight 1"]
    assert run["stats"]["dir1"]["changed"] == 0


def test_a_given_capacity_within_the_hysteresis_changes_nothing(tmp_path):
    rc, run = rebalance(tmp_path, "-e", "hpc_balance_rebalance_lvs_capacity_source=given",
                        "-e", '{"hpc_balance_rebalance_lvs_capacity": {"rs1": 520, "198.18.0.22": 480}}')
    assert rc == 0, run
    # 520:480 (shares 52.0/48.0) gives weights 9:8, the smallest within 1 point: shares 52.9/47.1 against 50/50 now.
    assert results(run, "Say what the plan does")[0]["msg"] == (
        "network: the shares would move by 2.9 points at most (not more than 5): kept")
    assert results(run, "Apply the weights through the lvs_director role (config and reload)")[0].get("skipped") is True


def test_an_unknown_capacity_source_is_refused_before_anything_runs(tmp_path):
    rc, run = rebalance(tmp_path, "-e", "hpc_balance_rebalance_lvs_capacity_source=ping")
    assert rc != 0
    assert results(run, "Check the capacity source")[0]["msg"] == (
        "hpc_balance_rebalance_lvs_capacity_source is ping: use none, iperf3 (needs an lvs_clients host), vcpus, or "
        "given with hpc_balance_rebalance_lvs_capacity as {real server: capacity}")


def test_weights_are_keyed_by_the_address_the_directors_list_not_a_management_ansible_host(tmp_path):
    # Issue 28, defect 14: rs2 is reached over 10.9.0.22; the virtual server lists it as 198.18.0.22.
    # Capacities within the hysteresis: the plan keeps the weights, so no director is reconfigured here.
    rc, run = rebalance(tmp_path, "-e", "hpc_balance_rebalance_lvs_capacity_source=given",
                        "-e", '{"hpc_balance_rebalance_lvs_capacity": {"rs1": 520, "rs2": 480}}',
                        rs2="ansible_host: 10.9.0.22, lvs_realserver_service_addresses: [198.18.0.22]", check=True)
    assert rc == 0, run
    planned = results(run, "Plan the weights (the same plan for every director)")
    (plan,) = [result["ansible_facts"]["hpc_balance_rebalance_lvs_plan"] for result in planned]
    assert plan["capacities"] == {"198.18.0.21": 520, "198.18.0.22": 480}
    shown = results(run, "Show each real server's capacity, share and weight, before and after")[0]["results"]
    assert shown[1]["msg"].startswith("rs2 (198.18.0.22): capacity 480")


def test_a_real_server_listed_under_none_of_its_addresses_stops_the_plan_by_name(tmp_path):
    rc, run = rebalance(tmp_path, "-e", "hpc_balance_rebalance_lvs_capacity_source=given",
                        "-e", '{"hpc_balance_rebalance_lvs_capacity": {"rs1": 520, "rs2": 480}}',
                        rs2="ansible_host: 10.9.0.22", check=True)
    assert rc != 0
    assert "rs2 (10.9.0.22): no virtual server lists this host" in json.dumps(run)
