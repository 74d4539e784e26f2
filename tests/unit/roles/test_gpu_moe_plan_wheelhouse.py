"""gpu_moe's wheelhouse planner (roles/gpu_moe/files/plan_wheelhouse.py): the hints and hashes it gives."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

FILES = Path(__file__).resolve().parents[3] / "roles" / "gpu_moe" / "files"
SPEC = importlib.util.spec_from_file_location("gpu_moe_plan_wheelhouse", FILES / "plan_wheelhouse.py")
plan = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(plan)


def test_the_x86_64_download_hint_names_every_manylinux_tag_from_2_28_down_to_manylinux1():
    """pip takes a --platform tag as written: nvidia-nvtx is tagged manylinux1 / manylinux_2_5 only on x86_64,
    nvidia-cuda-nvrtc manylinux_2_12, nvidia-cusparselt-cu13 manylinux2014 only, nvidia-cudnn-cu13 manylinux_2_27."""
    options = plan.download_platforms("x86_64", "2.36").split()
    tags = options[1::2]
    assert options[0::2] == ["--platform"] * 27
    assert tags[:24] == [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)]
    assert tags[24:] == ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def test_the_aarch64_download_hint_ends_at_manylinux_2_17_and_manylinux2014():
    """No aarch64 glibc is older than 2.17, and manylinux2010 / manylinux1 were never defined for aarch64."""
    tags = plan.download_platform_tags("aarch64", "2.36")
    assert tags == [f"manylinux_2_{minor}_aarch64" for minor in range(28, 16, -1)] + ["manylinux2014_aarch64"]


def test_an_older_glibc_starts_the_hint_at_its_own_version():
    assert (
        plan.download_platforms("aarch64", "2.17")
        == "--platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64"
    )


def test_a_host_accepts_legacy_aliases_of_its_glibc():
    tags = plan.platform_tags("x86_64", "2.28")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux2014_x86_64" in tags and tags[-1] == "linux_x86_64"


def test_wheels_are_hashed_with_sha256(tmp_path):
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes" * 100000)
    assert plan.sha256_of(wheel) == hashlib.sha256(wheel.read_bytes()).hexdigest()
