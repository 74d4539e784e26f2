# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lvs_director role's filters: fill in defaults once, then find mistakes across every director.

The model lives in module_utils, one room per job: ``_lvs_director_config`` resolves one host's role variables into a
complete config (the template renders only that), ``_lvs_director_problems`` reads the resolved configs of all
directors and returns ``{"errors": [...], "warnings": [...]}``, ``_lvs_director_scripts`` names the programs keepalived
would run. This file only exposes them as filters and turns a value that cannot be read into an AnsibleFilterError.
The filters' documentation is in the lvs_director_*.yml files beside this one.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_config import LvsDirectorConfigError, resolve
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_problems import problems
from ansible_collections.hpc.balance.plugins.module_utils._lvs_director_scripts import (
    script_lookups,
    script_paths,
    script_stat_command,
    script_stats,
)


def lvs_director_resolve(settings: Any) -> dict[str, Any]:
    """One director's role variables -> its complete config (every default filled in, numbers as numbers)."""
    try:
        return resolve(settings)
    except LvsDirectorConfigError as error:
        raise AnsibleFilterError(str(error)) from None


def lvs_director_problems(configs: list[dict[str, Any] | None], failed_hosts: list[str] | None = None,
                          left_out_hosts: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every mistake across the directors of a play: ``{"errors": [...], "warnings": [...]}``."""
    return problems(configs, failed_hosts=failed_hosts, left_out_hosts=left_out_hosts)


def lvs_director_script_paths(config: dict[str, Any]) -> list[dict[str, str]]:
    """Every program the config makes keepalived run, as [{"path", "key"}]."""
    return script_paths(config)


def lvs_director_script_lookups(config: dict[str, Any]) -> list[str]:
    """The paths the preflight looks at: each program the role does not deploy, and its folder."""
    return script_lookups(config)


def lvs_director_script_stat_command(paths: list[str]) -> list[str]:
    """The argument vector that reads every program and folder in one step (for hpc.balance.read_commands)."""
    return script_stat_command(paths)


def lvs_director_script_stats(read: dict[str, Any] | None, paths: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The outcome of that read -> {path: its facts, with the folders' above it}; a path it does not list is missing."""
    return script_stats(read, paths)


class FilterModule:
    """Filters of the lvs_director role."""

    def filters(self) -> dict[str, Any]:
        return {
            "lvs_director_resolve": lvs_director_resolve,
            "lvs_director_problems": lvs_director_problems,
            "lvs_director_script_lookups": lvs_director_script_lookups,
            "lvs_director_script_stat_command": lvs_director_script_stat_command,
            "lvs_director_script_stats": lvs_director_script_stats,
        }
