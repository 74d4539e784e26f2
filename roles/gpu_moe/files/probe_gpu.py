"""Report, read-only, which GPUs a host has and whether the torch build the gpu_moe role installs can use them.

Run on the managed host by gpu_moe_python (standard library only, Python 3.8+). Prints one JSON object:
{"gpus": [...], "driver": "580.65.06" | null, "mode": "gpu" | "cpu", "problems": [...], "notes": [...],
 "facts": {...}}. The role stops on any problem, before anything changes.

What it reads and why:
- `nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits` (NVIDIA's nvidia-smi manual, "--query-gpu"): one
  line per GPU, fields in the order asked, "[N/A]" where a field does not apply (mig.mode.current on a GPU without
  MIG). Drivers before R510 reject compute_cap, older ones the mig fields ('Field "X" is not a valid field to
  query.'), so it asks again with fewer fields.
- /proc/driver/nvidia/version and /dev/nvidia*: the kernel driver is loaded even when the nvidia-smi utility is not
  installed (Debian ships it as a separate package), which is not the same as "no driver".
- /dev/kfd, rocm-smi, amd-smi: an AMD GPU, which the CUDA build of torch from PyPI cannot use.
- The CUDA build of the torch wheel (from the role's torch_builds.json or gpu_moe_torch_cuda) against the driver:
  NVIDIA's CUDA Toolkit release notes, table "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
  Compatibility": CUDA 13.x needs driver >= 580, CUDA 12.x >= 525.60.13, CUDA 11.x >= 450.80.02 (Linux).
- /usr/local/cuda*/compat/libcuda.so.*: NVIDIA's CUDA forward-compatibility package (cuda-compat-13-0), which lets
  a data-center GPU with an older driver run a newer CUDA build when it is on LD_LIBRARY_PATH.
- The compute capability against the CUDA build's floor: CUDA 13.0's release notes remove offline compilation and
  library support for compute capability below 7.5 (Maxwell, Pascal, Volta; announced in CUDA 12.9's notes), CUDA
  12.0's removed Kepler (below 5.0). A V100 (7.0) on an R580 driver passes the driver check and fails at the first
  kernel, so it is refused here with the fix: a CUDA 12.x build of torch.
- `nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits` (the manual's
  "--query-compute-apps"): the processes that hold each GPU now. A GPU that a training job holds is marked busy, so
  the smoke test leaves it alone.

Usage: probe_gpu.py --nvidia-smi nvidia-smi --cuda-build 13.0|cpu [--require-gpu] [--allow-mig]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

# Oldest Linux driver per CUDA major version (CUDA Toolkit release notes, minor version compatibility table).
DRIVER_FLOOR = {13: "580.00", 12: "525.60.13", 11: "450.80.02"}
# The driver branch each floor belongs to, for messages.
DRIVER_BRANCH = {13: "R580", 12: "R525", 11: "R450"}
# Lowest compute capability per CUDA major version (CUDA 13.0 release notes: below 7.5 removed; CUDA 12.0: Kepler
# removed, so 5.0; CUDA 11.x still built for 3.5).
COMPUTE_CAPABILITY_FLOOR = {13: (7, 5), 12: (5, 0), 11: (3, 5)}
FULL_FIELDS = "index,uuid,name,driver_version,memory.total,compute_cap,mig.mode.current,compute_mode"
FIELD_SETS = [
    FULL_FIELDS,
    "index,uuid,name,driver_version,memory.total,compute_cap",
    "index,uuid,name,driver_version,memory.total",
]


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def parse_gpus(fields: str, text: str) -> list[dict]:
    """nvidia-smi CSV (noheader, nounits) -> one dict per GPU; absent fields read as None, "[N/A]" as None."""
    names = fields.split(",")
    gpus = []
    for line in text.splitlines():
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(names) or not values[0].isdigit():
            continue
        row = {
            name: (None if value in ("[N/A]", "N/A", "[Not Supported]") else value)
            for name, value in zip(names, values)  # noqa: B905 - same length (checked above); runs on Python 3.8
        }
        gpus.append(
            {
                "index": int(row["index"]),
                "uuid": row.get("uuid"),
                "name": row.get("name"),
                "driver": row.get("driver_version"),
                "memory_mib": int(row["memory.total"]) if (row.get("memory.total") or "").isdigit() else None,
                "compute_capability": row.get("compute_cap") or "unknown",
                "mig_mode": row.get("mig.mode.current"),
                "compute_mode": row.get("compute_mode"),
                # Filled by gather() from --query-compute-apps: the processes that hold this GPU now.
                "busy_pids": [],
            }
        )
    return gpus


def parse_compute_apps(text: str) -> dict[str, list[dict]]:
    """nvidia-smi --query-compute-apps CSV (noheader, nounits: gpu_uuid, pid, used_memory) -> processes per GPU uuid."""
    apps: dict[str, list[dict]] = {}
    for line in text.splitlines():
        values = [value.strip() for value in line.split(",")]
        if len(values) != 3 or not values[0].startswith(("GPU-", "MIG-")) or not values[1].isdigit():
            continue
        used = int(values[2]) if values[2].isdigit() else None
        apps.setdefault(values[0], []).append({"pid": int(values[1]), "used_memory_mib": used})
    return apps


def compute_capability_problem(gpu: dict, cuda_build: str, torch_label: str) -> str | None:
    """A GPU below the CUDA build's compute-capability floor, with the fix; None when it is fine or unknown."""
    major = int(cuda_build.split(".")[0])
    floor = COMPUTE_CAPABILITY_FLOOR.get(major)
    found = version_tuple(gpu["compute_capability"] or "")
    if floor is None or len(found) < 2 or found[:2] >= floor:
        return None
    older = max((m for m, f in COMPUTE_CAPABILITY_FLOOR.items() if found[:2] >= f), default=None)
    fix = (
        f"install a torch built for CUDA {older}.x, for example X.Y.Z+cu{older}6 from "
        f"https://download.pytorch.org/whl/cu{older}6 with gpu_moe_torch_cuda: '{older}.6'"
        if older
        else "use a newer GPU"
    )
    return (
        f"GPU {gpu['index']} ({gpu['name']}) has compute capability {gpu['compute_capability']}, but {torch_label} "
        f"is a CUDA {cuda_build} build, whose kernels start at compute capability {floor[0]}.{floor[1]} "
        f"(CUDA {major}.0 release notes): {fix}"
    )


