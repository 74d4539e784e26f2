"""SMB Multichannel decisions on JSON in the documented shape of the Smb* / NetAdapterRss cmdlets' output."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._winsmb import (
    SmbDesired,
    _same_server,
    channel_verdict,
    credential_path,
    parse_smb_state,
    plan,
    share_server,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "windows"


def raw(name):
    return json.loads((FIXTURES / (f"smb_gather_{name}.json")).read_text())


def state(name):
    return parse_smb_state(raw(name))


def desired(credentials="become_runas", **args):
    """The desired state as the action plugin completes it: with the task's credential path (become runas here)."""
    return replace(SmbDesired.from_args(args), credential_path=credentials)


REFRESH = {"action": "update_connections"}


# ---------------------------------------------------------------------------------------------------- verdicts
def test_one_channel_is_a_failure_that_names_the_interface_without_rss():
    result = channel_verdict(desired(verify_share="\\\\fs01\\scratch"), state("one_channel"))
    assert not result.ok
    assert result.channels == 1
    assert result.message.startswith(
        "share \\\\fs01\\scratch connects over 1 channel ('Storage' 10.20.0.11 -> 10.20.0.2 x1), fewer than 2: "
        "multichannel is not in effect; interface 'Storage' is not RSS-capable"
    )
    assert "RSS is disabled on 'Storage'" in result.message


def test_more_than_one_channel_is_ok_and_reported():
    result = channel_verdict(desired(verify_share="\\\\fs01\\scratch"), state("four_channels"))
    assert (result.ok, result.channels) == (True, 4)
    assert result.message == "share \\\\fs01\\scratch connects over 4 channels ('Storage' 10.20.0.11 -> 10.20.0.2 x4)"
    assert [path["client_interface"] for path in result.paths] == ["Storage"]  # the unselected 1G path is left out


@pytest.mark.parametrize(("min_channels", "ok"), [(2, True), (4, True), (5, False)])
def test_min_channels_is_the_bar(min_channels, ok):
    result = channel_verdict(
        desired(verify_share="\\\\fs01\\scratch", min_channels=min_channels), state("four_channels")
    )
    assert result.ok is ok


def test_server_named_by_fqdn_matches_its_short_name():
    result = channel_verdict(desired(verify_share="\\\\FS01.hpc.example\\scratch"), state("four_channels"))
    assert result.ok


def test_no_connection_to_the_server_is_a_failure():
    result = channel_verdict(desired(verify_share="\\\\fs09\\scratch"), state("four_channels"))
    assert (result.ok, result.channels) == (False, 0)
    assert result.message.startswith("no SMB multichannel connection to 'fs09'")


def test_failed_channels_do_not_count():
    data = raw("four_channels")
    data["connections"][0]["Failed"] = True
    assert not channel_verdict(desired(verify_share="\\\\fs01\\scratch"), parse_smb_state(data)).ok


def test_unreachable_share_is_a_failure_with_the_error():
    data = raw("four_channels")
    data["share_probe"] = {"path": "\\\\fs01\\scratch", "reachable": False, "error": "Access is denied"}
    result = channel_verdict(desired(verify_share="\\\\fs01\\scratch"), parse_smb_state(data))
    assert (result.ok, result.message) == (
        False,
        "share \\\\fs01\\scratch is not reachable from this host: Access is denied",
    )


def test_without_verify_share_nothing_is_claimed():
    result = channel_verdict(desired(), state("one_channel"))
    assert result.ok and result.channels is None
    assert "not checked" in result.message


# ---------------------------------------------------------------------------------------------------- changes
CHANGE_CASES = [
    ("already_in_state", "four_channels", {}, []),
    (
        "enable_server_and_client",
        "disabled",
        {},
        [
            {"action": "set_server_multichannel", "enable": True},
            {"action": "set_client_multichannel", "enable": True},
            REFRESH,
        ],
    ),
    (
        "leave_server_off",
        "disabled",
        {"server_enabled": False},
        [{"action": "set_client_multichannel", "enable": True}, REFRESH],
    ),
    (
        "constraint_added",
        "four_channels",
        {"constraints": [{"server_name": "fs01", "interfaces": ["Storage"]}]},
        [{"action": "add_constraint", "server_name": "fs01", "interfaces": ["Storage"]}, REFRESH],
    ),
    (
        "constraint_interface_swapped_adds_before_removing",
        "disabled",
        {
            "server_enabled": False,
            "client_enabled": False,
            "constraints": [{"server_name": "FS02", "interfaces": ["Storage"]}],
        },
        [
            {"action": "add_constraint", "server_name": "FS02", "interfaces": ["Storage"]},
            {"action": "remove_constraint", "server_name": "fs02", "interfaces": ["MGMT"]},
            REFRESH,
        ],
    ),
    (
        "constraint_already_there",
        "disabled",
        {
            "server_enabled": False,
            "client_enabled": False,
            "constraints": [{"server_name": "fs02", "interfaces": ["MGMT"]}],
        },
        [],
    ),
]


