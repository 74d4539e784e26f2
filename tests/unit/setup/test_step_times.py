"""tools/step_times.py: the step table of make test and make check, and molecule's phases inside it.

The phase lines are molecule 26's own ("INFO     [default > converge] Executing", as in .work/logs/molecule-*.log).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "step_times.py"

MOLECULE_OUTPUT = """INFO     [default > destroy] Executing
PLAY [Tear the lab down] ****
INFO     [default > destroy] Executed: Successful
INFO     [default > create] Executing
INFO     [other > verify] Executing
INFO     [default > converge] Executing
"""


def project(tmp_path, makefile):
    """A folder with ``makefile`` as its Makefile and a copy of the tool: (the tool, the times file it writes)."""
    (tmp_path / "Makefile").write_text(makefile)
    tool = tmp_path / "tools" / "step_times.py"
    tool.parent.mkdir()
    tool.write_text(TOOL.read_text())
    return tool, tmp_path / "work" / "times.tsv"


def test_phases_passes_the_output_through_and_records_each_phase_of_its_scenario(tmp_path):
    times = tmp_path / "times.tsv"
    result = subprocess.run([sys.executable, str(TOOL), "phases", str(times), "default"], input=MOLECULE_OUTPUT,
                            capture_output=True, text=True, check=True)
    assert result.stdout == MOLECULE_OUTPUT
    assert [line.split("\t")[1] for line in times.read_text().splitlines()] == [
        "default:destroy", "default:create", "default:converge"]


def test_the_table_lists_steps_with_their_phases_and_the_total(tmp_path):
    times = tmp_path / "times.tsv"
    # A times file of an older run (four columns) reads as well as one with the CPU columns.
    times.write_text("phase\tlvs-uml:converge\t61.0\t\n"
                     "step\tlint\t30.5\tok\n"
                     "step\tmolecule:lvs-uml\t90.0\tfailed (2)\t12.5\t97\n")
    table = subprocess.run([sys.executable, str(TOOL), "table", str(times)], capture_output=True, text=True,
                           check=True).stdout
    assert re.search(r"^lint +0:30\.5 +ok$", table, re.M)
    assert re.search(r"^molecule:lvs-uml +1:30\.0 +0:12\.5 +97 %  failed \(2\)$", table, re.M)
    assert re.search(r"^    converge +1:01\.0$", table, re.M)
    assert re.search(r"^total +2:00\.5 +0:12\.5$", table, re.M)


def test_each_step_s_cpu_time_and_the_cores_busy_share_are_measured(tmp_path):
    """A step that burns CPU shows its own CPU time (a grandchild's included) and a busy machine; a sleeping one
    shows almost none of its own."""
    (tmp_path / "burn.py").write_text("import time\nend = time.process_time() + 1.0\n"
                                      "while time.process_time() < end:\n    pass\n")
    tool, times = project(tmp_path, f"burn:\n\t@sh -c '{sys.executable} burn.py'\nsleep:\n\t@sleep 1\n")
    table = subprocess.run([sys.executable, str(tool), "make", str(times), "burn", "sleep"], capture_output=True,
                           text=True, check=True, cwd=tmp_path).stdout
    burn_row = re.search(r"^burn +0:0\d\.\d +0:(\d+\.\d) +(\d+) %  ok$", table, re.M)
    sleep_row = re.search(r"^sleep +0:0\d\.\d +0:(\d+\.\d) +(\d+) %  ok$", table, re.M)
    assert burn_row and sleep_row, table
    assert float(burn_row[1]) >= 0.9 and int(burn_row[2]) > 100 / (os.cpu_count() or 1) / 2
    assert float(sleep_row[1]) < 0.5
    assert re.search(r"^total +0:0\d\.\d +0:\d+\.\d +\d+ %$", table, re.M)


def test_the_makefile_reads_the_times_file_from_the_variable_the_tool_sets():
    # make exports a variable that came from the environment with the Makefile's own value: the tool's variable must
    # not share a name with a Makefile variable, or the molecule recipe reads the Makefile's.
    tool_variable = re.search(r"env=dict\(os\.environ, (\w+)=", TOOL.read_text())[1]
    makefile = (ROOT / "Makefile").read_text()
    assert f"$${{{tool_variable}:-" in makefile
    assert not re.search(rf"^{tool_variable} *[:?]?=", makefile, re.M)


def test_a_failed_step_s_summary_follows_the_table_and_a_passing_run_prints_none(tmp_path):
    """A CI log cut to its head and tail keeps the table's end: what failed is printed after it."""
    tool, times = project(tmp_path, "ok:\n\t@true\n"
                                    "bad:\n\t@printf 'TASK [Reboot urs1]\\nfatal: [urs1]: FAILED!\\n' > "
                                    "$$STEP_FAILURE_SUMMARY; false\n")
    failed = subprocess.run([sys.executable, str(tool), "make", str(times), "ok", "bad"], capture_output=True,
                            text=True, check=False)
    assert failed.returncode != 0
    table_end = failed.stdout.index("total")
    assert failed.stdout.index("fatal: [urs1]: FAILED!") > table_end
    passed = subprocess.run([sys.executable, str(tool), "make", str(times), "ok"], capture_output=True, text=True,
                            check=True)
    assert "what failed" not in passed.stdout


def test_background_steps_run_beside_the_others_and_the_total_is_the_run_s_wall_time(tmp_path):
    """`bg:` steps overlap the foreground: the total is the wall time, not the sum; their failure fails the run."""
    tool, times = project(tmp_path, "slow:\n\t@sleep 1\nfast:\n\t@true\nbad:\n\t@echo broken-in-background; false\n")
    passed = subprocess.run([sys.executable, str(tool), "make", str(times), "fast", "bg:slow", "bg:slow", "slow"],
                            capture_output=True, text=True, check=True).stdout
    # A step shorter than a clock tick of /proc/stat shows no busy share.
    assert len(re.findall(r"^slow +0:0\d\.\d +0:\d+\.\d +(\d+ %)?  ok, in the background$", passed, re.M)) == 2
    total_s = float(re.search(r"^total +0:(\d+\.\d) ", passed, re.M)[1])
    assert 2.0 <= total_s < 3.0  # the two background seconds run one after another, beside the foreground's one
    failed = subprocess.run([sys.executable, str(tool), "make", str(times), "bg:bad", "fast"], capture_output=True,
                            text=True, check=False)
    assert failed.returncode != 0
    assert re.search(r"^bad +\S+ +\S+ +(\d+ %)?  failed \(2\), in the background$", failed.stdout, re.M)
    assert "broken-in-background" in failed.stdout


def test_a_failed_background_step_stops_the_foreground_before_its_next_step(tmp_path):
    """The first failure stops the run, in the background chain too: the foreground runs no step after it."""
    tool, times = project(tmp_path, "bad:\n\t@false\nslow:\n\t@sleep 1\nafter:\n\t@touch ran-after\n")
    failed = subprocess.run([sys.executable, str(tool), "make", str(times), "bg:bad", "slow", "after"],
                            capture_output=True, text=True, check=False, cwd=tmp_path)
    assert failed.returncode != 0
    assert not (tmp_path / "ran-after").exists()  # `slow` runs or not, as the chain's failure lands before or in it
    assert not re.search(r"^after ", failed.stdout, re.M)


def test_a_beside_lane_runs_at_the_foreground_s_priority_and_its_failure_stops_the_other_lanes(tmp_path):
    """make check's second lane: `beside:` steps overlap the foreground like `bg:` ones, at the foreground's niceness.

    nice(1) prints the niceness it runs at; the lane's is the tool's own (make test runs the units at 19).
    """
    tool, times = project(tmp_path, "nice:\n\t@echo niceness-$$(nice)\nslow:\n\t@sleep 1\n"
                                    "bad:\n\t@false\nafter:\n\t@touch ran-after\n")
    passed = subprocess.run([sys.executable, str(tool), "make", str(times), "beside:nice", "beside:slow", "slow"],
                            capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert re.search(r"^nice +\S+ +\S+ +(\d+ %)?  ok, beside the others$", passed, re.M)
    assert float(re.search(r"^total +0:(\d+\.\d) ", passed, re.M)[1]) < 2.0  # the two seconds overlap
    log = tmp_path / "work" / "logs" / "background-nice.log"
    assert log.read_text().strip() == f"niceness-{os.nice(0)}"
    failed = subprocess.run([sys.executable, str(tool), "make", str(times), "beside:bad", "bg:slow", "bg:after",
                             "slow", "after"], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert failed.returncode != 0
    assert not (tmp_path / "ran-after").exists()
