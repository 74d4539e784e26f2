"""The guests' root filesystem: one ext4 image built from Debian packages, cached outside the checkout.

The image is keyed by a hash of its recipe (suite, package list, the files laid over it, the UML kernel's module
version, the build steps' version), so it is rebuilt only when one of those changes and every clone on the machine
shares it. Guests never write to it: each boots through its own copy-on-write file.

Build: mmdebstrap (minbase + the packages) into a folder, the files of guest-rootfs/ laid over it, the UML kernel's
modules copied in, units enabled/masked, then `mkfs.ext4 -d` turns the folder into the image (no loop device).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .system import LabError, run
from .uml_boot import ROOT_FS_SIZE_MIB

HERE = Path(__file__).resolve().parent
ROOTFS_OVERLAY = HERE / "guest-rootfs"
SUITE = "bookworm"
VARIANT = "minbase"
# Everything a guest needs to be a real LVS director or real server, managed by Ansible over ssh.
GUEST_PACKAGES = (
    "systemd-sysv",
    "udev",
    "dbus",
    "kmod",
    "procps",
    "iproute2",
    "openssh-server",
    "python3",
    "ipvsadm",
    "keepalived",
    "iperf3",
    "iputils-arping",
    "iputils-ping",
    "netcat-openbsd",
)
# Bump when the build steps below change in a way the recipe's other fields do not show.
BUILD_STEPS_VERSION = 1
UML_MODULES_DIR = Path("/usr/lib/uml/modules")
DEFAULT_CACHE_DIR = Path("/var/cache/hpc-balance-lab")
CACHE_DIR_VARIABLE = "HPC_BALANCE_LAB_CACHE"
IMAGE_FILE = "rootfs.img"
RECIPE_FILE = "recipe.json"
BUILD_LOG_FILE = "build.log"
BUILD_TIMEOUT_S = 900.0
# Memory the build may use for the image's folder tree (~300 MiB used), freed when the build ends.
BUILD_TMPFS_MIB = 1536
REQUIRED_TOOLS = ("mmdebstrap", "mkfs.ext4", "chroot", "linux")
MACHINE_PACKAGES_HINT = "apt-get install user-mode-linux mmdebstrap e2fsprogs (make setup)"

# Units a lab guest does not need: consoles nobody logs in on, periodic jobs that only slow a short-lived guest, and
# early-boot units for hardware, file systems and records a lab guest never uses. Every process costs a user-mode
# kernel far more than a real one (4 guests on 2 cores boot about a third faster without these).
MASKED_UNITS = (
    "getty.target",
    "console-getty.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "systemd-tmpfiles-clean.timer",
    "systemd-update-utmp.service",
    "systemd-update-utmp-runlevel.service",
    "systemd-binfmt.service",
    "proc-sys-fs-binfmt_misc.automount",
    "proc-sys-fs-binfmt_misc.mount",
    "sys-fs-fuse-connections.mount",
    "sys-kernel-config.mount",
    "sys-kernel-debug.mount",
    "sys-kernel-tracing.mount",
    "systemd-random-seed.service",
    "systemd-pstore.service",
    "systemd-sysusers.service",
    "modprobe@configfs.service",
    "modprobe@dm_mod.service",
    "modprobe@drm.service",
    "modprobe@efi_pstore.service",
    "modprobe@fuse.service",
    "modprobe@loop.service",
)
# Generators a lab guest does not need: systemd runs every generator at boot and at each daemon-reload, and each
# costs 0.6 to 2.0 s in a guest (a daemon-reload took 16.4 to 17.4 s with all twelve, 10.3 to 12.2 s without these).
# Kept: fstab (the root file system's options) and sysv (init scripts such as ipvsadm's). systemd.generator(7): a
# link to /dev/null in /etc/systemd/system-generators masks the generator of that name.
MASKED_GENERATORS = (
    "systemd-cryptsetup-generator",
    "systemd-debug-generator",
    "systemd-getty-generator",
    "systemd-gpt-auto-generator",
    "systemd-hibernate-resume-generator",
    "systemd-integritysetup-generator",
    "systemd-rc-local-generator",
    "systemd-run-generator",
    "systemd-system-update-generator",
    "systemd-veritysetup-generator",
)
GENERATOR_MASK_DIR = Path("etc/systemd/system-generators")
ENABLED_UNITS = ("systemd-networkd.service", "systemd-network-generator.service", "lab-seed.service")
# Files of guest-rootfs/ that must be executable inside the guest.
EXECUTABLE_DIRS = ("usr/local/sbin",)
# Documentation and translations are never read in a guest; leaving them out makes the image smaller and faster.
DPKG_PATH_EXCLUDES = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Image:
    """A built image and where it lives."""

    path: Path
    key: str
    built_now: bool
    build_s: float | None


def cache_root() -> Path:
    """Folder holding the cached images: $HPC_BALANCE_LAB_CACHE or /var/cache/hpc-balance-lab, plus /uml."""
    return Path(os.environ.get(CACHE_DIR_VARIABLE) or DEFAULT_CACHE_DIR) / "uml"


def uml_modules_version() -> str:
    """The module version of the installed UML kernel (the one folder under /usr/lib/uml/modules)."""
    versions = sorted(path.name for path in UML_MODULES_DIR.glob("*") if path.is_dir())
    if len(versions) != 1:
        raise LabError(
            f"expected exactly one UML kernel module folder in {UML_MODULES_DIR}, found {versions or 'none'}: "
            f"(re)install the Debian package user-mode-linux ({MACHINE_PACKAGES_HINT})"
        )
    return versions[0]


def overlay_files() -> list[tuple[str, str]]:
    """(relative path, sha256) of every file laid over the image, sorted."""
    files = []
    for path in sorted(ROOTFS_OVERLAY.rglob("*")):
        if path.is_file():
            files.append((str(path.relative_to(ROOTFS_OVERLAY)), hashlib.sha256(path.read_bytes()).hexdigest()))
    return files


def recipe() -> dict[str, object]:
    """Everything the image's content depends on; its hash is the cache key."""
    return {
        "suite": SUITE,
        "variant": VARIANT,
        "packages": sorted(GUEST_PACKAGES),
        "dpkg_path_excludes": list(DPKG_PATH_EXCLUDES),
        "overlay": overlay_files(),
        "enabled_units": list(ENABLED_UNITS),
        "masked_units": list(MASKED_UNITS),
        "masked_generators": list(MASKED_GENERATORS),
        "uml_modules": uml_modules_version(),
        "size_mib": ROOT_FS_SIZE_MIB,
        "build_steps": BUILD_STEPS_VERSION,
    }