@pytest.mark.parametrize(
    ("fixture", "args", "expected"), [c[1:] for c in CHANGE_CASES], ids=[c[0] for c in CHANGE_CASES]
)
def test_plan_is_the_smallest_change(fixture, args, expected):
    result = plan(desired(**args), state(fixture))
    assert not result.refused, result.refusal_message()
    assert result.changes == expected


def test_constraint_on_an_unknown_interface_is_refused():
    result = plan(desired(constraints=[{"server_name": "fs01", "interfaces": ["Storag"]}]), state("four_channels"))
    assert result.refused and result.changes == []
    assert result.refusal_message().startswith("constraint for server 'fs01' names interface 'Storag' not on this host")


def test_verify_without_client_multichannel_is_refused():
    result = plan(desired(client_enabled=False, verify_share="\\\\fs01\\scratch"), state("four_channels"))
    assert [f.code for f in result.findings if f.severity == "refuse"] == ["verify_needs_client"]


# ---------------------------------------------------------------------------------------------------- double hop
def test_verify_share_without_a_credential_path_is_refused_as_a_double_hop():
    result = plan(desired(credentials="none", verify_share="\\\\fs01\\scratch"), state("disabled"))
    assert [f.code for f in result.findings if f.severity == "refuse"] == ["verify_double_hop"]
    assert result.changes == []


@pytest.mark.parametrize("credentials", ["become_runas", "credssp", "kerberos_delegation"])
def test_verify_share_with_a_credential_path_is_planned(credentials):
    result = plan(desired(credentials=credentials, verify_share="\\\\fs01\\scratch"), state("disabled"))
    assert not result.refused and result.changes[-1] == REFRESH


@pytest.mark.parametrize(
    ("method", "password", "transports", "delegation", "path"),
    [
        ("runas", True, ["ntlm"], False, "become_runas"),
        ("ansible.builtin.runas", True, ["ntlm"], False, "become_runas"),
        ("ansible.builtin.runas", False, ["ntlm"], False, "become_runas_without_password"),
        ("runas", False, ["credssp"], False, "become_runas_without_password"),  # the S4U logon has no credentials
        (None, False, ["credssp"], False, "credssp"),
        (None, False, ["kerberos"], True, "kerberos_delegation"),
        (None, False, ["kerberos"], False, "none"),
        (None, False, ["ntlm"], False, "none"),
        (None, False, [], False, "none"),
    ],
)
def test_credential_path_is_read_from_become_and_the_transport(method, password, transports, delegation, path):
    assert credential_path(method, password, transports, delegation) == path


def test_a_runas_become_without_a_password_is_refused_naming_the_s4u_logon():
    result = plan(
        desired(credentials="become_runas_without_password", verify_share="\\\\fs01\\scratch"), state("disabled")
    )
    [finding] = [f for f in result.findings if f.severity == "refuse"]
    assert finding.code == "verify_double_hop" and result.changes == []
    assert "no become password is set: runas without a password is an S4U logon" in finding.message
    assert "ansible_become_password" in finding.message


# ---------------------------------------------------------------------------------------------------- server side, RDMA
def test_constraint_named_differently_from_an_existing_one_is_warned_about():
    result = plan(
        desired(
            server_enabled=False,
            client_enabled=False,
            constraints=[{"server_name": "FS02.hpc.example", "interfaces": ["MGMT"]}],
        ),
        state("disabled"),
    )
    assert "constraint_name_variant" in [f.code for f in result.findings]


def test_server_interface_without_rss_or_rdma_is_warned_about():
    data = raw("four_channels")
    data["server_interfaces"][0]["RssCapable"] = False
    result = plan(desired(), parse_smb_state(data))
    assert [f.code for f in result.findings] == ["server_interface_single_channel"]


def test_lbfo_team_nic_over_rdma_members_loses_smb_direct():
    data = raw("four_channels")
    for record in data["rdma"]:
        record["Enabled"] = True
    result = plan(desired(rss_interfaces=["Storage"]), parse_smb_state(data))
    finding = next(f for f in result.findings if f.code == "lbfo_no_smb_direct")
    assert "'NIC1', 'NIC2'" in finding.message


def test_rss_check_on_named_interfaces_warns():
    result = plan(desired(rss_interfaces=["Storage"]), state("one_channel"))
    assert sorted(f.code for f in result.findings) == ["interface_not_rss_capable", "rss_disabled"]
    assert not result.refused


# ---------------------------------------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"verify_share": "fs01/scratch"}, "verify_share is 'fs01/scratch': give a UNC share path"),
        ({"verify_share": "\\\\fs01"}, "give a UNC share path"),
        ({"min_channels": 1}, "min_channels is 1: multichannel means at least 2 channels"),
        ({"constraints": [{"server_name": "", "interfaces": ["NIC1"]}]}, r"constraints\[0\].server_name is empty"),
        ({"constraints": [{"server_name": "fs01", "interfaces": []}]}, "lists no interfaces"),
        (
            {
                "constraints": [
                    {"server_name": "fs01", "interfaces": ["A"]},
                    {"server_name": "FS01", "interfaces": ["B"]},
                ]
            },
            "constraints name server 'FS01' twice",
        ),
    ],
)
def test_arguments_are_checked(args, message):
    with pytest.raises(ValueError, match=message):
        desired(**args)


