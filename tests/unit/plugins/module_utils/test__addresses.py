"""One address spelling for inventory text and kernel tables (module_utils/_addresses.py)."""

import ipaddress

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._addresses import address_spelling, parse_address


@pytest.mark.parametrize(
    "text, spelled",
    [
        # ipvsadm -Ln and `ip -j addr` print IPv6 compressed, lower case, without brackets (RFC 5952 form).
        ("fd00:0:0::1", "fd00::1"),
        ("[FD00::1]", "fd00::1"),
        (" 198.18.0.11 ", "198.18.0.11"),
        ("urs1.lab", "urs1.lab"),
    ],
)
def test_address_spelling(text, spelled):
    assert address_spelling(text) == spelled


def test_parse_address_refuses_a_prefix_unless_allowed():
    assert parse_address("198.18.0.100/32") is None
    assert parse_address("198.18.0.100/32", prefix_allowed=True) == ipaddress.ip_address("198.18.0.100")
    assert parse_address("fd00::100/128", prefix_allowed=True) == ipaddress.ip_address("fd00::100")
    assert parse_address(None) is None
    assert parse_address("not an address") is None
