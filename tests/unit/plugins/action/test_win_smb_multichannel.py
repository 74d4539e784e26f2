"""hpc.balance.win_smb_multichannel action plugin: enable, constrain, verify channels with a bounded wait."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.hpc.balance.plugins.action import win_smb_multichannel as plugin
from ansible_collections.hpc.balance.plugins.modules import win_smb_multichannel as docs

GATHER = plugin.GATHER_MODULE
APPLY = plugin.APPLY_MODULE
SHARE = "\\\\fs01\\scratch"


@pytest.fixture
def gathered(windows_fixture):
    return lambda name: windows_fixture(f"smb_gather_{name}.json")


def test_enables_multichannel_then_verifies_more_than_one_channel(gathered, make_action):
    action, host = make_action(
        plugin,
        {"verify_share": SHARE},
        {GATHER: [gathered("disabled"), gathered("four_channels")], APPLY: [{"changed": True, "applied": []}]},
        diff=True,
    )
    result = action.run(task_vars={})
    assert host.modules_called() == [GATHER, APPLY, GATHER]
    assert host.calls[0][1] == {}  # preflight does not open the share
    assert host.calls[1][1] == {
        "changes": [
            {"action": "set_server_multichannel", "enable": True},
            {"action": "set_client_multichannel", "enable": True},
        ]
    }
    assert host.calls[2][1] == {"share": SHARE}
    assert result["changed"] and not result.get("failed")
    assert result["verdict"]["channels"] == 4
    assert result["diff"]["after"]["client_multichannel"] is True


def test_one_channel_after_the_wait_is_a_failure(gathered, make_action, clock):
    action, host = make_action(
        plugin,
        {"verify_share": SHARE, "wait_timeout_s": 20, "wait_delay_s": 5},
        {GATHER: [gathered("one_channel")]},
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
        assert set(documented.get("suboptions", {})) == set(spec.get("options", {})), name