def kernel_driver_version(text: str | None) -> str | None:
    """The version in /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  ...")."""
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text or "")
    return match.group(1) if match else None


def compat_driver(paths: list[str]) -> tuple[str, str] | None:
    """The newest forward-compatibility libcuda (version, folder) among /usr/local/cuda*/compat/libcuda.so.X.Y.Z."""
    found = []
    for path in paths:
        match = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", path)
        if match:
            found.append((version_tuple(match.group(1)), match.group(1), os.path.dirname(path)))
    return max(found)[1:] if found else None


def driver_problem(driver: str, cuda_build: str, compat: tuple[str, str] | None, torch_label: str):
    """None when the driver runs this CUDA build; else (problem, forward-compat folder or None)."""
    major = int(cuda_build.split(".")[0])
    floor = DRIVER_FLOOR.get(major)
    if floor is None or version_tuple(driver) >= version_tuple(floor):
        return None
    if compat and version_tuple(compat[0]) >= version_tuple(floor):
        return ("", compat[1])
    older = max((m for m, f in DRIVER_FLOOR.items() if version_tuple(driver) >= version_tuple(f)), default=None)
    runs = f"supports CUDA {older}.x at most" if older else "is older than any CUDA build torch ships"
    fix_build = (
        f"a torch built for CUDA {older}.x (gpu_moe_torch_version X.Y.Z+cu{older}N from "
        f"https://download.pytorch.org/whl/cu{older}N with gpu_moe_torch_cuda: '{older}.N')"
        if older
        else "none"
    )
    return (
        f"driver {driver} {runs}, but {torch_label} is a CUDA {cuda_build} build, which needs driver "
        f"{DRIVER_BRANCH[major]} ({floor}) or newer. Fix one of: upgrade the NVIDIA driver to {DRIVER_BRANCH[major]} "
        f"or newer; install NVIDIA's forward-compatibility package (cuda-compat-{major}-0, data-center GPUs only) so "
        f"that /usr/local/cuda-{major}.0/compat/libcuda.so.* exists; or install {fix_build}",
        None,
    )


