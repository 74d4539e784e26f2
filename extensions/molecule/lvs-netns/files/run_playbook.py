"""Run ansible-playbook and print what each task did on each host, as one JSON object.

Usage: python3 run_playbook.py PLAYBOOK [ansible-playbook arguments ...]

The verify playbooks run the roles again with other variables and must know, per host, whether a given task or
handler ran, changed something or was skipped, and what a failure said. ansible.posix.json gives all of that; this
keeps the part the checks read:

  {"rc": 2,
   "tasks": {"Reload keepalived": {"dir1": "changed", "dir2": "skipped"}, ...},   # name without the role prefix
   "failures": {"dir1": ["message", ...]},                                        # each failed task's msg
   "stderr": "..."}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def host_state(result: dict) -> str:
    if result.get("failed"):
        return "failed"
    if result.get("skipped"):
        return "skipped"
    return "changed" if result.get("changed") else "ok"


def message_lines(result: dict) -> list[str]:
    """A failure's msg (a string or a list of lines) and, when a command failed, its stderr."""
    message = result.get("msg", "")
    lines = [str(line) for line in message] if isinstance(message, list) else [str(message)]
    return lines + ([str(result["stderr"]).strip()] if result.get("stderr") else [])


def summarise(report: dict) -> tuple[dict, dict]:
    tasks, failures = {}, {}
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            name = task["task"]["name"].split(" : ", 1)[-1]
            for host, result in task.get("hosts", {}).items():
                tasks.setdefault(name, {})[host] = host_state(result)
                if result.get("failed") or result.get("unreachable"):
                    failures.setdefault(host, []).extend(message_lines(result))
    return tasks, failures


def run(playbook: str, arguments: list[str]) -> dict:
    """Run ansible-playbook PLAYBOOK ARGUMENTS... with the JSON callback and summarise what it did."""
    ansible_playbook = Path(sys.executable).with_name("ansible-playbook")
    command = [str(ansible_playbook) if ansible_playbook.exists() else "ansible-playbook", playbook, *arguments]
    # Only the JSON callback may write to stdout, or the output is not one JSON document.
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    completed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    try:
        tasks, failures = summarise(json.loads(completed.stdout))
    except ValueError:
        tasks, failures = {}, {"?": [completed.stdout[-4000:]]}
    return {"rc": completed.returncode, "tasks": tasks, "failures": failures, "stderr": completed.stderr[-4000:]}


def main(argv: list[str]) -> int:
    playbook, *arguments = argv
    print(json.dumps(run(playbook, arguments)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
