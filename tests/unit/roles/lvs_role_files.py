"""Where the LVS roles live, a YAML reader for their files, and keepalived's own config test (shared by the tests in
this folder)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"


def load_yaml(path):
    return yaml.safe_load(Path(path).read_text())


# Debian installs keepalived in /usr/sbin, which is not on a plain user's PATH.
KEEPALIVED = shutil.which("keepalived") or shutil.which("keepalived", path="/usr/sbin")


def keepalived_config_test(text, folder):
    """keepalived --config-test on ``text`` (written to ``folder``): the binary's own verdict on a rendered config."""
    config = Path(folder) / "keepalived.conf"
    config.write_text(text)
    return subprocess.run([KEEPALIVED, "--config-test", "--all-config", "--use-file", str(config)],
                          capture_output=True, text=True, timeout=30, check=False)
