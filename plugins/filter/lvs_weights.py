# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""LVS weights from measured capacity: the network half of playbooks/rebalance.yml.

wrr and wlc send each real server a share of the new connections in proportion to its weight, so a pool of unequal
servers at equal weights overloads the small ones. The weights here are the servers' measured capacities (iperf3
throughput, vCPU count, or a figure the operator gives) scaled to whole numbers, and they change only when the shares
move by more than a hysteresis: a re-measurement with a little noise rewrites nothing and reloads nothing.

The weights are the smallest whole numbers that give every server its share within a tolerance. wrr (ip_vs_wrr.c)
steps its current weight down from the largest weight by the weights' gcd, so 100:19 sends 81 connections in a row to
the first server in each cycle of 119, while 5:1 (the same shares within 0.7 points) mixes them in a cycle of 6: any
window of a few hundred connections then shows the shares the weights ask for, and an audit grades it so.

Not every scheduler splits by weight (module_utils/_ipvs_grading.py says which and why): rr, lc and dh only ask
whether a weight is above 0, fo and ovf use the weights as an order. New weights give such a service no new shares,
so the plan names it in ``skipped`` instead of claiming shares for it, keeps the weights when no service splits by
weight, and refuses to reorder an fo or ovf service by moving the weights of its real servers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.hpc.balance.plugins.module_utils._addresses import address_spelling
from ansible_collections.hpc.balance.plugins.module_utils._ipvs_grading import weights_set_no_shares

# The largest weight handed out: fine enough for a 1 % share step, far below IPVS's 65535.
DEFAULT_MAX_WEIGHT = 100
# Shares that move by less than this many percentage points leave the weights as they are.
DEFAULT_MIN_CHANGE_PERCENT = 5.0
# One run moves no server's share by more than this many percentage points; the next run moves on from there.
DEFAULT_MAX_SHARE_STEP_PERCENT = 50.0
# Capacities further apart than this (largest / smallest) read as a failed measurement, not as a real pool.
DEFAULT_MAX_CAPACITY_RATIO = 20.0
# The smallest weights whose shares are within this many percentage points of the capacities' shares are used.
DEFAULT_SHARE_TOLERANCE_PERCENT = 1.0
# ipvsadm accepts weights 0-65535 (ipvsadm(8) --weight); 0 would drain, which is the drain playbook's job.
WEIGHT_RANGE = (1, 65535)
# The lvs_director role's scheduler when a virtual server names none.
DEFAULT_SCHEDULER = "wlc"
# Schedulers that read the weights as an order or a cap (ip_vs_fo.c, ip_vs_ovf.c): moving them changes which real
# server takes the connections.
ORDER_SCHEDULERS = ("fo", "ovf")


def _capacity(name: str, value: Any) -> int | float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(
            f"lvs_weights: the capacity of {name} is {value!r}, not a number; measure it again or give it by hand "
            "(hpc_balance_rebalance_lvs_capacity)"
        ) from None
    if not math.isfinite(number) or number <= 0:
        raise AnsibleFilterError(
            f"lvs_weights: the capacity of {name} is {value!r}; a serving real server needs a capacity above 0 "
            "(drain a server that cannot serve with playbooks/lvs_drain.yml instead)"
        )
    return int(number) if number.is_integer() else number  # 8 vCPUs read as 8, not 8.0


