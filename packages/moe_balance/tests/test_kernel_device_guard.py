"""Every Triton launch runs with its tensors' device current, so tensors on any GPU of a host work.

Triton launches on the *current* CUDA device, whatever device its pointer arguments live on: a tensor on ``cuda:1``
launched while ``cuda:0`` is current fails with "Pointer argument cannot be accessed from Triton (cpu tensor?)"
(triton-lang/triton issues 2441 and 2925; the maintainer's answer there is to set the current device). Without a
second GPU the tests pin the guard twice: in the source (every ``kernel[grid](...)`` sits inside
``with device_guard(<one of its tensors>)``) and in behaviour (each kernel, run by Triton's CPU interpreter, is
launched inside the guard of its own tensors' device). On a host with two GPUs a last test runs the kernels on
``cuda:1`` for real.
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
import torch

import moe_balance
from moe_balance.kernels import kernel_can_run
from moe_balance.kernels._device import device_guard

PACKAGE = Path(moe_balance.__file__).parent
GUARD = "device_guard"
# The kernels the package launches today: the source search below must find each, so it cannot pass by finding none.
KNOWN_KERNELS = {"_router_stats_kernel", "_match_kernel", "_sinkhorn_kernel"}
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
needs_kernels = pytest.mark.skipif(
    not kernel_can_run(torch.empty(0, device=DEVICE)), reason="needs Triton with a GPU or TRITON_INTERPRET=1"
)


@dataclass(frozen=True)
class Launch:
    where: str  # module path:line
    kernel: str
    guard_arguments: tuple[str, ...]  # arguments of the device_guard(...) blocks around the launch, outermost first
    tensor_arguments: frozenset[str]  # the launch's positional arguments, as source text


def _is_triton_jit(decorator: ast.expr) -> bool:
    """``@triton.jit``, ``@triton.jit(...)``, ``@triton.autotune(...)`` or ``@triton.heuristics(...)``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return target.value.id == "triton" and target.attr in ("jit", "autotune", "heuristics")
    return isinstance(target, ast.Name) and target.id == "jit"


def _kernel_names(trees: dict[Path, ast.Module]) -> set[str]:
    return {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and any(_is_triton_jit(d) for d in node.decorator_list)
    }


class _LaunchFinder(ast.NodeVisitor):
    """Collects each ``kernel[grid](...)`` call with the ``device_guard(...)`` blocks that enclose it lexically."""

    def __init__(self, path: Path, kernels: set[str]) -> None:
        self.path = path
        self.kernels = kernels
        self.guards: list[str] = []
        self.launches: list[Launch] = []

    def visit_With(self, node: ast.With) -> None:
        guards = [
            ast.unparse(item.context_expr.args[0])
            for item in node.items
            if isinstance(item.context_expr, ast.Call)
            and ast.unparse(item.context_expr.func).rsplit(".", maxsplit=1)[-1] == GUARD
            and item.context_expr.args
        ]
        self.guards.extend(guards)
        self.generic_visit(node)
        del self.guards[len(self.guards) - len(guards) :]

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Subscript):
            name = ast.unparse(node.func.value).rsplit(".", maxsplit=1)[-1]
            if name in self.kernels:
                self.launches.append(
                    Launch(
                        where=f"{self.path.relative_to(PACKAGE.parent)}:{node.lineno}",
                        kernel=name,
                        guard_arguments=tuple(self.guards),
                        tensor_arguments=frozenset(ast.unparse(arg) for arg in node.args),
                    )
                )
        self.generic_visit(node)


def package_launches() -> list[Launch]:
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}
    kernels = _kernel_names(trees)
    launches = []
    for path, tree in trees.items():
        finder = _LaunchFinder(path, kernels)
        finder.visit(tree)
        launches.extend(finder.launches)
    return launches


def test_the_source_search_finds_every_known_kernel_launch():
    assert {launch.kernel for launch in package_launches()} >= KNOWN_KERNELS


def test_every_kernel_launch_sits_inside_a_device_guard_of_one_of_its_tensors():
    unguarded = [
        f"{launch.where} {launch.kernel}[...](...) guarded by {list(launch.guard_arguments) or 'nothing'}"
        for launch in package_launches()
        if not set(launch.guard_arguments) & launch.tensor_arguments
    ]
    assert not unguarded, "launch outside `with device_guard(<a tensor it is given>):`\n" + "\n".join(unguarded)


# Behaviour: each kernel is launched inside the guard of its own tensors' device.


def _router_launch() -> None:
    from moe_balance import router_stats

    router_stats(torch.randn(10, 8, device=DEVICE), 2, backend="triton")


