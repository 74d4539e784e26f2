"""Real-kernel guests (user-mode Linux with IPVS and systemd) on the hpc.balance netns lab.

  uml_lab.py image                                  build the cached guest image if needed; print its path
  uml_lab.py up     [--prefix hb] [--state-dir DIR]  boot the guests on the running netns lab; last stdout line:
                                                    the inventory path (<state-dir>/inventory-uml.yml)
  uml_lab.py down   [--prefix hb] [--state-dir DIR]  stop the guests, delete their taps and files
  uml_lab.py status [--prefix hb] [--state-dir DIR]  one line per guest; exit 1 unless all run and answer ssh
  uml_lab.py reboot GUEST [--prefix hb] [--state-dir DIR]   reboot a guest and wait until it is back

`tests/lab/lab.py up` first (the guests join its bridge). See README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The guests build on the netns lab's modules (tests/lab) and their own (tests/lab/uml).
for folder in (HERE.parent, HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import uml_guests  # noqa: E402
import uml_image  # noqa: E402
from lab_system import LabError  # noqa: E402
from lab_topology import DEFAULT_PREFIX, validate_prefix  # noqa: E402
from lab_up import LabRefused  # noqa: E402
from uml_topology import GUESTS  # noqa: E402

REPO_ROOT = HERE.parents[2]
EXIT_FAILED = 1
EXIT_REFUSED = 2


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def command_up(prefix: str, state_dir: Path, ssh_timeout_s: float, keep_on_failure: bool) -> int:
    started = time.monotonic()
    try:
        inventory = uml_guests.up(prefix, state_dir, ssh_timeout_s=ssh_timeout_s)
    except LabRefused as error:
        log(f"guests up refused: {error}")
        return EXIT_REFUSED
    except (LabError, OSError, KeyboardInterrupt) as error:
        log(f"guests up failed: {error}")
        if keep_on_failure:
            log(f"kept what was made for debugging; remove it with: {sys.argv[0]} down --prefix {prefix} "
                f"--state-dir {state_dir}")  # fmt: skip
        else:
            log("removing what was made")
            uml_guests.down(prefix, state_dir)
        return EXIT_FAILED
    log(f"lab {prefix}: {len(GUESTS)} guests up in {time.monotonic() - started:.1f} s "
        f"(timings: {state_dir / uml_guests.TIMINGS_FILE})")  # fmt: skip
    log(f"  ssh: ssh -F {state_dir / 'ssh_config-uml'} {GUESTS[0].name}")
    print(inventory)
    return 0


def command_down(prefix: str, state_dir: Path) -> int:
    started = time.monotonic()
    try:
        rc = uml_guests.down(prefix, state_dir)
    except LabError as error:
        log(f"guests down failed: {error}")
        return EXIT_FAILED
    log(f"lab {prefix}: guests down in {time.monotonic() - started:.2f} s")
    return rc


def command_reboot(prefix: str, state_dir: Path, name: str, timeout_s: float) -> int:
    try:
        result = uml_guests.reboot(prefix, state_dir, name, timeout_s=timeout_s)
    except (LabError, ValueError) as error:
        log(f"reboot of {name} failed: {error}")
        return EXIT_FAILED
    print(json.dumps(result))
    return 0


def command_image() -> int:
    try:
        image = uml_image.ensure_image()
    except LabError as error:
        log(f"guest image build failed: {error}")
        return EXIT_FAILED
    log(f"guest image {image.key}: {'built in ' + str(image.build_s) + ' s' if image.built_now else 'cached'}")
    print(image.path)
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="uml_lab.py", description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("image")
    for name in ("up", "down", "status", "reboot"):
        command = commands.add_parser(name)
        if name == "reboot":
            command.add_argument("guest", help=f"guest name ({', '.join(guest.name for guest in GUESTS)})")
            command.add_argument("--timeout-s", type=float, default=uml_guests.DEFAULT_REBOOT_TIMEOUT_S)
        command.add_argument("--prefix", default=DEFAULT_PREFIX, help="lab name prefix (default %(default)s)")
        command.add_argument("--state-dir", type=Path, help="the netns lab's state dir (default <repo>/.lab/<prefix>)")
        if name == "up":
            command.add_argument("--ssh-timeout-s", type=float, default=uml_guests.DEFAULT_SSH_TIMEOUT_S,
                                 help="wait for every guest's sshd (default %(default)s)")  # fmt: skip
            command.add_argument("--keep-on-failure", action="store_true", help="leave failed guests for debugging")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.command == "image":
        return command_image()
    try:
        prefix = validate_prefix(args.prefix)
    except ValueError as error:
        log(str(error))
        return EXIT_REFUSED
    state_dir = (args.state_dir or REPO_ROOT / ".lab" / prefix).absolute()
    if args.command == "up":
        return command_up(prefix, state_dir, args.ssh_timeout_s, args.keep_on_failure)
    if args.command == "down":
        return command_down(prefix, state_dir)
    if args.command == "reboot":
        return command_reboot(prefix, state_dir, args.guest, args.timeout_s)
    try:
        return uml_guests.status(prefix, state_dir)
    except LabError as error:
        log(str(error))
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
