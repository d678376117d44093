"""TRACE's prefix readiness scores ℓ̄_k (eq. 5) under the frozen reference model.

    ℓ̄_k = 1/|y*| Σ_t log π_ref(y*_t | S_k, opener, y*_<t),   k = 0..T

S_k = input_ids[:boundaries[k]] (the prompt and the first k action–observation pairs); `opener_ids`
are the assistant-turn header + `<answer>` in the model's own chat format; `answer_ids` the gold
answer's tokens. Both come from the caller, as token ids, so nothing is re-tokenised here.

Two implementations with the same result:
- `score_naive`: one forward pass per prefix; the plain definition, kept as the test oracle.
- `score_fast` / `score_batch`: one pass over each trajectory builds a KV cache; then all T+1 probes
  (opener + answer) of a trajectory run in a single short pass on top of that cache, each probe
  seeing only the first boundaries[k] cached positions (a 4D additive attention mask) and itself
  causally, with position ids continuing from boundaries[k]. Trajectories of the same length share a batch.

Departures from the paper: the paper scores "all ℓ̄_k in a single batched forward pass"; we use two
passes (cache, then probes) because a dense block mask over [trajectory; probes] costs O(L²) attention
without the causal kernel, which made it slower on CPU. The fast path needs `sdpa` or `eager` attention
(custom 4D masks); flash-attention models must score with an sdpa copy.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

_FAST_ATTENTION = ("sdpa", "eager")


@dataclass(frozen=True)
class ScoringItem:
    """One trajectory to score: ids (L,), prefix lengths b_0..b_T, opener and gold-answer ids."""

    input_ids: torch.Tensor
    boundaries: Sequence[int]
    opener_ids: Sequence[int]
    answer_ids: Sequence[int]


def score_naive(
    model,
    input_ids: torch.Tensor,
    boundaries: Sequence[int],
    opener_ids: Sequence[int],
    answer_ids: Sequence[int],
) -> torch.Tensor:
    """ℓ̄_0..ℓ̄_T (T+1,) in float32, one forward pass per prefix S_k."""
    _check(ScoringItem(input_ids, boundaries, opener_ids, answer_ids))
    device = _device(model)
    ids = input_ids.to(device)
    opener = torch.as_tensor(list(opener_ids), dtype=torch.long, device=device)
    answer = torch.as_tensor(list(answer_ids), dtype=torch.long, device=device)
    scores = []
    with torch.no_grad():
        for b in boundaries:
            # The last answer token is never an input: it is only predicted.
            seq = torch.cat([ids[:b], opener, answer[:-1]])[None]  # (1, b + o + a - 1)
            logits = model(input_ids=seq, logits_to_keep=len(answer), use_cache=False).logits[0]  # (a, V)
            scores.append(_token_logprobs(logits, answer).mean())
    return torch.stack(scores).cpu()


def score_fast(
    model,
    input_ids: torch.Tensor,
    boundaries: Sequence[int],
    opener_ids: Sequence[int],
    answer_ids: Sequence[int],
) -> torch.Tensor:
    """Same as `score_naive`, sharing the trajectory's KV cache across all boundaries."""
    return score_batch(model, [ScoringItem(input_ids, boundaries, opener_ids, answer_ids)])[0]


def score_batch(model, items: Sequence[ScoringItem], max_batch_tokens: int = 16384) -> list[torch.Tensor]:
    """ℓ̄ (T_i+1,) float32 for every item, batching trajectories of similar length together.

    `max_batch_tokens` bounds rows × padded (trajectory + probes) length per forward pass.
    """
    for item in items:
        _check(item)
    _check_attention(model)
    # Identical items (a group's rollouts that sampled the same tokens throughout, common on a trained
    # policy) are scored once: every score is a function of the item alone.
    first: dict[tuple, int] = {}
    same = [first.setdefault(_identity(item), i) for i, item in enumerate(items)]
    unique = [i for i, j in enumerate(same) if i == j]
    scored = _score_unique(model, [items[i] for i in unique], max_batch_tokens)
    by_item = dict(zip(unique, scored))
    return [by_item[j] if i == j else by_item[j].clone() for i, j in enumerate(same)]


def _identity(item: ScoringItem) -> tuple:
    return (tuple(item.input_ids.tolist()), tuple(item.boundaries), tuple(item.opener_ids), tuple(item.answer_ids))


def _score_unique(model, items: Sequence[ScoringItem], max_batch_tokens: int) -> list[torch.Tensor]:
    # Only trajectories of one length share a batch: the cache pass then needs no padding mask and takes
    # the attention kernel's causal path (a padded batch of a group's rollouts took twice as long on CPU).
    order = sorted(range(len(items)), key=lambda i: (max(items[i].boundaries), _row_width(items[i])))
    results: list[torch.Tensor] = [torch.empty(0)] * len(items)
    chunk: list[int] = []
    for i in order:
        # Rows are sorted by width, so the newest row is the widest of its chunk.
        if chunk and (max(items[i].boundaries) != max(items[chunk[0]].boundaries)
                      or _row_width(items[i]) * (len(chunk) + 1) > max_batch_tokens):
            _score_chunk(model, items, chunk, results)
            chunk = []
        chunk.append(i)
    if chunk:
        _score_chunk(model, items, chunk, results)
    return results


def _row_width(item: ScoringItem) -> int:
    return max(item.boundaries) + len(item.boundaries) * _probe_len(item)


