# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Units shown to people: the one formatter for rates in bits per second, used by every module and the report.

Decimal prefixes, as link speeds are quoted (10GbE is 10 000 000 000 bit/s), at most two decimals and no trailing
zeros, so a link speed reads the way it is sold ("10 Gbit/s") and a measurement keeps its precision ("9.41 Gbit/s").
"""

from __future__ import annotations

RATE_PREFIXES = ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"))


def format_bits_per_second(bits_per_second: int | float | None) -> str:
    """9410000000 -> '9.41 Gbit/s', 10000000000 -> '10 Gbit/s', 950e6 -> '950 Mbit/s', None -> 'unknown'."""
    if bits_per_second is None:
        return "unknown"
    for factor, unit in RATE_PREFIXES:
        if abs(bits_per_second) >= factor:
            return f"{_two_decimals(bits_per_second / factor)} {unit}"
    return f"{_two_decimals(bits_per_second)} bit/s"


def _two_decimals(number: float) -> str:
    text = f"{number:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text
