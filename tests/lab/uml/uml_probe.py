"""Wait until sshd answers on guest addresses; run inside the lab's switch namespace (the only place that reaches them).

Usage: ip netns exec <prefix>-sw python3 uml_probe.py TIMEOUT_S ADDRESS...
Prints one JSON object {address: true|false} and exits 0 when every sshd sent its banner in time, 1 otherwise.

A guest kernel in user mode forks slowly: sshd may take a few seconds to send its banner while a guest boots, so
each attempt waits up to ATTEMPT_TIMEOUT_S for it (the netns lab's probe gives up after one second).
"""

from __future__ import annotations

import json
import socket
import sys
import time

SSH_PORT = 22
ATTEMPT_TIMEOUT_S = 5.0
RETRY_PAUSE_S = 0.2


def ssh_banner_seen(address: str, timeout_s: float) -> bool:
    """True when a TCP connection to address:22 yields an SSH identification line within the time."""
    try:
        with socket.create_connection((address, SSH_PORT), timeout=timeout_s) as connection:
            return connection.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def wait_for_ssh(addresses: list[str], timeout_s: float) -> dict[str, bool]:
    """Poll every address until its banner arrives or the time is up."""
    deadline = time.monotonic() + timeout_s
    ready = dict.fromkeys(addresses, False)
    while True:
        for address in [address for address, seen in ready.items() if not seen]:
            remaining_s = max(0.1, min(ATTEMPT_TIMEOUT_S, deadline - time.monotonic()))
            ready[address] = ssh_banner_seen(address, remaining_s)
        if all(ready.values()) or time.monotonic() >= deadline:
            return ready
        time.sleep(RETRY_PAUSE_S)


def main(argv: list[str]) -> int:
    ready = wait_for_ssh(argv[1:], float(argv[0]))
    print(json.dumps(ready))
    return 0 if all(ready.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
