"""A guest's seed disk: a small read-only ext4 image with what makes the shared image this one guest.

It holds the lab's public key (root's authorized key), the guest's own ssh host key and the lab's /etc/hosts.
The guest's `lab-seed.service` (rootfs/) installs them at boot, before sshd starts. Hostname, address and machine
id come from kernel arguments instead (uml_boot.kernel_arguments).
"""

from __future__ import annotations

import os
from pathlib import Path

from .system import run
from .topology import GUESTS, HOSTS, SWITCH_ADDRESS, LabHost

SEED_IMAGE = "seed.img"
SEED_SIZE_KIB = 4096


def etc_hosts_text(guest: LabHost) -> str:
    """/etc/hosts of a guest: localhost, the switch, every netns host and every guest by name.

    The first line is the marker lab-seed looks for: a file without it is replaced at boot.
    """
    lines = ["127.0.0.1\tlocalhost", f"{SWITCH_ADDRESS}\tswitch.lab switch"]
    lines += [f"{host.address}\t{host.name}.lab {host.name}" for host in HOSTS]
    lines += [f"{other.address}\t{other.name}.lab {other.name}" for other in GUESTS]
    return f"# lab hosts (seen from {guest.name})\n" + "\n".join(lines) + "\n"


# The seed's tree/ is copied onto the guest's root with `cp -a`, so every folder's mode here becomes the guest's.
_TREE_FOLDERS = (("", 0o755), ("etc", 0o755), ("etc/ssh", 0o755), ("root", 0o700), ("root/.ssh", 0o700))


def write_seed(folder: Path, guest: LabHost, authorized_key: str) -> Path:
    """Create `folder`/seed/ (kept for reading) and `folder`/seed.img from it; return the image path.

    Layout: tree/ (files at their paths in the guest: root's authorized key, the ssh host key) and hosts.
    """
    seed = folder / "seed"
    seed.mkdir(mode=0o700)
    tree = seed / "tree"
    for relative, mode in _TREE_FOLDERS:
        (tree / relative).mkdir(exist_ok=True)
        os.chmod(tree / relative, mode)
    (tree / "root" / ".ssh" / "authorized_keys").write_text(authorized_key, encoding="utf-8")
    os.chmod(tree / "root" / ".ssh" / "authorized_keys", 0o600)
    host_key = tree / "etc" / "ssh" / "ssh_host_ed25519_key"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{guest.name} host key", "-f", str(host_key)])
    os.chmod(host_key, 0o600)
    os.chmod(host_key.with_suffix(".pub"), 0o644)
    (seed / "hosts").write_text(etc_hosts_text(guest), encoding="utf-8")
    os.chmod(seed / "hosts", 0o644)
    image = folder / SEED_IMAGE
    run(["mkfs.ext4", "-q", "-F", "-L", "lab-seed", "-d", str(seed), str(image), f"{SEED_SIZE_KIB}K"])
    return image
