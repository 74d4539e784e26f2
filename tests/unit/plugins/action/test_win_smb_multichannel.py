"""hpc.balance.win_smb_multichannel action plugin: enable, constrain, refresh, verify channels with a bounded wait."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible._internal._templating._engine import TemplateEngine
from ansible.executor.task_executor import TaskExecutor
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.plugins.loader import connection_loader, init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig

from ansible_collections.hpc.balance.plugins.action import win_smb_multichannel as plugin
from ansible_collections.hpc.balance.plugins.modules import win_smb_multichannel as docs

GATHER = plugin.GATHER_MODULE
APPLY = plugin.APPLY_MODULE
SHARE = "\\\\fs01\\scratch"
VERIFY_ARGS = {"share": SHARE, "min_channels": 2, "settle_s": 10}


@pytest.fixture
def gathered(windows_fixture):
    return lambda name: windows_fixture(f"smb_gather_{name}.json")


def test_enables_multichannel_refreshes_sessions_then_verifies_more_than_one_channel(gathered, make_action):
    action, host = make_action(
        plugin,
        {"verify_share": SHARE},
        {GATHER: [gathered("disabled"), gathered("four_channels")], APPLY: [{"changed": True, "applied": []}]},
        diff=True,
        become=True,
    )
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER, APPLY, GATHER]
    assert host.calls[0][1] == {}  # preflight does not open the share
    assert [change["action"] for change in host.calls[1][1]["changes"]] == [
        "set_server_multichannel",
        "set_client_multichannel",
        "update_connections",
    ]
    assert host.calls[1][1]["changes"][-1]["commands"] == [
        {"command": "Update-SmbMultichannelConnection", "parameters": {"ErrorAction": "Stop"}}
    ]
    assert host.calls[2][1] == VERIFY_ARGS
    assert result["changed"] and not result.get("failed")
    assert result["verdict"]["channels"] == 4 and result["credential_path"] == "become_runas"
    assert result["diff"]["after"]["client_multichannel"] is True


def test_verify_share_without_a_credential_path_is_refused_before_any_change(gathered, make_action):
    action, host = make_action(plugin, {"verify_share": SHARE}, {GATHER: [gathered("disabled")]})
    result = action.run(task_vars={"ansible_winrm_transport": "ntlm"})
    assert host.modules_called() == [GATHER]
    assert result["failed"] and result["changes"] == []
    assert "the double hop" in result["msg"] and "become_method: runas" in result["msg"]


@pytest.mark.parametrize(
    ("task_vars", "path"),
    [
        ({"ansible_winrm_transport": "credssp"}, "credssp"),
        ({"ansible_winrm_transport": "kerberos", "ansible_winrm_kerberos_delegation": True}, "kerberos_delegation"),
    ],
)
def test_credssp_or_kerberos_delegation_is_a_credential_path(gathered, make_action, task_vars, path):
    action, host = make_action(plugin, {"verify_share": SHARE}, {GATHER: [gathered("four_channels")]})
    result = action.run(task_vars=task_vars)
    assert result["credential_path"] == path and not result.get("failed")


def test_one_channel_after_the_wait_is_a_failure(gathered, make_action, clock):
    action, host = make_action(
        plugin,
        {"verify_share": SHARE, "wait_timeout_s": 20, "wait_delay_s": 5},
        {GATHER: [gathered("one_channel")]},
        become=True,
    )
    result = action.run(task_vars={})
    assert result["failed"]
    assert result["msg"].startswith("share \\\\fs01\\scratch connects over 1 channel")
    assert clock.sleeps == [5, 5, 5, 5]
    assert host.modules_called() == [GATHER] * 6


def test_channels_that_open_late_are_waited_for(gathered, make_action, clock):
    action, host = make_action(
        plugin,
        {"verify_share": SHARE},
        {GATHER: [gathered("four_channels"), gathered("one_channel"), gathered("four_channels")]},
        become=True,
    )
    result = action.run(task_vars={})
    assert not result.get("failed") and result["verdict"]["channels"] == 4
    assert clock.sleeps == [5]


def test_without_verify_share_only_the_configuration_is_converged(gathered, make_action):
    action, host = make_action(plugin, {}, {GATHER: [gathered("four_channels")]})
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER]
    assert result["verdict"]["channels"] is None and not result["changed"]


def test_check_mode_does_not_open_the_share(gathered, make_action):
    action, host = make_action(
        plugin,
        {"verify_share": SHARE},
        {GATHER: [gathered("disabled")], APPLY: [{"changed": True, "applied": []}]},
        check_mode=True,
        become=True,
    )
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER, APPLY]
    assert result["changed"] and "verdict" not in result


def test_argument_spec_matches_the_documentation():
    options = yaml.safe_load(docs.DOCUMENTATION)["options"]
    assert set(options) == set(plugin.ARGUMENT_SPEC)
    for name, spec in plugin.ARGUMENT_SPEC.items():
        documented = options[name]
        for key in ("type", "default", "choices", "elements"):
            assert documented.get(key) == spec.get(key), (name, key)
        assert documented.get("required", False) == spec.get("required", False), name


# ------------------------------------------------------------------------------------------- the real resolution
ROLE_TASKS = Path(__file__).resolve().parents[4] / "roles" / "win_smb_multichannel" / "tasks" / "main.yml"
HOST_VARS = {"inventory_hostname": "w1", "ansible_host": "10.0.0.21", "ansible_connection": "winrm"}


class _ConnectionSetUp(TaskExecutor):
    """TaskExecutor with its task set directly: ansible-core 2.21 reads `_task` from the running task's context."""

    _task = None


