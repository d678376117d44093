"""Floating-point work of a Llama-style decoder's forwards and backwards, from its shape and token counts.

`benchmarks/bench_step.py` divides these by the seconds a step spent in the sampler's forwards and the
update's forward and backward, and sets the achieved rate beside a plain matmul's on the same core.
Only matrix products count: norms, RoPE, the activation, residual adds and the embedding lookup are
O(hidden) per token against the projections' O(hidden²) (under 1% at the testbed's sizes), softmax
O(heads·context) (a few percent at its longest contexts). LoRA adapters (rank ≪ hidden) are left out
too. A multiply-add is 2 FLOPs; tests/test_flops.py checks the formula against torch's own count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DecoderShape:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int


def decoder_shape(config: Mapping[str, Any]) -> DecoderShape | None:
    """The shape from a Hugging Face config's keys (`model.config.to_dict()`; a multimodal config's
    `text_config` where it has one). head_dim defaults to hidden_size / num_attention_heads, as the
    Llama config does. None where a key is missing or not a positive number (another architecture's
    names): the caller then prints no FLOPs rather than wrong ones."""
    config = config.get("text_config") or config
    try:
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        shape = DecoderShape(
            layers=int(config["num_hidden_layers"]), hidden=hidden, intermediate=int(config["intermediate_size"]),
            heads=heads, kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads), vocab=int(config["vocab_size"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return shape if min(vars(shape).values()) > 0 else None


def layer_matmul_parameters(shape: DecoderShape) -> int:
    """Weights one decoder layer multiplies each token by:

        W = h·H·d + 2·h·K·d + H·d·h + 3·h·i = 2·h·d·(H + K) + 3·h·i

    (query, key and value projections, output projection; the gated MLP's gate, up and down),
    with h hidden, H heads, K KV heads, d head_dim, i intermediate."""
    h, d = shape.hidden, shape.head_dim
    return 2 * h * d * (shape.heads + shape.kv_heads) + 3 * h * shape.intermediate


def context_sum(start: int, n: int) -> int:
    """Keys attended to, summed over n tokens appended after `start` cached ones: token j (1..n) sees
    start + j (itself included), so the sum is n·start + n·(n + 1)/2."""
    return n * start + n * (n + 1) // 2


def forward_flops(shape: DecoderShape, tokens: int, contexts: int, head_tokens: int) -> int:
    """FLOPs of forwards over `tokens` tokens whose attended keys sum to `contexts`, with `head_tokens`
    of them projected onto the vocabulary:

        F = 2·L·W·N + 4·L·H·d·C + 2·h·V·N_head

    L layers, W = layer_matmul_parameters, N tokens, C = contexts, V vocab. Per layer a token with c
    keys costs 2·W for its projections and 2·H·d·c for its scores q·kᵀ plus 2·H·d·c for the weighted
    sum of values (grouped KV heads share keys, not the products: H, not K). The LM head costs 2·h·V
    per projected position: a sampler projects only the positions it samples from, the update only
    those with a log-probability in the loss.

    C is exact where each run of tokens' start is known (context_sum per run, as bench_step counts the
    sampler's and the update's). Where only totals are, C ≈ N·(s̄ + (n̄ + 1)/2) from the mean run length
    n̄ and mean cached start s̄ (the mean context, exact when all runs are alike), and a kernel that
    multiplies the masked upper triangle too (eager attention) does the dense C = Σ n·(s + n) instead."""
    return (2 * shape.layers * layer_matmul_parameters(shape) * tokens
            + 4 * shape.layers * shape.heads * shape.head_dim * contexts
            + 2 * shape.hidden * shape.vocab * head_tokens)


def backward_flops(forward: int) -> int:
    """B = 2·F: every product of the forward has two in the backward of the same size, one for the
    gradient of its input and one for that of its weight (or, in attention, of its other operand).
    With frozen weights (LoRA) the weight gradients are not computed and B is nearer F."""
    return 2 * forward


def step_gflops(shape: DecoderShape, counts: Mapping[str, float]) -> dict[str, float]:
    """A step's GFLOPs from its sums of forward_flops' counts, as counts[f"{part}_tokens" | "_contexts" | "_head"]:
    rollout_forward (the sampler's forwards), update_forward (every update forward) and update_backward,
    B = 2·F of update_forward_grad (the forwards the backward runs through). A missing count is 0."""
    def forward(part: str) -> int:
        return forward_flops(shape, *(int(counts.get(f"{part}_{key}", 0)) for key in ("tokens", "contexts", "head")))

    return {"rollout_forward_gflops": forward("rollout_forward") / 1e9,
            "update_forward_gflops": forward("update_forward") / 1e9,
            "update_backward_gflops": backward_flops(forward("update_forward_grad")) / 1e9}


def achieved_rates(figures: Mapping[str, float], matmul_rate: float) -> dict[str, float]:
    """GFLOP/s of each part (its GFLOPs over its seconds; 0 where it took none) and the update's forward and
    backward together over `matmul_rate`, the machine's plain matmul GFLOP/s (update_share_of_matmul_rate)."""
    def rate(gflops: float, seconds: float) -> float:
        return gflops / seconds if seconds > 0 else 0.0

    out = {f"{part}_gflop_s": rate(figures[f"{part}_gflops"], figures[f"{part}_s"])
           for part in ("rollout_forward", "update_forward", "update_backward")}
    update = rate(figures["update_forward_gflops"] + figures["update_backward_gflops"],
                  figures["update_forward_s"] + figures["update_backward_s"])
    out["update_share_of_matmul_rate"] = update / matmul_rate
    return out


def matmul_gflop_s(rows: int, inner: int, cols: int, repeats: int = 7) -> float:
    """This machine's rate on one fp32 (rows, inner) @ (inner, cols) product at torch's current thread
    count: 2·rows·inner·cols FLOPs over the median of `repeats` timed calls, in GFLOP/s. One untimed
    call first (the kernel's choice, the output's pages); the output is reused so that no call allocates."""
    import statistics
    import time

    import torch

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(rows, inner, generator=generator)
    b = torch.randn(inner, cols, generator=generator)
    out = torch.matmul(a, b)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b, out=out)
        seconds.append(time.perf_counter() - start)
    return 2 * rows * inner * cols / statistics.median(seconds) / 1e9


def matmul_rates(shape: DecoderShape, tokens: int) -> dict[str, float]:
    """matmul_gflop_s on a 1024³ product and matmul_model_shape_gflop_s on the model's own MLP product,
    (tokens, hidden) @ (hidden, intermediate), with its matmul_model_shape_tokens."""
    return {"matmul_gflop_s": matmul_gflop_s(1024, 1024, 1024), "matmul_model_shape_tokens": tokens,
            "matmul_model_shape_gflop_s": matmul_gflop_s(tokens, shape.hidden, shape.intermediate)}