def recipe_key(recipe_data: dict[str, object]) -> str:
    """The cache key: 16 hex digits of the recipe's sha256."""
    return hashlib.sha256(json.dumps(recipe_data, sort_keys=True).encode()).hexdigest()[:16]


def apt_source_files(suite: str = SUITE, apt_dir: Path = Path("/etc/apt")) -> list[str]:
    """The machine's own apt source files that serve this suite, handed to mmdebstrap as its mirrors.

    The image is fetched through the same Debian sources (mirror, proxy) the machine's apt uses.
    """
    candidates = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    candidates += sorted((apt_dir / "sources.list.d").glob("*.sources"))
    chosen = []
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in (raw.split("#", 1)[0].split() for raw in text.splitlines()):
            one_line_style = line[:1] == ["deb"] and suite in line
            deb822_style = line[:1] == ["Suites:"] and suite in line[1:]
            if one_line_style or deb822_style:
                chosen.append(str(path))
                break
    if not chosen:
        raise LabError(
            f"no apt source on this machine serves Debian {suite} (looked in {apt_dir}/sources.list and "
            f"{apt_dir}/sources.list.d): add the Debian {suite} sources, then run `apt-get update`"
        )
    return chosen


def check_tools() -> None:
    """Fail before building when a tool is missing or the caller is not root."""
    if os.geteuid() != 0:
        raise LabError("building the guest image needs root (mmdebstrap in root mode, chroot)")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise LabError(f"missing tools {missing}: {MACHINE_PACKAGES_HINT}")


