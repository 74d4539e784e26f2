"""hpc.balance.win_smb_multichannel action plugin: enable, constrain, refresh, verify channels with a bounded wait."""

from __future__ import annotations

import pytest
import yaml

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
        {"command": "Update-SmbMultichannelConnection", "parameters": {}}
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
