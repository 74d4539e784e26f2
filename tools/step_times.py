"""Wall time of each step of `make test` and `make check`, printed as one table at the end, pass or fail.

CI's limit is a budget: the table shows where it went (each make step, each molecule scenario and the phases inside
it), so a slow step is seen in the run that made it slow. Beside each step's wall time: `cpu`, the CPU time of the
step's own processes (user + system, of every process it waited for; a lab's guests run apart and are not in it), and
`busy`, how busy all of the machine's cores were while it ran (/proc/stat, every lane and guest included): a step that
waits beside idle cores waits on real time, one beside busy cores waits on CPU. Standard library only: it runs before
any virtualenv.

    step_times.py make  TIMES_TSV STEP...        run `make STEP` for each STEP in turn (`molecule:NAME` runs
                                                 `make molecule SCENARIO=NAME`); stop at the first failure; print
                                                 the table either way, then the failed step's summary (what
                                                 it wrote to $STEP_FAILURE_SUMMARY); exit with its status.
                                                 `bg:STEP` steps run as one chain beside the others at the
                                                 lowest priority, started where the first is listed and
                                                 waited for before the table; a failed one stops the others
                                                 before their next step. `beside:STEP` steps do the same at
                                                 the foreground's own priority (make check's second lane)
    step_times.py phases TIMES_TSV SCENARIO      copy stdin to stdout and record each molecule phase's wall time
    step_times.py table TIMES_TSV                print the table of what TIMES_TSV holds
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

SUMMARY_LINES = 20
# The chains beside the foreground, by step prefix: (niceness, how the table marks their steps). `bg:` steps need
# only CPU and no deadline, and take what the lab's waits leave idle; `beside:` steps share the cores as equals.
CHAINS = {"bg:": (19, "in the background"), "beside:": (0, "beside the others")}
BACKGROUND_LOG_LINES = 40
# molecule 26 announces each action of a scenario's test sequence as "INFO     [<scenario> > <action>] Executing".
PHASE_LINE = re.compile(r"\[(?P<scenario>[\w.-]+) > (?P<phase>[\w-]+)\] Executing$")


_APPEND_LOCK = threading.Lock()


def _append(times_tsv: Path, kind: str, name: str, seconds: float, status: str, cpu_s: float | None = None,
            busy_percent: float | None = None) -> None:
    times_tsv.parent.mkdir(parents=True, exist_ok=True)
    cpu = "" if cpu_s is None else f"{cpu_s:.1f}"
    busy = "" if busy_percent is None else f"{busy_percent:.0f}"
    with _APPEND_LOCK, times_tsv.open("a", encoding="utf-8") as out:
        out.write(f"{kind}\t{name}\t{seconds:.1f}\t{status}\t{cpu}\t{busy}\n")


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, all) clock ticks of every core since boot, from /proc/stat's first line; None where it is missing."""
    try:
        first = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()
    except OSError:
        return None
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    ticks = [int(value) for value in first[1:9]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def _busy_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """How busy the cores were between two _cpu_ticks readings, in percent of all of them."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


def _call(command: list[str], **kwargs) -> tuple[int, float]:
    """(exit status, CPU seconds) of a command: user + system time of it and of every process it waited for."""
    process = subprocess.Popen(command, **kwargs)
    _pid, wait_status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(wait_status)
    return process.returncode, usage.ru_utime + usage.ru_stime


def _make_command(root: Path, step: str) -> list[str]:
    target, _sep, scenario = step.partition(":")
    command = ["make", "--no-print-directory", "-C", str(root), target]
    if scenario:
        command.append(f"SCENARIO={scenario}")
    return command


class BackgroundChain:
    """A chain's steps, one after another in a thread, at the chain's CPU priority, each logged to a file of its own.

    make test's `bg:` steps need only CPU and have no deadline (lint, sanity, units, Galaxy's import checks):
    started beside the foreground, whose scenarios spend much of their wall time waiting on real time (sessions,
    reboots, VRRP adverts), they use the cores it leaves idle at the lowest priority. The guests run at a raised
    priority, so the lab's timing does not wait for them. make check's `beside:` steps are a second lane at the
    foreground's priority: two single-process lanes keep both cores busy. The first failure anywhere (``stop``, shared
    by the chains) stops every chain and the foreground before their next step; the run's status is the first
    failure's.
    """

    def __init__(self, root: Path, times_tsv: Path, steps: list[str], niceness: int, marked: str,
                 stop: threading.Event) -> None:
        self.root, self.times_tsv, self.steps = root, times_tsv, steps
        self.niceness, self.marked, self.stop = niceness, marked, stop
        self.status = 0
        self.failed_log: Path | None = None
        self.logs_dir = times_tsv.parent / "logs"
        self.thread = threading.Thread(target=self._run, daemon=True)

    def log_path(self, step: str) -> Path:
        return self.logs_dir / f"background-{step.replace(':', '-')}.log"

    def _run(self) -> None:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        for step in self.steps:
            if self.stop.is_set():
                return
            started, ticks = time.monotonic(), _cpu_ticks()
            with self.log_path(step).open("w", encoding="utf-8") as log:
                self.status, cpu_s = _call(
                    ["nice", "-n", str(self.niceness), *_make_command(self.root, step)], stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=dict(os.environ, STEP_TIMES_TSV=os.devnull, STEP_FAILURE_SUMMARY=os.devnull))
            status = "ok" if self.status == 0 else f"failed ({self.status})"
            _append(self.times_tsv, "step", step, time.monotonic() - started, f"{status}, {self.marked}", cpu_s,
                    _busy_percent(ticks, _cpu_ticks()))
            if self.status != 0:
                self.failed_log = self.log_path(step)
                self.stop.set()
                return

    def join(self) -> int:
        if self.thread.ident is None:
            return 0
        self.thread.join()
        for step in self.steps:
            if self.log_path(step).exists():
                print(f"== background step {step}: log in {self.log_path(step)}")
        if self.failed_log is not None:
            lines = self.failed_log.read_text(encoding="utf-8", errors="replace").splitlines()
            print(f"== the background step failed; the last {BACKGROUND_LOG_LINES} lines of {self.failed_log}:")
            print("\n".join(lines[-BACKGROUND_LOG_LINES:]))
        return self.status


def run_make_steps(times_tsv: Path, steps: list[str]) -> int:
    """Each step through make, timed; the first failure stops the run (as make's own prerequisites would).

    The steps of one prefix (CHAINS) start together, as one chain (BackgroundChain), when the first of them is
    reached; the run waits for every chain before the table. A failed step stops every other before its next step.
    """
    times_tsv.unlink(missing_ok=True)
    summary = failure_summary_path(times_tsv)
    summary.unlink(missing_ok=True)
    root = Path(__file__).resolve().parents[1]
    run_started, run_ticks = time.monotonic(), _cpu_ticks()
    stop = threading.Event()
    chains = {}
    for prefix, (niceness, marked) in CHAINS.items():
        chain_steps = [step.removeprefix(prefix) for step in steps if step.startswith(prefix)]
        chains[prefix] = BackgroundChain(root, times_tsv, chain_steps, niceness, marked, stop)
    status = 0
    for step in steps:
        prefix = next((prefix for prefix in chains if step.startswith(prefix)), None)
        if prefix is not None:
            if chains[prefix].thread.ident is None:
                chains[prefix].thread.start()
            continue
        if stop.is_set():
            break
        started, ticks = time.monotonic(), _cpu_ticks()
        status, cpu_s = _call(
            _make_command(root, step),
            env=dict(os.environ, STEP_TIMES_TSV=str(times_tsv), STEP_FAILURE_SUMMARY=str(summary)))
        _append(times_tsv, "step", step, time.monotonic() - started, "ok" if status == 0 else f"failed ({status})",
                cpu_s, _busy_percent(ticks, _cpu_ticks()))
        if status != 0:
            stop.set()
            break
    background_status = next((code for code in [chain.join() for chain in chains.values()] if code), 0)
    _append(times_tsv, "total", "total", time.monotonic() - run_started, "", None,
            _busy_percent(run_ticks, _cpu_ticks()))
    print_table(times_tsv)
    if status != 0 and summary.exists():
        print_failure_summary(summary)
    return status or background_status


def failure_summary_path(times_tsv: Path) -> Path:
    """Where a failing step may leave a few lines saying what failed (molecule: its first failed task)."""
    return times_tsv.with_suffix(".failure.txt")


def print_failure_summary(summary: Path) -> None:
    """Repeat a failed step's own summary after the table: a CI log cut to its head and tail keeps both."""
    lines = summary.read_text(encoding="utf-8", errors="replace").splitlines()[:SUMMARY_LINES]
    print("\nwhat failed (again, from the step's log):")
    print("\n".join(lines))


def record_phases(times_tsv: Path, scenario: str) -> int:
    """Pass molecule's output through; a phase lasts from its announcement to the next one (or the end)."""
    current, started = None, time.monotonic()
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        match = PHASE_LINE.search(line)
        if match and match["scenario"] == scenario:
            now = time.monotonic()
            if current is not None:
                _append(times_tsv, "phase", f"{scenario}:{current}", now - started, "")
            current, started = match["phase"], now
    if current is not None:
        _append(times_tsv, "phase", f"{scenario}:{current}", time.monotonic() - started, "")
    return 0


def print_table(times_tsv: Path) -> None:
    lines = times_tsv.read_text(encoding="utf-8").splitlines() if times_tsv.exists() else []
    # kind, name, seconds, status, cpu_s, busy_percent (the last two empty where not measured)
    rows = [(line.split("\t") + ["", ""])[:6] for line in lines]
    phases: dict[str, list[tuple[str, float]]] = {}
    for kind, name, seconds, _status, _cpu, _busy in rows:
        if kind == "phase":
            scenario, _sep, phase = name.partition(":")
            phases.setdefault(scenario, []).append((phase, float(seconds)))
    total, total_cpu_s, measured = 0.0, 0.0, False
    print(f"\n{'step':<34}{'wall':>10}{'cpu':>10}{'busy':>7}  status")
    for kind, name, seconds, status, cpu, busy in rows:
        if kind != "step":
            continue
        if not any(marked in status for _niceness, marked in CHAINS.values()):
            total += float(seconds)
        total_cpu_s += float(cpu or 0)
        measured = measured or bool(cpu)
        print(f"{name:<34}{_minutes(float(seconds)):>10}{_minutes(float(cpu)) if cpu else '':>10}"
              f"{busy + ' %' if busy else '':>7}  {status}")
        for phase, phase_seconds in phases.get(name.partition(":")[2], []):
            print(f"    {phase:<30}{_minutes(phase_seconds):>10}")
    # The run's wall time where it was recorded (background steps overlap the others), else the sum of the steps.
    total_row = next((row for row in rows if row[0] == "total"), None)
    if total_row is not None:
        total = float(total_row[2])
    busy = total_row[5] if total_row is not None else ""
    print(f"{'total':<34}{_minutes(total):>10}{_minutes(total_cpu_s) if measured else '':>10}"
          f"{busy + ' %' if busy else '':>7}".rstrip())


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "make":
        return run_make_steps(Path(argv[1]), argv[2:])
    if len(argv) == 3 and argv[0] == "phases":
        return record_phases(Path(argv[1]), argv[2])
    if len(argv) == 2 and argv[0] == "table":
        print_table(Path(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
