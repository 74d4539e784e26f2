#!/usr/bin/env bash
# Install the Debian packages listed in a requirements file (requirements/apt.txt) by name, with ONE apt-get call,
# only when one is missing or below its declared floor. Then compare what is installed with the versions the project
# was tested with (requirements/apt-tested.txt) and print each difference as a note: Debian's security updates move
# package builds on, and that is expected.
#
#   apt_ensure.sh REQUIREMENTS TESTED            install, then print the notes
#   apt_ensure.sh --record REQUIREMENTS TESTED   write the installed versions into TESTED (after a green `make test`)
#
# Safe to run again: with everything in place it touches nothing and needs no network.
set -euo pipefail

record=0
if [[ "${1:-}" == "--record" ]]; then
    record=1
    shift
fi
requirements=$1
tested=$2

installed_version() {
    dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null | sed -n 's/^install ok installed //p'
}

names=()
floors=()
# Lines: `name` or `name >= version`; comments and blank lines are skipped.
while read -r name op floor rest; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    if [[ -n "$op" && "$op" != ">=" ]] || [[ -n "$op" && -z "$floor" ]] || [[ -n "${rest:-}" ]]; then
        echo "setup: $requirements: '$name $op $floor $rest' is not 'name' or 'name >= version'" >&2
        exit 2
    fi
    names+=("$name")
    floors+=("${floor:-}")
done < <(sed 's/#.*//' "$requirements")

below_floor() {  # $1 name, $2 floor (may be empty)
    local have
    have=$(installed_version "$1")
    [[ -z "$have" ]] && return 0
    [[ -n "$2" ]] && ! dpkg --compare-versions "$have" ge "$2"
}

if ((record)); then
    {
        echo "# Debian package versions the last green \`make test\` ran with (tools/apt_ensure.sh --record)."
        echo "# A note, not a pin: \`make setup\` installs by name and prints each difference."
        for name in "${names[@]}"; do
            echo "$name $(installed_version "$name")"
        done
    } > "$tested"
    exit 0
fi

missing=()
for i in "${!names[@]}"; do
    below_floor "${names[$i]}" "${floors[$i]}" && missing+=("${names[$i]}")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

status=0
for i in "${!names[@]}"; do
    if below_floor "${names[$i]}" "${floors[$i]}"; then
        echo "setup: ${names[$i]} $(installed_version "${names[$i]}") is below its floor ${floors[$i]} ($requirements says why)" >&2
        status=1
    fi
done
((status == 0)) || exit "$status"

# Notes: what differs from the tested versions.
while read -r name version; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    have=$(installed_version "$name")
    if [[ "$have" != "$version" ]]; then
        echo "setup: note: $name ${have:-(not installed)} differs from the tested $version" >&2
    fi
done < "$tested"
