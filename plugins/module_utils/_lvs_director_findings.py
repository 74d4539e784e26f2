# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every lvs_director check returns: a finding names the hosts it stops and one sentence with the fix.

Shared by the checks of one director (``_lvs_director_host_problems`` and the VRRP, virtual server and route checks
it calls), across directors (``_lvs_director_peer_problems``) and across directors and real servers
(``_lvs_pool_problems``), with the small value tests they have in common.
"""

from __future__ import annotations

from typing import Any

PRIORITY_RANGE = (1, 255)
FAMILY_NAMES: dict[int | None, str] = {4: "IPv4", 6: "IPv6"}
# An unquoted # or ! starts a comment in keepalived's parser (the template quotes such values); a " ends a quoted
# string and cannot be escaped in most keywords, a newline ends the line: values with these are refused.
UNQUOTABLE_CHARS = ('"', "\\", "\n", "\r")


def finding(hosts: list[str], message: str) -> dict[str, Any]:
    """One finding: the hosts it concerns (each of them stops on it) and the sentence that names the fix."""
    return {"hosts": sorted(set(hosts)), "message": message}


def vip_address(address: str) -> str:
    """A VIP as written in the config (``198.18.0.100/32``) without its prefix length."""
    return address.split("/")[0]


def out_of_range(value: Any, low: float, high: float | None = None) -> bool:
    """A given number below ``low`` or above ``high`` (None: not given, never out of range)."""
    return value is not None and (value < low or (high is not None and value > high))


def whole_positive(value: Any) -> bool:
    return isinstance(value, int) and value >= 1


def unquotable(value: Any) -> bool:
    """Whether keepalived's parser cannot read ``value`` back, quoted or not."""
    return any(char in str(value) for char in UNQUOTABLE_CHARS)
