"""Files of a lab's state dir: ssh keys, per-host folders the host init mounts, sshd and ssh client configs.

Layout (all under the state dir):
  ssh/id_ed25519          the lab key Ansible logs in with (its .pub is every host's authorized key)
  ssh_config              `ssh -F <state-dir>/ssh_config rs1` reaches a host by name
  logs/<host>.log         stdout/stderr of the host's init and sshd
  hosts/<host>/           seen inside the host as /run/lab-host
    sshd_config, ssh/     the host's sshd configuration and host key
    upper/etc, work/etc   copy-on-write layer over /etc (what the host wrote to /etc lies in upper/etc)
    upper/var/log, ...    the same for /var/log
    root/ tmp/ var-tmp/        fresh per-host /root, /tmp, /var/tmp (/opt is a tmpfs of the host's own)
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from .system import LabError
from .topology import HOSTS, SSH_PORT, SWITCH_ADDRESS, LabHost

# Paths the host sees through a copy-on-write overlay of the machine's own folder.
OVERLAY_PATHS = ("/etc", "/var/log")
# Paths the host gets as fresh, empty per-host folders in the state dir: (path inside the host, folder name, mode).
FRESH_FOLDERS = (
    ("/root", "root", 0o700),
    ("/tmp", "tmp", 0o1777),
    ("/var/tmp", "var-tmp", 0o1777),
)
# Paths the host gets as a fresh tmpfs of its own (host-init.sh), gone with the host. /opt holds gpu1's venvs (about
# 1.2 GB each of torch and triton): on the machine's disk, removing them at `down` took 3 to 6 s (ext4 with online
# discard); a tmpfs is freed at once when the host ends.
FRESH_TMPFS = ("/opt",)
# Folders of /etc a host keeps to itself, empty at first: the machine's own stays hidden behind an opaque folder in the
# host's upper layer (overlayfs: the trusted.overlay.opaque attribute). /etc/ansible: playbooks run against the machine
# itself (tests/playbooks) record local facts in /etc/ansible/facts.d, which the lvs_director role reads on a director,
# so a host would otherwise read the machine's record while such a test runs beside the lab.
PRIVATE_ETC_FOLDERS = ("/etc/ansible",)
# Every path under which a host sees its own fresh files instead of the machine's.
FRESH_PATHS = (*(inside for inside, _name, _mode in FRESH_FOLDERS), *FRESH_TMPFS, *PRIVATE_ETC_FOLDERS)
# The host init binds the host folder here; configs refer to it so they work wherever the state dir is.
HOST_DIR_INSIDE = "/run/lab-host"


def host_sees(path: str | Path) -> bool:
    """Whether a lab host sees the machine's own file at ``path`` (it does, but under a fresh per-host folder)."""
    resolved = Path(path).resolve()
    return not any(resolved == Path(inside) or Path(inside) in resolved.parents for inside in FRESH_PATHS)


def lab_key_path(state_dir: Path) -> Path:
    """Private key Ansible uses for every host."""
    return state_dir / "ssh" / "id_ed25519"


def host_dir(state_dir: Path, host: LabHost) -> Path:
    """Folder holding one host's files."""
    return state_dir / "hosts" / host.name


def host_log(state_dir: Path, host: LabHost) -> Path:
    """Log of one host's init and sshd."""
    return state_dir / "logs" / f"{host.name}.log"


def control_path(state_dir: Path) -> str:
    """ssh ControlPath for the lab's persistent connections (%h: the host address, unique within one lab)."""
    return str(state_dir / "cp-%h")


