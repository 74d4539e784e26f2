"""The gpu_moe stack's pins, read from where they are kept, and the wheelhouse download commands made from them.

Why: the numpy pin depends on the Python version (numpy 2.4.6 has no CPython 3.10 wheel; 2.2.6 is the last release
with one), and a wheelhouse download must name every manylinux tag a host accepts (pip matches each --platform tag
literally, and torch 2.13.0's CUDA wheels are tagged from manylinux1 to manylinux_2_28). Written out by hand in
several places these drift apart, so they are read from one place each: requirements/moe.txt for the project's pins
(with environment markers), roles/gpu_moe/defaults/main.yml and vars/main.yml for the role's, and
roles/gpu_moe/files/plan_wheelhouse.py for the tags. The role's README shows the commands this prints, and
tests/unit/setup/test_moe_pins.py checks that the README's text is exactly this output.

Standard library only (it runs on a bare controller Python):

    moe_pins.py download-commands               the wheelhouse `pip download` commands of roles/gpu_moe/README.md
    moe_pins.py pin NAME --python-version 3.10  the version requirements/moe.txt pins NAME to for that Python
"""

from __future__ import annotations

import argparse
import importlib.util
import operator
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
ROLE = ROOT / "roles" / "gpu_moe"
MOE_REQUIREMENTS = ROOT / "requirements" / "moe.txt"
# The newest glibc whose wheels a wheelhouse takes: torch's own wheels are manylinux_2_28, so every host that runs
# them accepts each tag up to 2_28, and nothing newer is needed.
WHEELHOUSE_GLIBC = "2.28"
# The README's examples: both architectures, and both numpy pins (Python 3.10, as on Ubuntu 22.04, and 3.11).
README_EXAMPLES = (("3.11", "x86_64"), ("3.10", "aarch64"))
README_WHEELHOUSE = "/srv/wheelhouse"

_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_PYTHON_CLAUSE = re.compile(r"python_version\s*(<=|>=|==|!=|<|>)\s*['\"](\d+)\.(\d+)['\"]")
_PIN = re.compile(r"([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)\s*(?:;(.*))?")


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


def marker_holds(marker: str, python_version: str) -> bool:
    """Whether a marker made of `python_version OP "X.Y"` clauses joined by `and` holds for that Python.

    Only that form is read (what requirements/moe.txt needs); any other marker is an error, not a guess.
    """
    result = True
    for clause in marker.split(" and "):
        match = _PYTHON_CLAUSE.fullmatch(clause.strip())
        if not match:
            raise ValueError(
                f'marker clause {clause.strip()!r} is not `python_version OP "X.Y"`; moe_pins.py '
                "reads only those (add the form it needs here)"
            )
        wanted = (int(match.group(2)), int(match.group(3)))
        result = result and _COMPARE[match.group(1)](version_tuple(python_version), wanted)
    return result


def requirement_pins(path: Path, python_version: str) -> dict[str, str]:
    """name -> version of each `name==version[; marker]` line of a requirements file whose marker holds."""
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.fullmatch(line)
        if not match:
            raise ValueError(f"{path}:{number}: {line!r} is not an exact pin (name==version[; marker])")
        name, version, marker = match.groups()
        if marker is None or marker_holds(marker, python_version):
            if name.lower() in found:
                raise ValueError(f"{path}:{number}: {name} is pinned twice for Python {python_version}")
            found[name.lower()] = version
    return found


def role_variables(path: Path) -> dict[str, object]:
    """The top-level scalars and flow mappings ({} or {name: "1.0"}) of a role's defaults or vars file."""
    found: dict[str, object] = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([a-z_][a-z0-9_]*):\s*(.*?)\s*", line)
        if not match:
            continue
        name, value = match.groups()
        if value.startswith("{") and value.endswith("}") and "{{" not in value:
            pairs = re.findall(r"([A-Za-z0-9_.-]+)\s*:\s*['\"]?([^'\",}]+?)['\"]?\s*(?:,|$)", value[1:-1].strip())
            found[name] = dict(pairs)
        else:
            found[name] = value.strip("'\"")
    return found


