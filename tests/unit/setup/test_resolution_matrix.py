"""tools/resolution_matrix.py without the network: pip's recorded report and errors read, the table, the refusals,
and a whole run through a stand-in interpreter that answers as pip does.

The recorded report and stderr are real pip 26.3 output against PyPI (tests/unit/fixtures/pip_report/README.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
import moe_pins  # noqa: E402
import resolution_matrix as matrix  # noqa: E402

FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "pip_report"
REPORT = FIXTURES / "role-py3.10-x86_64.json"
FAILED_STDERR = (FIXTURES / "role-py3.10-x86_64-manylinux_2_28-to-2_17.stderr").read_text()


def test_a_report_gives_the_versions_pip_picked_the_package_count_and_every_wheel_url():
    summary = matrix.summarize_report(json.loads(REPORT.read_text()))
    assert (summary["torch"], summary["triton"], summary["numpy"]) == ("2.13.0", "3.7.1", "2.2.6")
    assert summary["packages"] == 30 and len(summary["urls"]) == 30 and summary["pip_version"] == "26.3"
    assert all(url.startswith("https://files.pythonhosted.org/") and url.endswith(".whl") for url in summary["urls"])


def test_pips_error_lines_are_kept_and_its_other_output_dropped():
    errors = matrix.error_lines(FAILED_STDERR)
    assert len(errors) == 3 and all(line.startswith("ERROR: ") for line in errors)
    assert errors[-1] == "ERROR: No matching distribution found for nvidia-cusparselt-cu13==0.8.1 (from torch)"


def test_output_without_an_error_line_is_kept_as_its_last_five_lines():
    output = "\n".join(f"line {number}" for number in range(8)) + "\nTraceback (most recent call last):\n"
    assert matrix.error_lines(output) == ["line 4", "line 5", "line 6", "line 7", "Traceback (most recent call last):"]


def test_the_pip_command_names_the_target_python_and_every_wheelhouse_tag(tmp_path):
    cell = matrix.Cell("moe.txt", "3.12", "aarch64")
    argv = matrix.pip_arguments(cell, ["-r", "moe.txt"], tmp_path / "r.json", tmp_path / "t", "https://pypi.org/simple")
    for words in (["--python-version", "3.12"], ["--abi", "cp312"], ["--implementation", "cp"], ["--report"]):
        assert any(argv[index : index + len(words)] == words for index in range(len(argv))), words
    assert {"--isolated", "--dry-run", "--ignore-installed", "--only-binary=:all:"} <= set(argv)
    assert [argv[index + 1] for index, word in enumerate(argv) if word == "--platform"] == moe_pins.platform_tags(
        "aarch64"
    )
    assert argv[-2:] == ["-r", "moe.txt"]


def test_the_refusal_message_is_the_one_preflight_gives():
    """The words the matrix quotes must still be preflight's (roles/gpu_moe/tasks/preflight.yml)."""
    preflight = (ROOT / "roles" / "gpu_moe" / "tasks" / "preflight.yml").read_text()
    assert "needs Python {{ gpu_moe_min_python }} or later. Nothing was changed." in " ".join(preflight.split())


@pytest.mark.parametrize(
    "stack, python_version, refused",
    [("role", "3.9", True), ("role", "3.10", False), ("role", "3.13", False), ("moe.txt", "3.9", False)],
)
def test_only_the_roles_stack_is_refused_and_only_below_its_minimum_python(stack, python_version, refused):
    cell = matrix.Cell(stack, python_version, "x86_64", interpreter="/usr/bin/python3.9")
    message = matrix.refusal(cell, "3.10", "2.13.0")
    assert (message is not None) is refused
    if refused:
        assert message == (
            "gpu_moe_python /usr/bin/python3.9 on HOST is Python 3.9; torch 2.13.0 needs Python 3.10 or later. "
            "Nothing was changed."
        )


