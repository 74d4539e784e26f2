"""Offline stand-in for the pip bootstrap script that ansible-test downloads.

ansible-test bootstraps pip into each sanity virtual environment with a script it fetches from a host that
air-gapped controllers cannot reach. This stand-in takes the same command line (pip options, then the requested
packages such as ``pip==24.2``), seeds pip with the interpreter's bundled ``ensurepip`` and lets that pip install
the requested release from the configured package index.
"""

from __future__ import annotations

import subprocess
import sys

# Options of the original script that pip itself does not understand.
_BOOTSTRAP_ONLY_OPTIONS = {"--no-setuptools", "--no-wheel"}


def main() -> int:
    args = [arg for arg in sys.argv[1:] if arg not in _BOOTSTRAP_ONLY_OPTIONS]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    return subprocess.call([sys.executable, "-m", "pip", "install", *args])


if __name__ == "__main__":
    sys.exit(main())
