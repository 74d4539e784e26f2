#!/usr/bin/python
# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: file_set
short_description: Write several small files in one step, each only when its content, owner or mode differs
version_added: 0.1.0
description:
  - Compares each file with the content given and writes only the ones that differ, then sets owner, group and mode
    where they differ. A role that manages a handful of small files (a unit, a drop-in, a sysctl file, a script) pays
    one round trip to the host instead of two per file, which is what a rerun that changes nothing costs most.
  - Content comes rendered from the controller, for example with the C(ansible.builtin.template) lookup.
  - Every changed file with a I(validate) command is checked first, as a temporary file beside its destination; only
    when every check passed does any file replace its destination (each by an atomic rename). A failed check changes
    nothing and names the file and the command's output.
  - Reports which paths changed (I(changed_paths)), so later tasks can notify a handler per file.
  - The module does not write its arguments to the host's log.
author:
  - hpc.balance maintainers (@hpc-balance)
extends_documentation_fragment:
  - hpc.balance.attributes
attributes:
  check_mode:
    support: full
    details: Reports what would change, with the diff; writes nothing and runs no I(validate) command.
  diff_mode:
    support: full
    details: A diff per file whose content changes, unless that file sets I(diff=false); owner and mode changes too.
options:
  files:
    description:
      - The files, written in this order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: The destination. Its folder must exist unless I(parent_mode) is given.
        type: path
        required: true
        aliases: [dest]
      content:
        description: The whole content of the file.
        type: str
        required: true
      owner:
        description: Owner of the file; left as it is when not given (a new file gets the module's user).
        type: str
      group:
        description: Group of the file; left as it is when not given.
        type: str
      mode:
        description: Mode of the file, as a quoted octal string such as C("0644") or in symbolic form.
        type: raw
      validate:
        description:
          - A command that checks the new content before it replaces the destination; C(%s) stands for the
            temporary file's path and must appear. It runs without a shell, like I(validate) of
            C(ansible.builtin.template).
        type: str
      parent_mode:
        description: Create the destination's folder (owned by the module's user) with this mode when it is missing.
        type: raw
      diff:
        description:
          - Show this file's content in the diff. Set to C(false) for a file that holds a secret; its content is then
            also masked wherever it would appear in the module's result (the invocation's arguments included), as a
            C(no_log) value is.
        type: bool
        default: true
"""

EXAMPLES = r"""
- name: Write the unit, its drop-in and the sysctl file in one step
  hpc.balance.file_set:
    files:
      - path: /etc/systemd/system/keepalived.service.d/hpc-balance.conf
        content: "{{ lookup('ansible.builtin.template', 'systemd-dropin.conf.j2') }}"
        owner: root
        group: root
        mode: "0644"
        parent_mode: "0755"
      - path: /etc/sysctl.d/90-lvs.conf
        content: "net.ipv4.vs.conntrack = 0\n"
        owner: root
        group: root
        mode: "0644"
  register: written

- name: Restart the service when its drop-in changed
  ansible.builtin.debug:
    msg: the drop-in changed
  changed_when: true
  when: "'/etc/systemd/system/keepalived.service.d/hpc-balance.conf' in written.changed_paths"
  notify: Restart keepalived
"""

RETURN = r"""
changed_paths:
  description: The paths whose content, owner, group or mode changed (or would change in check mode), in order.
  returned: always
  type: list
  elements: str
  sample: [/etc/sysctl.d/90-lvs.conf]
files:
  description: Per file, in order, whether its content and whether its owner, group or mode changed.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The destination.
      type: str
    content_changed:
      description: The content differed (the file was missing, or held other bytes).
      type: bool
    changed:
      description: The content, owner, group or mode differed.
      type: bool
"""

import os
import shlex
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native


def _current_bytes(path: str) -> bytes | None:
    """The file's bytes, or None when there is no regular file at path."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        return handle.read()


def _file_args(module: AnsibleModule, spec: dict[str, Any]) -> dict[str, Any]:
    """The common file arguments AnsibleModule.set_fs_attributes_if_different takes (SELinux context left alone)."""
    return module.load_file_common_arguments({"path": spec["path"], "mode": spec["mode"], "owner": spec["owner"],
                                              "group": spec["group"]})


def _content_diff(spec: dict[str, Any], before: bytes | None) -> dict[str, str]:
    path = spec["path"]
    if not spec["diff"]:
        return {"before_header": path, "after_header": path,
                "before": "(content not shown: diff is false for this file)\n",
                "after": "(content not shown: diff is false for this file)\n"}
    return {"before_header": path if before is not None else f"{path} (absent)", "after_header": path,
            "before": "" if before is None else to_native(before, errors="surrogate_or_strict"),
            "after": spec["content"]}