def assess(facts: dict, cuda_build: str, require_gpu: bool, allow_mig: bool, torch_label: str) -> dict:
    """Decide from gathered facts (see gather()): GPU or CPU mode, problems that stop the role, notes to report."""
    problems, notes, compat_dir = [], [], None
    gpus = facts["gpus"]
    smi = facts["nvidia_smi"]
    if not gpus:
        if facts["rocm"]:
            reason = (
                f"an AMD GPU with ROCm was found ({', '.join(facts['rocm'])}), and gpu_moe installs PyPI's CUDA "
                "build of torch with PyPI's triton, which cannot use it (ROCm's torch ships its triton as "
                "pytorch-triton-rocm). ROCm is not supported by this role: set gpu_moe_require_gpu: false for CPU mode"
            )
        elif not smi["found"] and (facts["kernel_driver"] or facts["device_nodes"]):
            where = (
                facts["kernel_driver"]
                and f"kernel module {facts['kernel_driver']}"
                or ", ".join(facts["device_nodes"][:3])
            )
            reason = (
                f"the NVIDIA driver is loaded ({where}) but the nvidia-smi utility was not found as "
                f"'{smi['command']}': install it (Debian: nvidia-smi; Ubuntu: nvidia-utils-<branch>; RHEL: "
                "nvidia-driver-cuda) or set gpu_moe_nvidia_smi to its absolute path"
            )
        elif not smi["found"]:
            reason = (
                f"no NVIDIA driver: '{smi['command']}' was not found and there is no /dev/nvidia* or "
                "/proc/driver/nvidia/version. Install the NVIDIA driver so that `nvidia-smi -L` lists the GPUs"
            )
        elif smi["rc"] != 0:
            reason = (
                f"{smi['command']} failed with rc {smi['rc']}: {smi['output'][-600:]}. (After a driver upgrade, "
                "'Driver/library version mismatch' clears with a reboot.)"
            )
        else:
            reason = f"{smi['command']} lists no GPU"
        (problems if require_gpu else notes).append(reason)
        mode = "cpu"
    else:
        mode = "gpu"
        driver = gpus[0]["driver"] or ""
        if cuda_build == "cpu":
            problems.append(
                f"{torch_label} is a CPU build (gpu_moe_torch_cuda is cpu) but this host has {len(gpus)} GPU(s): "
                "install a CUDA build (plain torch from PyPI) or set gpu_moe_require_gpu: false"
            )
        elif cuda_build:
            found = driver_problem(driver, cuda_build, facts["compat"], torch_label)
            if found and found[1]:
                compat_dir = found[1]
                notes.append(
                    f"driver {driver} is older than CUDA {cuda_build} needs; using the forward-compatibility "
                    f"libcuda {facts['compat'][0]} in {compat_dir} (LD_LIBRARY_PATH)"
                )
            elif found:
                problems.append(found[0])
            problems.extend(filter(None, (compute_capability_problem(gpu, cuda_build, torch_label) for gpu in gpus)))
        for gpu in gpus:
            if gpu["mig_mode"] == "Enabled":
                text = (
                    f"GPU {gpu['index']} ({gpu['name']}) has MIG mode Enabled: CUDA sees only the MIG instances "
                    "named in CUDA_VISIBLE_DEVICES (MIG-<uuid>), not the whole GPU"
                )
                if allow_mig:
                    notes.append(text)
                else:
                    problems.append(
                        f"{text}. Disable MIG (nvidia-smi -i {gpu['index']} -mig 0, then reset the GPU) "
                        "or set gpu_moe_allow_mig: true and give CUDA_VISIBLE_DEVICES in "
                        "gpu_moe_smoke_environment"
                    )
            if gpu["compute_mode"] == "Prohibited":
                problems.append(
                    f"GPU {gpu['index']} ({gpu['name']}) is in compute mode Prohibited: no process may "
                    f"use it; set it back with nvidia-smi -i {gpu['index']} -c DEFAULT"
                )
            if gpu["busy_pids"]:
                notes.append(
                    f"GPU {gpu['index']} is busy (processes {', '.join(map(str, gpu['busy_pids']))}): the smoke test "
                    "leaves it alone"
                )
            elif gpu["compute_mode"] == "Exclusive_Process":
                notes.append(
                    f"GPU {gpu['index']} is in compute mode Exclusive_Process: the smoke test fails on it "
                    "while another process (a training job) holds it"
                )
        if problems and not require_gpu:
            notes.extend(problems)
            problems, mode = [], "cpu"
    return {
        "mode": mode,
        "gpus": gpus,
        "idle_gpu_uuids": [gpu["uuid"] for gpu in gpus if not gpu["busy_pids"] and gpu["uuid"]],
        "gpu_lines": [
            f"GPU {gpu['index']}: {gpu['name']}, driver {gpu['driver']}, {gpu['memory_mib']} MiB, compute capability "
            f"{gpu['compute_capability']}, MIG {gpu['mig_mode'] or 'n/a'}, compute mode {gpu['compute_mode'] or 'n/a'}"
            for gpu in gpus
        ],
        "driver": gpus[0]["driver"] if gpus else facts["kernel_driver"],
        "forward_compat_dir": compat_dir,
        "problems": problems,
        "notes": notes,
    }


