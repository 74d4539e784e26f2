#!/usr/bin/env bash
# Install Debian packages pinned as NAME=VERSION with ONE apt-get call, only when one of them is missing or at
# another version. Safe to run again: with everything in place it touches nothing and needs no network.
set -euo pipefail
missing=()
for spec in "$@"; do
    name=${spec%%=*}
    want=${spec#*=}
    have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
    if [[ "$spec" == "$name" ]]; then
        [[ "$have" == "install ok installed "* ]] || missing+=("$spec")
    else
        [[ "$have" == "install ok installed $want" ]] || missing+=("$spec")
    fi
done
if ((${#missing[@]} == 0)); then
    exit 0
fi
echo "setup: installing Debian packages: ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
