"""Report, read-only, what the gpu_moe role needs to know about a host before it changes anything.

Run on the managed host by the interpreter that creates the venv (gpu_moe_python). It prints one JSON object:
the interpreter's version, CPU architecture and glibc (to resolve the right wheels), whether it can create a venv,
the package versions it sees itself (for preinstalled torch), and, when the venv exists, the versions installed in
it and the role's marker file. It compares them with the wanted versions and with the sha256 of the moe_balance
wheel built on the controller, so the role installs only what differs and a second run changes nothing.

Kept to the standard library of Python 3.8 and later: it runs before anything is installed.

Usage: probe_host.py --venv DIR --marker FILE_NAME --wheel-sha256 HEX
                     [--want torch==2.13.0 ...] [--want-system torch==2.13.0 --want-system numpy ...]
A want without a version only asks for the package to be there. A pin without a local label accepts any local
label (torch==2.13.0 is met by 2.13.0+cpu or 2.13.0+cu128), as pip does.
"""

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--wheel-sha256", required=True)
    parser.add_argument("--want", action="append", default=[])
    parser.add_argument("--want-system", action="append", default=[])
    args = parser.parse_args()
    names = sorted({split_want(want)[0] for want in args.want + args.want_system} | {"moe_balance"})

    libc, libc_version = platform.libc_ver()
    system, system_error = package_versions(sys.executable, names)
    venv_python = os.path.join(args.venv, "bin", "python")
    venv = {
        "path": args.venv,
        "exists": os.path.isdir(args.venv),
        "python": venv_python,
        "python_exists": os.access(venv_python, os.X_OK),
        "system_site_packages": None,
        "python_version": None,
        "packages": {name: None for name in names},
        "error": None,
        "unmet": [],
    }
    if venv["python_exists"]:
        setting = pyvenv_setting(args.venv, "include-system-site-packages")
        venv["system_site_packages"] = None if setting is None else setting.lower() == "true"
        seen, venv["error"] = package_versions(venv_python, names)
        if seen:
            venv["packages"], venv["python_version"] = seen["packages"], seen["version"]
        venv["unmet"] = unmet(args.want, venv["packages"])
    system_packages = (system or {}).get("packages", {name: None for name in names})
    marker = read_marker(os.path.join(args.venv, args.marker))
    installed_wheel = (marker or {}).get("moe_balance") or {}
    result = {
        "python": {
            "executable": sys.executable,
            "version": platform.python_version(),
            "machine": platform.machine(),
            "libc": libc,
            "glibc": libc_version if libc == "glibc" else None,
            "can_create_venv": all(importlib.util.find_spec(mod) is not None for mod in ("venv", "ensurepip")),
            "packages": system_packages,
            "unmet": unmet(args.want_system, system_packages),
            "error": system_error,
        },
        "venv": venv,
        "marker": marker,
        # The installed moe_balance is the very wheel built on the controller: same hash recorded, same version seen.
        "wheel_current": bool(
            installed_wheel.get("sha256") == args.wheel_sha256
            and installed_wheel.get("version") is not None
            and installed_wheel.get("version") == venv["packages"].get("moe_balance")
        ),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