def run_smi(command: str, fields: str, query: str = "--query-gpu") -> tuple[int, str]:
    try:
        done = subprocess.run(
            [command, f"{query}={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 124, f"{command} did not answer within 60 s (a hung GPU or driver)"
    return done.returncode, (done.stdout + done.stderr).strip()


def gather(command: str) -> dict:
    """Everything assess() reads, from this host."""
    found = shutil.which(command) is not None
    smi = {"command": command, "found": found, "rc": None, "output": "", "fields": None}
    gpus = []
    if found:
        for fields in FIELD_SETS:
            rc, output = run_smi(command, fields)
            smi.update(rc=rc, output=output, fields=fields)
            if rc == 0 or "is not a valid field" not in output:
                break
        if smi["rc"] == 0:
            gpus = parse_gpus(smi["fields"], smi["output"])
    apps: dict[str, list[dict]] = {}
    if gpus:
        rc, output = run_smi(command, "gpu_uuid,pid,used_memory", query="--query-compute-apps")
        apps = parse_compute_apps(output) if rc == 0 else {}
    for gpu in gpus:
        gpu["busy_pids"] = [app["pid"] for app in apps.get(gpu["uuid"] or "", [])]
    try:
        with open("/proc/driver/nvidia/version") as handle:
            kernel = kernel_driver_version(handle.read())
    except OSError:
        kernel = None
    rocm = [path for path in ("/dev/kfd",) if os.path.exists(path)]
    rocm += [tool for tool in ("rocm-smi", "amd-smi") if shutil.which(tool)]
    return {
        "nvidia_smi": smi,
        "gpus": gpus,
        "kernel_driver": kernel,
        "device_nodes": sorted(glob.glob("/dev/nvidia[0-9]*")),
        "rocm": rocm,
        "compat": compat_driver(glob.glob("/usr/local/cuda*/compat/libcuda.so.*")),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--cuda-build", default="", help="CUDA version of the torch build (13.0), cpu, or empty")
    parser.add_argument("--torch-label", default="torch", help="how messages name the torch to be installed")
    parser.add_argument("--require-gpu", action="store_true")
    parser.add_argument("--allow-mig", action="store_true")
    args = parser.parse_args(argv)
    facts = gather(args.nvidia_smi)
    result = assess(facts, args.cuda_build, args.require_gpu, args.allow_mig, args.torch_label)
    result["facts"] = facts
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
