"""gpu_moe's GPU decision (roles/gpu_moe/files/probe_gpu.py) on recorded nvidia-smi answers.

Every answer follows NVIDIA's nvidia-smi manual for `--query-gpu=FIELDS --format=csv,noheader,nounits`: one line per
GPU, the fields in the order asked, separated by ", ", "[N/A]" for a field that does not apply (mig.mode.current on a
GPU without MIG), compute_mode one of Default / Exclusive_Process / Prohibited, mig.mode.current Enabled / Disabled.
Driver floors: CUDA Toolkit release notes, "Minimum Required Driver Version for CUDA Minor Version Compatibility"
(CUDA 13.x >= 580, 12.x >= 525.60.13). Compute-capability floors: CUDA 13.0's release notes remove compute capability
below 7.5 (Maxwell, Pascal, Volta), CUDA 12.0's remove Kepler. `--query-compute-apps=gpu_uuid,pid,used_memory
--format=csv,noheader,nounits` answers one line per process holding a GPU: "GPU-<uuid>, <pid>, <MiB>".
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

FILES = Path(__file__).resolve().parents[3] / "roles" / "gpu_moe" / "files"
SPEC = importlib.util.spec_from_file_location("gpu_moe_probe_gpu", FILES / "probe_gpu.py")
probe_gpu = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe_gpu)

FIELDS = probe_gpu.FULL_FIELDS
# Two H200 on an R580 driver, MIG off, compute mode Default.
H200_R580 = (
    "0, GPU-5c2a6f1e-8b9d-4a3c-9e0f-1a2b3c4d5e6f, NVIDIA H200, 580.65.06, 143771, 9.0, Disabled, Default\n"
    "1, GPU-7d3b8a2f-9cae-4b4d-8f1a-2b3c4d5e6f70, NVIDIA H200, 580.65.06, 143771, 9.0, Disabled, Default\n"
)
# The same GPUs on an R570 driver (CUDA 12.8 at most).
H200_R570 = H200_R580.replace("580.65.06", "570.133.20")
# An A100 with MIG enabled.
A100_MIG = (
    "0, GPU-1a2b3c4d-0000-4000-8000-00000000a100, NVIDIA A100-SXM4-80GB, 580.82.07, 81920, 8.0, Enabled, Default\n"
)
# A consumer GPU: no MIG ([N/A]), exclusive-process compute mode.
RTX_EXCLUSIVE = (
    "0, GPU-0f0e0d0c-1111-4222-8333-444455556666, NVIDIA GeForce RTX 4090, 580.65.06, 24564, 8.9, [N/A], "
    "Exclusive_Process\n"
)
PROHIBITED = RTX_EXCLUSIVE.replace("Exclusive_Process", "Prohibited")
# /proc/driver/nvidia/version as the R580 kernel module writes it.
PROC_VERSION = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16-I3-B03-4-1)\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)


def facts(smi_output="", rc=0, found=True, kernel=None, nodes=(), rocm=(), compat=None):
    gpus = probe_gpu.parse_gpus(FIELDS, smi_output) if found and rc == 0 else []
    return {
        "nvidia_smi": {"command": "nvidia-smi", "found": found, "rc": rc if found else None, "output": smi_output},
        "gpus": gpus,
        "kernel_driver": kernel,
        "device_nodes": list(nodes),
        "rocm": list(rocm),
        "compat": compat,
    }


def assess(host, cuda="13.0", require_gpu=True, allow_mig=False):
    return probe_gpu.assess(host, cuda, require_gpu, allow_mig, "torch 2.13.0")


def test_every_field_of_each_gpu_is_read():
    gpus = probe_gpu.parse_gpus(FIELDS, H200_R580)
    assert gpus[1] == {
        "index": 1,
        "uuid": "GPU-7d3b8a2f-9cae-4b4d-8f1a-2b3c4d5e6f70",
        "name": "NVIDIA H200",
        "driver": "580.65.06",
        "memory_mib": 143771,
        "compute_capability": "9.0",
        "mig_mode": "Disabled",
        "compute_mode": "Default",
        "busy_pids": [],
    }


def test_an_old_driver_answer_without_compute_cap_reads_as_unknown():
    fields = "index,uuid,name,driver_version,memory.total"
    gpus = probe_gpu.parse_gpus(
        fields, "0, GPU-00000000-1111-2222-3333-444444444444, Tesla V100-SXM2-32GB, 470.239.06, 32768\n"
    )
    assert (gpus[0]["compute_capability"], gpus[0]["mig_mode"], gpus[0]["memory_mib"]) == ("unknown", None, 32768)


def test_a_kernel_module_version_is_read_from_proc():
    assert probe_gpu.kernel_driver_version(PROC_VERSION) == "580.65.06"
    assert (
        probe_gpu.kernel_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20  Fri")
        == "570.133.20"
    )


@pytest.mark.parametrize(
    ("host", "cuda", "mode", "problem"),
    [
        (facts(H200_R580), "13.0", "gpu", None),
        (facts(H200_R570), "12.8", "gpu", None),
        (
            facts(H200_R570),
            "13.0",
            "gpu",
            "driver 570.133.20 supports CUDA 12.x at most, but torch 2.13.0 is a CUDA 13.0 build, which needs driver "
            "R580 (580.00) or newer. Fix one of: upgrade the NVIDIA driver to R580 or newer; install NVIDIA's "
            "forward-compatibility package (cuda-compat-13-0, data-center GPUs only)",
        ),
        (
            facts(H200_R580.replace("580.65.06", "470.239.06")),
            "12.8",
            "gpu",
            "driver 470.239.06 supports CUDA 11.x at most",
        ),
        (facts(A100_MIG), "13.0", "gpu", "GPU 0 (NVIDIA A100-SXM4-80GB) has MIG mode Enabled"),
        (facts(PROHIBITED), "13.0", "gpu", "GPU 0 (NVIDIA GeForce RTX 4090) is in compute mode Prohibited"),
        (
            facts(H200_R580),
            "cpu",
            "gpu",
            "torch 2.13.0 is a CPU build (gpu_moe_torch_cuda is cpu) but this host has 2 GPU(s)",
        ),
        (
            facts(found=False, kernel="580.65.06", nodes=["/dev/nvidia0", "/dev/nvidia1"]),
            "13.0",
            "cpu",
            "the NVIDIA driver is loaded (kernel module 580.65.06) but the nvidia-smi utility was not found",
        ),
        (
            facts(found=False, nodes=["/dev/nvidia0"]),
            "13.0",
            "cpu",
            "the NVIDIA driver is loaded (/dev/nvidia0) but the nvidia-smi utility was not found",
        ),
        (
            facts(found=False),
            "13.0",
            "cpu",
            "no NVIDIA driver: 'nvidia-smi' was not found and there is no /dev/nvidia*",
        ),
        (
            facts("Failed to initialize NVML: Driver/library version mismatch", rc=18),
            "13.0",
            "cpu",
            "nvidia-smi failed with rc 18: Failed to initialize NVML: Driver/library version mismatch",
        ),
        (facts(""), "13.0", "cpu", "nvidia-smi lists no GPU"),
        (
            facts(found=False, rocm=["/dev/kfd", "rocm-smi"]),
            "13.0",
            "cpu",
            "an AMD GPU with ROCm was found (/dev/kfd, rocm-smi)",
        ),
    ],
    ids=[
        "r580-runs-cuda-13",
        "r570-runs-cuda-12.8",
        "r570-refuses-cuda-13-naming-both-and-the-fixes",
        "r470-refuses-cuda-12",
        "mig-enabled-refused",
        "compute-mode-prohibited-refused",
        "cpu-torch-on-a-gpu-host-refused",
        "nvidia-smi-missing-but-kernel-module-loaded",
        "nvidia-smi-missing-but-device-nodes",
        "no-driver-at-all",
        "nvml-mismatch",
        "empty-list",
        "rocm-refused",
    ],
)
def test_decision_with_a_gpu_required(host, cuda, mode, problem):
    verdict = assess(host, cuda)
    assert verdict["mode"] == mode
    if problem is None:
        assert verdict["problems"] == []
    else:
        assert len(verdict["problems"]) == 1 and verdict["problems"][0].startswith(problem), verdict["problems"]


def test_a_too_old_driver_names_a_cuda_12_torch_as_the_third_fix():
    problem = assess(facts(H200_R570))["problems"][0]
    assert "or install a torch built for CUDA 12.x" in problem and "https://download.pytorch.org/whl/cu12N" in problem


def test_forward_compatibility_libcuda_lets_an_old_driver_run_cuda_13():
    compat = probe_gpu.compat_driver(
        ["/usr/local/cuda-13.0/compat/libcuda.so.580.65.06", "/usr/local/cuda-13.0/compat/libcuda.so.1"]
    )
    verdict = assess(facts(H200_R570, compat=compat))
    assert verdict["problems"] == [] and verdict["forward_compat_dir"] == "/usr/local/cuda-13.0/compat"
    assert verdict["notes"][0].startswith(
        "driver 570.133.20 is older than CUDA 13.0 needs; using the forward-compatibility"
    )


def test_mig_is_a_note_when_allowed():
    verdict = assess(facts(A100_MIG), allow_mig=True)
    assert verdict["problems"] == [] and "MIG mode Enabled" in verdict["notes"][0]


def test_exclusive_process_is_a_note():
    verdict = assess(facts(RTX_EXCLUSIVE))
    assert verdict["problems"] == [] and "Exclusive_Process" in verdict["notes"][0]


@pytest.mark.parametrize(
    "host", [facts(found=False), facts(H200_R570), facts(A100_MIG)], ids=["no-gpu", "old-driver", "mig"]
)
def test_without_require_gpu_every_problem_becomes_a_note_and_cpu_mode(host):
    verdict = assess(host, require_gpu=False)
    assert verdict["problems"] == [] and verdict["mode"] == "cpu" and verdict["notes"]


def test_the_driver_version_is_reported():
    assert assess(facts(H200_R580))["driver"] == "580.65.06"
    assert assess(facts(found=False, kernel="580.65.06"), require_gpu=False)["driver"] == "580.65.06"


def test_each_gpu_gets_a_line_for_the_report():
    assert assess(facts(RTX_EXCLUSIVE))["gpu_lines"] == [
        "GPU 0: NVIDIA GeForce RTX 4090, driver 580.65.06, 24564 MiB, compute capability 8.9, MIG n/a, "
        "compute mode Exclusive_Process"
    ]


# A V100 (compute capability 7.0) on an R580 driver: the driver runs CUDA 13, the GPU does not.
V100_R580 = "0, GPU-00000000-1111-2222-3333-444444444444, Tesla V100-SXM2-32GB, 580.65.06, 32768, 7.0, [N/A], Default\n"
# A T4 (7.5), the oldest GPU CUDA 13 still builds for.
T4_R580 = "0, GPU-99999999-1111-2222-3333-444444444444, Tesla T4, 580.65.06, 15360, 7.5, [N/A], Default\n"


def test_a_gpu_below_cuda_13s_compute_capability_floor_is_refused_with_a_cuda_12_build_as_the_fix():
    problems = assess(facts(V100_R580))["problems"]
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        "GPU 0 (Tesla V100-SXM2-32GB) has compute capability 7.0, but torch 2.13.0 is a CUDA 13.0 build, whose kernels "
        "start at compute capability 7.5"
    )
    assert "install a torch built for CUDA 12.x" in problems[0] and "gpu_moe_torch_cuda: '12.6'" in problems[0]


def test_the_same_gpu_passes_with_a_cuda_12_build_and_the_floor_gpu_with_cuda_13():
    assert assess(facts(V100_R580), cuda="12.6")["problems"] == []
    assert assess(facts(T4_R580))["problems"] == []


def test_an_unknown_compute_capability_is_not_refused():
    host = facts(H200_R580.replace(", 9.0,", ", [N/A],"))
    assert assess(host)["problems"] == []


def test_busy_gpus_come_from_the_compute_apps_answer_and_are_left_out_of_the_idle_list():
    apps = probe_gpu.parse_compute_apps(
        "GPU-7d3b8a2f-9cae-4b4d-8f1a-2b3c4d5e6f70, 41213, 70312\n"
        "GPU-7d3b8a2f-9cae-4b4d-8f1a-2b3c4d5e6f70, 41214, 512\n"
        "No running processes found\n"
    )
    assert apps == {
        "GPU-7d3b8a2f-9cae-4b4d-8f1a-2b3c4d5e6f70": [
            {"pid": 41213, "used_memory_mib": 70312},
            {"pid": 41214, "used_memory_mib": 512},
        ]
    }
    host = facts(H200_R580)
    host["gpus"][1]["busy_pids"] = [41213, 41214]
    verdict = assess(host)
    assert verdict["problems"] == []
    assert verdict["idle_gpu_uuids"] == ["GPU-5c2a6f1e-8b9d-4a3c-9e0f-1a2b3c4d5e6f"]
    assert "GPU 1 is busy (processes 41213, 41214): the smoke test leaves it alone" in verdict["notes"]