def test_the_table_has_a_row_per_cell_and_the_reasons_of_those_that_did_not_resolve():
    resolved = matrix.Cell(
        "role",
        "3.10",
        "x86_64",
        status="resolved",
        torch="2.13.0",
        triton="3.7.1",
        numpy="2.2.6",
        packages=30,
        download_size_bytes=2757653756,
        wall_s=17.04,
    )
    refused = matrix.Cell("role", "3.9", "x86_64", status="refused", errors=["gpu_moe_python ... needs Python 3.10"])
    failed = matrix.Cell("moe.txt", "3.10", "aarch64", status="failed", errors=matrix.error_lines(FAILED_STDERR)[-1:])
    lines = matrix.table([resolved, refused, failed]).splitlines()
    assert lines[0].split() == [
        "stack",
        "python",
        "machine",
        "result",
        "torch",
        "triton",
        "numpy",
        "packages",
        "download",
        "wall",
    ]
    assert lines[1].split() == [
        "role",
        "3.10",
        "x86_64",
        "resolved",
        "2.13.0",
        "3.7.1",
        "2.2.6",
        "30",
        "2.57",
        "GiB",
        "17.0",
        "s",
    ]
    assert lines[2].split()[:4] == ["role", "3.9", "x86_64", "refused"] and lines[2].split()[4:8] == ["-"] * 4
    assert lines[3].split()[:4] == ["moe.txt", "3.10", "aarch64", "failed"]
    assert lines[4:] == [
        "role / Python 3.9 / x86_64: gpu_moe_python ... needs Python 3.10",
        "moe.txt / Python 3.10 / aarch64: ERROR: No matching distribution found for nvidia-cusparselt-cu13==0.8.1 "
        "(from torch)",
    ]


def test_download_sizes_are_summed_per_url_and_unknown_when_one_is_missing(tmp_path):
    first, second = tmp_path / "a.whl", tmp_path / "b.whl"
    first.write_bytes(b"x" * 10)
    second.write_bytes(b"x" * 32)
    sizes = matrix.Sizes(timeout_s=1)
    assert sizes.total_bytes([first.as_uri(), second.as_uri(), first.as_uri()]) == 52
    assert sizes.total_bytes([first.as_uri(), (tmp_path / "missing.whl").as_uri()]) is None


STAND_IN = """#!{python}
# Answers as an interpreter would for `-c` (its version) and as pip for `-m pip install ... --report FILE`.
import shutil, sys
if sys.argv[1] == "-c":
    print("{version}")
    sys.exit(0)
if "aarch64" in " ".join(sys.argv) and "{fail_aarch64}" == "yes":
    sys.stderr.write("Collecting torch==2.13.0\\nERROR: No matching distribution found for torch==2.13.0\\n")
    sys.exit(1)
shutil.copy("{report}", sys.argv[sys.argv.index("--report") + 1])
"""


def run_matrix(tmp_path: Path, fail_aarch64: str) -> tuple[subprocess.CompletedProcess, dict]:
    interpreter = tmp_path / "python3.10"
    interpreter.write_text(
        STAND_IN.format(python=sys.executable, version="3.10", report=REPORT, fail_aarch64=fail_aarch64)
    )
    interpreter.chmod(0o755)
    out = tmp_path / "matrix.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "resolution_matrix.py"),
            "--pythons",
            "3.9,3.10",
            "--python",
            f"3.10={interpreter}",
            "--python",
            f"3.9={tmp_path / 'absent'}",
            "--stack",
            "role",
            "--pip-version",
            "",
            "--no-sizes",
            "--timeout-s",
            "30",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return done, json.loads(out.read_text())


def test_a_run_where_every_cell_resolves_or_is_refused_exits_0_and_writes_each_cell(tmp_path):
    done, record = run_matrix(tmp_path, fail_aarch64="no")
    assert done.returncode == 0, done.stdout + done.stderr
    cells = {(cell["python_version"], cell["machine"]): cell for cell in record["cells"]}
    assert [cells[("3.9", machine)]["status"] for machine in ("x86_64", "aarch64")] == ["refused", "refused"]
    assert cells[("3.10", "aarch64")]["resolved"] is True and cells[("3.10", "aarch64")]["numpy"] == "2.2.6"
    assert cells[("3.10", "x86_64")]["packages"] == 30 and cells[("3.10", "x86_64")]["download_size_bytes"] is None
    assert cells[("3.10", "x86_64")]["command"][:4] == ["python3.10", "-m", "pip", "install"]
    rows = [line.split()[:9] for line in done.stdout.splitlines()]
    assert ["role", "3.10", "x86_64", "resolved", "2.13.0", "3.7.1", "2.2.6", "30", "-"] in rows


def test_a_run_with_a_failed_cell_exits_1_and_records_pips_error(tmp_path):
    done, record = run_matrix(tmp_path, fail_aarch64="yes")
    assert done.returncode == 1
    [failed] = [cell for cell in record["cells"] if cell["status"] == "failed"]
    assert (failed["machine"], failed["resolved"]) == ("aarch64", False)
    assert failed["errors"] == ["ERROR: No matching distribution found for torch==2.13.0"]


def test_an_interpreter_that_is_not_the_python_version_asked_for_is_not_used(tmp_path):
    path, problem = matrix.find_interpreter("3.10", {"3.10": sys.executable})
    if sys.version_info[:2] == (3, 10):
        pytest.skip("the test interpreter is a 3.10")
    assert path == sys.executable and "is not a working Python 3.10" in problem