def _stage(module: AnsibleModule, spec: dict[str, Any], content: bytes) -> tuple[str | None, str | None]:
    """Write content to a temporary file beside the destination and run the file's validate command on it.

    Returns the staged file's path, or None and what went wrong: the caller removes every file it staged before it
    fails, so a failure leaves no temporary file behind.
    """
    folder = os.path.dirname(spec["path"]) or "."
    if spec["validate"] and "%s" not in spec["validate"]:
        return None, f"{spec['path']}: validate must contain %s: {spec['validate']}"
    try:
        if not os.path.isdir(folder):
            if spec["parent_mode"] is None:
                return None, f"{spec['path']}: its folder {folder} does not exist (give parent_mode to create it)"
            os.makedirs(folder)
            module.set_mode_if_different(folder, spec["parent_mode"], False)
        handle, staged = tempfile.mkstemp(prefix=".file_set.", dir=folder)
        with os.fdopen(handle, "wb") as out:
            out.write(content)
    except OSError as error:
        return None, f"{spec['path']}: {error}"
    if spec["validate"]:
        argv = [word.replace("%s", staged) for word in shlex.split(spec["validate"])]
        rc, out, err = module.run_command(argv)
        if rc != 0:
            os.unlink(staged)
            return None, f"{spec['path']}: validate ({spec['validate']}) failed with rc {rc}: {(err or out).strip()}"
    return staged, None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list", "elements": "dict", "required": True,
                "options": {
                    "path": {"type": "path", "required": True, "aliases": ["dest"]},
                    "content": {"type": "str", "required": True},
                    "owner": {"type": "str"},
                    "group": {"type": "str"},
                    "mode": {"type": "raw"},
                    "validate": {"type": "str"},
                    "parent_mode": {"type": "raw"},
                    "diff": {"type": "bool", "default": True},
                },
            },
        },
        supports_check_mode=True,
        # The host's log never gets the files' contents (the arguments are not logged at all).
        no_log=True,
    )
    specs = module.params["files"]
    # A file shown with diff=false holds a secret: its content is masked in the whole result, invocation included.
    module.no_log_values.update(spec["content"] for spec in specs if not spec["diff"] and spec["content"])
    paths = [spec["path"] for spec in specs]
    repeated = sorted({path for path in paths if paths.count(path) > 1})
    if repeated:
        module.fail_json(msg=f"file_set: each path may appear once; repeated: {', '.join(repeated)}")

    # Compare every file first; stage and validate the changed ones; only then replace any destination.
    wanted = [to_bytes(spec["content"], errors="surrogate_or_strict") for spec in specs]
    before = [_current_bytes(spec["path"]) for spec in specs]
    differs = [old != new for old, new in zip(before, wanted)]
    diffs = [_content_diff(spec, old) for spec, old, changed in zip(specs, before, differs) if changed]
    if not module.check_mode:
        staged: dict[int, str | None] = {}
        failures: list[str] = []
        for index, spec in enumerate(specs):
            if differs[index]:
                staged[index], failure = _stage(module, spec, wanted[index])
                if failure:
                    failures.append(failure)
        if failures:
            for path in staged.values():
                if path:
                    os.unlink(path)
            module.fail_json(msg="file_set: nothing was written. " + "; ".join(failures), failures=failures)
        for index, path in staged.items():
            module.atomic_move(path, specs[index]["path"], unsafe_writes=False)

    results = []
    for spec, content_changed in zip(specs, differs):
        attribute_diff: dict[str, dict[str, Any]] = {"before": {}, "after": {}}
        # In check mode a file that does not exist yet has no attributes to compare: its creation is the change.
        if module.check_mode and not os.path.exists(spec["path"]):
            attributes_changed = False
        else:
            attributes_changed = module.set_fs_attributes_if_different(_file_args(module, spec), False,
                                                                       attribute_diff)
        if attributes_changed and not content_changed:
            diffs.append({"before_header": spec["path"], "after_header": spec["path"],
                          "before": "".join(f"{key}: {value}\n" for key, value in attribute_diff["before"].items()),
                          "after": "".join(f"{key}: {value}\n" for key, value in attribute_diff["after"].items())})
        results.append({"path": spec["path"], "content_changed": content_changed,
                        "changed": content_changed or attributes_changed})
    changed_paths = [result["path"] for result in results if result["changed"]]
    module.exit_json(changed=bool(changed_paths), changed_paths=changed_paths, files=results,
                     diff=diffs if module._diff else [])


if __name__ == "__main__":
    main()
