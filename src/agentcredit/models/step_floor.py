"""How fast a training step could be on this machine with the same arithmetic: its floor and the ratio to it.

`benchmarks/bench_step.py` measures where a step's seconds go. This module turns the same counts into
the seconds the machine's own rates allow for the model's forwards and backward:

- the projections, the LM head and the update (forward and backward) run at the machine's fp32 matmul
  rate: their FLOPs (models/flops.py) over that rate;
- the sampler's attention runs at the larger of its FLOPs over the matmul rate and its cache reads over
  the machine's read rate. A decoded token reads every key and value its row holds and does two
  multiply-adds per value read: on a CPU that is bound by memory, not arithmetic. A run of tokens
  (a prefill) reads its row's keys once for all its tokens, so the bytes count each run once;
- everything else (tools, sampling and bookkeeping in Python, credit, the optimiser, logging) stays at
  the seconds measured.

So the floor gives the step's measured non-model seconds for free and its model seconds at peak rates:
`step_floor_ratio` (measured step over floor) bounds what any kernel work on these forwards could gain
without changing what is computed (lower precision, fewer tokens). Both rates are the better of two
measurements in the same process, which makes the floor lower and the bound more generous.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping

from agentcredit.models.flops import DecoderShape


def attention_flops(shape: DecoderShape, contexts: int) -> int:
    """forward_flops' attention term: 4·L·H·d·C (scores and weighted values over C attended keys)."""
    return 4 * shape.layers * shape.heads * shape.head_dim * contexts


def kv_read_bytes(shape: DecoderShape, keys: int, dtype_bytes: int = 4) -> int:
    """Bytes of cached keys and values read for `keys` key positions (summed over runs, each run once):
    2·L·K·d·bytes per position (a key and a value per layer and KV head)."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * dtype_bytes * keys


def _median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: first-touch pages, the kernel's choice
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def read_rates(repeats: int = 7) -> dict[str, float]:
    """This process's memory read rates in GB/s at torch's current threads: summing a 256 MiB tensor
    (sum_gb_s) and a 128 MiB matrix times a vector (gemv_gb_s)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    flat = torch.randn(64 * 2**20, generator=generator)
    matrix, vector = torch.randn(4096, 8192, generator=generator), torch.randn(8192, generator=generator)
    return {"sum_gb_s": flat.numel() * 4 / _median_seconds(flat.sum, repeats) / 1e9,
            "gemv_gb_s": matrix.numel() * 4 / _median_seconds(lambda: matrix @ vector, repeats) / 1e9}


def step_floor(figures: Mapping[str, float], shape: DecoderShape, matmul_gflop_s: float,
               read_gb_s: float) -> dict[str, float]:
    """The floor of a step from bench_step's figures (seconds, GFLOPs and the sampler's attention counts
    rollout_forward_contexts and rollout_forward_kv_keys):

        rollout forward: (F_rollout − F_attn) / M + max(F_attn / M, bytes_kv / R)
        update:          (F_update_forward + F_update_backward) / M
        step floor:      step_s − measured model seconds + the two above

    M the matmul rate (GFLOP/s), R the read rate (GB/s). Returns the floors, the step's floor and
    step_floor_ratio = step_s / step_floor_s."""
    if matmul_gflop_s <= 0 or read_gb_s <= 0:
        raise ValueError(f"rates must be positive, got {matmul_gflop_s} GFLOP/s and {read_gb_s} GB/s")
    attention = attention_flops(shape, int(figures["rollout_forward_contexts"])) / 1e9
    read = kv_read_bytes(shape, int(figures["rollout_forward_kv_keys"])) / 1e9
    rollout = (figures["rollout_forward_gflops"] - attention) / matmul_gflop_s + max(attention / matmul_gflop_s,
                                                                                     read / read_gb_s)
    update = (figures["update_forward_gflops"] + figures["update_backward_gflops"]) / matmul_gflop_s
    measured_model = figures["rollout_forward_s"] + figures["update_forward_s"] + figures["update_backward_s"]
    floor = figures["step_s"] - measured_model + rollout + update
    return {"rollout_attention_gflops": attention, "rollout_kv_read_gb": read, "read_gb_s": read_gb_s,
            "floor_rollout_forward_s": rollout, "floor_update_s": update, "step_floor_s": floor,
            "step_floor_ratio": figures["step_s"] / floor}


def measured_floor(figures: Mapping[str, float], shape: DecoderShape) -> dict[str, float]:
    """read_rates() measured now and step_floor at the better of each pair of rates in `figures`
    (matmul_gflop_s, matmul_model_shape_gflop_s) and of the read rates."""
    rates = read_rates()
    matmul = max(figures["matmul_gflop_s"], figures["matmul_model_shape_gflop_s"])
    return {**rates, **step_floor(figures, shape, matmul, max(rates.values()))}
