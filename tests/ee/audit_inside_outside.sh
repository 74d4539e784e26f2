#!/usr/bin/env bash
# make ee-audit: playbooks/audit.yml (as the collection's hpc.balance.audit) run twice against one running lab, once
# by the checkout's controller and once inside the execution environment image, then the two verdicts side by side
# (tests/ee/compare_verdicts.py; a difference fails).
#
# Environment (set by the Makefile): ROOT, PREFIX, LAB_STATE (the lab's state folder), EE_IMAGE, EE_AUDIT_DIR (the
# run's folder, emptied first), CONTAINERS_CONF; the outside run uses the caller's ansible-playbook.
#
# The container runs as the image's own user (uid 1000, as AWX runs it) inside the lab's switch namespace, the only
# way into the lab (tests/ee/container_inventory.py); it sees the lab key (a copy it may read), its inventory and its
# report folder, nothing else of the machine.
set -euo pipefail
root=${ROOT:?set by the Makefile}
out=$EE_AUDIT_DIR
if [[ -f "$LAB_STATE/inventory-uml.yml" ]]; then
    inventory=$LAB_STATE/inventory-uml.yml
elif [[ -f "$LAB_STATE/inventory.yml" ]]; then
    inventory=$LAB_STATE/inventory.yml
else
    echo "ee-audit: no lab under $LAB_STATE; bring one up with the roles applied first," \
        "for example: make demo KEEP=1 PREFIX=$PREFIX" >&2
    exit 2
fi
key=$LAB_STATE/ssh/id_ed25519
switch_netns=/run/netns/$PREFIX-sw

rm -rf "$out"
mkdir -p "$out/key"
for side in outside inside; do
    mkdir -p "$out/$side/inventory" "$out/$side/report"
    # The lab's hosts beside the lab's site variables, as make demo gives them to site.yml and the audit.
    cp -rL "$root/tests/lab/site/group_vars" "$root/tests/lab/site/host_vars" "$out/$side/inventory/"
done
cp "$inventory" "$out/outside/inventory/hosts.yml"
python3 "$root/tests/ee/container_inventory.py" "$inventory" "$out/inside/inventory/hosts.yml"
install -m 0600 -o 1000 -g 0 "$key" "$out/key/id_ed25519"
chown -R 1000:0 "$out/inside/report"

audit_vars=(-e "hpc_balance_lab_repo=$root"
    -e '{"hpc_balance_required_groups": ["lvs_directors", "lvs_realservers", "lvs_clients", "gpu_nodes"]}')

echo "== ee-audit: hpc.balance.audit outside (checkout's controller) against $inventory"
start_s=$(date +%s)
ansible-playbook -i "$out/outside/inventory" hpc.balance.audit "${audit_vars[@]}" \
    -e "hpc_balance_report_dir=$out/outside/report" >"$out/outside/audit.log" 2>&1 \
    || { tail -n 40 "$out/outside/audit.log"; echo "ee-audit: the outside audit failed" >&2; exit 1; }
outside_s=$(( $(date +%s) - start_s ))

echo "== ee-audit: hpc.balance.audit inside $EE_IMAGE (network: $switch_netns)"
start_s=$(date +%s)
podman run --rm --network "ns:$switch_netns" \
    -v "$out/inside/inventory:/runner/inventory:ro" \
    -v "$out/key/id_ed25519:$key:ro" \
    -v "$out/inside/report:/runner/report" \
    -e ANSIBLE_FORKS="${ANSIBLE_FORKS:-10}" -e ANSIBLE_NOCOWS=1 -e ANSIBLE_FORCE_COLOR=0 \
    -e ANSIBLE_CALLBACK_RESULT_FORMAT=yaml \
    "$EE_IMAGE" ansible-playbook -i /runner/inventory hpc.balance.audit "${audit_vars[@]}" \
    -e hpc_balance_report_dir=/runner/report >"$out/inside/audit.log" 2>&1 \
    || { tail -n 40 "$out/inside/audit.log"; echo "ee-audit: the audit inside the image failed" >&2; exit 1; }
inside_s=$(( $(date +%s) - start_s ))

echo "ee-audit: audit wall time outside ${outside_s} s, inside ${inside_s} s (logs and reports in $out)"
python3 "$root/tests/ee/compare_verdicts.py" "$out/outside/report/report.json" "$out/inside/report/report.json"
