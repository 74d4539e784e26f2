"""Offline stand-in for the pip bootstrap script that ansible-test downloads.

ansible-test bootstraps pip into each sanity virtual environment with a script it fetches from a host that
air-gapped controllers cannot reach. This stand-in takes the same command line (pip options, then the requested
packages such as ``pip==24.2``), seeds pip with the interpreter's bundled ``ensurepip`` and lets that pip install
the requested release from the configured package index.

    python get_pip_offline.py --place DIR    copy this script into ansible-test's cache folder DIR, under the name the
                                             installed ansible-test looks for (get_pip_<its pip pin>.py), with the
                                             wheel of that pip release beside it (DIR/pip-wheels)

With the wheel placed, a bootstrap that asks for that pip release alone runs pip from its own wheel and installs it
from there: no ensurepip and no package index (2.1 s instead of 4.7 s on 2 cores, once per sanity test's
virtual environment and ansible-core line). Otherwise it seeds pip with ensurepip as above.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

# Options of the original script that pip itself does not understand.
_BOOTSTRAP_ONLY_OPTIONS = {"--no-setuptools", "--no-wheel"}
# Beside the script in ansible-test's cache folder: the wheel of the pip release it bootstraps.
WHEEL_FOLDER = "pip-wheels"


def pip_version() -> str:
    """The pip release the installed ansible-test pins for its virtual environments."""
    # Imported here: the bootstrap itself runs in a bare virtual environment without ansible-test.
    from ansible_test._internal.python_requirements import get_venv_packages

    python = types.SimpleNamespace(version=f"{sys.version_info[0]}.{sys.version_info[1]}")
    return get_venv_packages(python)["pip"]


def cache_name(version: str) -> str:
    """The file ansible-test looks for: named after the pip release it pins for its virtual environments."""
    return f"get_pip_{version.replace('.', '_')}.py"


def place(folder: Path) -> int:
    """Copy this script in, and download its pip wheel beside it, each under a name of its own first and then renamed:
    make test places it for several lines side by side."""
    version = pip_version()
    folder.mkdir(parents=True, exist_ok=True)
    wheels = folder / WHEEL_FOLDER
    wheels.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheels) as download:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                               ":all:", "--dest", download, f"pip=={version}"])
        for wheel in Path(download).glob("pip-*.whl"):
            wheel.replace(wheels / wheel.name)
    staged = folder / f".{cache_name(version)}.{os.getpid()}"
    shutil.copyfile(__file__, staged)
    staged.replace(folder / cache_name(version))
    return 0


def _placed_wheel(packages: list[str]) -> Path | None:
    """The wheel placed beside this script, when the bootstrap asks for that pip release and nothing else."""
    if len(packages) != 1 or not packages[0].startswith("pip=="):
        return None
    version = packages[0].removeprefix("pip==")
    wheel = Path(__file__).resolve().parent / WHEEL_FOLDER / f"pip-{version}-py3-none-any.whl"
    return wheel if wheel.is_file() else None


def main() -> int:
    if sys.argv[1:2] == ["--place"] and len(sys.argv) == 3:
        return place(Path(sys.argv[2]))
    args = [arg for arg in sys.argv[1:] if arg not in _BOOTSTRAP_ONLY_OPTIONS]
    wheel = _placed_wheel([arg for arg in args if not arg.startswith("-")])
    if wheel is not None:
        # pip runs from its own wheel (a zip on sys.path) and installs that wheel into this environment.
        return subprocess.call([sys.executable, str(wheel / "pip"), "install", "--no-index", "--find-links",
                                str(wheel.parent), *args])
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    return subprocess.call([sys.executable, "-m", "pip", "install", *args])


if __name__ == "__main__":
    sys.exit(main())
