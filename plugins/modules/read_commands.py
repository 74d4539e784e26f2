#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: read_commands
short_description: Run several read-only commands on a host in one step and return each one's exit status and output
version_added: 0.1.0
description:
  - Runs each command (an argument vector, no shell) in turn and returns, per name, what C(ansible.builtin.command)
    would have registered - C(rc), C(stdout), C(stderr), C(stdout_lines) - so a role reads everything it decides from in
    one round trip to the host instead of one per command.
  - A command whose program is not installed returns C(rc=127) and says so in C(stderr), as a shell does; it is not
    a failure of the module. Deciding what a non-zero status means is the caller's part.
  - Only for commands that change nothing, such as C(pidof), C(dpkg-query), C(sysctl) without C(-w), C(nft list) or
    C(test). They run in check mode too, and the module always reports C(changed=false).
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.attributes
attributes:
  check_mode:
    support: full
    details: The commands run in check mode too, so they must only read.
options:
  commands:
    description:
      - Name to argument vector. Each name becomes a key of I(results). An empty vector is refused.
    type: dict
    required: true
  timeout_s:
    description: Seconds each command may run before it is stopped and reported with C(rc=124).
    type: float
    default: 30
"""

EXAMPLES = r"""
- name: Read what the role decides from, in one step
  hpc.balance.read_commands:
    commands:
      keepalived_pids: [pidof, keepalived]
      packages: [dpkg-query, --show, "--showformat=${Package} ${db:Status-Status}\n", keepalived, ipvsadm]
      ruleset: [nft, -j, list, ruleset]
  register: host

- name: Say whether keepalived runs
  ansible.builtin.debug:
    msg: "keepalived {{ 'runs' if host.reads.keepalived_pids.rc == 0 else 'does not run' }}"
"""

RETURN = r"""
reads:
  description: Per name, the command's outcome.
  returned: always
  type: dict
  contains:
    cmd:
      description: The argument vector that ran.
      type: list
      elements: str
    rc:
      description: Exit status; 127 when the program is not installed, 124 when it ran past I(timeout_s).
      type: int
    stdout:
      description: Standard output, without the trailing newline.
      type: str
    stderr:
      description: Standard error, without the trailing newline.
      type: str
    stdout_lines:
      description: Standard output split into lines.
      type: list
      elements: str
  sample:
    keepalived_pids: {cmd: [pidof, keepalived], rc: 0, stdout: "812 811", stderr: "", stdout_lines: ["812 811"]}
"""

import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule

MISSING_PROGRAM_RC = 127
TIMEOUT_RC = 124


def run_one(module: AnsibleModule, argv: list[str], timeout_s: float) -> dict[str, Any]:
    """One command's outcome in the shape ansible.builtin.command registers."""
    program = argv[0] if "/" in argv[0] else module.get_bin_path(argv[0], opt_dirs=["/usr/sbin", "/sbin"])
    if program is None:
        return {"cmd": argv, "rc": MISSING_PROGRAM_RC, "stdout": "", "stdout_lines": [],
                "stderr": f"{argv[0]}: command not found"}
    try:
        done = subprocess.run([program] + argv[1:], capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"cmd": argv, "rc": TIMEOUT_RC, "stdout": "", "stdout_lines": [],
                "stderr": f"{argv[0]}: stopped after {timeout_s} s"}
    except OSError as error:
        return {"cmd": argv, "rc": MISSING_PROGRAM_RC, "stdout": "", "stdout_lines": [], "stderr": str(error)}
    stdout = done.stdout.rstrip("\n")
    return {"cmd": argv, "rc": done.returncode, "stdout": stdout, "stdout_lines": stdout.splitlines(),
            "stderr": done.stderr.rstrip("\n")}


def main() -> None:
    module = AnsibleModule(
        argument_spec={"commands": {"type": "dict", "required": True},
                       "timeout_s": {"type": "float", "default": 30}},
        supports_check_mode=True,
    )
    commands = module.params["commands"]
    bad = sorted(name for name, argv in commands.items()
                 if not isinstance(argv, list) or not argv or not all(isinstance(word, str) for word in argv))
    if bad:
        module.fail_json(msg="read_commands: each command must be a non-empty list of strings; not so: "
                             + ", ".join(bad))
    reads = {name: run_one(module, argv, module.params["timeout_s"]) for name, argv in commands.items()}
    module.exit_json(changed=False, reads=reads)


if __name__ == "__main__":
    main()
