"""How close the sampler's decode attention runs to this machine's memory rate, as one JSON line.

    python benchmarks/bench_decode_attention.py                    # the testbed model's heads, long-preset lengths
    python benchmarks/bench_decode_attention.py --slots 32 --min-keys 300 --max-keys 3000

A decode step attends one new token per slot over that slot's cached keys and values. Each key and
value is read once and used for two multiply-adds per element, so the call is bound by reading the
cache, not by arithmetic: what matters is the bytes read per second. This times, on random caches
shaped like the sampler's (slots × kv heads × capacity × head dim, float32), with lengths drawn
uniformly in [--min-keys, --max-keys]:

- `sampler_ms`: the sampler's call (agent/lean_forward.py): slots cut into runs (`decode_chunks`), each
  run one masked scaled-dot-product call read up to its longest slot;
- `per_slot_ms`: one unmasked call per slot over exactly its keys (nothing padded read);
- `bmm_ms`: the softmax written out with batched matrix products, one slot at a time;
- `kernel_ms`: agent/decode_kernel.py's C++ kernel (each slot's keys and values read once, up to its
  length, with an online softmax); when it cannot be built, `kernel` says why and it is left out;

and beside them the machine's own read rates in the same process: `sum_gb_s` (summing a 256 MiB
tensor) and `gemv_gb_s` (a 128 MiB matrix times a vector). Each `*_gb_s` figure is the cache bytes a
variant must read (every slot's keys and values up to its own length) over its median time, so it is
comparable with the two machine rates. `max_abs_diff` is the largest difference of any variant's
output from the sampler's. Medians of --repeats timed rounds after one warm-up, variants taking turns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from agentcredit.agent.decode_kernel import decode_attention, decode_kernel_available
from agentcredit.agent.forward_plan import decode_chunks
from agentcredit.models.step_floor import read_rates


def sampler_attention(q, keys, values, lengths: list[int], scale: float) -> torch.Tensor:
    """(S, H, D): the lean forward's decode attention (runs of slots, each read up to its longest)."""
    width = max(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None])[:, None, None]  # (S, 1, 1, W)
    parts = []
    for lo, hi, run_width in decode_chunks(lengths):
        full = all(n == run_width for n in lengths[lo:hi])
        out = F.scaled_dot_product_attention(q[lo:hi, :, None], keys[lo:hi, :, :run_width], values[lo:hi, :, :run_width],
                                             attn_mask=None if full else mask[lo:hi, :, :, :run_width], scale=scale)
        parts.append(out[:, :, 0])
    return torch.cat(parts)


def per_slot_attention(q, keys, values, lengths: list[int], scale: float) -> torch.Tensor:
    return torch.stack([F.scaled_dot_product_attention(q[i, :, None], keys[i, :, :n], values[i, :, :n], scale=scale)[:, 0]
                        for i, n in enumerate(lengths)])


def bmm_attention(q, keys, values, lengths: list[int], scale: float) -> torch.Tensor:
    out = torch.empty_like(q)
    for i, n in enumerate(lengths):
        scores = torch.bmm(q[i][:, None] * scale, keys[i, :, :n].transpose(1, 2))  # (H, 1, n)
        torch.bmm(torch.softmax(scores, -1), values[i, :, :n], out=out[i][:, None])
    return out


def kernel_attention(q, keys, values, lengths: list[int], scale: float) -> torch.Tensor:
    return decode_attention(q, keys, values, torch.tensor(lengths), scale)


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(slots: int, kv_heads: int, head_dim: int, min_keys: int, max_keys: int, repeats: int, seed: int,
            rates: bool = True) -> dict:
    if not 1 <= min_keys <= max_keys:
        raise ValueError(f"need 1 <= --min-keys <= --max-keys, got {min_keys} and {max_keys}")
    generator = torch.Generator().manual_seed(seed)
    capacity = max_keys
    keys = torch.randn(slots, kv_heads, capacity, head_dim, generator=generator)
    values = torch.randn(slots, kv_heads, capacity, head_dim, generator=generator)
    q = torch.randn(slots, kv_heads, head_dim, generator=generator)
    lengths = torch.randint(min_keys, max_keys + 1, (slots,), generator=generator).tolist()
    scale = head_dim ** -0.5
    variants = {"sampler": sampler_attention, "per_slot": per_slot_attention, "bmm": bmm_attention}
    kernel_reason = decode_kernel_available()
    if kernel_reason is None:
        variants["kernel"] = kernel_attention
    reference = sampler_attention(q, keys, values, lengths, scale)
    diff = max(float((fn(q, keys, values, lengths, scale) - reference).abs().max()) for fn in variants.values())
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            rounds[name].append(seconds(lambda: fn(q, keys, values, lengths, scale)))
    read_bytes = 2 * sum(lengths) * kv_heads * head_dim * 4  # keys and values up to each slot's length
    out = {"slots": slots, "kv_heads": kv_heads, "head_dim": head_dim, "mean_keys": round(sum(lengths) / slots, 1),
           "read_bytes": read_bytes, "max_abs_diff": diff, "threads": torch.get_num_threads(),
           "kernel": kernel_reason or "ok"}
    for name, times in rounds.items():
        median = statistics.median(times)
        out[f"{name}_ms"] = float(f"{median * 1e3:.4g}")
        out[f"{name}_gb_s"] = float(f"{read_bytes / median / 1e9:.3g}")
    if rates:
        out.update({k: round(v, 2) for k, v in read_rates(repeats).items()})  # models/step_floor.py's, as bench_step's
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=32, help="rows decoding at once (4 questions × 8 rollouts)")
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--min-keys", type=int, default=300)
    parser.add_argument("--max-keys", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.slots < 1 or args.repeats < 1:
        parser.error("--slots and --repeats must be at least 1")
    torch.set_num_threads(args.threads)
    try:
        figures = measure(args.slots, args.kv_heads, args.head_dim, args.min_keys, args.max_keys, args.repeats, args.seed)
    except ValueError as error:
        parser.error(str(error))
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
