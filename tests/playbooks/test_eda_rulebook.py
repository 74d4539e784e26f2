"""The event-driven rebalance with the real ansible-rulebook (and its Java rule engine): the source plugin reads an
audit history, a compute imbalance that persists for N reports runs playbooks/rebalance.yml exactly once, and a
one-off spike or a balanced history runs nothing. Also the plugin's streak logic, report by report.

ansible-rulebook is a test requirement (requirements/dev.txt, Java from requirements/apt.txt): without it these tests
fail, they do not skip."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULEBOOK = ROOT / "extensions" / "eda" / "rulebooks" / "rebalance_on_imbalance.yml"
SOURCE = ROOT / "extensions" / "eda" / "plugins" / "event_source" / "audit_history.py"
BIN = Path(sys.executable).parent
ANSIBLE_RULEBOOK = BIN / "ansible-rulebook"


def source_plugin():
    spec = importlib.util.spec_from_file_location("audit_history", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_history(folder, compute_verdicts):
    folder.mkdir(parents=True, exist_ok=True)
    for run, verdict in enumerate(compute_verdicts, start=1):
        report = {"run": run, "verdicts": {"network": "skipped", "host_link": "balanced", "compute": verdict},
                  "metrics": {"compute": {"name": "worst layer max/mean", "value": 2.5 if verdict == "imbalanced"
                                          else 1.1}}}
        (folder / f"report-{run:06d}.json").write_text(json.dumps(report))
    return folder


def skewed_records(path):
    rng = random.Random(5)
    with open(path, "w") as handle:
        for layer in range(2):
            tokens = [int(8000 / (1 + expert) ** 1.2) + rng.randint(0, 9) for expert in range(8)]
            tokens[0] += (-sum(tokens)) % 2
            handle.write(json.dumps({"schema": "moe_balance.tokens_per_expert/1", "step": 1, "layer": layer,
                                     "tokens_per_expert": tokens, "top_k": 2, "num_tokens": sum(tokens) // 2}) + "\n")
    return path


def run_rulebook(tmp_path, compute_verdicts):
    assert ANSIBLE_RULEBOOK.exists(), (
        f"{ANSIBLE_RULEBOOK} is missing: install the test requirements (make setup installs ansible-rulebook from "
        f"requirements/dev.txt and Java from requirements/apt.txt)")
    history = write_history(tmp_path / "history", compute_verdicts)
    placement = tmp_path / "expert_placement.json"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"children": {"gpu_nodes": {"hosts": {"gpu1": {
        "ansible_host": "127.0.0.1", "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "hpc_balance_rebalance_moe_python": sys.executable,
        "hpc_balance_rebalance_records_path": str(skewed_records(tmp_path / "tokens.jsonl")),
        "hpc_balance_rebalance_placement_path": str(placement), "hpc_balance_rebalance_num_gpus": 2,
        "hpc_balance_rebalance_expert_size_bytes": 1024}}}}}}))
    variables = tmp_path / "vars.yml"
    variables.write_text(json.dumps({"hpc_balance_history_dir": str(history), "hpc_balance_checks": 3,
                                     "hpc_balance_interval_s": 0.1, "hpc_balance_once": True}))
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    result = subprocess.run(
        [str(ANSIBLE_RULEBOOK), "-i", str(inventory), "--rulebook", str(RULEBOOK), "--vars", str(variables),
         "--print-events"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"'run': {len(compute_verdicts)}" in output or f'"run": {len(compute_verdicts)}' in output, (
        "the rule engine never saw the last report:\n" + output)
    return output, placement


def test_a_persistent_compute_imbalance_runs_the_rebalance_once(tmp_path):
    output, placement = run_rulebook(tmp_path, ["balanced", "imbalanced", "imbalanced", "imbalanced", "imbalanced"])
    assert output.count("PLAY [Compute layer - expert placement from tokens_per_expert records]") == 1, output
    assert placement.exists()
    assert json.loads(placement.read_text())["schema"] == "hpc.balance.expert_placement/1"


@pytest.mark.parametrize("verdicts", [
    ["balanced", "imbalanced", "balanced", "balanced", "imbalanced", "imbalanced"],
    ["balanced", "balanced", "balanced", "balanced"],
], ids=["one-off-spikes", "balanced"])
def test_a_one_off_spike_or_a_balanced_history_runs_nothing(tmp_path, verdicts):
    output, placement = run_rulebook(tmp_path, verdicts)
    assert "PLAY [" not in output, output
    assert not placement.exists()


@pytest.mark.parametrize(("verdicts", "alarms"), [
    (["imbalanced"] * 5, [[], [], ["compute"], [], []]),
    (["imbalanced", "imbalanced", "balanced", "imbalanced", "imbalanced", "imbalanced"],
     [[], [], [], [], [], ["compute"]]),
    (["imbalanced", "imbalanced", "error", "imbalanced"], [[], [], [], ["compute"]]),
    (["imbalanced", "balanced"] * 3, [[]] * 6),
])
def test_streaks_alarm_once_when_n_reports_in_a_row_are_imbalanced(tmp_path, verdicts, alarms):
    history = write_history(tmp_path / "history", verdicts)
    events = []

    class Queue:
        async def put(self, event):
            events.append(event)

    asyncio.run(source_plugin().main(Queue(), {"path": str(history), "checks": 3, "once": True}))
    assert [event["audit"]["alarm"] for event in events] == alarms
    assert [event["audit"]["run"] for event in events] == list(range(1, len(verdicts) + 1))


def test_a_report_still_being_written_is_read_on_the_next_look(tmp_path):
    plugin = source_plugin()
    history = write_history(tmp_path / "history", ["imbalanced", "imbalanced"])
    (history / "report-000003.json").write_text('{"verdicts": {"compute": "imbal')
    watcher = plugin.Watcher(3, ["compute"])
    assert [event["audit"]["run"] for event in plugin.new_events(watcher, str(history))] == [1, 2]
    (history / "report-000003.json").write_text('{"verdicts": {"compute": "imbalanced"}}')
    assert plugin.new_events(watcher, str(history))[0]["audit"]["alarm"] == ["compute"]


def test_wrong_options_name_the_value_and_the_fix():
    plugin = source_plugin()
    with pytest.raises(ValueError, match=r"checks is 0: give the number of reports in a row, at least 1"):
        plugin.Watcher(0, ["compute"])
    with pytest.raises(ValueError, match=r"layers \['gpu'\] are not audit layers"):
        plugin.Watcher(3, ["gpu"])
