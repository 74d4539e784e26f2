"""The playbooks under test run against this machine (local connection) and record what they decided where the
lvs_director role reads it on a director: /etc/ansible/facts.d. A lab on this machine whose hosts share its file
system (the lvs-netns scenario's network namespaces) reads the same folder, so each test leaves those files as it
found them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

RECORDED_FACTS = [Path("/etc/ansible/facts.d/hpc_balance_lvs_weights.fact"),
                  Path("/etc/ansible/facts.d/hpc_balance_lvs.fact")]


@pytest.fixture(autouse=True)
def _facts_left_as_found() -> Iterator[None]:
    before = {path: path.read_bytes() if path.exists() else None for path in RECORDED_FACTS}
    yield
    for path, content in before.items():
        if content is None:
            path.unlink(missing_ok=True)
        elif not path.exists() or path.read_bytes() != content:
            path.write_bytes(content)
