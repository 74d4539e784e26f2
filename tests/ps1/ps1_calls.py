"""The commands a PowerShell script calls, read from its tree-sitter-powershell syntax tree (no PowerShell runs here).

``calls`` gives each command called by a literal name with its named arguments; ``advanced_functions`` the functions
a script defines and whether they declare SupportsShouldProcess.
"""

from __future__ import annotations

from check_ps1_parse import parser


def _text(node) -> str:
    return node.text.decode("utf-8")


def _arguments(command) -> dict:
    """{'-name': (value text or None, written with a colon)} of one command node's named parameters."""
    elements = next((child for child in command.children if child.type == "command_elements"), None)
    found: dict = {}
    if elements is None:
        return found
    children = [child for child in elements.children if child.type != "command_argument_sep" or ":" in _text(child)]
    index = 0
    while index < len(children):
        child = children[index]
        if child.type != "command_parameter":
            index += 1
            continue
        name = _text(child).lower()
        colon = index + 1 < len(children) and children[index + 1].type == "command_argument_sep"
        value_index = index + 2 if colon else index + 1
        value = None
        if value_index < len(children) and children[value_index].type not in ("command_parameter",):
            value = _text(children[value_index]).strip().strip("'\"")
            index = value_index
        found[name] = (value, colon)
        index += 1
    return found


def calls(source: str) -> list[tuple[int, str, dict]]:
    """(line, command name, arguments) of every command called by a literal name in the script."""
    tree = parser().parse(source.encode("utf-8"))
    found = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "command":
            name = next((child for child in node.children if child.type == "command_name"), None)
            if name is not None:
                found.append((node.start_point[0] + 1, _text(name), _arguments(node)))
        stack.extend(reversed(node.children))
    return found


def advanced_functions(source: str) -> dict:
    """{function name (lower): declares SupportsShouldProcess} of the functions the script defines."""
    tree = parser().parse(source.encode("utf-8"))
    found = {}
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "function_statement":
            name = next(child for child in node.children if child.type == "function_name")
            found[_text(name).lower()] = "supportsshouldprocess = $true" in _text(node).lower()
        stack.extend(reversed(node.children))
    return found
