"""Kernel offsets that grow with the program id or a row stride are computed in int64.

``tl.program_id`` is int32 and Triton multiplies int32 by int32 in int32, so ``tile * BLOCK_E`` wraps once it
passes 2**31: in the router-statistics kernel that happens from 2048 experts (one token per tile) at about 1M
tokens, far beyond what a CPU test can allocate. The test therefore reads the kernels' source: every
multiplication that involves a program id (or a value computed from one) or a ``stride*`` argument must have an
operand widened with ``.to(tl.int64)`` (directly, or through a name computed from such a value). Kernels with a
single program and no program id (the replica-plan kernels) keep their offsets below ``MAX_CELLS`` and
``MAX_RANKS**2`` and are not concerned.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TypeGuard

import moe_balance

PACKAGE = Path(moe_balance.__file__).parent


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) in ("triton.jit", "jit", "triton.autotune", "triton.heuristics")


def kernels() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
                found.append((f"{path.relative_to(PACKAGE.parent)}:{node.name}", node))
    return found


def _is_program_id(node: ast.AST) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and ast.unparse(node.func) in ("tl.program_id", "triton.language.program_id")


def _is_widening(node: ast.AST) -> TypeGuard[ast.Call]:
    """``<x>.to(tl.int64)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "to"
        and [ast.unparse(a) for a in node.args] == ["tl.int64"]
    )


def _widened_operand(call: ast.Call) -> ast.expr:
    """x of ``<x>.to(tl.int64)`` (a call ``_is_widening`` accepted)."""
    assert isinstance(call.func, ast.Attribute)
    return call.func.value


class _Offsets:
    """Which names of one kernel come from a program id, and which are int64, following plain assignments."""

    def __init__(self, kernel: ast.FunctionDef) -> None:
        self.strides = {a.arg for a in kernel.args.args if a.arg.startswith("stride")}
        self.from_program_id: set[str] = set()
        self.int64: set[str] = set()
        assignments = [
            (node.targets[0].id, node.value)
            for node in ast.walk(kernel)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ]
        for _pass in range(len(assignments) + 1):  # to a fixed point; assignments are few
            for name, value in assignments:
                if self.grows(value):
                    self.from_program_id.add(name)
                if self.is_int64(value):
                    self.int64.add(name)

    def grows(self, node: ast.expr) -> bool:
        """An index value computed from a program id (loads and other calls are data, not offsets)."""
        if _is_program_id(node):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.from_program_id
        if _is_widening(node):
            return self.grows(_widened_operand(node))
        if isinstance(node, ast.Subscript):
            return self.grows(node.value)
        if isinstance(node, ast.BinOp):
            return self.grows(node.left) or self.grows(node.right)
        return False

    def is_int64(self, node: ast.expr) -> bool:
        if _is_widening(node):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.int64
        if isinstance(node, ast.Subscript):
            return self.is_int64(node.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
            return self.is_int64(node.left) or self.is_int64(node.right)
        return False

    def needs_int64(self, node: ast.expr) -> bool:
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        return self.grows(node) or bool(names & self.strides)


def narrow_products(kernel: ast.FunctionDef) -> list[str]:
    offsets = _Offsets(kernel)
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(kernel)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mult)
        and (offsets.needs_int64(node.left) or offsets.needs_int64(node.right))
        and not (offsets.is_int64(node.left) or offsets.is_int64(node.right))
    ]


def test_the_source_search_finds_the_router_kernel_and_its_offset_products():
    [router] = [kernel for name, kernel in kernels() if name.endswith(":_router_stats_kernel")]
    offsets = _Offsets(router)
    products = [
        node
        for node in ast.walk(router)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mult)
        and (offsets.needs_int64(node.left) or offsets.needs_int64(node.right))
    ]
    assert len(products) >= 5  # tile * BLOCK_T, rows * stride_row, rows * TOP_K, three tile * BLOCK_E


def test_every_offset_product_of_a_program_id_or_a_stride_is_int64():
    narrow = {name: found for name, kernel in kernels() if (found := narrow_products(kernel))}
    assert not narrow, f"int32 offset products (widen one operand with .to(tl.int64)): {narrow}"


def test_every_program_id_is_widened_where_it_is_read():
    narrow = []
    for name, kernel in kernels():
        widened = {id(_widened_operand(node)) for node in ast.walk(kernel) if _is_widening(node)}
        narrow += [f"{name} line {n.lineno}" for n in ast.walk(kernel) if _is_program_id(n) and id(n) not in widened]
    assert not narrow, f"tl.program_id(...) used as int32 (write tl.program_id(0).to(tl.int64)): {narrow}"
