"""Attention of a prefilled row's new tokens over its cached keys, without a mask where none is needed.

A row back from its tools feeds n new tokens on top of `start` cached ones: query j (column start + j)
sees columns 0..start + j. In general that takes a boolean mask, which the CPU flash kernel first turns
into a float mask (m × (start + n) values) and then adds block by block. Two cases need none:

- the last decoder layer, which runs only each row's last new token: it sees every column;
- a row with nothing cached (its first prefill): plain causal attention, the kernel's causal path.

Both give the masked call's softmax over the same keys; only the kernel's blocking (its order of
sums) differs (tests/test_cached_attention.py: within 1e-6).

Tried and left out: splitting a prefill into the cached prefix (no mask) and its new tokens (causal),
merged by the two parts' log-sum-exps. In isolation it took 7.2 → 5.9 ms at 300 new tokens over 1,500
cached, but over a recorded long-preset rollout's 1,240 prefills it took 5.09 s against the masked
calls' 4.97 s (timed side by side on the same inputs, one thread): most prefills are short.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def prefill_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, start: int, n: int,
                      scale: float, gqa: bool) -> torch.Tensor:
    """(1, H, m, D) attention of the last m of a row's n new tokens (queries q, (1, H, m, D)) over its
    keys and values (1, H_kv, start + n, D): query i (new token n - m + i) sees columns 0..start + n - m + i."""
    m = q.shape[2]
    if m == 1:  # the last new token sees every column
        return F.scaled_dot_product_attention(q, keys, values, scale=scale, enable_gqa=gqa)
    if start == 0 and m == n:  # nothing cached: causal attention over the new tokens
        return F.scaled_dot_product_attention(q, keys, values, is_causal=True, scale=scale, enable_gqa=gqa)
    columns = torch.arange(start + n, device=q.device)
    mask = columns[None, :] <= (start + n - m) + torch.arange(m, device=q.device)[:, None]  # (m, start + n)
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask[None, None], scale=scale, enable_gqa=gqa)
