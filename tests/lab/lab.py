"""The hpc.balance local lab's command line (netns hosts and real-kernel guests): `python3 tests/lab/lab.py --help`.

The lab itself is the package hpclab/ beside this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hpclab.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
