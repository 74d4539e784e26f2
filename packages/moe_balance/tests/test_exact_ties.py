"""Exact ties go to the lower expert id on every backend: the Triton kernel, the fused torch pass and ``route``.

bf16 router logits hold few distinct values, so a token often scores two experts exactly alike. The kernel takes
the lower id; ``torch.topk`` documents no order among equal values (on CPU it orders most tied rows differently),
while ``torch.sort(..., stable=True)`` "preserves the order of equivalent elements" (PyTorch's torch.sort
documentation), which the torch paths now use. The per-token reference (``best_first``) is the oracle.
"""

from __future__ import annotations

import pytest
import torch

from moe_balance import reference, route, router_stats
from moe_balance.kernels import kernel_can_run
from moe_balance.routing import RouterConfig, top_indices

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
needs_kernel = pytest.mark.skipif(
    not kernel_can_run(torch.empty(0, device=DEVICE)), reason="needs Triton with a GPU or TRITON_INTERPRET=1"
)

CONFIGS = {
    "softmax-top8": RouterConfig(8),
    "sigmoid-top4-bias": RouterConfig(4, score="sigmoid"),
    # top_k // group_topk = 1: a group scores its best expert, so tied groups stay exactly tied on every backend
    "sigmoid-groups-8-keep-4": RouterConfig(4, score="sigmoid", num_groups=8, group_topk=4),
    "softmax-groups-on-logits": RouterConfig(4, num_groups=8, group_topk=4, group_score="logits"),
}


def tied_logits(num_tokens: int = 512, num_experts: int = 64, seed: int = 0) -> torch.Tensor:
    """(tokens, experts) bf16 logits on four levels (0, 0.5, 1, 1.5): every row has many exact ties."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 4, (num_tokens, num_experts), generator=generator) / 2).to(torch.bfloat16)


def tied_bias(num_experts: int = 64) -> torch.Tensor:
    """(experts,) a bias on two levels, so biased selection scores tie too."""
    return (torch.arange(num_experts) % 2 * 0.25).to(torch.float32)


def test_top_indices_puts_the_lower_index_first_on_ties():
    values = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    assert top_indices(values, 3).tolist() == [[1, 2, 4], [0, 1, 2]]


@pytest.mark.parametrize("name", CONFIGS)
def test_the_torch_path_breaks_bf16_ties_towards_the_lower_expert(name):
    config = CONFIGS[name]
    logits = tied_logits(num_tokens=200)
    bias = tied_bias() if name.endswith("-bias") else None
    want, _gates, _tokens_per_expert = reference.route_reference(logits.float(), config, bias=bias)
    assert route(logits, config, bias=bias).topk_idx.tolist() == want
    assert router_stats(logits, config, bias=bias, backend="torch").topk_idx.tolist() == want


@needs_kernel
@pytest.mark.parametrize("name", CONFIGS)
def test_kernel_and_torch_route_every_tied_bf16_row_identically(name):
    config = CONFIGS[name]
    logits = tied_logits().to(DEVICE)
    bias = tied_bias().to(DEVICE) if name.endswith("-bias") else None
    kernel = router_stats(logits, config, bias=bias, backend="triton")
    fused_torch = router_stats(logits, config, bias=bias, backend="torch")
    plain = route(logits, config, bias=bias)
    differing_rows = int((kernel.topk_idx != fused_torch.topk_idx).any(dim=1).sum())
    assert differing_rows == 0, f"{differing_rows} of {logits.shape[0]} rows routed differently"
    assert torch.equal(plain.topk_idx, kernel.topk_idx)
    assert torch.equal(kernel.tokens_per_expert, fused_torch.tokens_per_expert)
    assert torch.equal(kernel.aux_tokens_per_expert, fused_torch.aux_tokens_per_expert)