def resolved_for(task_keywords, variables):
    """(connection, play context) as the task executor leaves them for a task with these keywords on a host with
    these variables: the play context overridden by the task and the magic variables, the become plugin set on a
    real winrm connection, and the connection's and become plugin's options set from the variables."""
    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader()
    loader = DataLoader()
    task = Task.load(dict(task_keywords, **{"ansible.builtin.debug": {"msg": "x"}}), loader=loader)
    templar = TemplateEngine(loader=loader, variables=variables)
    for keyword in task_keywords:
        setattr(task, keyword, task.post_validate_attribute(keyword, templar=templar))
    play_context = PlayContext().set_task_and_variable_override(task=task, variables=variables, templar=templar)
    connection = connection_loader.get("winrm", play_context, None)
    executor = _ConnectionSetUp.__new__(_ConnectionSetUp)  # only its connection set-up steps run, as in _execute
    executor._task, executor._play_context, executor._connection = task, play_context, connection
    executor._set_become_plugin(variables, templar, connection)
    executor._set_connection_options(variables, templar)
    return connection, play_context


def role_verify_task_keywords():
    """The become keywords of the role's own verify task, as written in its tasks/main.yml."""
    tasks = DataLoader().load_from_file(str(ROLE_TASKS), trusted_as_template=True)
    [verify] = [task for task in tasks if task.get("name") == "Verify the share's channels"]
    return {keyword: verify[keyword] for keyword in ("become", "become_method", "become_user")}


def run_resolved(make_action, gathered, task_keywords, variables):
    action, host = make_action(plugin, {"verify_share": SHARE}, {GATHER: [gathered("four_channels")]})
    action._connection, action._play_context = resolved_for(task_keywords, variables)
    return action.run(task_vars=variables), host


ROLE_VARS = dict(
    HOST_VARS,
    win_smb_multichannel_verify_become=True,
    win_smb_multichannel_verify_become_user="HPC\\svc-share",
    ansible_winrm_transport="ntlm",
)


def test_the_roles_own_verify_task_with_a_become_password_is_a_credential_path(gathered, make_action):
    keywords = role_verify_task_keywords()
    assert keywords["become_method"] == "ansible.builtin.runas"
    result, host = run_resolved(make_action, gathered, keywords, dict(ROLE_VARS, ansible_become_password="pw"))
    assert result["credential_path"] == "become_runas" and not result.get("failed")
    assert host.modules_called() == [GATHER, GATHER]


def test_the_roles_own_verify_task_without_a_become_password_is_refused_as_an_s4u_logon(gathered, make_action):
    result, host = run_resolved(make_action, gathered, role_verify_task_keywords(), ROLE_VARS)
    assert result["failed"] and result["credential_path"] == "become_runas_without_password"
    assert "runas without a password is an S4U logon" in result["msg"]
    assert host.modules_called() == [GATHER]


def test_become_set_in_the_inventory_is_a_credential_path(gathered, make_action):
    inventory = dict(
        HOST_VARS,
        ansible_winrm_transport="ntlm",
        ansible_become=True,
        ansible_become_method="runas",
        ansible_become_user="HPC\\svc-share",
        ansible_become_password="pw",
    )
    result, _host = run_resolved(make_action, gathered, {}, inventory)
    assert result["credential_path"] == "become_runas" and not result.get("failed")


def test_the_transport_is_read_from_the_connection_options(gathered, make_action):
    connection, _play_context = resolved_for({}, dict(HOST_VARS, ansible_winrm_transport="credssp"))
    assert connection.get_option("transport") == ["credssp"]
    action, _host = make_action(plugin, {"verify_share": SHARE}, {GATHER: [gathered("four_channels")]})
    action._connection, action._play_context = connection, _play_context
    result = action.run(task_vars={})  # nothing in the task vars: the connection's own option decides
    assert result["credential_path"] == "credssp" and not result.get("failed")
