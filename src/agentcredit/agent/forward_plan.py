"""Where to cut a batch's forwards: cost models for splitting a prefill and a decode's attention.

Both cut sorted or slot-ordered rows into consecutive runs with the least modelled cost
(`cheapest_runs`); the constants are timings of the tiny model on 2 CPU threads.
"""

from __future__ import annotations


def cheapest_runs(values: list[float], call: float, base: list[float], slope: list[float],
                  max_run: int = 32) -> list[tuple[int, int]]:
    """Cut items 0..n-1 into consecutive runs [i, j) of at most max_run items with the least total
    cost, by dynamic programming over the cuts, where a run costs

        call + (j - i) * (base[j - 1] + slope[j - 1] * max(values[i:j])):

    a fixed cost per run plus, per row, a cost set by the run's last item and its largest value.
    Cut points are scanned right to left so the maximum is a running one: O(n * max_run) plain
    steps, no calls (this runs at every decode step, over every slot)."""
    n = len(values)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        peak, b, m = values[j - 1], base[j - 1], slope[j - 1]
        for i in range(j - 1, max(j - 1 - max_run, -1), -1):
            if values[i] > peak:
                peak = values[i]
            total = best[i] + call + (j - i) * (b + m * peak)
            if total < best[j]:
                best[j], cut[j] = total, i
    runs, j = [], n
    while j:
        runs.append((cut[j], j))
        j = cut[j]
    return runs[::-1]


PREFILL_CALL_TOKENS = 220
"""What one more prefill forward costs, in prefilled tokens: about 2.9 ms a forward against 13
microseconds a token over a short cache (tiny model, lean forward, 2 CPU threads, measured).
`prefill_groups` splits a prefill into several forwards only where the padding saved costs more."""

PREFILL_KEY_SCALE = 1000
"""Cached keys at which a prefilled token costs twice what it costs over an empty cache (measured
as above: 16, 27 and 42 microseconds a token at about 250, 1,250 and 2,250 keys)."""


def prefill_groups(lengths: list[int], starts: list[int], call_tokens: float = PREFILL_CALL_TOKENS,
                   key_scale: float = PREFILL_KEY_SCALE) -> list[list[int]]:
    """Split rows with `lengths` new tokens after `starts` cached ones into right-padded forwards.

    One forward pads every row to the longest and attends over the widest cache, so a 400-token
    page prefilled beside a 10-token error message costs 800 padded tokens. Rows are sorted by
    length and cut into consecutive groups with the least modelled cost, where a group costs
    call_tokens + rows * longest * (1 + widest / key_scale). Returns groups of row indices, the
    longest group first."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], starts[i]))
    longest = [lengths[i] for i in order]  # a run's longest row is its last
    # Per row: longest * (1 + (widest start + longest) / key_scale), split into base + slope * widest start.
    base = [n * (1 + n / key_scale) for n in longest]
    slope = [n / key_scale for n in longest]
    runs = cheapest_runs([starts[i] for i in order], call_tokens, base, slope)
    return [order[i:j] for i, j in reversed(runs)]


DECODE_CALL_KEYS = 512
"""What one more attention call costs in a decode forward, in row-keys read: about 55 microseconds
per call against 0.1 per key of one row (tiny model's shapes, 2 CPU threads, measured)."""


def decode_chunks(keys: list[int], call_keys: float = DECODE_CALL_KEYS) -> list[tuple[int, int, int]]:
    """Runs of consecutive slots (lo, hi, width) whose decode attention reads only `width` keys.

    A decode forward's attention is bound by reading the cache, and one call reads every slot up
    to the longest row: about 40% of that is padding in a tiny-model rollout. Cutting the slots
    into runs, each read up to its own longest row, at call_keys per extra call, saves about a
    fifth of the attention's cost on a recorded rollout, without reordering the cache."""
    runs = cheapest_runs(keys, call_keys, [0.0] * len(keys), [1.0] * len(keys))
    return [(i, j, max(keys[i:j])) for i, j in runs]
