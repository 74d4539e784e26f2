from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.filter.inventory_problems import (
    host_address_problem,
    inventory_problems,
)


def _never_resolves(name):
    return False


def _groups(**members):
    groups = {"all": sorted({h for hosts in members.values() for h in hosts}), "ungrouped": []}
    groups.update(members)
    return groups


def test_usable_inventory_has_no_problems():
    groups = _groups(lvs_directors=["dir1"], gpu_nodes=["gpu1"])
    hostvars = {"dir1": {"ansible_host": "198.18.0.11"}, "gpu1": {"ansible_host": "198.18.0.31"}}
    assert inventory_problems(groups, hostvars, required_groups=["lvs_directors"], resolve=_never_resolves) == []


def test_unknown_group_is_named_with_the_fix():
    groups = _groups(lvs_direktors=["dir1"])
    assert inventory_problems(groups, {"dir1": {"ansible_host": "198.18.0.11"}}) == [
        "unknown inventory group 'lvs_direktors': the collection acts on lvs_directors, lvs_realservers, "
        "lvs_clients, windows_storage, gpu_nodes; rename it to one of them or list it in hpc_balance_extra_groups"
    ]


def test_extra_groups_are_allowed():
    groups = _groups(rack7=["dir1"], lvs_directors=["dir1"])
    assert inventory_problems(groups, {"dir1": {"ansible_host": "198.18.0.11"}}, extra_groups=["rack7"]) == []


def test_empty_group_is_fine_unless_required():
    groups = _groups(lvs_directors=["dir1"], gpu_nodes=[])
    hostvars = {"dir1": {"ansible_host": "198.18.0.11"}}
    assert inventory_problems(groups, hostvars) == []
    assert inventory_problems(groups, hostvars, required_groups=["gpu_nodes"]) == [
        "required group 'gpu_nodes' has no hosts: add hosts to it or remove it from hpc_balance_required_groups"
    ]


def test_required_group_absent_from_inventory_counts_as_empty():
    groups = _groups(lvs_directors=["dir1"])
    problems = inventory_problems(groups, {"dir1": {"ansible_host": "198.18.0.11"}}, required_groups=["lvs_clients"])
    assert problems == [
        "required group 'lvs_clients' has no hosts: add hosts to it or remove it from hpc_balance_required_groups"
    ]


def test_required_group_must_be_known():
    groups = _groups(lvs_directors=["dir1"])
    problems = inventory_problems(groups, {"dir1": {"ansible_host": "198.18.0.11"}}, required_groups=["gpus"])
    assert problems == ["required group 'gpus' is not a group the collection knows (lvs_directors, lvs_realservers, "
                        "lvs_clients, windows_storage, gpu_nodes)"]


@pytest.mark.parametrize(
    ("host", "host_vars", "has_problem"),
    [
        ("dir1", {"ansible_host": "198.18.0.11"}, False),
        ("dir1", {"ansible_host": ""}, True),
        ("dir1", {}, True),
        ("198.18.0.11", {}, False),
        ("2001:db8::11", {}, False),
        ("controller", {"ansible_connection": "local"}, False),
    ],
)
def test_host_address_problem(host, host_vars, has_problem):
    problem = host_address_problem(host, host_vars, resolve=_never_resolves)
    assert (problem is not None) == has_problem
    if has_problem:
        assert problem == (f"host '{host}' has no address: ansible_host is not set and the name does not resolve; "
                           "set ansible_host for it in the inventory")


def test_resolvable_name_needs_no_ansible_host():
    assert host_address_problem("localhost", {}) is None


def test_bad_required_groups_type_is_refused():
    with pytest.raises(AnsibleFilterError, match="required_groups must be a list of group names, got \\[1\\]"):
        inventory_problems(_groups(), {}, required_groups=[1])
