"""Read the Ansible.Basic argument spec (`$spec = ...`) out of a PowerShell module, without PowerShell.

The spec is a hashtable literal of strings, numbers, $true/$false/$null, arrays and nested hashtables; this
evaluates exactly that subset from the tree-sitter-powershell syntax tree and refuses anything else (an unbound
variable, an interpolated string, a command), so the comparison with the .py DOCUMENTATION never guesses.

One step beyond literals: a module may build its spec with a function of a module_utils library
(`$spec = Get-HpcChangeListSpec -Command $commands`). The function's own `$spec = @{...}` literal is then evaluated
with its parameters bound to the call's named arguments, each a literal or a variable the module assigns one.
"""

from __future__ import annotations

import tree_sitter
import tree_sitter_powershell

_CONSTANTS = {"$true": True, "$false": False, "$null": None}


class SpecError(ValueError):
    pass


def _parser():
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_powershell.language()))


def _text(node):
    return node.text.decode("utf-8")


def _string(node):
    text = _text(node)
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1].replace("''", "'")
    if text.startswith('"') and text.endswith('"'):
        inner = text[1:-1]
        if "$" in inner or "`" in inner:
            raise SpecError(f"interpolated string {text} in the spec: use a literal")
        return inner
    raise SpecError(f"unexpected string literal {text}")


def evaluate(node, variables=None):
    """Python value of a literal expression node; `variables` ({'$name': value}, lower case) binds variables."""
    kind = node.type
    if kind == "hash_literal_expression":
        result = {}
        body = [child for child in node.named_children if child.type == "hash_literal_body"]
        entries = body[0].named_children if body else []
        for entry in entries:
            if entry.type != "hash_entry":
                continue
            key_node, value_node = entry.named_children[0], entry.named_children[-1]
            key = _text(key_node).strip("'\"")
            if key in result:
                raise SpecError(f"key {key!r} appears twice in one hashtable")
            result[key] = evaluate(value_node, variables)
        return result
    if kind == "array_expression":
        if not node.named_children:
            return []
        value = evaluate(node.named_children[0], variables)
        return value if isinstance(value, list) else [value]
    if kind == "array_literal_expression" and len(node.named_children) > 1:
        return [evaluate(child, variables) for child in node.named_children]
    if kind == "string_literal":
        return _string(node)
    if kind in ("integer_literal", "decimal_integer_literal"):
        return int(_text(node))
    if kind == "variable":
        name = _text(node).lower()
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if variables is not None and name in variables:
            return variables[name]
        raise SpecError(f"variable {_text(node)} in the spec: only literals are compared")
    if len(node.named_children) == 1:
        return evaluate(node.named_children[0], variables)
    raise SpecError(f"unsupported {kind} in the spec: {_text(node)[:60]}")


def _parse(source):
    return _parser().parse(source if isinstance(source, bytes) else source.encode("utf-8")).root_node


def _assignment(root, variable):
    """The value node of the first `variable = ...` under root (source order), or None."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "assignment_expression":
            target, value = node.named_children[0], node.named_children[-1]
            if _text(target).strip().lower() == variable.lower():
                return value
        stack.extend(reversed(node.named_children))
    return None


class _Assigned:
    """The variables of a script, each read as the literal assigned to it there."""

    def __init__(self, root):
        self._root = root

    def __contains__(self, name):
        return _assignment(self._root, name) is not None

    def __getitem__(self, name):
        return evaluate(_assignment(self._root, name))


def _call(node):
    """(function name, [(parameter, value node), ...]) when node is one command call, else None."""
    while node.type != "command" and len(node.named_children) == 1:
        node = node.named_children[0]
    if node.type != "command":
        return None
    name = _text(node.named_children[0])
    elements = [child for element in node.named_children[1:] for child in element.named_children]
    elements = [child for child in elements if child.type != "command_argument_sep"]
    arguments = []
    while elements:
        parameter = elements.pop(0)
        if parameter.type != "command_parameter" or ":" in _text(parameter) or not elements:
            raise SpecError(f"{name}: only named arguments (-Name value) are read, not {_text(parameter)!r}")
        arguments.append((_text(parameter)[1:], elements.pop(0)))
    return name, arguments


def _function(root, name):
    """The `Function name { ... }` statement under root."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "function_statement":
            names = [child for child in node.named_children if child.type == "function_name"]
            if names and _text(names[0]).lower() == name.lower():
                return node
        stack.extend(reversed(node.named_children))
    raise SpecError(f"no function {name} in the library")


def module_spec(source, variable="$spec", library=None):
    """The hashtable assigned to `variable` at the top of a module, as a dict.

    `library` is the source of the module_utils that defines a function the module builds its spec with.
    """
    root = _parse(source)
    value = _assignment(root, variable)
    if value is None:
        raise SpecError(f"no {variable} = @{{...}} assignment found")
    call = _call(value)
    if call is None:
        return evaluate(value)
    name, arguments = call
    if library is None:
        raise SpecError(f"{variable} is built by {name}: pass the library that defines it")
    bound = {f"${parameter.lower()}": evaluate(argument, _Assigned(root)) for parameter, argument in arguments}
    body = _assignment(_function(_parse(library), name), "$spec")
    if body is None:
        raise SpecError(f"function {name} assigns no $spec = @{{...}}")
    return evaluate(body, bound)


def normalise_options(options):
    """Ansible.Basic spec options -> {name: comparable dict}; the defaults Ansible.Basic applies are made explicit."""
    result = {}
    for name, option in (options or {}).items():
        result[name] = {
            "type": option.get("type", "str"),
            "required": bool(option.get("required", False)),
            "default": option.get("default"),
            "choices": option.get("choices"),
            "elements": option.get("elements"),
            "options": normalise_options(option.get("options")) if option.get("options") else None,
        }
    return result


def normalise_documented(options):
    """DOCUMENTATION options -> the same comparable shape."""
    result = {}
    for name, option in (options or {}).items():
        result[name] = {
            "type": option.get("type", "str"),
            "required": bool(option.get("required", False)),
            "default": option.get("default"),
            "choices": option.get("choices"),
            "elements": option.get("elements"),
            "options": normalise_documented(option.get("suboptions")) if option.get("suboptions") else None,
        }
    return result
