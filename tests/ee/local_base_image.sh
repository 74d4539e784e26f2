#!/usr/bin/env bash
# A local stand-in for the execution environment's public base image, for machines that reach no container registry:
# a Debian 12 root (python3 3.11 with pip and venv, apt) built with mmdebstrap from the machine's own apt sources and
# imported into podman. ansible-builder then builds the shipped execution-environment.yml on it with a few stated
# differences (tests/ee/local_definition.py says which).
#
#   tests/ee/local_base_image.sh IMAGE   # prints IMAGE; builds it only when no image of this recipe exists
#
# The machine's own CA certificates (/usr/local/share/ca-certificates) go into the image's trust store, and pip is
# told to use that store: where outbound TLS passes an inspecting proxy, pip's own CA bundle would refuse PyPI.
# The package lists stay in the image (mmdebstrap removes them by default) so that ansible-builder's bindep step can
# `apt-get install` without an `apt-get update` of its own.
set -euo pipefail
image=${1:?usage: local_base_image.sh IMAGE}
suite=bookworm
packages=python3,python3-pip,python3-venv,ca-certificates
# The recipe's key: this script and the CA certificates it copies. An unchanged recipe is never rebuilt.
key=$(cat "$0" /usr/local/share/ca-certificates/*.crt 2>/dev/null | sha256sum | cut -c1-12)
if [[ "$(podman image inspect --format '{{ index .Labels "hpc.balance.recipe" }}' "$image" 2>/dev/null)" == "$key" ]]; then
    echo "$image"
    exit 0
fi
echo "local_base_image: building $image (Debian $suite: $packages) with mmdebstrap" >&2
# Each hook is run by mmdebstrap with $1 = the new root: single quotes on purpose.
# shellcheck disable=SC2016
mmdebstrap --quiet --variant=minbase --include="$packages" --skip=cleanup/apt/lists \
    --customize-hook='mkdir -p "$1/usr/local/share/ca-certificates"' \
    --customize-hook='for c in /usr/local/share/ca-certificates/*.crt; do [ -e "$c" ] && cp "$c" "$1/usr/local/share/ca-certificates/"; done; true' \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null 2>&1' \
    --customize-hook='printf "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n" > "$1/etc/pip.conf"' \
    "$suite" - 2>&2 \
    | podman import --quiet --change 'CMD ["/bin/bash"]' --change "LABEL hpc.balance.recipe=$key" - "$image" >/dev/null
echo "$image"
