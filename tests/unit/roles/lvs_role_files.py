"""Where the LVS roles live, and a YAML reader for their files (shared by the tests in this folder)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"


def load_yaml(path):
    return yaml.safe_load(Path(path).read_text())
