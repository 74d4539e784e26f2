"""Read the Ansible.Basic argument spec (`$spec = @{...}`) out of a PowerShell module, without PowerShell.

The spec is a hashtable literal of strings, numbers, $true/$false/$null, arrays and nested hashtables; this
evaluates exactly that subset from the tree-sitter-powershell syntax tree and refuses anything else (a variable, an
interpolated string, a command), so the comparison with the .py DOCUMENTATION never guesses.
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


def evaluate(node):
    """Python value of a literal expression node."""
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
            result[key] = evaluate(value_node)
        return result
    if kind == "array_expression":
        if not node.named_children:
            return []
        value = evaluate(node.named_children[0])
        return value if isinstance(value, list) else [value]
    if kind == "array_literal_expression" and len(node.named_children) > 1:
        return [evaluate(child) for child in node.named_children]
    if kind == "string_literal":
        return _string(node)
    if kind in ("integer_literal", "decimal_integer_literal"):
        return int(_text(node))
    if kind == "variable":
        if _text(node).lower() in _CONSTANTS:
            return _CONSTANTS[_text(node).lower()]
        raise SpecError(f"variable {_text(node)} in the spec: only literals are compared")
    if len(node.named_children) == 1:
        return evaluate(node.named_children[0])
    raise SpecError(f"unsupported {kind} in the spec: {_text(node)[:60]}")


def module_spec(source, variable="$spec"):
    """The hashtable assigned to `variable` at the top of a module, as a dict."""
    tree = _parser().parse(source if isinstance(source, bytes) else source.encode("utf-8"))
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "assignment_expression":
            target, value = node.named_children[0], node.named_children[-1]
            if _text(target).strip().lower() == variable.lower():
                return evaluate(value)
        stack.extend(reversed(node.named_children))
    raise SpecError(f"no {variable} = @{{...}} assignment found")


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
