"""Report, read-only, what the gpu_moe role needs to know about a host before it changes anything, and decide.

Run on the managed host by the interpreter that creates the venvs (gpu_moe_python). It prints one JSON object:
the interpreter's version, CPU architecture and glibc (to resolve the right wheels), whether it can create a venv,
whether Triton's JIT can compile there (a C compiler and the interpreter's Python.h), the package versions it sees
itself (for preinstalled torch), the venv that gpu_moe_venv points to now, and what to do with it:

- keep: the venv runs this interpreter's Python version and holds the wanted stack and moe_balance wheel;
- refresh_wheel: only moe_balance differs (version or bytes): reinstall that wheel alone (no 2.8 GiB re-copy);
- build: a new venv in gpu_moe_venvs_dir, keyed by the interpreter's Python version and the stack, is built beside
  the current one, and gpu_moe_venv is switched to it (an atomic rename of a link) only once it is complete. Reasons:
  no venv yet, the Python version changed (an OS upgrade from 3.11 to 3.12), a pin differs, a CPU build of torch
  (local label +cpu) on a GPU host, another stack or source.

It also checks, before any change, that the interpreter is new enough and that the filesystems of the venvs folder
and the stage folder have the space a build needs.

Kept to the standard library of Python 3.8 and later: it runs before anything is installed.

Usage: probe_host.py --venv LINK --venvs-dir DIR --stage-dir DIR --stack-key TEXT --marker FILE_NAME
                     --wheel-sha256 HEX --wheel-version V [--want torch==2.13.0 ...] [--want-system ...] [--gpu]
                     [--min-python 3.10] [--need-venv-mib N] [--need-stage-mib N]
A want without a version only asks for the package to be there. A pin without a local label accepts any local
label (torch==2.13.0 is met by 2.13.0+cpu or 2.13.0+cu128), as pip does; --gpu then rejects a +cpu build.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig

VERSIONS_CODE = """
import json, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
found = {}
for name in sys.argv[1].split(","):
    try:
        found[name] = metadata.version(name) if metadata else None
    except Exception:
        found[name] = None
