"""Wait until sshd answers on lab addresses; runs inside the lab's switch namespace (the only place that reaches them).

Usage: ip netns exec <prefix>-sw python3 -I ssh_probe.py TIMEOUT_S ATTEMPT_TIMEOUT_S ADDRESS...
Prints one JSON object {address: true|false} and exits 0 when every sshd sent its banner in time, 1 otherwise.

Both kinds of lab machine use it. A netns host's sshd answers at once; a user-mode Linux guest forks slowly, so its
sshd may take a few seconds to send the banner while the guest boots: each attempt waits up to ATTEMPT_TIMEOUT_S.
Standard library only, and no imports from the lab package: it runs as a script, isolated (`-I`).
"""

from __future__ import annotations

import json
import socket
import sys
import time

SSH_PORT = 22
# How long one attempt waits for a banner: a netns host, a real-kernel guest.
HOST_ATTEMPT_TIMEOUT_S = 1.0
GUEST_ATTEMPT_TIMEOUT_S = 5.0
RETRY_PAUSE_S = 0.05


def probe_argv(switch: str, timeout_s: float, addresses: list[str], attempt_timeout_s: float) -> list[str]:
    """The command that runs this probe from inside the switch namespace."""
    return ["ip", "netns", "exec", switch, sys.executable, "-I", __file__, str(timeout_s), str(attempt_timeout_s),
            *addresses]  # fmt: skip


def ssh_banner_seen(address: str, timeout_s: float) -> bool:
    """True when a TCP connection to address:22 yields an SSH identification line within the time."""
    try:
        with socket.create_connection((address, SSH_PORT), timeout=timeout_s) as connection:
            return connection.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def wait_for_ssh(addresses: list[str], timeout_s: float, attempt_timeout_s: float) -> dict[str, bool]:
    """Poll every address until its banner arrives or the time is up."""
    deadline = time.monotonic() + timeout_s
    ready = dict.fromkeys(addresses, False)
    while True:
        for address in [address for address, seen in ready.items() if not seen]:
            remaining_s = max(0.1, min(attempt_timeout_s, deadline - time.monotonic()))
            ready[address] = ssh_banner_seen(address, remaining_s)
        if all(ready.values()) or time.monotonic() >= deadline:
            return ready
        time.sleep(RETRY_PAUSE_S)


def main(argv: list[str]) -> int:
    ready = wait_for_ssh(argv[2:], timeout_s=float(argv[0]), attempt_timeout_s=float(argv[1]))
    print(json.dumps(ready))
    return 0 if all(ready.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
