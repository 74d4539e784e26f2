"""Wait until sshd answers on lab addresses; run inside the switch namespace (the only place that reaches them).

Usage: ip netns exec <prefix>-sw python3 lab_probe.py TIMEOUT_S ADDRESS...
Prints one JSON object {address: true|false} and exits 0 when every sshd sent its banner in time, 1 otherwise.
"""

from __future__ import annotations

import json
import socket
import sys
import time

SSH_PORT = 22


def ssh_banner_seen(address: str, timeout_s: float) -> bool:
    """True when a TCP connection to address:22 yields an SSH identification line."""
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
            ready[address] = ssh_banner_seen(address, timeout_s=1.0)
        if all(ready.values()) or time.monotonic() >= deadline:
            return ready
        time.sleep(0.02)


def main(argv: list[str]) -> int:
    timeout_s = float(argv[0])
    ready = wait_for_ssh(argv[1:], timeout_s)
    print(json.dumps(ready))
    return 0 if all(ready.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
