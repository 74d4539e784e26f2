"""How long ipvs_spread takes on a director with thousands of real servers: parsing (fast path and its regex
reference) and the spread against the weights, as the module runs them.

Run from the repository root with the collection on the import path:

    PYTHONPATH=<dir holding ansible_collections/hpc/balance> python tests/perf/bench_ipvs_spread.py [1000 5000 ...]
    ... bench_ipvs_spread.py --quick     (one small table, one run: what `make check` runs so the script cannot rot)

The tables are written in the exact layouts of the kernel and ipvsadm (tests/unit/.../ipvs_tables.py): one service,
weights 1/2/3, counters in the 10^15 range. The regex references are in ipvs_reference.py beside it. Prints the best
of several runs per step, in milliseconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "plugins" / "module_utils"))

import ipvs_tables  # noqa: E402
from ipvs_reference import reference_parse_ipvsadm, reference_parse_proc_ip_vs  # noqa: E402

from ansible_collections.hpc.balance.plugins.module_utils._ipvs import (  # noqa: E402
    merge_ipvsadm,
    parse_ipvsadm,
    parse_proc_ip_vs,
)
from ansible_collections.hpc.balance.plugins.module_utils._ipvs_grading import report_service  # noqa: E402

REPEATS = 5
THRESHOLD_PERCENT = 15.0


def best_ms(function, *args, repeats=REPEATS):
    best = float("inf")
    for _i in range(repeats):
        started = time.perf_counter()
        function(*args)
        best = min(best, time.perf_counter() - started)
    return 1000.0 * best


def spread(table, metric):
    """Grade every service as the module does for one reading (no rate window)."""
    options = {"metric": metric, "has_counters": metric != "current_conns", "window_s": 0.0,
               "threshold_percent": THRESHOLD_PERCENT, "names": {}}
    for service in table["services"]:
        report_service(service, options, lambda message: None)


def merged(listing_text, stats_text):
    return merge_ipvsadm(parse_ipvsadm(listing_text), parse_ipvsadm(stats_text))


def reference_both(listing_text, stats_text):
    return reference_parse_ipvsadm(listing_text), reference_parse_ipvsadm(stats_text)


def proc_end_to_end(proc_text):
    spread(parse_proc_ip_vs(proc_text), "current_conns")


def ipvsadm_end_to_end(listing_text, stats_text):
    spread(merged(listing_text, stats_text), "conns")


def main(sizes, repeats):
    print(f"{'real servers':>12} {'proc parse':>11} {'proc ref':>9} {'ipvsadm 2x+merge':>17} {'ipvsadm ref':>12} "
          f"{'spread':>7} {'proc total':>11} {'ipvsadm total':>14}   (ms, best of {repeats})")
    for size in sizes:
        tables = [ipvs_tables.big_service(size)]
        proc_text = ipvs_tables.proc_ip_vs(tables)
        listing_text = ipvs_tables.ipvsadm_list(tables)
        stats_text = ipvs_tables.ipvsadm_stats(tables)
        proc_ms = best_ms(parse_proc_ip_vs, proc_text, repeats=repeats)
        proc_ref_ms = best_ms(reference_parse_proc_ip_vs, proc_text, repeats=repeats)
        adm_ms = best_ms(merged, listing_text, stats_text, repeats=repeats)
        adm_ref_ms = best_ms(reference_both, listing_text, stats_text, repeats=repeats)
        table = merged(listing_text, stats_text)
        spread_ms = best_ms(spread, table, "conns", repeats=repeats)
        proc_total = best_ms(proc_end_to_end, proc_text, repeats=repeats)
        adm_total = best_ms(ipvsadm_end_to_end, listing_text, stats_text, repeats=repeats)
        print(f"{size:>12} {proc_ms:>11.1f} {proc_ref_ms:>9.1f} {adm_ms:>17.1f} {adm_ref_ms:>12.1f} {spread_ms:>7.1f} "
              f"{proc_total:>11.1f} {adm_total:>14.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="*", default=[1000, 5000], help="real servers per table")
    parser.add_argument("--quick", action="store_true", help="one table of 200 real servers, one run (a smoke run)")
    arguments = parser.parse_args()
    if arguments.quick:
        main([200], repeats=1)
    else:
        main(arguments.sizes, repeats=REPEATS)
