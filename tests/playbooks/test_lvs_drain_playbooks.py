"""lvs_drain.yml and lvs_rolling_maintenance.yml refuse a bad request before they change anything, with a message that
names the value and the fix.

These run the real ansible-playbook. The directors of these inventories point at a closed port on this machine
(127.0.0.1:1): a run that got past its checks would fail differently (UNREACHABLE) and never leave the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
DRAIN = ROOT / "playbooks" / "lvs_drain.yml"
ROLLING = ROOT / "playbooks" / "lvs_rolling_maintenance.yml"

# dir1 balances port 80 over rs1 (its address from hostvars, as the lab's group_vars write it) and rs2, and port 53
# over rs1 alone; rs9 is in lvs_realservers but in no virtual server.
INVENTORY = """
all:
  vars:
    ansible_connection: ssh
    ansible_port: 1
  children:
    lvs_directors:
      hosts:
        dir1:
          ansible_host: 127.0.0.1
          lvs_director_virtual_servers:
            - address: 198.18.0.100
              port: 80
              real_servers:
                - {address: "{{ hostvars['rs1']['ansible_host'] }}", weight: 3}
                - {address: 198.18.0.22}
            - address: 198.18.0.100
              port: 53
              protocol: UDP
              real_servers:
                - {address: 198.18.0.21}
    lvs_realservers:
      hosts:
        rs1: {ansible_host: 198.18.0.21}
        rs9: {ansible_host: 198.18.0.29}
"""

NO_DIRECTORS = """
all:
  children:
    lvs_realservers:
      hosts:
        rs1: {ansible_host: 198.18.0.21}
"""


def run(tmp_path, playbook, *extra_args, inventory_text=INVENTORY):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(inventory_text)
    return run_playbook(playbook, inventory, *extra_args, ANSIBLE_HOST_KEY_CHECKING="0")


def assert_refused(result, message):
    assert result.returncode == 2, result.stdout
    assert message in " ".join(result.stdout.split()), result.stdout
    assert "UNREACHABLE" not in result.stdout


@pytest.mark.parametrize(
    ("extra_vars", "message"),
    [
        ([], "lvs_drain_action is ''; pass -e lvs_drain_action=drain"),
        (["-e", "lvs_drain_action=drian", "-e", "lvs_drain_real_server=rs1"],
         "lvs_drain_action is 'drian'; pass -e lvs_drain_action=drain"),
        (["-e", "lvs_drain_action=drain"], "lvs_drain_real_server is not set; pass -e lvs_drain_real_server=NAME"),
        (["-e", "lvs_drain_action=drain", "-e", "lvs_drain_real_server=rs1", "-e", "lvs_drain_timeout_s=soon"],
         "lvs_drain_timeout_s is 'soon'; give the seconds to wait as a number above 0"),
        (["-e", "lvs_drain_action=undrain", "-e", "lvs_drain_real_server=rs1", "-e", "lvs_drain_timeout_s=0"],
         "lvs_drain_timeout_s is '0'; give the seconds to wait as a number above 0"),
    ],
    ids=["no action", "misspelt action", "no real server", "timeout not a number", "timeout zero"],
)
def test_drain_refuses_a_bad_request_before_any_host_is_touched(tmp_path, extra_vars, message):
    result = run(tmp_path, DRAIN, *extra_vars)
    assert_refused(result, message)
    assert "record the drained list on every director" not in result.stdout


@pytest.mark.parametrize(("name", "shown"), [("rs9", "rs9 (addresses 198.18.0.29)"), ("198.18.0.29", "198.18.0.29")],
                         ids=["inventory name", "address"])
def test_drain_refuses_an_address_that_no_virtual_server_lists(tmp_path, name, shown):
    result = run(tmp_path, DRAIN, "-e", "lvs_drain_action=drain", "-e", f"lvs_drain_real_server={name}")
    assert_refused(
        result,
        f"{shown} is not a real server of any virtual server in lvs_director_virtual_servers of dir1, so draining it "
        "would change nothing. Give one of 198.18.0.21, 198.18.0.22 or the inventory name of its host",
    )
    assert "Gather the facts the role checks" not in result.stdout


def test_drain_finds_a_host_with_a_management_ansible_host_by_its_service_addresses(tmp_path):
    # rs1 is reached over a management address IPVS never sees; the virtual servers list 198.18.0.21.
    inventory = INVENTORY.replace("rs1: {ansible_host: 198.18.0.21}",
                                  "rs1: {ansible_host: 10.9.0.21, lvs_realserver_service_addresses: [198.18.0.21]}")
    inventory = inventory.replace("{address: \"{{ hostvars['rs1']['ansible_host'] }}\", weight: 3}",
                                  "{address: 198.18.0.21, weight: 3}")
    result = run(tmp_path, DRAIN, "-e", "lvs_drain_action=drain", "-e", "lvs_drain_real_server=rs1",
                 inventory_text=inventory)
    assert "is not a real server of any virtual server" not in result.stdout
    assert "Gather the facts the role checks" in result.stdout
    assert "UNREACHABLE" in result.stdout


def test_drain_refuses_an_inventory_without_directors(tmp_path):
    result = run(tmp_path, DRAIN, "-e", "lvs_drain_action=drain", "-e", "lvs_drain_real_server=rs1",
                 inventory_text=NO_DIRECTORS)
    assert_refused(result, "The inventory has no host in lvs_directors, so there is nothing to drain on")


def test_rolling_maintenance_refuses_a_task_file_that_does_not_exist(tmp_path):
    missing = tmp_path / "missing.yml"
    result = run(tmp_path, ROLLING, "-e", f"lvs_maintenance_tasks={missing}")
    assert_refused(result, f"lvs_maintenance_tasks is '{missing}', which is not a file on the controller")


def test_rolling_maintenance_refuses_a_service_with_one_serving_real_server(tmp_path):
    result = run(tmp_path, ROLLING)
    assert_refused(
        result,
        "dir1: UDP 198.18.0.100:53 has 1 real server(s) with a weight above 0 - draining its only serving real "
        "server would leave the service with none",
    )
    assert "TCP 198.18.0.100:80" not in result.stdout


def test_rolling_maintenance_refuses_a_real_server_that_no_virtual_server_lists(tmp_path):
    # Port 53 gets a second real server, so only rs9 (in lvs_realservers, in no virtual server) is wrong: its drain
    # would match no IPVS entry and it would be rebooted at full weight.
    inventory = INVENTORY.replace(
        "                - {address: 198.18.0.21}\n",
        "                - {address: 198.18.0.21}\n                - {address: 198.18.0.22}\n",
    )
    result = run(tmp_path, ROLLING, inventory_text=inventory)
    assert_refused(
        result,
        "rs9 of lvs_realservers is not a real server of any virtual server under its ansible_host or service "
        "addresses, so a drain would change nothing before the maintenance",
    )


def test_rolling_maintenance_passes_its_checks_when_every_service_keeps_a_serving_real_server(tmp_path):
    # Port 53 gets a second real server, rs9; the run then gets as far as the first connection (refused on
    # 127.0.0.1:1).
    inventory = INVENTORY.replace(
        "                - {address: 198.18.0.21}\n",
        "                - {address: 198.18.0.21}\n                - {address: 198.18.0.29}\n",
    )
    result = run(tmp_path, ROLLING, inventory_text=inventory)
    assert result.returncode == 4, result.stdout
    assert "would leave the service with none" not in result.stdout
    assert "UNREACHABLE" in result.stdout