def _shares(weights: Mapping[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {name: (weight / total if total else 0.0) for name, weight in weights.items()}


def _scaled(measured: dict[str, int | float], top_weight: int) -> dict[str, int]:
    """The largest capacity gets top_weight, the others in proportion, rounded, at least 1."""
    largest = max(measured.values())
    return {name: max(WEIGHT_RANGE[0], round(top_weight * value / largest)) for name, value in measured.items()}


def _smallest_weights(measured: dict[str, int | float], max_weight: int,
                      tolerance_percent: float) -> dict[str, int]:
    """The weights of the smallest top weight (1 .. max_weight) whose shares are all within the tolerance of the
    capacities' shares; max_weight's when none is (or the tolerance is 0)."""
    wanted = _shares(measured)
    if tolerance_percent > 0:
        for top_weight in range(1, max_weight):
            weights = _scaled(measured, top_weight)
            shares = _shares(weights)
            if max(abs(shares[name] - wanted[name]) for name in measured) * 100.0 <= tolerance_percent:
                return weights
    return _scaled(measured, max_weight)


def _check_spread(measured: dict[str, int | float], max_capacity_ratio: float) -> None:
    """Refuse capacities so far apart that one of them is more likely a failed test than a real server."""
    largest, smallest = max(measured, key=measured.__getitem__), min(measured, key=measured.__getitem__)
    ratio = measured[largest] / measured[smallest]
    if ratio > max_capacity_ratio:
        raise AnsibleFilterError(
            f"lvs_weights: {smallest} measured {measured[smallest]:g} and {largest} {measured[largest]:g}, "
            f"{ratio:.1f} times as much (more than max_capacity_ratio {max_capacity_ratio:g}); a measurement this far "
            "apart is more often a failed test (a busy link, a test cut short) than a real pool, and the weights would "
            f"send {smallest} almost nothing. Measure again, drain a server that cannot serve "
            "(playbooks/lvs_drain.yml), or raise hpc_balance_rebalance_lvs_max_capacity_ratio"
        )


def _stepped_toward(before: dict[str, float], target: dict[str, float],
                    step_percent: float) -> tuple[dict[str, float], bool]:
    """(shares moved from ``before`` toward ``target`` by one factor for every server, so that none moves by more
    than step_percent points (the same factor keeps the shares summing to 1), whether they stop short of it)."""
    largest = max(abs(target[name] - before[name]) for name in target) * 100.0
    if largest <= step_percent + 1e-9:  # float sums: 0.7 + 0.2 is a hair above 0.9
        return target, False
    factor = step_percent / largest
    return {name: before[name] + factor * (target[name] - before[name]) for name in target}, True


def _service_name(server: dict[str, Any]) -> str:
    """'TCP 198.18.0.100:80' for one of lvs_director_virtual_servers (IPv6 in brackets)."""
    address = address_spelling(server.get("address"))
    host = f"[{address}]" if ":" in address else address
    return f"{str(server.get('protocol') or 'TCP').upper()} {host}:{server.get('port')}"


def _services_by_split(virtual_servers: Any) -> tuple[list[str], list[str], list[tuple[str, str, set[str]]]]:
    """(names of the services that split by weight, a note per service that does not, (name, scheduler, real server
    addresses) of those that use the weights as an order)."""
    if virtual_servers in (None, ""):
        return [], [], []
    if not isinstance(virtual_servers, list) or not all(isinstance(server, dict) for server in virtual_servers):
        raise AnsibleFilterError("lvs_weights: virtual_servers must be the list lvs_director_virtual_servers holds")
    weighted, skipped, ordered = [], [], []
    for server in virtual_servers:
        name = _service_name(server)
        scheduler = str(server.get("lvs_sched") or DEFAULT_SCHEDULER)
        why = weights_set_no_shares(scheduler)
        if why is None:
            weighted.append(name)
            continue
        skipped.append(f"{name} ({scheduler}) skipped: {why}, so new weights give it no new shares")
        if scheduler in ORDER_SCHEDULERS:
            addresses = {address_spelling(real.get("address")) for real in server.get("real_servers") or []
                         if isinstance(real, dict)}
            ordered.append((name, scheduler, addresses))
    return weighted, skipped, ordered


def _refuse_reordering(ordered: list[tuple[str, str, set[str]]], moved: set[str]) -> None:
    """Refuse new weights for real servers of a service that reads its weights as an order (fo, ovf)."""
    for name, scheduler, addresses in ordered:
        touched = sorted(addresses & moved)
        if touched:
            raise AnsibleFilterError(
                f"lvs_weights: {name} uses {scheduler}, which reads the weights as an order, not as shares "
                f"({weights_set_no_shares(scheduler)}); the new weights of {', '.join(touched)} would change which "
                f"real server takes its connections. Give it real servers of its own or a weighted scheduler "
                f"(wrr, wlc), or rebalance without a capacity source (none)"
            )


def lvs_weights(capacities: dict[str, Any], current: dict[str, Any] | None = None,
                max_weight: int = DEFAULT_MAX_WEIGHT,
                min_change_percent: float = DEFAULT_MIN_CHANGE_PERCENT,
                share_tolerance_percent: float = DEFAULT_SHARE_TOLERANCE_PERCENT,
                virtual_servers: list[dict[str, Any]] | None = None,
                max_share_step_percent: float = DEFAULT_MAX_SHARE_STEP_PERCENT,
                max_capacity_ratio: float = DEFAULT_MAX_CAPACITY_RATIO) -> dict[str, Any]:
    """{real server: capacity} -> the plan ``{weights, before, after, change_percent, changed, reason}``.

    capacities         -- measured capacity per real server (any unit, the same for all: bit/s, vCPUs, requests/s)
    current            -- {real server: weight} in use now; missing servers count as weight 1
    max_weight         -- the largest weight handed out; the largest capacity gets it, or less (see below)
    min_change_percent -- hysteresis: when no server's share moves by more than this many percentage points, the
                          current weights are kept (changed false)
    share_tolerance_percent -- the smallest weights whose shares are all within this many percentage points of the
                          capacities' shares are proposed (0: the largest capacity gets max_weight, as before)
    virtual_servers    -- lvs_director_virtual_servers (lvs_sched, real_servers): a service whose scheduler does not
                          split by weight is named in ``skipped``; when none does, the weights are kept; an fo or ovf
                          service whose real servers' weights would move is refused (None or []: all split by weight)
    max_share_step_percent -- one run moves no share by more than this many points: a larger move goes part of the
                          way (``stepped`` true), and the next run, measuring again, goes on
    max_capacity_ratio -- capacities further apart than this (largest / smallest) are refused as a bad measurement

    ``before`` and ``after`` are the shares in percent; ``weights`` is what to apply (the current ones when unchanged).
    """
    if not isinstance(capacities, dict) or not capacities:
        raise AnsibleFilterError("lvs_weights: no capacity was measured; give {real server: capacity}")
    try:
        max_weight = int(max_weight)
        min_change_percent = float(min_change_percent)
        share_tolerance_percent = float(share_tolerance_percent)
        max_share_step_percent = float(max_share_step_percent)
        max_capacity_ratio = float(max_capacity_ratio)
    except (TypeError, ValueError):
        raise AnsibleFilterError(
            "lvs_weights: max_weight must be a whole number; min_change_percent, share_tolerance_percent, "
            "max_share_step_percent and max_capacity_ratio numbers"
        ) from None
    if not 0 < max_share_step_percent <= 100:
        raise AnsibleFilterError(
            f"lvs_weights: max_share_step_percent is {max_share_step_percent:g}; "
            "use more than 0 and at most 100, e.g. 50"
        )
    if not max_capacity_ratio >= 1:
        raise AnsibleFilterError(f"lvs_weights: max_capacity_ratio is {max_capacity_ratio:g}; use 1 or more, e.g. 20")
    if not WEIGHT_RANGE[0] <= max_weight <= WEIGHT_RANGE[1]:
        raise AnsibleFilterError(f"lvs_weights: max_weight is {max_weight}; use 1 to {WEIGHT_RANGE[1]}, e.g. 100")
    if min_change_percent < 0:
        raise AnsibleFilterError(f"lvs_weights: min_change_percent is {min_change_percent:g}; use 0 or more, e.g. 5")
    if not 0 <= share_tolerance_percent <= 100:
        raise AnsibleFilterError(
            f"lvs_weights: share_tolerance_percent is {share_tolerance_percent:g}; use 0 to 100, e.g. 1"
        )
    weighted, skipped, ordered = _services_by_split(virtual_servers)
    measured = {str(name): _capacity(str(name), value) for name, value in capacities.items()}
    _check_spread(measured, max_capacity_ratio)
    in_use = {name: int((current or {}).get(name, 1)) for name in measured}
    before = _shares(in_use)
    target, stepped = _stepped_toward(before, _shares(measured), max_share_step_percent)
    proposed = _smallest_weights(target, max_weight, share_tolerance_percent)
    after = _shares(proposed)
    change = max(abs(after[name] - before[name]) for name in measured) * 100.0
    splits_by_weight = bool(weighted) or not skipped
    if not splits_by_weight:
        changed = False
        reason = "no virtual service splits new connections by weight, so new weights would give no new shares: kept"
    elif change > min_change_percent:
        changed = True
        reason = f"the shares move by up to {change:.1f} points (more than {min_change_percent:g})" + (
            f"; one run moves a share by at most {max_share_step_percent:g} points, so a later run goes on"
            if stepped else "")
    else:
        changed = False
        reason = f"the shares would move by {change:.1f} points at most (not more than {min_change_percent:g}): kept"
    if changed:
        _refuse_reordering(ordered, {address_spelling(name) for name in measured if proposed[name] != in_use[name]})
    return {
        "weights": proposed if changed else in_use,
        "proposed": proposed,
        "capacities": measured,
        "before": {name: round(share * 100.0, 1) for name, share in before.items()},
        "after": {name: round(share * 100.0, 1) for name, share in (after if changed else before).items()},
        "change_percent": round(change, 1),
        "changed": changed,
        "reason": reason,
        "skipped": skipped,
        "splits_by_weight": splits_by_weight,
        "stepped": bool(changed and stepped),
    }


class FilterModule:
    """LVS weights from measured capacity."""

    def filters(self) -> dict[str, Any]:
        return {"lvs_weights": lvs_weights}