def _probe_len(item: ScoringItem) -> int:
    return len(item.opener_ids) + len(item.answer_ids) - 1


def _score_chunk(model, items: Sequence[ScoringItem], rows: list[int], results: list[torch.Tensor]) -> None:
    device = _device(model)
    dtype = _dtype(model)
    chunk = [items[i] for i in rows]
    traj_lens = [max(it.boundaries) for it in chunk]
    probe_lens = [_probe_len(it) for it in chunk]
    widths = [len(it.boundaries) * m for it, m in zip(chunk, probe_lens)]
    B, L, W = len(chunk), max(traj_lens), max(widths)

    traj = torch.zeros(B, L, dtype=torch.long)  # (B, L) right-padded; pad id is irrelevant (masked)
    traj_mask = torch.zeros(B, L, dtype=torch.long)
    probes = torch.zeros(B, W, dtype=torch.long)  # (B, W) probe k of row i at [k*m_i, (k+1)*m_i)
    probe_pos = torch.zeros(B, W, dtype=torch.long)
    probe_seg = -1 - torch.arange(W).repeat(B, 1)  # padding: a segment of its own (attends to itself)
    probe_limit = torch.zeros(B, W, dtype=torch.long)  # cached positions visible to each probe token
    for r, (it, length, m) in enumerate(zip(chunk, traj_lens, probe_lens)):
        traj[r, :length] = it.input_ids[:length].cpu()
        traj_mask[r, :length] = 1
        probe = torch.tensor(list(it.opener_ids) + list(it.answer_ids)[:-1], dtype=torch.long)  # (m,)
        for k, b in enumerate(it.boundaries):
            span = slice(k * m, (k + 1) * m)
            probes[r, span] = probe
            probe_pos[r, span] = b + torch.arange(m)
            probe_seg[r, span] = k
            probe_limit[r, span] = b

    sees_cache = torch.arange(L)[None, None, :] < probe_limit[:, :, None]  # (B, W, L)
    causal = torch.arange(W)[None, :] <= torch.arange(W)[:, None]  # (W, W)
    sees_probe = (probe_seg[:, :, None] == probe_seg[:, None, :]) & causal  # (B, W, W)
    allowed = torch.cat([sees_cache, sees_probe], dim=-1)[:, None]  # (B, 1, W, L + W)
    additive = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)

    cache_kw = _cache_kwarg(model)
    with torch.no_grad():
        # All-ones masks let the attention kernel take its causal fast path.
        first = model(
            input_ids=traj.to(device),
            attention_mask=None if bool(traj_mask.all()) else traj_mask.to(device),
            use_cache=True,
            logits_to_keep=1,
        )
        cache = getattr(first, "cache", None)
        if cache is None:  # the field's name before transformers 5.x
            cache = getattr(first, "past_key_values", None)
        logits = model(
            input_ids=probes.to(device),
            attention_mask=additive.to(device),
            position_ids=probe_pos.to(device),
            use_cache=True,
            **{cache_kw: cache},
        ).logits  # (B, W, V)
    if cache is None or cache.get_seq_length() != L + W:
        raise RuntimeError("the model ignored the KV cache passed to it; score with score_naive for this model")

    for r, (it, m) in enumerate(zip(chunk, probe_lens)):
        o, a, n = len(it.opener_ids), len(it.answer_ids), len(it.boundaries)
        answer = torch.as_tensor(list(it.answer_ids), dtype=torch.long, device=device)
        # Within each probe, positions o-1 .. o+a-2 predict answer tokens 0 .. a-1.
        row = logits[r, : n * m].view(n, m, -1)[:, o - 1 : o - 1 + a]  # (T+1, a, V)
        results[rows[r]] = _token_logprobs(row, answer.expand(n, a)).mean(-1).cpu()


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[targets] in float32; (..., V), (...) → (...)."""
    logits = logits.float()
    return logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)


def _check(item: ScoringItem) -> None:
    length = int(item.input_ids.shape[0])
    b = list(item.boundaries)
    if item.input_ids.dim() != 1:
        raise ValueError(f"input_ids must be one trajectory of shape (L,), got {tuple(item.input_ids.shape)}")
    if not b or b[0] < 1 or b[-1] > length or any(x > y for x, y in zip(b, b[1:])):
        raise ValueError(f"boundaries must be non-decreasing prefix lengths in [1, {length}], got {b}")
    if not item.opener_ids:
        raise ValueError("opener_ids is empty; pass the assistant-turn header + <answer> token ids")
    if not item.answer_ids:
        raise ValueError("answer_ids is empty; the gold answer must have at least one token")


def _unwrap(model) -> torch.nn.Module:
    """The Hugging Face causal LM under a ReferenceModel and/or a PEFT wrapper."""
    inner = model.module if hasattr(model, "active") else model
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


def _device(model) -> torch.device:
    return next(_unwrap(model).parameters()).device


def _dtype(model) -> torch.dtype:
    return next(_unwrap(model).parameters()).dtype


def _check_attention(model) -> None:
    impl = getattr(_unwrap(model).config, "_attn_implementation", "eager")
    if impl not in _FAST_ATTENTION:
        raise ValueError(
            f"reference scoring needs custom attention masks: use attn_implementation sdpa or eager, not {impl!r}"
        )


def _cache_kwarg(model) -> str:
    # transformers 5.x renamed past_key_values to cache; older releases only know the old name.
    return "cache" if "cache" in inspect.signature(_unwrap(model).forward).parameters else "past_key_values"