print(json.dumps({"packages": found, "version": "%d.%d.%d" % sys.version_info[:3]}))
"""
# A build needs this much more than its estimate (pip's temporary files, .pyc, rounding).
DISK_MARGIN = 1.1


def package_versions(python, names):
    """Versions of the named distributions as `python` sees them (None when absent), or an error text."""
    try:
        done = subprocess.run(
            [python, "-c", VERSIONS_CODE, ",".join(names)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"cannot run {python}: {error}"
    if done.returncode != 0:
        return None, f"{python} exited {done.returncode}: {done.stderr.strip()[-500:]}"
    return json.loads(done.stdout), None


def split_want(want):
    name, version = (want.split("==", 1) + [""])[:2]
    return name.strip(), version.strip()


def unmet(wants, installed):
    """Plain-words list of the wants that `installed` (name -> version or None) does not meet."""
    problems = []
    for want in wants:
        name, version = split_want(want)
        have = installed.get(name)
        if have is None:
            problems.append(f"{name} is not installed" + (f" ({version} is wanted)" if version else ""))
        elif version and have != version and ("+" in version or have.split("+")[0] != version):
            problems.append(f"{name} {have} is installed, {version} is wanted")
    return problems


def minor(version):
    """'3.11.7' -> '3.11'."""
    return ".".join(str(version).split(".")[:2])


def venv_key(python_version, stack_key):
    """The venv's folder name: its interpreter's Python version and a hash of the stack (pins, source, build)."""
    return f"py{minor(python_version)}-{hashlib.sha256(stack_key.encode()).hexdigest()[:12]}"


def venv_action(venv, wanted_path, python_version, wants, gpu, wheel_current, wheel_version):
    """(action, reasons): keep, refresh_wheel or build, and why a build is needed."""
    if not venv["python_exists"]:
        return "build", ["there is no venv yet" if not venv["exists"] else f"{venv['path']} has no working bin/python"]
    reasons = []
    if venv["python_version"] and minor(venv["python_version"]) != minor(python_version):
        reasons.append(
            f"the venv runs Python {venv['python_version']} and the interpreter is now {python_version}: a venv is "
            "bound to its interpreter's version, so a new one is built"
        )
    stack_wants = [want for want in wants if split_want(want)[0] != "moe_balance"]
    reasons += unmet(stack_wants, venv["packages"])
    torch = venv["packages"].get("torch") or ""
    if gpu and "+" in torch and torch.split("+", 1)[1].startswith("cpu"):
        reasons.append(f"torch {torch} is a CPU build and this host has a GPU: replaced by the CUDA build")
    # Builds are named KEY.TIMESTAMP, so a rebuild of the same stack never overwrites the venv in use.
    if not reasons and not (venv["resolved"] or "").startswith(os.path.realpath(wanted_path) + "."):
        reasons.append(f"the venv in use ({venv['resolved']}) is not one for this stack ({wanted_path}.*)")
    if reasons:
        return "build", reasons
    if venv["packages"].get("moe_balance") != wheel_version or not wheel_current:
        return "refresh_wheel", []
    return "keep", []


def existing_ancestor(path):
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def disk_check(needs, stat=os.statvfs, device_of=lambda path: os.stat(path).st_dev):
    """needs: [(path, MiB)] -> per filesystem [{paths, free_mib, need_mib, ok}] (needs on one filesystem add up)."""
    filesystems = {}
    for path, need_mib in needs:
        where = existing_ancestor(path)
        entry = filesystems.setdefault(device_of(where), {"paths": [], "need_mib": 0, "free_mib": None})
        entry["paths"].append(path)
        entry["need_mib"] += int(need_mib * DISK_MARGIN)
        if entry["free_mib"] is None:
            found = stat(where)
            entry["free_mib"] = found.f_bavail * found.f_frsize // 1048576
    result = list(filesystems.values())
    for entry in result:
        entry["ok"] = entry["free_mib"] >= entry["need_mib"]
    return result


def pyvenv_setting(venv, key):
    path = os.path.join(venv, "pyvenv.cfg")
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        for line in handle:
            name, sep, value = line.partition("=")
            if sep and name.strip() == key:
                return value.strip()
    return None


def read_marker(path):
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {"unreadable": True}


def jit_toolchain():
    """What Triton's JIT needs at first use: a C compiler ($CC, gcc, cc or clang) and this interpreter's Python.h."""
    compilers = [os.environ.get("CC") or "", "gcc", "cc", "clang"]
    compiler = next((shutil.which(name) for name in compilers if name and shutil.which(name)), None)
    include = sysconfig.get_paths().get("include") or ""
    header = os.path.join(include, "Python.h")
    return {"cc": compiler, "python_h": header, "python_h_exists": os.path.isfile(header)}


def inspect_venv(path, names):
    venv_python = os.path.join(path, "bin", "python")
    kind = (
        "link"
        if os.path.islink(path)
        else "dir"
        if os.path.isdir(path)
        else "other"
        if os.path.lexists(path)
        else "absent"
    )
    venv = {
        "path": path,
        "kind": kind,
        "exists": kind in ("link", "dir") and os.path.isdir(path),
        "resolved": os.path.realpath(path) if os.path.isdir(path) else None,
        "python": venv_python,
        "python_exists": os.access(venv_python, os.X_OK),
        "system_site_packages": None,
        "python_version": None,
        "packages": {name: None for name in names},
        "error": None,
    }
    if venv["python_exists"]:
        setting = pyvenv_setting(path, "include-system-site-packages")
        venv["system_site_packages"] = None if setting is None else setting.lower() == "true"
        seen, venv["error"] = package_versions(venv_python, names)
        if seen:
            venv["packages"], venv["python_version"] = seen["packages"], seen["version"]
    return venv


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", required=True)
    parser.add_argument("--venvs-dir", required=True)
    parser.add_argument("--stage-dir", required=True)
    parser.add_argument("--stack-key", required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--wheel-sha256", required=True)
    parser.add_argument("--wheel-version", required=True)
    parser.add_argument("--want", action="append", default=[])
    parser.add_argument("--want-system", action="append", default=[])
    parser.add_argument("--gpu", action="store_true", help="the host will use a GPU: a +cpu torch must be replaced")
    parser.add_argument("--min-python", default="3.10")
    parser.add_argument("--need-venv-mib", type=int, default=0)
    parser.add_argument("--need-stage-mib", type=int, default=0)
    args = parser.parse_args()
    names = sorted({split_want(want)[0] for want in args.want + args.want_system} | {"moe_balance"})

    libc, libc_version = platform.libc_ver()
    python_version = platform.python_version()
    system, system_error = package_versions(sys.executable, names)
    venv = inspect_venv(args.venv, names)
    marker = read_marker(os.path.join(args.venv, args.marker))
    installed_wheel = (marker or {}).get("moe_balance") or {}
    # The installed moe_balance is the very wheel built on the controller: same hash recorded, same version seen.
    wheel_current = bool(
        installed_wheel.get("sha256") == args.wheel_sha256
        and installed_wheel.get("version") is not None
        and installed_wheel.get("version") == venv["packages"].get("moe_balance")
    )
    wanted = os.path.join(args.venvs_dir, venv_key(python_version, args.stack_key))
    action, reasons = venv_action(venv, wanted, python_version, args.want, args.gpu, wheel_current, args.wheel_version)
    venv.update(
        unmet=unmet(args.want, venv["packages"]) if venv["python_exists"] else [],
        action=action,
        reasons=reasons,
        wanted=wanted,
    )
    needs = [(args.venvs_dir, args.need_venv_mib), (args.stage_dir, args.need_stage_mib)] if action == "build" else []
    system_packages = (system or {}).get("packages", {name: None for name in names})
    version_tuple = tuple(int(part) for part in python_version.split(".")[:2])
    result = {
        "python": {
            "executable": sys.executable,
            "version": python_version,
            "version_ok": version_tuple >= tuple(int(part) for part in args.min_python.split(".")[:2]),
            "machine": platform.machine(),
            "libc": libc,
            "glibc": libc_version if libc == "glibc" else None,
            "can_create_venv": all(importlib.util.find_spec(mod) is not None for mod in ("venv", "ensurepip")),
            # A venv's own interpreter: a venv made from it with --system-site-packages sees the *base* interpreter's
            # site-packages (sys.base_prefix, Python's venv documentation), not this venv's, so its torch would vanish.
            "in_venv": sys.prefix != sys.base_prefix,
            # pip in this interpreter: the index mode's dry run (pip install --dry-run) needs it before any venv exists.
            "has_pip": importlib.util.find_spec("pip") is not None,
            "base_prefix": sys.base_prefix,
            "packages": system_packages,
            "unmet": unmet(args.want_system, system_packages),
            "error": system_error,
        },
        "jit": jit_toolchain(),
        "venv": venv,
        "disk": disk_check(needs),
        "marker": marker,
        "wheel_current": wheel_current,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
