"""gpu_moe's wheelhouse planner (roles/gpu_moe/files/plan_wheelhouse.py): the hints and hashes it gives."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

FILES = Path(__file__).resolve().parents[3] / "roles" / "gpu_moe" / "files"
SPEC = importlib.util.spec_from_file_location("gpu_moe_plan_wheelhouse", FILES / "plan_wheelhouse.py")
plan = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(plan)


def test_the_download_hint_names_every_manylinux_tag_from_2_28_down_to_2_17():
    """One manylinux_2_28 tag alone misses nvidia-cudnn-cu13 (2_27) and the resolution fails (pip 23.2 and 26.3)."""
    options = plan.download_platforms("x86_64", "2.36").split()
    tags = options[1::2]
    assert options[0::2] == ["--platform"] * 12
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-1] == "manylinux_2_17_x86_64"
    assert "manylinux_2_27_x86_64" in tags


def test_an_older_glibc_starts_the_hint_at_its_own_version():
    assert plan.download_platforms("aarch64", "2.17") == "--platform manylinux_2_17_aarch64"


def test_a_host_accepts_legacy_aliases_of_its_glibc():
    tags = plan.platform_tags("x86_64", "2.28")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux2014_x86_64" in tags and tags[-1] == "linux_x86_64"


def test_wheels_are_hashed_with_sha256(tmp_path):
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes" * 100000)
    assert plan.sha256_of(wheel) == hashlib.sha256(wheel.read_bytes()).hexdigest()
