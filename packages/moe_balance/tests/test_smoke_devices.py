"""The smoke test proves the GPUs instead of falling back to the CPU quietly: device choice, the GPU requirement,
torch's GPU count against the driver's, the runtime record, and an all-reduce with one process per device (gloo on
CPUs here; NCCL on GPUs)."""

from __future__ import annotations

import json

import pytest
import torch

from moe_balance import cli, smoke


def test_auto_is_every_gpu_or_else_the_cpu():
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    want = [torch.device("cuda", i) for i in range(count)] or [torch.device("cpu")]
    assert smoke.resolve_devices("auto") == want


@pytest.mark.parametrize(
    ("spec", "want"),
    [("cpu", ["cpu"]), ("cuda:1", ["cuda:1"]), ("0,2", ["cuda:0", "cuda:2"]), ("3", ["cuda:3"])],
)
def test_a_chosen_list_of_devices(spec, want):
    assert [str(d) for d in smoke.resolve_devices(spec)] == want


def test_a_cpu_run_fails_when_a_gpu_is_required():
    check = smoke.check_gpu_required([torch.device("cpu")], None)
    assert check["ok"] is False
    assert check["detail"]["problems"] == ["the smoke test would run on cpu, not on a GPU"]


def test_torch_seeing_fewer_gpus_than_the_driver_fails():
    seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
    check = smoke.check_gpu_required([], seen + 2)
    assert check["ok"] is False
    assert check["detail"]["problems"][-1].startswith(f"torch sees {seen} GPU(s) and the driver lists {seen + 2}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback is what this host would do without a GPU")
def test_require_gpu_on_a_cpu_host_exits_non_zero_with_the_reason(capsys):
    assert cli.main(["smoke", "--json", "--require-gpu", "--expect-gpus", "2"]) == 1
    result = json.loads(capsys.readouterr().out)
    [check] = [c for c in result["checks"] if c["name"] == "gpu_required"]
    assert result["ok"] is False and check["ok"] is False
    assert check["detail"]["devices"] == ["cpu"] and check["detail"]["driver_gpu_count"] == 2


def test_the_runtime_record_names_torch_cuda_cudnn_nccl_and_the_driver():
    record = smoke.runtime_info()
    assert set(record) == {"torch", "cuda", "hip", "cudnn", "nccl", "driver", "cuda_available", "device_count", "gpus"}
    assert record["torch"] == torch.__version__ and record["cuda"] == torch.version.cuda
    assert record["device_count"] == len(record["gpus"])


def test_one_device_has_nothing_to_all_reduce():
    check = smoke.check_allreduce([torch.device("cpu")])
    assert check["ok"] is True and check["detail"]["skipped"] == "one device: nothing to all-reduce across"


def test_two_gloo_ranks_all_reduce_to_the_exact_sum():
    check = smoke.check_allreduce([torch.device("cpu")] * 2, timeout_s=60, numel=1 << 16)
    assert check["ok"] is True, check
    assert check["detail"]["backend"] == "gloo" and check["detail"]["world_size"] == 2
    assert [r["value"] for r in check["detail"]["ranks"]] == [3.0, 3.0]
    assert all(r["algbw_gb_per_s"] > 0 for r in check["detail"]["ranks"])


def test_the_report_file_is_the_result_without_records(tmp_path, capsys):
    out = tmp_path / "smoke.json"
    assert cli.main(["smoke", "--json", "--device", "cpu", "--report-out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(out.read_text())
    assert "records" not in written and written["checks"] == printed["checks"]
    assert written["devices"][0]["device"] == "cpu" and written["devices"][0]["failed_checks"] == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a host where torch sees no GPU")
def test_no_gpu_seen_names_the_fabric_manager():
    check = smoke.check_gpu_required([], 8)
    assert check["detail"]["problems"][-1].endswith("on HGX/NVSwitch boards nvidia-fabricmanager must be running")
