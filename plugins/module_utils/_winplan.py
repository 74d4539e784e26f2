# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every Windows-layer decision module shares: findings with a severity, the plan they gate, record helpers.

A plan is refused as soon as one finding has severity ``refuse``: nothing may change then, and the refusal message
lists every refusing finding. ``_winteam`` (NIC teams) and ``_winsmb`` (SMB Multichannel) both build on this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

REFUSE = "refuse"
WARN = "warn"
INFO = "info"


def as_list(value: object) -> list:
    """A list field as a list: a type-extension property may hold one item as a scalar, and none as null."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def quoted_names(items: list | tuple) -> str:
    """['a', 'b'] -> "'a', 'b'"; nothing -> 'none' (for messages)."""
    return ", ".join(f"'{item}'" for item in items) if items else "none"


@dataclass(frozen=True)
class Finding:
    severity: str  # refuse | warn | info
    code: str  # stable identifier, e.g. "mixed_link_speeds"
    message: str

    def as_dict(self) -> dict:
        return {"severity": self.severity, "code": self.code, "message": self.message}


def refusals(findings: list[Finding]) -> list[Finding]:
    return [finding for finding in findings if finding.severity == REFUSE]


@dataclass(frozen=True)
class Plan:
    findings: list
    changes: list

    @property
    def refused(self) -> bool:
        return bool(refusals(self.findings))

    def refusal_message(self) -> str:
        return "; ".join(finding.message for finding in refusals(self.findings))


def gated_plan(findings: list[Finding], plan_changes: Callable[[], list[dict]]) -> Plan:
    """Plan of the preflight findings and, when nothing is refused, plan_changes() (empty when refused)."""
    return Plan(findings=findings, changes=[] if refusals(findings) else plan_changes())