def _run_logged(argv: list[str], log_path: Path, timeout_s: float) -> None:
    """Run a build step with its output appended to the build log; on failure raise with the log's tail."""
    with open(log_path, "ab") as log_file:
        log_file.write(f"$ {' '.join(argv)}\n".encode())
        log_file.flush()
        try:
            completed = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise LabError(f"image build step took longer than {timeout_s} s: {' '.join(argv)}") from error
    if completed.returncode != 0:
        tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        raise LabError(f"image build step failed (rc {completed.returncode}): {argv[0]}; full log {log_path}\n{tail}")


def bootstrap(root: Path, log_path: Path) -> None:
    """Debian minbase plus the guest packages, from the machine's apt sources, into the folder `root`."""
    argv = [
        "mmdebstrap",
        "--mode=root",
        f"--variant={VARIANT}",
        f"--include={','.join(GUEST_PACKAGES)}",
        # The machine's apt does not insist on fresh Release dates (its mirror may be a snapshot); neither do we.
        '--aptopt=Acquire::Check-Valid-Until "false"',
        *[f"--dpkgopt={option}" for option in DPKG_PATH_EXCLUDES],
        SUITE,
        str(root),
        *apt_source_files(),
    ]
    _run_logged(argv, log_path, BUILD_TIMEOUT_S)


def lay_overlay(root: Path) -> None:
    """Copy guest-rootfs/ over the image folder: root-owned, 0755 in the executable folders, 0644 elsewhere."""
    for source in sorted(ROOTFS_OVERLAY.rglob("*")):
        relative = source.relative_to(ROOTFS_OVERLAY)
        target = root / relative
        if source.is_dir():
            target.mkdir(mode=0o755, exist_ok=True)
            continue
        if target.is_symlink() or target.exists():
            target.unlink()
        shutil.copyfile(source, target)
        executable = any(str(relative).startswith(f"{folder}/") for folder in EXECUTABLE_DIRS)
        os.chmod(target, 0o755 if executable else 0o644)
        os.chown(target, 0, 0)


def mask_generators(root: Path) -> None:
    """Link each of MASKED_GENERATORS to /dev/null under the image's /etc/systemd/system-generators."""
    folder = root / GENERATOR_MASK_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name in MASKED_GENERATORS:
        link = folder / name
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")


def customize(root: Path, log_path: Path) -> None:
    """Make the bootstrapped folder a lab guest: modules, overlay, per-guest identity left blank, units."""
    version = uml_modules_version()
    shutil.copytree(UML_MODULES_DIR / version, root / "usr" / "lib" / "modules" / version, symlinks=True)
    lay_overlay(root)
    # Identity comes per guest at boot (kernel arguments, seed disk), never from the image.
    (root / "etc" / "machine-id").write_text("", encoding="ascii")
    for path in [root / "etc" / "hostname", *sorted((root / "etc" / "ssh").glob("ssh_host_*"))]:
        path.unlink(missing_ok=True)
    _run_logged(["chroot", str(root), "systemctl", "enable", *ENABLED_UNITS], log_path, 60.0)
    _run_logged(["chroot", str(root), "systemctl", "mask", *MASKED_UNITS], log_path, 60.0)
    mask_generators(root)


def make_filesystem(root: Path, image: Path, log_path: Path) -> None:
    """A sparse ext4 image holding the folder's tree (mkfs.ext4 -d; needs no loop device or mount)."""
    argv = ["mkfs.ext4", "-q", "-F", "-L", "lab-guest", "-d", str(root), str(image), f"{ROOT_FS_SIZE_MIB}M"]
    _run_logged(argv, log_path, 300.0)