def _sinkhorn_launch() -> None:
    from moe_balance.placement._sinkhorn_triton import sinkhorn_flow_triton
    from moe_balance.placement.replica import rank_cost_matrix

    supply = torch.tensor([0.5, 0.5, 0.0, 0.0])
    demand = torch.tensor([0.0, 0.0, 0.25, 0.75])
    sinkhorn_flow_triton(supply, demand, rank_cost_matrix(4, 2, 3.0), 0.25, 5)


def _matching_launch() -> None:
    from moe_balance.placement._matching_triton import match_slots_triton

    surplus = torch.tensor([9, 3, 0, 0, 0, 0, 0, 0])  # (experts,) 4 ranks x 2 experts, rank 0 is hot
    supply = torch.tensor([12, 0, 0, 0])  # (ranks,)
    demand = torch.tensor([0, 4, 4, 4])  # (ranks,)
    flow = torch.full((2, 2), 20)  # (nodes, nodes), 2 ranks per node
    slot_expert = torch.full((4,), -1)  # (ranks * slots,) one slot per rank
    match_slots_triton(surplus, supply, demand, flow, 2, slot_expert, torch.zeros(4, dtype=torch.int64), 100, 4)


LAUNCHERS = {
    "moe_balance.kernels.router_stats_triton:_router_stats_kernel": _router_launch,
    "moe_balance.placement._sinkhorn_triton:_sinkhorn_kernel": _sinkhorn_launch,
    "moe_balance.placement._matching_triton:_match_kernel": _matching_launch,
}


@needs_kernels
@pytest.mark.parametrize("target", LAUNCHERS)
def test_each_kernel_is_launched_inside_the_guard_of_its_tensors_device(target, monkeypatch):
    import importlib

    module_name, kernel_name = target.split(":")
    module = importlib.import_module(module_name)
    kernel = getattr(module, kernel_name)
    current: list[torch.device] = []  # the guard stack while the kernel's wrapper runs
    launches: list[tuple[torch.device | None, set[torch.device]]] = []

    @contextlib.contextmanager
    def recording_guard(where):
        current.append(where.device if isinstance(where, torch.Tensor) else torch.device(where))
        try:
            yield
        finally:
            current.pop()

    real_run = kernel.run

    def recording_run(*args, **kwargs):  # kernel[grid](...) calls kernel.run(..., grid=grid, warmup=False)
        tensors = {a.device for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)}
        launches.append((current[-1] if current else None, tensors))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(module, GUARD, recording_guard, raising=False)  # absent where a module has no guard
    monkeypatch.setattr(kernel, "run", recording_run)
    LAUNCHERS[target]()
    assert len(launches) == 1
    [(guarded_with, tensor_devices)] = launches
    assert guarded_with is not None, f"{kernel_name} was launched outside {GUARD}"
    assert tensor_devices == {guarded_with}


# The guard itself.


class _RecordingCudaDevice:
    """Stands in for ``torch.cuda.device`` (which needs a GPU): records the device each block makes current."""

    entered: list[torch.device] = []

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def __enter__(self) -> None:
        self.entered.append(self.device)

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


def test_a_cuda_device_is_made_current_with_torch_cuda_device(monkeypatch):
    monkeypatch.setattr(_RecordingCudaDevice, "entered", [])
    monkeypatch.setattr(torch.cuda, "device", _RecordingCudaDevice)
    with device_guard(torch.device("cuda", 1)):
        pass
    assert _RecordingCudaDevice.entered == [torch.device("cuda", 1)]


@pytest.mark.parametrize("where", [torch.zeros(2), torch.device("cpu"), torch.empty(2, device="meta")], ids=str)
def test_a_tensor_or_device_off_cuda_needs_no_guard(where, monkeypatch):
    monkeypatch.setattr(_RecordingCudaDevice, "entered", [])
    monkeypatch.setattr(torch.cuda, "device", _RecordingCudaDevice)
    with device_guard(where):
        pass
    assert _RecordingCudaDevice.entered == []


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_the_router_kernel_runs_on_the_second_gpu_while_the_first_is_current():
    from moe_balance import router_stats

    torch.cuda.set_device(0)
    logits = torch.randn(64, 16, device="cuda:1")
    stats = router_stats(logits, 4, backend="triton")
    want = router_stats(logits.cpu(), 4, backend="torch")
    assert stats.topk_idx.device == torch.device("cuda", 1)
    assert torch.equal(stats.topk_idx.cpu(), want.topk_idx)
