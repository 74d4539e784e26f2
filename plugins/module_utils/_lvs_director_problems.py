# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's config model, second room: every mistake the preflight stops on, in one answer.

``problems`` reads the resolved configs (``_lvs_director_config.resolve``) of all directors of the play and returns
``{"errors": [...], "warnings": [...]}``, one sentence each, naming the host, the variable and the fix. The checks
live by concern: one director's settings (``_lvs_director_host_problems``), across directors
(``_lvs_director_peer_problems``), scripts (``_lvs_director_scripts``), virtual routes
(``_lvs_director_route_problems``). Directors against their real servers are
checked by ``_lvs_pool_problems``, in the play that sees both.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_findings import finding
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_host_problems import host_problems
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_peer_problems import (
    peer_problems,
    peer_warnings,
)


def problems(configs: list[dict[str, Any] | None] | None, failed_hosts: list[str] | None = None,
             left_out_hosts: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every mistake across the directors of a play: ``{"errors": [...], "warnings": [...]}``.

    Each entry is ``{"hosts": [...], "message": "..."}``: the hosts it concerns and one sentence naming the host, the
    variable and the fix. A run must stop on every director when ``errors`` is not empty.

    configs      -- resolved configs (from lvs_director_resolve), one per director; None entries are skipped
    failed_hosts -- hosts of the play that failed before the check (their settings cannot be checked)
    left_out_hosts -- directors of the inventory this run leaves out (--limit): the checks across directors cannot
                    see them, so every director of the run stops
    """
    present = [config for config in configs or [] if config]
    errors: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    for host in sorted(failed_hosts or []):
        errors.append(
            finding(
                [host], f"{host}: failed or was unreachable earlier in this play, so the checks across directors "
                "cannot see its settings; fix it (see its error above) or leave it out with --limit"
            )
        )
    left_out = sorted(set(left_out_hosts or []))
    if left_out:
        errors.append(
            finding(
                [config["host"] for config in present],
                f"{', '.join(left_out)} {'is' if len(left_out) == 1 else 'are'} in lvs_directors but not in this run "
                "(--limit), so the checks across directors (peers, VIPs, unicast lists, virtual servers) cannot see "
                f"{'it' if len(left_out) == 1 else 'them'} and a mismatch would split the pair; run on every director, "
                "or set lvs_director_allow_partial_run: true when the others are gone for good",
            )
        )
    for config in present:
        host_errors, host_warnings = host_problems(config)
        errors += host_errors
        warnings += host_warnings
    errors += peer_problems(present)
    warnings += peer_warnings(present)
    return {"errors": errors, "warnings": warnings}
