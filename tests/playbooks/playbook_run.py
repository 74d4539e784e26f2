"""Run this venv's real ansible-playbook the way every playbook test does: no colour, no retry files, output kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")


def run_playbook(playbook, inventory, *args, timeout_s: float = 120, **environment: str):
    """ansible-playbook -i INVENTORY PLAYBOOK ARGS...; ``environment`` adds variables (ANSIBLE_STDOUT_CALLBACK=...)."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0", **environment)
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook), *map(str, args)],
        capture_output=True, text=True, env=env, timeout=timeout_s, check=False,
    )