@pytest.mark.parametrize(
    ("path", "server"), [("\\\\fs01\\scratch", "fs01"), ("//fs01.hpc.example/data/sub", "fs01.hpc.example")]
)
def test_share_server(path, server):
    assert share_server(path) == server


# ---------------------------------------------------------------------------------------------------- idempotence
def apply_smb(state, changes):
    """What each SMB change does to the recorded state (Set-Smb*Configuration, New-/Remove-SmbMultichannelConstraint;
    Update-SmbMultichannelConnection changes no setting): the oracle of the idempotence test below."""
    server, client = state.server_multichannel, state.client_multichannel
    constraints = {name: set(aliases) for name, aliases in state.constraints.items()}
    for change in changes:
        if change["action"] == "set_server_multichannel":
            server = change["enable"]
        elif change["action"] == "set_client_multichannel":
            client = change["enable"]
        elif change["action"] == "add_constraint":
            constraints.setdefault(change["server_name"], set()).update(change["interfaces"])
        elif change["action"] == "remove_constraint":
            left = constraints.get(change["server_name"], set()) - set(change["interfaces"])
            constraints[change["server_name"]] = left
    return replace(
        state,
        server_multichannel=server,
        client_multichannel=client,
        constraints={name: tuple(sorted(aliases)) for name, aliases in constraints.items() if aliases},
    )


SMB_KINDS = {
    "defaults": {},
    "server_off": {"server_enabled": False},
    "client_off": {"client_enabled": False, "server_enabled": False},
    "constraint": {"constraints": [{"server_name": "fs01", "interfaces": ["Storage"]}]},
    "constraint_fqdn": {"constraints": [{"server_name": "fs02.hpc.example", "interfaces": ["MGMT"]}]},
    "constraint_swap": {"constraints": [{"server_name": "FS02", "interfaces": ["Storage", "NIC3"]}]},
    "exclusive": {"exclusive_constraints": True, "constraints": [{"server_name": "fs01", "interfaces": ["NIC1"]}]},
    "exclusive_none": {"exclusive_constraints": True},
}


@pytest.mark.parametrize("kind", sorted(SMB_KINDS))
@pytest.mark.parametrize("fixture", ["one_channel", "four_channels", "disabled"])
def test_plan_of_the_applied_smb_plan_is_empty(fixture, kind):
    recorded = state(fixture)
    wanted = desired(**SMB_KINDS[kind])
    first = plan(wanted, recorded)
    assert plan(wanted, apply_smb(recorded, first.changes)).changes == []


# ---------------------------------------------------------------------------------------------------- one server?
@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        ("fs01", "FS01", True),
        ("fs01", "fs01.hpc.example", True),  # a short name: its domain is unknown here
        ("fs01.hpc.example.", "FS01.hpc.example", True),
        ("fs01.site-a.example", "fs01.site-b.example", False),  # two FQDNs: the whole name decides
        ("fs01.site-a", "fs01", True),
        ("10.9.9.9", "10.0.0.5", False),  # an address is compared whole, never by its first octet
        ("10.0.0.5", "10.0.0.5", True),
        ("10.0.0.5", "10", False),
        ("10.0.0.5", "fs01", False),  # nothing resolves names here
        ("2001:db8::5", "2001-db8--5.ipv6-literal.net", True),  # the UNC form of an IPv6 address
        ("2001:db8::5", "2001:db8::6", False),
        ("fs01", "fs02.hpc.example", False),
        ("", "fs01", False),
    ],
)
def test_same_server_compares_whole_names_and_addresses(one, other, same):
    assert _same_server(one, other) is same
    assert _same_server(other, one) is same


def _connections_to(server_name):
    data = raw("four_channels")
    for record in data["connections"]:
        record["ServerName"] = server_name
    return parse_smb_state(data)


@pytest.mark.parametrize(
    ("share", "server_name"),
    [("\\\\10.9.9.9\\scratch", "10.0.0.5"), ("\\\\fs01.site-a.example\\scratch", "fs01.site-b.example")],
)
def test_channels_to_another_server_are_not_counted_for_the_share(share, server_name):
    verdict = channel_verdict(desired(verify_share=share), _connections_to(server_name))
    assert not verdict.ok and verdict.channels == 0
    assert verdict.message.startswith("no SMB multichannel connection to ")


def test_channels_by_the_short_name_count_for_the_fqdn_share():
    verdict = channel_verdict(desired(verify_share="\\\\fs01.hpc.example\\scratch"), _connections_to("FS01"))
    assert verdict.ok and verdict.channels == 4
