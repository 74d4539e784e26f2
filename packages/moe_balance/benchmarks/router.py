"""Router benchmark: moe_balance's fused router pass vs an eager transcription of Megatron-LM's router formulas.

Both compute, from (T, E) logits: top-k routing with gates normalised over the selected experts, tokens per expert,
the Switch/Megatron aux loss (E/k * sum_i f_i P_i, P over the full softmax) and the router z-loss; then the backward
pass of ``sum(gates * upstream) + a * aux + b * z`` to the logits. The eager side follows the formulas as Megatron's
eager (unfused) path writes them: z-loss from logsumexp, top-k on the logits then a softmax over the selected ones,
dense (T, E) probability and routing maps from scatters, counts as the routing map's column sums, and a second
full softmax for the aux loss, all under autograd. Both run in the same process, interleaved, and the median of each
is reported with the ratio package / eager (below 1.0 means the package is faster) and the agreement of the results.

    python benchmarks/router.py                  # CPU, T=16384, E=256, k=8
    python benchmarks/router.py --tokens 4096    # smaller
    python benchmarks/router.py --quick          # T=1024, E=64, 3 repeats: a smoke run (`make check`)
On a machine with a GPU the same comparison also runs on CUDA, with the Triton kernel as the package's forward.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from moe_balance import router_stats

AUX_COEFF = 1e-2
Z_COEFF = 1e-3


# (probs or gates, top indices, counts, aux, z) of one router pass
RouterOutputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def megatron_eager(logits: torch.Tensor, top_k: int) -> RouterOutputs:
    """Eager Megatron-style router pass; returns (dense probs (T, E), top indices, counts (E,), aux, z)."""
    num_tokens, num_experts = logits.shape
    z = torch.square(torch.logsumexp(logits, dim=-1)).mean() * Z_COEFF
    top_logits, top_idx = torch.topk(logits, k=top_k, dim=1)  # (T, k)
    top_probs = torch.softmax(top_logits, dim=-1, dtype=torch.float32)
    probs = torch.zeros_like(logits).scatter(1, top_idx, top_probs)  # (T, E)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_idx, 1).bool()  # (T, E)
    tokens_per_expert = routing_map.sum(dim=0)  # (E,)
    scores = torch.softmax(logits, dim=-1, dtype=torch.float32)  # (T, E) for the aux loss
    aux = torch.sum(scores.sum(dim=0) * tokens_per_expert) * (
        num_experts * AUX_COEFF / (top_k * num_tokens * num_tokens)
    )
    return probs, top_idx, tokens_per_expert, aux, z


def package_path(logits: torch.Tensor, top_k: int, backend: str) -> RouterOutputs:
    stats = router_stats(logits, top_k, backend=backend)
    return stats.gates, stats.topk_idx, stats.tokens_per_expert, stats.aux_loss * AUX_COEFF, stats.z_loss * Z_COEFF


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn: Callable[[], Any], device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def compare(device: torch.device, tokens: int, experts: int, top_k: int, repeats: int, backend: str) -> dict:
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(tokens, experts, generator=generator).to(device)
    upstream_dense = torch.randn(tokens, experts, generator=generator).to(device)  # grad arriving at the gates

    def eager_forward() -> None:
        with torch.no_grad():
            megatron_eager(base, top_k)

    def package_forward() -> None:
        with torch.no_grad():
            package_path(base, top_k, backend)

    def eager_step() -> torch.Tensor:
        x = base.clone().requires_grad_(True)
        probs, _topk_idx, _counts, aux, z = megatron_eager(x, top_k)
        ((probs * upstream_dense).sum() + aux + z).backward()
        return x.grad

    def package_step() -> torch.Tensor:
        x = base.clone().requires_grad_(True)
        gates, idx, _counts, aux, z = package_path(x, top_k, backend)
        ((gates * upstream_dense.gather(1, idx)).sum() + aux + z).backward()
        return x.grad

    # Agreement first (also the warm-up).
    e_probs, e_idx, e_counts, e_aux, e_z = megatron_eager(base, top_k)
    p_gates, p_idx, p_counts, p_aux, p_z = package_path(base, top_k, backend)
    agreement = {
        "same_topk_sets": bool(torch.equal(e_idx.sort(dim=1).values, p_idx.sort(dim=1).values)),
        "same_counts": bool(torch.equal(e_counts.cpu(), p_counts.cpu())),
        "gates_max_abs_diff": float((e_probs.gather(1, p_idx) - p_gates).abs().max()),
        "aux_rel_diff": float(abs(e_aux - p_aux) / abs(e_aux)),
        "z_rel_diff": float(abs(e_z - p_z) / abs(e_z)),
        "grad_max_abs_diff": float((eager_step() - package_step()).abs().max()),
    }

    timings: dict[str, list[float]] = {
        "eager_forward": [], "package_forward": [], "eager_fwd_bwd": [], "package_fwd_bwd": []
    }
    for _repeat in range(repeats):  # interleaved, so drift from other load hits both sides alike
        timings["eager_forward"].append(_time(eager_forward, device))
        timings["package_forward"].append(_time(package_forward, device))
        timings["eager_fwd_bwd"].append(_time(eager_step, device))
        timings["package_fwd_bwd"].append(_time(package_step, device))
    median_ms = {name: statistics.median(values) * 1e3 for name, values in timings.items()}
    return {
        "device": str(device),
        "backend": backend,
        "tokens": tokens,
        "experts": experts,
        "top_k": top_k,
        "repeats": repeats,
        "threads": torch.get_num_threads(),
        "median_ms": {k: round(v, 3) for k, v in median_ms.items()},
        "ratio_forward": round(median_ms["package_forward"] / median_ms["eager_forward"], 3),
        "ratio_fwd_bwd": round(median_ms["package_fwd_bwd"] / median_ms["eager_fwd_bwd"], 3),
        "agreement": agreement,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--experts", type=int, default=256)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print one JSON object per device")
    parser.add_argument("--quick", action="store_true", help="T=1024, E=64, 3 repeats (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.experts, args.repeats = 1024, 64, 3

    runs = [(torch.device("cpu"), "torch")]
    if torch.cuda.is_available():
        runs.append((torch.device("cuda"), "triton"))
    for device, backend in runs:
        result = compare(device, args.tokens, args.experts, args.top_k, args.repeats, backend)
        if args.json:
            print(json.dumps(result))
            continue
        ms = result["median_ms"]
        print(f"{device} ({backend}), T={args.tokens} E={args.experts} k={args.top_k}, median of {args.repeats}:")
        print(
            f"  forward   eager {ms['eager_forward']:9.3f} ms  package {ms['package_forward']:9.3f} ms  "
            f"ratio {result['ratio_forward']:.3f}x"
        )
        print(
            f"  fwd+bwd   eager {ms['eager_fwd_bwd']:9.3f} ms  package {ms['package_fwd_bwd']:9.3f} ms  "
            f"ratio {result['ratio_fwd_bwd']:.3f}x"
        )
        print(f"  agreement {json.dumps(result['agreement'])}")
    if not torch.cuda.is_available():
        print(
            "no GPU here: the Triton kernel's ratio was not measured (it runs where torch.cuda.is_available())",
            file=sys.stderr if args.json else sys.stdout,
        )


if __name__ == "__main__":
    main()
