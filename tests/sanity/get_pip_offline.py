"""Offline stand-in for the pip bootstrap script that ansible-test downloads.

ansible-test bootstraps pip into each sanity virtual environment with a script it fetches from a host that
air-gapped controllers cannot reach. This stand-in takes the same command line (pip options, then the requested
packages such as ``pip==24.2``), seeds pip with the interpreter's bundled ``ensurepip`` and lets that pip install
the requested release from the configured package index.

    python get_pip_offline.py --place DIR    copy this script into ansible-test's cache folder DIR, under the name the
                                             installed ansible-test looks for (get_pip_<its pip pin>.py)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

# Options of the original script that pip itself does not understand.
_BOOTSTRAP_ONLY_OPTIONS = {"--no-setuptools", "--no-wheel"}


def cache_name() -> str:
    """The file ansible-test looks for: named after the pip release it pins for its virtual environments."""
    # Imported here: the bootstrap itself runs in a bare virtual environment without ansible-test.
    from ansible_test._internal.python_requirements import get_venv_packages

    python = types.SimpleNamespace(version=f"{sys.version_info[0]}.{sys.version_info[1]}")
    pip_version = get_venv_packages(python)["pip"]
    return f"get_pip_{pip_version.replace('.', '_')}.py"


def place(folder: Path) -> int:
    """Copy this script in under a name of its own first: make test places it for several lines side by side."""
    folder.mkdir(parents=True, exist_ok=True)
    staged = folder / f".{cache_name()}.{os.getpid()}"
    shutil.copyfile(__file__, staged)
    staged.replace(folder / cache_name())
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--place"] and len(sys.argv) == 3:
        return place(Path(sys.argv[2]))
    args = [arg for arg in sys.argv[1:] if arg not in _BOOTSTRAP_ONLY_OPTIONS]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    return subprocess.call([sys.executable, "-m", "pip", "install", *args])


if __name__ == "__main__":
    sys.exit(main())
