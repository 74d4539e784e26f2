"""Derive the execution environment definition that builds on this machine from the shipped one.

The machine reaches PyPI and Debian's mirrors but neither a container registry nor Ansible Galaxy. Four things
change, nothing else:

- the base image: a local Debian 12 root (tests/ee/local_base_image.sh) instead of the public one;
- ansible-builder's package manager: apt-get (its scripts call ``$PKGMGR install -y`` and ``$PKGMGR clean all``,
  both of which apt-get accepts) instead of dnf;
- pip comes from the base (Debian's python3-pip, ``options.skip_pip_install``): Debian disables ``ensurepip`` for
  its system Python, which ansible-builder's own pip step calls;
- the Galaxy requirements: the same collections at the same versions, taken as ``type: dir`` sources from the
  ``ansible`` package installed in .venv (requirements/controller.txt pins it), because Galaxy cannot be reached. A
  version that differs from the shipped requirements file fails the derivation: the image must hold what ships.

Paths are rewritten for the derived file's own folder. ansible-builder documents RPM-based base images only, so the
Debian base is this machine's test path, not a base the project ships.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import sys

import yaml

# Where the galaxy stage finds the collection sources (ansible-builder copies _build to /build in that stage).
SOURCES_IN_BUILD = "/build/collection-sources"
PACKAGE_MANAGER = "/usr/bin/apt-get"


def installed_version(collections_dir: pathlib.Path, name: str) -> str | None:
    """The version an installed collection's MANIFEST.json states, or None where it is not installed."""
    manifest = collections_dir.joinpath(*name.split("."), "MANIFEST.json")
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text())["collection_info"]["version"]


def derive(shipped: dict, root: pathlib.Path, base_image: str, collections_dir: pathlib.Path,
           out_dir: pathlib.Path) -> tuple[dict, dict]:
    """Return (definition, galaxy requirements) for the local build; raise ValueError on a version mismatch."""
    local = copy.deepcopy(shipped)
    local["images"]["base_image"]["name"] = base_image
    options = local.setdefault("options", {})
    options["package_manager_path"] = PACKAGE_MANAGER
    options["skip_pip_install"] = True
    deps = local["dependencies"]
    for key in ("python", "system"):
        deps[key] = str(root / deps[key])

    wanted = yaml.safe_load((root / shipped["dependencies"]["galaxy"]).read_text())["collections"]
    requirements: list[dict] = []
    # ansible-builder takes an absolute src literally (no glob) and a relative one as a glob beside the definition.
    build_files = [{**entry, "src": os.path.relpath(root / entry["src"], out_dir)}
                   for entry in local.get("additional_build_files", [])]
    problems = []
    for item in wanted:
        have = installed_version(collections_dir, item["name"])
        if have != str(item["version"]):
            problems.append(f"{item['name']}: requirements say {item['version']}, {collections_dir} has {have}")
            continue
        rel = item["name"].replace(".", "/")
        requirements.append({"name": f"{SOURCES_IN_BUILD}/{rel}", "type": "dir"})
        build_files.append({"src": str(collections_dir / rel), "dest": f"collection-sources/{rel}"})
    if problems:
        raise ValueError("; ".join(problems))
    local["additional_build_files"] = build_files
    deps["galaxy"] = str(out_dir / "collections.yml")
    return local, {"collections": requirements}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, required=True, help="the checkout")
    parser.add_argument("--base-image", required=True)
    parser.add_argument("--collections-dir", type=pathlib.Path, required=True,
                        help="an ansible_collections folder holding the pinned collections")
    parser.add_argument("--out-dir", type=pathlib.Path, required=True)
    args = parser.parse_args(argv)
    shipped = yaml.safe_load((args.root / "execution-environment.yml").read_text())
    try:
        local, requirements = derive(shipped, args.root.resolve(), args.base_image, args.collections_dir.resolve(),
                                     args.out_dir.resolve())
    except ValueError as exc:
        print(f"local_definition: {exc}", file=sys.stderr)
        return 1
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "collections.yml").write_text(yaml.safe_dump(requirements, sort_keys=False))
    (args.out_dir / "execution-environment.yml").write_text(yaml.safe_dump(local, sort_keys=False))
    print(args.out_dir / "execution-environment.yml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
