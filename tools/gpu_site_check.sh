#!/usr/bin/env bash
# Run playbooks/gpu.yml on THIS machine (local connection, GPU mode) and print the smoke record of every GPU.
#
# For a GPU machine borrowed for a few minutes: it installs torch/triton/moe_balance from PyPI into a venv under
# .work/gpu-site-check (no root needed, nothing outside that folder is written), runs the role's smoke test on every
# GPU (all-reduce across them when there are two or more), and prints per GPU: model, capability, memory, checks,
# seconds; and once: torch, CUDA, cuDNN, NCCL, driver, torch's GPU count against nvidia-smi's.
#
# Budget (one H200-class GPU, a fast index): wheels ~2.6 GiB download 1-3 min, pip install 1-2 min, first Triton
# compile + smoke < 1 min. The whole run is stopped after GPU_SITE_CHECK_TIMEOUT_S (default 480 s = 8 min).
#
# Usage: tools/gpu_site_check.sh [--dry-run] [--no-allreduce] [-- EXTRA ansible-playbook ARGS]
#   --dry-run       write the inventory, syntax-check the play, list its tasks and print what the role's GPU probe
#                   decides on this machine (read-only; installs nothing). Works on a machine without a GPU.
# Environment: GPU_MOE_PYTHON (the host Python for the venv, default /usr/bin/python3), GPU_SITE_CHECK_DIR,
#   GPU_SITE_CHECK_TIMEOUT_S, GPU_MOE_INDEX_URL (default https://pypi.org/simple), GPU_MOE_TORCH_CUDA (e.g. 12.8
#   with a cu128 index), and the controller's ansible from `make setup` (.venv) or from PATH.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${GPU_SITE_CHECK_DIR:-$ROOT/.work/gpu-site-check}
TIMEOUT_S=${GPU_SITE_CHECK_TIMEOUT_S:-480}
HOST_PYTHON=${GPU_MOE_PYTHON:-/usr/bin/python3}
DRY_RUN=0
ALLREDUCE=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --no-allreduce) ALLREDUCE=false ;;
    --) shift; break ;;
    *) echo "gpu_site_check: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done

if [ -x "$ROOT/.venv/bin/ansible-playbook" ]; then
  export PATH="$ROOT/.venv/bin:$PATH"
  export ANSIBLE_COLLECTIONS_PATH="$ROOT/.venv/collections"
  CONTROLLER_PYTHON="$ROOT/.venv/bin/python"
else
  command -v ansible-playbook >/dev/null || { echo "gpu_site_check: no ansible-playbook; run make setup" >&2; exit 2; }
  CONTROLLER_PYTHON=$(head -1 "$(command -v ansible-playbook)" | sed 's/^#!//')
  # The collection from this checkout: ansible_collections/hpc/balance -> ROOT.
  mkdir -p "$WORK/collections/ansible_collections/hpc"
  ln -sfn "$ROOT" "$WORK/collections/ansible_collections/hpc/balance"
  export ANSIBLE_COLLECTIONS_PATH="$WORK/collections"
fi
export ANSIBLE_ROLES_PATH="$ROOT/roles" ANSIBLE_CALLBACK_RESULT_FORMAT=yaml ANSIBLE_NOCOLOR=1

GPU_COUNT=0
if command -v nvidia-smi >/dev/null; then GPU_COUNT=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true); fi
if [ "$ALLREDUCE" = auto ]; then
  if [ "$GPU_COUNT" -ge 2 ]; then ALLREDUCE=true; else ALLREDUCE=false; fi
fi

