# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One spelling of an IP address, wherever inventory text meets a table the kernel prints.

An operator may write ``fd00:0::1``, ``[fd00::1]`` or `` 198.18.0.11 ``; ipvsadm and ``ip -j addr`` print the
compressed form without brackets. Every lookup keyed by an address goes through here, so the two spellings meet.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Union

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


def parse_address(text: Any, prefix_allowed: bool = False) -> Address | None:
    """The address in ``text`` (surrounding blanks and IPv6 brackets ignored), or None when it is not one.

    With ``prefix_allowed`` a ``/len`` suffix is accepted and dropped (``198.18.0.100/32`` is 198.18.0.100).
    """
    spelled = str(text).strip().strip("[]")
    try:
        if prefix_allowed:
            return ipaddress.ip_interface(spelled).ip
        return ipaddress.ip_address(spelled)
    except ValueError:
        return None


def address_spelling(text: Any) -> str:
    """The compressed spelling of an address (fd00:0::1 -> fd00::1); text that is not an address, stripped."""
    address = parse_address(text)
    return str(address) if address is not None else str(text).strip()
