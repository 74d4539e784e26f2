# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of booleans from inventory: "false", "no", "0", "off", "n" and "f" are False.

`-e flag=false` and INI inventories hand a role the string "false", which Python's `bool()` reads as True. Every
filter reads the booleans it takes from variables through `read_boolean`, which uses Ansible's own
`convert_bool.boolean(value, strict=True)` so a value reads the same here as in a module's `type: bool` option.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean


class BooleanInputError(ValueError):
    """A variable holds a value that is not a boolean; the message names the variable, the value and the fix."""


def read_boolean(value: object, name: str, default: bool = False) -> bool:
    """True/False for `value` the way Ansible reads booleans; `default` when it is None (unset or null).

    `name` names the variable in the error, e.g. "lvs_director_vrrp_instances[VI_1].nopreempt on dir1".
    """
    if value is None:
        return default
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise BooleanInputError(
            f"{name} is {value!r}, which is not a boolean: set it to true or false "
            "(yes/no, on/off, 1/0 read the same)"
        ) from None