# numpy as requirements/moe.txt pins it for the host's Python: numpy 2.3 and later have no CPython 3.10 wheel.
HOST_PYTHON_VERSION=$("$HOST_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
  || { echo "gpu_site_check: $HOST_PYTHON does not run; set GPU_MOE_PYTHON to the host Python for the venv" >&2; exit 2; }
NUMPY_VERSION=$("$CONTROLLER_PYTHON" "$ROOT/tools/moe_pins.py" pin numpy --python-version "$HOST_PYTHON_VERSION")

mkdir -p "$WORK"
REPORT="$WORK/smoke/smoke.json"
cat > "$WORK/inventory.yml" <<EOF
# Written by tools/gpu_site_check.sh: this machine as the only GPU node, through a local connection.
all:
  children:
    gpu_nodes:
      hosts:
        localhost:
          ansible_connection: local
          ansible_python_interpreter: "$CONTROLLER_PYTHON"
          # Everything lives under $WORK, so no root is needed (the play asks for become: true).
          ansible_become: false
          gpu_moe_require_gpu: true
          gpu_moe_python: "$HOST_PYTHON"
          gpu_moe_torch_source: index
          gpu_moe_index_url: "${GPU_MOE_INDEX_URL:-https://pypi.org/simple}"
          gpu_moe_torch_cuda: "${GPU_MOE_TORCH_CUDA:-}"
          gpu_moe_pinned_packages:
            numpy: "$NUMPY_VERSION"
          gpu_moe_venv: "$WORK/venv"
          gpu_moe_venvs_dir: "$WORK/venvs"
          gpu_moe_stage_dir: "$WORK/stage"
          gpu_moe_smoke_records_path: "$WORK/smoke/tokens_per_expert.jsonl"
          gpu_moe_smoke_report_path: "$REPORT"
          gpu_moe_smoke_device: auto
          gpu_moe_smoke_allreduce: $ALLREDUCE
          gpu_moe_smoke_timeout_s: 300
          gpu_moe_controller_python: "$CONTROLLER_PYTHON"
          gpu_moe_controller_build_dir: "$WORK/build"
EOF
PLAY=(ansible-playbook -i "$WORK/inventory.yml" "$ROOT/playbooks/gpu.yml" "$@")
echo "gpu_site_check: $GPU_COUNT GPU(s) listed by nvidia-smi; all-reduce: $ALLREDUCE; Python $HOST_PYTHON_VERSION" \
  "with numpy $NUMPY_VERSION; work folder $WORK"

if [ "$DRY_RUN" = 1 ]; then
  "${PLAY[@]}" --syntax-check
  "${PLAY[@]}" --list-tasks | sed -n '1,60p'
  echo "gpu_site_check: what the role's GPU probe decides here (torch $(sed -n 's/^gpu_moe_torch_version: "\(.*\)"/\1/p' \
    "$ROOT/roles/gpu_moe/defaults/main.yml"), GPU required):"
  "$HOST_PYTHON" "$ROOT/roles/gpu_moe/files/probe_gpu.py" --cuda-build "${GPU_MOE_TORCH_CUDA:-13.0}" --require-gpu \
    | "$HOST_PYTHON" -c 'import json, sys; r = json.load(sys.stdin); print(json.dumps({k: r[k] for k in ("mode", "driver", "gpu_lines", "problems", "notes")}, indent=2))'
  echo "gpu_site_check: dry run only; would run: timeout $TIMEOUT_S ${PLAY[*]}"
  exit 0
fi

rm -f "$REPORT"
started=$(date +%s)
set +e
timeout -k 15 "$TIMEOUT_S" "${PLAY[@]}" 2>&1 | tee "$WORK/playbook.log"
rc=${PIPESTATUS[0]}
set -e
echo "gpu_site_check: playbook rc $rc after $(( $(date +%s) - started )) s (limit $TIMEOUT_S s); log $WORK/playbook.log"
[ "$rc" = 124 ] && echo "gpu_site_check: stopped by the time limit (GPU_SITE_CHECK_TIMEOUT_S)"
if [ ! -s "$REPORT" ]; then
  echo "gpu_site_check: no smoke report at $REPORT (the role stopped before the smoke test; see the log above)" >&2
  exit "$(( rc == 0 ? 1 : rc ))"
fi
"$CONTROLLER_PYTHON" - "$REPORT" "$GPU_COUNT" <<'EOF'
import json, sys

report = json.load(open(sys.argv[1]))
runtime = report["runtime"]
print(f"smoke ok={report['ok']}  moe_balance {report['version']}  total {report['timings_s']['total']} s")
print(f"runtime: torch {runtime['torch']}, CUDA {runtime['cuda']}, cuDNN {runtime['cudnn']}, NCCL {runtime['nccl']}, "
      f"driver {runtime['driver']}; torch sees {runtime['device_count']} GPU(s), nvidia-smi lists {sys.argv[2]}")
for device in report["devices"]:
    failed = ", ".join(check["name"] for check in device["failed_checks"]) or "none"
    print(f"  {device['device']:<8} {device.get('name', '-'):<28} capability {device.get('capability', '-'):<5} "
          f"{device.get('memory_mib', '-')} MiB  ok={device['ok']}  {device['seconds']} s  failed checks: {failed}")
for check in report["checks"]:
    if check["name"] in ("gpu_required", "allreduce", "other_devices") or not check["ok"]:
        print(f"  check {check['name']}: ok={check['ok']} {json.dumps(check['detail'])[:1500]}")
EOF
exit "$rc"