def _generate_keys(paths: list[Path], comment: str) -> None:
    """Create ed25519 key pairs in parallel (one ssh-keygen per key)."""
    processes = [
        subprocess.Popen(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for path in paths
    ]
    for path, process in zip(paths, processes, strict=True):
        output = process.communicate()[0]
        if process.returncode != 0:
            raise LabError(f"ssh-keygen failed for {path} (rc {process.returncode}): {output.strip()}")


def opaque_folder(path: Path) -> None:
    """An empty folder that hides the lower layer's folder of the same name in an overlay mount (root only)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o755)
    os.setxattr(path, "trusted.overlay.opaque", b"y")


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)


def etc_hosts_text(host: LabHost) -> str:
    """/etc/hosts of a lab host: localhost, the switch and every lab host by name."""
    lines = ["127.0.0.1\tlocalhost", f"127.0.1.1\t{host.name}.lab", f"{SWITCH_ADDRESS}\tswitch.lab switch"]
    lines += [f"{other.address}\t{other.name}.lab {other.name}" for other in HOSTS]
    return "# lab hosts\n" + "\n".join(lines) + "\n"


def sshd_config_text(host: LabHost) -> str:
    """sshd configuration of a lab host: its own address only, key login as root, no DNS, no PAM."""
    return f"""# sshd of lab host {host.name}
ListenAddress {host.address}:{SSH_PORT}
HostKey {HOST_DIR_INSIDE}/ssh/ssh_host_ed25519_key
PidFile /run/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile /root/.ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
StrictModes yes
PrintMotd no
PrintLastLog no
AcceptEnv LANG LC_*
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp /usr/lib/openssh/sftp-server
"""


def ssh_config_text(state_dir: Path, switch_netns: str) -> str:
    """An ssh client config reaching every host by name through the switch namespace."""
    return ssh_client_config_text(HOSTS, state_dir, switch_netns)


def ssh_client_config_text(hosts, state_dir: Path, switch_netns: str, extra_options: tuple[str, ...] = ()) -> str:
    """ssh client config: one `Host` block per host (anything with .name and .address), then the options they share.

    Every lab machine is reached the same way: as root with the lab key, through `nc` in the switch namespace, one
    control connection per address. extra_options are appended to the shared block, one option a line.
    """
    blocks = [f"Host {host.name}\n  HostName {host.address}\n" for host in hosts]
    common = f"""Host *
  User root
  Port {SSH_PORT}
  IdentityFile {lab_key_path(state_dir)}
  IdentitiesOnly yes
  ProxyCommand ip netns exec {switch_netns} nc %h %p
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ControlMaster auto
  ControlPersist 60s
  ControlPath {control_path(state_dir)}
"""
    return "".join(blocks) + common + "".join(f"  {option}\n" for option in extra_options)


def _unlocked_shadow_text() -> str | None:
    """/etc/shadow with root's password field '*' when the machine's root account is locked ('!...').

    sshd without PAM refuses even key logins to a locked account; the change lives only in the hosts' /etc layer.
    """
    with open("/etc/shadow", encoding="utf-8") as shadow_file:
        lines = shadow_file.read().splitlines(keepends=True)
    for index, line in enumerate(lines):
        fields = line.split(":")
        if fields[0] == "root" and len(fields) > 1 and fields[1].startswith("!"):
            fields[1] = "*"
            lines[index] = ":".join(fields)
            return "".join(lines)
    return None


def write_state_files(state_dir: Path, switch_netns: str) -> None:
    """Create keys, configs and per-host folders for every host."""
    (state_dir / "ssh").mkdir(mode=0o700)
    (state_dir / "logs").mkdir()
    for host in HOSTS:
        (host_dir(state_dir, host) / "ssh").mkdir(parents=True, mode=0o700)
    _generate_keys(
        [lab_key_path(state_dir)] + [host_dir(state_dir, host) / "ssh" / "ssh_host_ed25519_key" for host in HOSTS],
        comment="hpc.balance lab",
    )
    authorized_key = lab_key_path(state_dir).with_suffix(".pub").read_text(encoding="utf-8")
    shadow_text = _unlocked_shadow_text()
    for host in HOSTS:
        folder = host_dir(state_dir, host)
        for path in OVERLAY_PATHS:
            for layer in ("upper", "work"):
                layer_dir = folder / layer / path.lstrip("/")
                layer_dir.mkdir(parents=True)
            # The merged folder takes the upper folder's owner and mode: mirror the machine's.
            os.chmod(folder / "upper" / path.lstrip("/"), stat.S_IMODE(os.stat(path).st_mode))
        for _inside, name, mode in FRESH_FOLDERS:
            (folder / name).mkdir()
            os.chmod(folder / name, mode)
        (folder / "root" / ".ssh").mkdir(mode=0o700)
        _write(folder / "root" / ".ssh" / "authorized_keys", authorized_key, 0o600)
        upper_etc = folder / "upper" / "etc"
        _write(upper_etc / "hostname", f"{host.name}\n")
        _write(upper_etc / "hosts", etc_hosts_text(host))
        _write(
            upper_etc / "resolv.conf",
            "# lab hosts resolve names from /etc/hosts only\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
        )
        if shadow_text is not None:
            _write(upper_etc / "shadow", shadow_text, 0o640)
            os.chown(upper_etc / "shadow", 0, os.stat("/etc/shadow").st_gid)
        for private in PRIVATE_ETC_FOLDERS:
            opaque_folder(folder / "upper" / private.lstrip("/"))
        _write(folder / "sshd_config", sshd_config_text(host))
    _write(state_dir / "ssh_config", ssh_config_text(state_dir, switch_netns))
