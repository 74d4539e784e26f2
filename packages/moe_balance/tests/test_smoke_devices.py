"""The smoke test proves the GPUs instead of falling back to the CPU quietly: device choice, each device made current
for its checks, the GPU requirement, torch's GPU count against the count the caller expects, the runtime record, and
an all-reduce with one process per device (gloo on CPUs here; NCCL on GPUs)."""

from __future__ import annotations

import contextlib
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


def test_torch_seeing_other_than_the_expected_count_fails():
    seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
    check = smoke.check_gpu_required([], seen + 2)
    assert check["ok"] is False
    assert check["detail"]["problems"][-1].startswith(f"torch sees {seen} GPU(s), expected {seen + 2}: ")


def pretend_torch_sees(monkeypatch: pytest.MonkeyPatch, count: int) -> list[torch.device]:
    """A host where torch sees ``count`` GPUs (e.g. CUDA_VISIBLE_DEVICES=2,3 on an 8-GPU board, or one MIG instance)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    return [torch.device("cuda", i) for i in range(count)]


@pytest.mark.parametrize(
    ("seen", "expected", "problem"),
    [
        (2, 2, None),  # CUDA_VISIBLE_DEVICES=2,3 on an 8-GPU board: the caller expects the 2 torch can see
        (1, 1, None),  # one MIG instance of an A100 in MIG mode
        (1, 2, "torch sees 1 GPU(s), expected 2: "),
        (3, 2, "torch sees 3 GPU(s), expected 2: "),
    ],
)
def test_expect_gpus_counts_the_gpus_visible_to_torch(monkeypatch, seen, expected, problem):
    devices = pretend_torch_sees(monkeypatch, seen)
    check = smoke.check_gpu_required(devices, expected)
    assert check["ok"] is (problem is None)
    assert check["detail"]["torch_device_count"] == seen and check["detail"]["expected_gpu_count"] == expected
    assert [p[: len(problem)] for p in check["detail"]["problems"]] == ([] if problem is None else [problem])


def test_the_expect_gpus_flag_says_it_counts_the_gpus_torch_sees(capsys):
    with pytest.raises(SystemExit):
        cli.main(["smoke", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "fail unless torch sees N GPUs: the GPUs visible to torch" in help_text
    assert "not the physical count" in help_text


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback is what this host would do without a GPU")
def test_require_gpu_on_a_cpu_host_exits_non_zero_with_the_reason(capsys):
    assert cli.main(["smoke", "--json", "--require-gpu", "--expect-gpus", "2"]) == 1
    result = json.loads(capsys.readouterr().out)
    [check] = [c for c in result["checks"] if c["name"] == "gpu_required"]
    assert result["ok"] is False and check["ok"] is False
    assert check["detail"]["devices"] == ["cpu"] and check["detail"]["expected_gpu_count"] == 2


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


def test_each_device_runs_its_checks_with_that_device_current(monkeypatch):
    """Triton launches on the current device (triton-lang/triton issue 2925): cuda:1's checks need cuda:1 current."""
    current: list[torch.device] = []

    @contextlib.contextmanager
    def recording_cuda_device(device):  # stands in for torch.cuda.device, which needs a GPU
        current.append(torch.device(device))
        try:
            yield
        finally:
            current.pop()

    ran_on: dict[str, str | None] = {}

    def fake_checks(dev, seed):
        ran_on[str(dev)] = str(current[-1]) if current else None
        return [{"name": "known_answers", "ok": True, "detail": {}}], {"known_answers": 0.0}, []

    monkeypatch.setattr(torch.cuda, "device", recording_cuda_device)
    monkeypatch.setattr(smoke, "resolve_devices", lambda spec: [torch.device("cuda", 0), torch.device("cuda", 1)])
    monkeypatch.setattr(smoke, "_device_checks", fake_checks)
    monkeypatch.setattr(smoke, "_device_summary", lambda dev, checks, timings: {"device": str(dev), "ok": True})
    monkeypatch.setattr(smoke, "device_info", lambda dev: {"device": str(dev)})
    result = smoke.run_smoke("auto")
    assert ran_on == {"cuda:0": "cuda:0", "cuda:1": "cuda:1"}
    assert result["ok"] is True
