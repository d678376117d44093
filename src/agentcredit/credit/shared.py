"""Helpers that several credit methods' files share: knob defaults of an advantage function, right-padding of
per-turn rows, and the continuation-cost step metric."""

from __future__ import annotations

import inspect

import torch
from torch import Tensor


def keyword_defaults(advantages) -> dict:
    """An advantage function's knob defaults: diagnostics called with fewer knobs use the same values."""
    return {k: p.default for k, p in inspect.signature(advantages).parameters.items() if p.kind == p.KEYWORD_ONLY}


def pad_rows(rows: list[Tensor], dtype: torch.dtype) -> Tensor:
    """Rows of different lengths right-padded with 0 into one (G, T_max) tensor."""
    width = max((r.numel() for r in rows), default=0)
    padded = torch.zeros(len(rows), width, dtype=dtype)
    for g, row in enumerate(rows):
        padded[g, : row.numel()] = row
    return padded  # (G, T_max)


def continuation_overhead(logs: dict[str, list[float]]) -> dict[str, float]:
    """Verification overhead of a step (ProVer, SPO-chain, Monte Carlo value credit): tokens its continuations
    generated per token of the step's own rollouts (ProVer reports +2.4–16.8%)."""
    group_tokens = sum(logs.get("group_tokens", []))
    if "extra_tokens" not in logs or group_tokens <= 0:
        return {}
    return {"extra_token_ratio": sum(logs["extra_tokens"]) / group_tokens}
