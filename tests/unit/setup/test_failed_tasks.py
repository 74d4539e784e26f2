"""tools/failed_tasks.py: the failed tasks that make molecule and make test print again at the end of a red run.

The log is ansible-playbook's own, run here for real with the result format make sets (ANSIBLE_CALLBACK_RESULT_FORMAT
=yaml), so the test follows whatever ansible-core prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "failed_tasks.py"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

# A command that fails the way `lab.py up` does when it refuses: the reason is on stderr only, after a long argv.
PLAYBOOK = """- name: Fail like a refused lab start
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Fail and be ignored
      ansible.builtin.command: "false"
      ignore_errors: true
    - name: Start the network-namespace lab
      ansible.builtin.command:
        argv: [python3, -c, "import sys; print('started', file=sys.stdout); {padding}
          print('lab up refused: a lab with prefix hbm seems to exist', file=sys.stderr); sys.exit(2)"]
"""


def run_playbook(tmp_path, text):
    """Run the playbook ``text`` for real on localhost, then the tool on its log: (the run's exit status, summary)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(text)
    env = {**os.environ, "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml", "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", "-e",
                          f"ansible_python_interpreter={sys.executable}", str(playbook)],
                         capture_output=True, text=True, env=env, check=False)
    log = tmp_path / "run.log"
    log.write_text(run.stdout + run.stderr)
    return run.returncode, subprocess.run([sys.executable, str(TOOL), str(log)], capture_output=True, text=True,
                                          check=True).stdout.splitlines()


def test_the_reason_on_stderr_is_shown_before_the_timings_and_the_long_command_and_ignored_failures_are_not(tmp_path):
    returncode, summary = run_playbook(
        tmp_path, PLAYBOOK.format(padding="; ".join(f"x{n} = {n}" for n in range(40)) + ";"))
    assert returncode == 2, summary
    assert summary[0].startswith("TASK [Start the network-namespace lab]")
    assert summary[1].startswith("fatal: [localhost]: FAILED!")
    # The msg's words are ansible-core's own and differ between releases (2.21 spells them out).
    assert summary[2].startswith("    msg: ") and "non-zero return code" in summary[2]
    assert summary[3:5] == ["    stderr: 'lab up refused: a lab with prefix hbm seems to exist'", "    rc: 2"]
    assert not any(line.startswith(("    delta:", "    end:", "    start:", "    stderr_lines:")) for line in summary)
    assert "    cmd:" in summary and len(summary) <= 1 + 12 + 1


# A scenario's expected failure, rescued by a block, before the one that ends the host (gpu-moe's bad-input cases).
RESCUED_PLAYBOOK = """- name: Expect one failure, then meet another
  hosts: localhost
  gather_facts: false
  tasks:
    - name: A case that must fail
      block:
        - name: Fail as the case expects
          ansible.builtin.fail:
            msg: the expected refusal
      rescue:
        - name: Keep the failure
          ansible.builtin.set_fact:
            kept: "{{ ansible_failed_result.msg }}"
    - name: The check that ends the run
      ansible.builtin.assert:
        that: kept == 'another refusal'
        fail_msg: the real cause
"""


def test_the_failure_that_ended_the_host_comes_before_one_the_play_went_on_after(tmp_path):
    returncode, summary = run_playbook(tmp_path, RESCUED_PLAYBOOK)
    assert returncode == 2, summary
    headers = [line for line in summary if line.startswith("TASK [")]
    assert headers[0].startswith("TASK [The check that ends the run]") and "went on" not in headers[0], summary
    assert headers[1].startswith("TASK [Fail as the case expects]") and headers[1].endswith(
        "(the play went on after this one)"), summary
    assert any("the real cause" in line for line in summary[:4]), summary


def test_a_log_without_failures_says_so(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("TASK [Gathering Facts] ***\nok: [localhost]\n")
    printed = subprocess.run([sys.executable, str(TOOL), str(log)], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == f"(no failed task in {log}; see the log above)"