def build(target: Path, recipe_data: dict[str, object]) -> dict[str, float]:
    """Build the image into a fresh folder `target` (IMAGE_FILE, RECIPE_FILE, BUILD_LOG_FILE); return timings."""
    log_path = target / BUILD_LOG_FILE
    root = target / "root"
    timings = {}
    # NOTE: the folder tree lives in a tmpfs of its own: dpkg's many small writes and the final removal of ~13k
    # files take tens of seconds on a disk, well under one in memory. Unmounting frees the memory at once.
    root.mkdir()
    run(["mount", "-t", "tmpfs", "-o", f"size={BUILD_TMPFS_MIB}M,mode=0755", "lab-guest-build", str(root)])
    try:
        mark = time.monotonic()
        bootstrap(root, log_path)
        timings["bootstrap_s"] = round(time.monotonic() - mark, 2)
        mark = time.monotonic()
        customize(root, log_path)
        timings["customize_s"] = round(time.monotonic() - mark, 2)
        mark = time.monotonic()
        make_filesystem(root, target / IMAGE_FILE, log_path)
        timings["mkfs_s"] = round(time.monotonic() - mark, 2)
    finally:
        _unmount_under(target)
    root.rmdir()
    os.chmod(target / IMAGE_FILE, 0o444)
    record = {"recipe": recipe_data, "timings": timings, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (target / RECIPE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return timings


def ensure_image() -> Image:
    """The cached image for the current recipe, built first when missing (one builder at a time per machine)."""
    recipe_data = recipe()
    key = recipe_key(recipe_data)
    root = cache_root()
    final = root / key
    if (final / IMAGE_FILE).is_file():
        return Image(path=final / IMAGE_FILE, key=key, built_now=False, build_s=None)
    check_tools()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w", encoding="ascii") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        if (final / IMAGE_FILE).is_file():  # another builder finished it while we waited
            return Image(path=final / IMAGE_FILE, key=key, built_now=False, build_s=None)
        work = root / f"{key}.building"
        if work.exists():
            _remove_tree(work)
        work.mkdir()
        started = time.monotonic()
        log(f"lab guests: building the guest image {key} (Debian {SUITE}, {len(GUEST_PACKAGES)} packages) in {work}")
        try:
            timings = build(work, recipe_data)
        except BaseException:
            log(f"lab guests: image build failed; its log stays in {work / BUILD_LOG_FILE}")
            raise
        os.replace(work, final)
        build_s = round(time.monotonic() - started, 2)
        _prune_unused_images(root, keep=final)
        log(f"lab guests: image {key} built in {build_s} s ({timings}) -> {final / IMAGE_FILE}")
        return Image(path=final / IMAGE_FILE, key=key, built_now=True, build_s=build_s)


def _unmount_under(path: Path) -> None:
    """Unmount everything mounted below `path` (the build tmpfs, and /proc etc. a failed chroot step left)."""
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines()]
    for mount_point in sorted((m for m in mounts if m.startswith(f"{path}/")), reverse=True):
        run(["umount", "--lazy", mount_point])


def _remove_tree(path: Path) -> None:
    """Remove a half-built image folder left by an interrupted build."""
    _unmount_under(path)
    shutil.rmtree(path)


def _open_paths() -> set[str]:
    """Paths that running processes hold open (a guest's `linux` holds its image)."""
    paths = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for descriptor in os.listdir(f"/proc/{entry}/fd"):
                paths.add(os.readlink(f"/proc/{entry}/fd/{descriptor}"))
        except OSError:
            continue
    return paths


def _prune_unused_images(root: Path, keep: Path) -> None:
    """Remove older images of other recipes that no running guest uses (each takes ~400 MiB of disk)."""
    in_use = _open_paths()
    for folder in root.glob("*.building"):  # builds interrupted earlier (the lock is ours, so none runs now)
        _remove_tree(folder)
    for folder in root.iterdir():
        if folder == keep or not folder.is_dir() or not (folder / RECIPE_FILE).is_file():
            continue
        if str(folder / IMAGE_FILE) in in_use:
            continue
        log(f"lab guests: removing the unused older image {folder}")
        shutil.rmtree(folder, ignore_errors=True)
