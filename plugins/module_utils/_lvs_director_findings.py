# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every lvs_director check returns: a finding names the hosts it stops and one sentence with the fix.

Shared by the checks of one director (``_lvs_director_host_problems``), across directors
(``_lvs_director_peer_problems``) and across directors and real servers (``_lvs_pool_problems``).
"""

from __future__ import annotations

from typing import Any

PRIORITY_RANGE = (1, 255)
FAMILY_NAMES: dict[int | None, str] = {4: "IPv4", 6: "IPv6"}


def finding(hosts: list[str], message: str) -> dict[str, Any]:
    """One finding: the hosts it concerns (each of them stops on it) and the sentence that names the fix."""
    return {"hosts": sorted(set(hosts)), "message": message}


def vip_address(address: str) -> str:
    """A VIP as written in the config (``198.18.0.100/32``) without its prefix length."""
    return address.split("/")[0]