def role_requirements() -> list[str]:
    """What the role installs with its defaults: torch, triton, gpu_moe_pinned_packages, moe_balance's dependencies."""
    import tomllib  # Python 3.11; only the resolution matrix needs it

    defaults = role_variables(ROLE / "defaults" / "main.yml")
    pinned = defaults["gpu_moe_pinned_packages"]
    if not isinstance(pinned, dict):
        raise ValueError(
            f"gpu_moe_pinned_packages in {ROLE / 'defaults' / 'main.yml'} is not a flow mapping "
            f'({pinned!r}); moe_pins.py reads `{{}}` or `{{name: "version"}}`'
        )
    wants = [f"torch=={defaults['gpu_moe_torch_version']}", f"triton=={defaults['gpu_moe_triton_version']}"]
    wants += [f"{name}=={version}" for name, version in pinned.items()]
    pyproject = tomllib.loads((ROOT / "packages" / "moe_balance" / "pyproject.toml").read_text())
    return wants + list(pyproject["project"]["dependencies"])


def plan_wheelhouse() -> ModuleType:
    """The role's wheelhouse planner, which decides the manylinux tags (shipped with the role; tools/ is not)."""
    spec = importlib.util.spec_from_file_location("gpu_moe_plan_wheelhouse", ROLE / "files" / "plan_wheelhouse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def platform_tags(machine: str) -> list[str]:
    """The --platform tags of a wheelhouse download for this architecture, in the order pip is given them."""
    return plan_wheelhouse().download_platform_tags(machine, WHEELHOUSE_GLIBC)


def _platform_text(machine: str) -> list[str]:
    """The tags as shell text: the run of manylinux_2_N tags as one `seq` loop, then the aliases."""
    tags = platform_tags(machine)
    minors = []
    for tag in tags:
        match = re.fullmatch(rf"manylinux_2_(\d+)_{re.escape(machine)}", tag)
        if not match:
            break
        minors.append(int(match.group(1)))
    if minors != list(range(minors[0], minors[-1] - 1, -1)):
        raise ValueError(f"the manylinux_2_N tags of {machine} are not one descending run: {tags}")
    loop = f"$(for m in $(seq {minors[0]} -1 {minors[-1]}); do echo --platform manylinux_2_${{m}}_{machine}; done)"
    return [loop, " ".join(f"--platform {tag}" for tag in tags[len(minors) :])]


def download_command(python_version: str, machine: str, dest: str = README_WHEELHOUSE) -> str:
    """One `pip download` command for hosts of this Python and architecture: options, tags, then what to download."""
    pins = requirement_pins(MOE_REQUIREMENTS, python_version)
    abi = "cp" + python_version.replace(".", "")
    head = f"pip download --only-binary=:all: --implementation cp --python-version {python_version} --abi {abi}"
    tail = " ".join([f"-d {dest}", *(f"{name}=={version}" for name, version in pins.items())])
    lines = [head, *_platform_text(machine), tail]
    return " \\\n    ".join(line for line in lines if line)


def download_commands() -> str:
    """The README's commands, each under a comment naming its hosts."""
    blocks = [
        f"# {machine} hosts with Python {python}\n{download_command(python, machine)}"
        for python, machine in README_EXAMPLES
    ]
    return "\n".join(blocks) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("download-commands", help="the wheelhouse commands of roles/gpu_moe/README.md")
    pin = commands.add_parser("pin", help="the version requirements/moe.txt pins a package to for a Python")
    pin.add_argument("name")
    pin.add_argument("--python-version", required=True, help="X.Y")
    args = parser.parse_args(argv)
    if args.command == "download-commands":
        sys.stdout.write(download_commands())
        return 0
    pins = requirement_pins(MOE_REQUIREMENTS, args.python_version)
    if args.name.lower() not in pins:
        print(f"moe_pins: {MOE_REQUIREMENTS} pins no {args.name} for Python {args.python_version}", file=sys.stderr)
        return 2
    print(pins[args.name.lower()])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
