"""The one rate formatter: decimal prefixes, at most two decimals, no trailing zeros, and None as 'unknown'."""

from __future__ import annotations

import pytest

from ansible_collections.hpc.balance.plugins.module_utils._units import format_bits_per_second


@pytest.mark.parametrize(("value", "text"), [
    (10_000_000_000, "10 Gbit/s"), (9_410_000_000, "9.41 Gbit/s"), (9.6e9, "9.6 Gbit/s"), (950e6, "950 Mbit/s"),
    (1.5e12, "1.5 Tbit/s"), (12_000, "12 kbit/s"), (12, "12 bit/s"), (0, "0 bit/s"), (999.999, "1000 bit/s"),
    (2_684_354_560.0, "2.68 Gbit/s"), (None, "unknown"),
])
def test_rates_read_as_link_speeds_are_quoted(value, text):
    assert format_bits_per_second(value) == text


def test_the_windows_layer_has_no_formatter_of_its_own():
    from ansible_collections.hpc.balance.plugins.module_utils import _winteam_findings, _winteam_state

    assert not hasattr(_winteam_state, "format_bits_per_second")
    assert _winteam_findings.format_bits_per_second is format_bits_per_second
