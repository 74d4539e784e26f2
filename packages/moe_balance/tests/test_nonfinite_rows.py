"""A router row with NaN or inf is never routed silently: refused by default on every device, and distinct experts
when the caller skips the check.

Before, the finite check ran on CPU only, and on a GPU the Triton kernel sent a NaN row ``top_k`` times to expert
E - 1. Now ``route`` and ``router_stats`` check on every device unless told ``check_finite=False``, and both
backends rank NaN above every number, lower id first, as ``torch.sort`` does (PyTorch's
test/test_sort_and_select.py: "we put NaNs ... at the beginning of descending" sorted lists).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch

from moe_balance import route, router_stats
from moe_balance.kernels import kernel_can_run
from moe_balance.routing import RouterConfig

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BACKENDS = [
    pytest.param(
        "triton",
        marks=pytest.mark.skipif(
            not kernel_can_run(torch.empty(0, device=DEVICE)), reason="needs Triton with a GPU or TRITON_INTERPRET=1"
        ),
    ),
    "torch",
]
# Triton's CPU interpreter reduces with numpy, which warns on an all-NaN row (the logsumexp of a NaN row is NaN).
pytestmark = pytest.mark.filterwarnings("ignore:All-NaN slice encountered:RuntimeWarning")
ROUTING_ENTRY_POINTS: dict[str, Callable[..., Any]] = {"route": route, "router_stats": router_stats}


def logits_with_bad_rows(bad: float, rows: tuple[int, ...] = (2, 5, 7)) -> torch.Tensor:
    """(10, 8) logits with one ``bad`` value in each of ``rows``."""
    x = torch.randn(10, 8, generator=torch.Generator().manual_seed(0))
    for row in rows:
        x[row, row % 8] = bad
    return x.to(DEVICE)


@pytest.mark.parametrize("name", ROUTING_ENTRY_POINTS)
def test_routing_checks_for_non_finite_rows_on_every_device_by_default(name):
    """The default is True, not "CPU only": a GPU run must not route a NaN row quietly."""
    assert inspect.signature(ROUTING_ENTRY_POINTS[name]).parameters["check_finite"].default is True


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_a_non_finite_row_is_refused_with_the_row_count(backend, bad):
    refused = r"logits has 3 row\(s\) out of 10 with NaN or inf \(3 value\(s\)\).*check_finite=False"
    with pytest.raises(ValueError, match=refused):
        router_stats(logits_with_bad_rows(bad), 2, backend=backend)


def test_route_refuses_a_non_finite_row_with_the_row_count():
    with pytest.raises(ValueError, match=r"logits has 3 row\(s\) out of 10 with NaN or inf"):
        route(logits_with_bad_rows(float("nan")), 2)


CASES = {
    "softmax": RouterConfig(3),  # one NaN logit makes the whole softmax row NaN
    "sigmoid": RouterConfig(3, score="sigmoid"),  # only that expert's score is NaN
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CASES)
def test_an_unchecked_nan_row_gets_distinct_experts_nan_first(backend, name):
    config = CASES[name]
    x = logits_with_bad_rows(float("nan"), rows=(2, 5))
    x[7] = float("nan")  # a whole row of NaN
    stats = router_stats(x, config, backend=backend, check_finite=False)
    idx = stats.topk_idx.cpu()  # (10, 3)
    assert all(len(set(row)) == 3 for row in idx.tolist()), idx
    assert int(idx.min()) >= 0 and int(idx.max()) < 8
    assert idx[7].tolist() == [0, 1, 2]  # all tied as NaN: the lowest ids
    if name == "sigmoid":  # the NaN expert ranks first, the finite scores follow as usual
        assert idx[2, 0] == 2 and idx[5, 0] == 5
    else:
        assert idx[2].tolist() == [0, 1, 2] and idx[5].tolist() == [0, 1, 2]
    assert int(stats.tokens_per_expert.sum()) == 10 * 3


@pytest.mark.parametrize("name", CASES)
def test_an_unchecked_nan_row_routes_the_same_on_both_backends(name):
    if not kernel_can_run(torch.empty(0, device=DEVICE)):
        pytest.skip("needs Triton with a GPU or TRITON_INTERPRET=1")
    x = logits_with_bad_rows(float("nan"), rows=(1, 4, 6))
    x[9] = float("nan")
    kernel = router_stats(x, CASES[name], backend="triton", check_finite=False)
    torch_pass = router_stats(x, CASES[name], backend="torch", check_finite=False)
    assert torch.equal(kernel.topk_idx, torch_pass.topk_idx)
    assert torch.equal(kernel.tokens_per_expert, torch_pass.tokens_per_expert)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unchecked_nan_row_under_a_group_limit_still_gets_distinct_experts(backend):
    x = logits_with_bad_rows(float("nan"), rows=(0, 3))
    x[6] = float("nan")
    stats = router_stats(x, 4, score="sigmoid", num_groups=4, group_topk=2, backend=backend, check_finite=False)
    idx = stats.topk_idx.cpu()
    assert all(len(set(row)) == 4 for row in idx.tolist()), idx
    assert int(idx.min()) >= 0 and int(idx.max()) < 8
