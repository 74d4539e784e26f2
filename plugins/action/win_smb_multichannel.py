# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of hpc.balance.win_smb_multichannel: gather -> plan (module_utils._winsmb) -> apply -> verify.

The Windows host only runs win_smb_multichannel_gather and win_smb_multichannel_apply; the decisions and the
channel verdict are made here. The share is opened only to verify, and only with a credential path that avoids the
WinRM double hop (become with runas and a password, CredSSP, or Kerberos delegation). This plugin reads it as Ansible
resolved it for the task and host: the become plugin set on the connection (task keywords or inventory
ansible_become_* alike), else the play context, and the connection plugin's own options.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._winplan import Plan
from ansible_collections.hpc.balance.plugins.module_utils._winsmb import (
    ChannelVerdict,
    SmbDesired,
    SmbState,
    channel_verdict,
    credential_path,
    parse_smb_state,
    plan,
)
from ansible_collections.hpc.balance.plugins.plugin_utils._win_action import WinPlanAction

GATHER_MODULE = "hpc.balance.win_smb_multichannel_gather"
APPLY_MODULE = "hpc.balance.win_smb_multichannel_apply"

ARGUMENT_SPEC = {
    "server_enabled": {"type": "bool", "default": True},
    "client_enabled": {"type": "bool", "default": True},
    "constraints": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "server_name": {"type": "str", "required": True},
            "interfaces": {"type": "list", "elements": "str", "required": True},
        },
    },
    "exclusive_constraints": {"type": "bool", "default": False},
    "verify_share": {"type": "str"},
    "min_channels": {"type": "int", "default": 2},
    "settle_s": {"type": "int", "default": 10},
    "rss_interfaces": {"type": "list", "elements": "str", "default": []},
    "preflight_only": {"type": "bool", "default": False},
    "wait_timeout_s": {"type": "int", "default": 60},
    "wait_delay_s": {"type": "int", "default": 5},
}

# Indirection so tests can drive the wait loop without sleeping.
_sleep = time.sleep
_monotonic = time.monotonic


def _option(plugin: Any, name: str) -> Any:
    """A plugin option, or None where the plugin has no such option (or is not a plugin)."""
    try:
        return plugin.get_option(name)
    except (AttributeError, KeyError):
        return None


def become_settings(connection: Any, play_context: Any) -> tuple[str | None, bool]:
    """(become method, whether a become password is set) as the task executor resolved them; method None: no become.

    The task executor sets the become plugin on the connection from the task keywords or the inventory's
    ansible_become / ansible_become_method (whichever is set), and passes the password to it; without a plugin
    there, the play context carries the same resolution.
    """
    plugin = getattr(connection, "become", None)
    if plugin is not None and hasattr(plugin, "get_option"):
        method = getattr(plugin, "ansible_name", None) or getattr(plugin, "name", None)
        return (str(method) if method else None), bool(_option(plugin, "become_pass"))
    if not getattr(play_context, "become", False):
        return None, False
    return getattr(play_context, "become_method", None), bool(getattr(play_context, "become_pass", None))


def transport_settings(connection: Any, task_vars: dict) -> tuple[list[str], bool]:
    """(authentication transports, Kerberos delegation) from the connection plugin's options (winrm: transport and
    the ansible_winrm_kerberos_delegation extra; psrp: auth and negotiate_delegate), else from the task vars."""
    transport = _option(connection, "transport") or _option(connection, "auth")
    extras = _option(connection, "_extras")
    delegation = _option(connection, "negotiate_delegate")
    if delegation is None and isinstance(extras, dict):
        delegation = extras.get("ansible_winrm_kerberos_delegation")
    if not isinstance(transport, (str, list, tuple)):
        transport = task_vars.get("ansible_winrm_transport") or task_vars.get("ansible_psrp_auth") or ""
    if delegation is None or not isinstance(delegation, (bool, str, int)):
        delegation = task_vars.get("ansible_winrm_kerberos_delegation") or task_vars.get(
            "ansible_psrp_negotiate_delegate"
        )
    transports = transport.split(",") if isinstance(transport, str) else [str(t) for t in transport]
    return [t.strip() for t in transports if t and t.strip()], str(delegation).lower() in ("true", "yes", "1", "on")


def _switches(state: SmbState) -> dict:
    return {
        "server_multichannel": state.server_multichannel,
        "client_multichannel": state.client_multichannel,
        "constraints": {server: list(aliases) for server, aliases in sorted(state.constraints.items())},
    }


class ActionModule(WinPlanAction):
    GATHER_MODULE = GATHER_MODULE
    APPLY_MODULE = APPLY_MODULE
    ARGUMENT_SPEC = ARGUMENT_SPEC
    DESIRED_TYPE = SmbDesired

    def _gather_args(self, desired: SmbDesired, verify: bool) -> dict:
        # The share is opened only once the configuration is right: preflight gathers without it.
        if not verify:
            return {}
        return {"share": desired.verify_share, "min_channels": desired.min_channels, "settle_s": desired.settle_s}

    def _parse(self, raw: dict) -> SmbState:
        return parse_smb_state(raw)

    def _desired(self, desired: SmbDesired, task_vars: dict) -> SmbDesired:
        method, password = become_settings(self._connection, self._play_context)
        transports, delegation = transport_settings(self._connection, task_vars)
        return replace(desired, credential_path=credential_path(method, password, transports, delegation))

    def _plan(self, desired: SmbDesired, state: SmbState) -> Plan:
        return plan(desired, state)

    def _report(self, desired: SmbDesired, state: SmbState) -> dict:
        return {"credential_path": desired.credential_path, "server_interfaces": list(state.server_interfaces)}

    def _diff(self, desired: SmbDesired, state: SmbState, changes: list[dict]) -> dict:
        after: dict[str, Any] = {
            "server_multichannel": desired.server_enabled,
            "client_multichannel": desired.client_enabled,
            "constraints": dict(_switches(state)["constraints"]),
        }
        for change in changes:
            if change["action"] == "remove_constraint":
                left = [a for a in after["constraints"].get(change["server_name"], []) if a not in change["interfaces"]]
                after["constraints"][change["server_name"]] = left
            elif change["action"] == "add_constraint":
                current = after["constraints"].setdefault(change["server_name"], [])
                current += [a for a in change["interfaces"] if a not in current]
        after["constraints"] = {k: sorted(v) for k, v in sorted(after["constraints"].items()) if v}
        return {"before": _switches(state), "after": after}

    def _needs_wait(self, desired: SmbDesired, changed: bool) -> bool:
        return bool(desired.verify_share)

    def _judge(self, desired: SmbDesired, state: SmbState) -> ChannelVerdict:
        return channel_verdict(desired, state)

    def _wait(self, desired: SmbDesired, state: Any, changed: bool, args: dict, task_vars: dict) -> tuple:
        if not desired.verify_share:
            return channel_verdict(desired, None), 0.0
        return super()._wait(desired, state, changed, args, task_vars)

    def _sleep(self, seconds: float) -> None:
        _sleep(seconds)

    def _monotonic(self) -> float:
        return _monotonic()
