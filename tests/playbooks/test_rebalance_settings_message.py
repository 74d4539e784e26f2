"""rebalance.yml's compute settings check names only what is wrong: a missing GPU count or expert size, or a layout
other than eplb and vllm, each alone (a valid layout is not reported as a problem)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from playbook_run import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "rebalance.yml"
SIZES = ["-e", "hpc_balance_rebalance_num_gpus=8", "-e", "hpc_balance_rebalance_expert_size_bytes=44040192"]


@pytest.mark.parametrize(
    "extra, named, not_named",
    [
        ([], "set hpc_balance_rebalance_num_gpus", "log2phy_layout"),
        (
            [*SIZES, "-e", "hpc_balance_rebalance_log2phy_layout=deepseek"],
            "log2phy_layout is deepseek: use eplb or vllm",
            "set hpc_balance_rebalance_num_gpus",
        ),
    ],
    ids=["sizes-missing", "bad-layout"],
)
def test_the_settings_check_names_only_what_is_wrong(tmp_path, extra, named, not_named):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"""
all:
  children:
    gpu_nodes:
      hosts:
        gpu1: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}
""")
    result = run_playbook(PLAYBOOK, inventory, "--check", "--tags", "compute", *extra)
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stdout.split("fatal: [gpu1]", 1)[1].split("PLAY RECAP", 1)[0]
    assert named in " ".join(message.split()), message
    assert not_named not in message, message
