#!/usr/bin/env bash
# make demo: bring the local lab up, roll playbooks/site.yml out on it, print the audit, tear the lab down.
# Environment (set by the Makefile): PREFIX, LAB (uml or netns), LAB_STATE, REPORT_DIR, KEEP (1 = leave the lab running).
#   uml:   directors and real servers are real-kernel guests (IPVS); the client sends a bounded load through the VIP
#          between the roll-out and the audit, which grades the real IPVS spread.
#   netns: the quick flavour; the directors run VRRP only (no IPVS in this kernel) and the audit says so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lab=(python3 "$root/tests/lab/lab.py")
lab_args=(--prefix "$PREFIX" --state-dir "$LAB_STATE")

start_s=$(date +%s)
# Six lab machines: one fork each, so no play waits for a second batch.
export ANSIBLE_FORKS=${ANSIBLE_FORKS:-10}
# `up` refuses to touch a lab that already exists, so a second demo stops here and harms nothing.
inventory=$("${lab[@]}" up "${lab_args[@]}" --flavour "${LAB:-uml}" | tail -n 1)
if [[ "${KEEP:-0}" != 1 ]]; then
    trap '"${lab[@]}" down "${lab_args[@]}" >&2' EXIT
fi

# The lab's inventory beside the lab's site variables (the same ones the molecule scenarios use).
site_inventory="$LAB_STATE/site-inventory"
mkdir -p "$site_inventory"
ln -sfn "$inventory" "$site_inventory/hosts.yml"
ln -sfn "$root/tests/lab/site/group_vars" "$site_inventory/group_vars"
ln -sfn "$root/tests/lab/site/host_vars" "$site_inventory/host_vars"
echo "demo: lab inventory $site_inventory" >&2

# The lab's hosts see the machine's files (all but their own /root, /opt, /tmp, /var/tmp), as nodes see a shared
# file system: where gpu1 sees the wheelhouse, it installs torch and triton from there in place, without a copy.
wheelhouse_shared=$(PYTHONPATH="$root/tests/lab" python3 -c \
    'import sys; from hpclab.files import host_sees; print(str(host_sees(sys.argv[1])).lower())' \
    "$root/.work/wheelhouse/gpu_moe")
site_vars=(-e "hpc_balance_lab_repo=$root" -e "hpc_balance_report_dir=$REPORT_DIR"
    -e "gpu_moe_wheelhouse_shared=$wheelhouse_shared"
    -e '{"hpc_balance_required_groups": ["lvs_directors", "lvs_realservers", "lvs_clients", "gpu_nodes"]}')
# site.yml is the roll-out and then the audit; the lab's client load goes in between, where the audit can see it.
# The roll-out runs as two --limit runs side by side, as on a large site: the GPU hosts in one, every other host
# in the other (the layers share no host, and each layer's checks look only at its own hosts). The compute run,
# after its wheelhouse, and the real servers' service start in the background; their logs are printed afterwards.
# The network run is the longer one: each of its steps waits for a guest, and the guests run at nice -10 (see
# hpclab/uml_process.py). Its controller side runs at the same priority.
compute_log="$LAB_STATE/site-compute.log"
services_log="$LAB_STATE/prepare-realservers.log"
{
    ansible-playbook -i "$site_inventory" "$root/tests/lab/site/prepare_wheelhouse.yml" "${site_vars[@]}" &&
        ansible-playbook -i "$site_inventory" "$root/playbooks/site.yml" "${site_vars[@]}" --skip-tags audit \
            --limit 'gpu_nodes:localhost'
} >"$compute_log" 2>&1 &
compute_pid=$!
# lvs_realserver waits (lvs_realserver_check_ports) for the service this starts.
ansible-playbook -i "$site_inventory" "$root/tests/lab/site/prepare_realservers.yml" "${site_vars[@]}" \
    >"$services_log" 2>&1 &
services_pid=$!
network_rc=0
nice -n -10 ansible-playbook -i "$site_inventory" "$root/playbooks/site.yml" "${site_vars[@]}" --skip-tags audit \
    --limit 'all:localhost:!gpu_nodes' || network_rc=$?
services_rc=0
wait "$services_pid" || services_rc=$?
compute_rc=0
wait "$compute_pid" || compute_rc=$?
echo "==================== prepare_realservers.yml (ran alongside) ===================="
cat "$services_log"
echo "==================== prepare_wheelhouse.yml, then site.yml --limit gpu_nodes (ran alongside) ===================="
cat "$compute_log"
if (( services_rc )); then
    echo "demo: prepare_realservers.yml failed (rc $services_rc)" >&2
    exit 1
fi
if (( network_rc || compute_rc )); then
    echo "demo: site.yml failed (other hosts: rc $network_rc, gpu_nodes: rc $compute_rc)" >&2
    exit 1
fi
# The client's bounded load (uml only: the netns directors have no IPVS to send it), then the audit, in one run.
audit_playbooks=("$root/playbooks/audit.yml")
if [[ "${LAB:-uml}" == uml ]]; then
    audit_playbooks=("$root/tests/lab/site/traffic.yml" "${audit_playbooks[@]}")
fi
ansible-playbook -i "$site_inventory" "${audit_playbooks[@]}" "${site_vars[@]}"

echo
echo "==================== hpc.balance audit ===================="
if [[ -f "$REPORT_DIR/report.json" ]]; then
    python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["summary"]))' "$REPORT_DIR/report.json"
    echo "report: $REPORT_DIR/report.html (also report.md, report.json)"
else
    echo "(no report written: see the audit play above)"
fi
"${lab[@]}" guard "${lab_args[@]}" >/dev/null && echo "lab guard: 0 frames left the lab subnet"
echo "demo: done in $(( $(date +%s) - start_s )) s$([[ "${KEEP:-0}" == 1 ]] && echo "; lab kept: make lab-down PREFIX=$PREFIX")"
