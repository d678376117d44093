"""Batched sampling of one assistant turn for many sequences of different lengths.

Each row's KV cache is kept across turns, so a turn prefills only what was appended since the last
one (observation and chat pieces), then decodes token by token. Rows
that stop are dropped from the batch (and from the cache), so a few long turns do not make every
finished row pay for each further step. Log-probabilities are recorded under the same
temperature-scaled distribution the loss recomputes (top-p truncation is not part of it, so
training and sampling agree on the ratio's denominator).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import DynamicCache


@dataclass
class SampledTurn:
    token_ids: list[int]
    logprobs: list[float]
    stop: str  # "eos" | "stop_string" | "length"
    cache: "RowCache | None" = None  # KV cache of the sequence and all sampled tokens but the last


class StopChecker:
    """Decides after each sampled token whether a row's turn is over.

    Stop strings may span several tokens, so the decoded tail is checked, but only after tokens
    whose text contains the last character of a stop string (a precomputed table), which keeps
    decoding off the per-token hot path.
    """

    def __init__(self, tokenizer, stop_strings: tuple[str, ...], eos_ids: tuple[int, ...]):
        self.tokenizer = tokenizer
        self.stop_strings = stop_strings
        self.eos_ids = set(eos_ids)
        last_chars = {s[-1] for s in stop_strings}
        vocab_size = len(tokenizer)
        pieces = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
        self._may_end = torch.zeros(vocab_size + 1, dtype=torch.bool)
        for i, piece in enumerate(pieces):
            if piece is not None and any(c in piece for c in last_chars):
                self._may_end[i] = True
        self._tail_tokens = max(8, max(len(s) for s in stop_strings))

    def may_end(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self._may_end[token_ids.clamp(max=len(self._may_end) - 1)]

    def stop_reason(self, generated: list[int]) -> str | None:
        last = generated[-1]
        if last in self.eos_ids:
            return "eos"
        if self._may_end[min(last, len(self._may_end) - 1)]:
            tail = self.tokenizer.decode(generated[-self._tail_tokens:], skip_special_tokens=False)
            if any(tail.endswith(s) for s in self.stop_strings):
                return "stop_string"
        return None


def sample_top_p(logits: torch.Tensor, top_p: float, generator: torch.Generator | None) -> torch.Tensor:
    """Nucleus sampling from already temperature-scaled logits. (B, V) -> (B,)"""
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        cumulative = sorted_probs.cumsum(dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (the top token is always kept).
        drop = cumulative - sorted_probs >= top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        choice = torch.multinomial(sorted_probs, 1, generator=generator)  # (B, 1)
        return order.gather(-1, choice).squeeze(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def cache_kwarg(model) -> str:
    """transformers 5.x renamed `past_key_values` to `cache`; older releases only know the old name."""
    forward = getattr(model, "get_base_model", lambda: model)().forward
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


@dataclass
class RowCache:
    """KV cache of one sequence's first `length` tokens: per layer (keys, values), each (H_kv, length, D)."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    length: int


def _batch_cache(caches: list[RowCache | None], width: int) -> DynamicCache:
    """Left-pad row caches to `width` columns and stack them into one batch cache."""
    cache = DynamicCache()
    if width == 0:
        return cache
    template = next(c for c in caches if c is not None)
    for layer, (k0, v0) in enumerate(template.layers):
        keys = k0.new_zeros((len(caches), k0.shape[0], width, k0.shape[2]))  # (B, H, P, D)
        values = v0.new_zeros((len(caches), v0.shape[0], width, v0.shape[2]))
        for row, c in enumerate(caches):
            if c is not None and c.length:
                keys[row, :, width - c.length :] = c.layers[layer][0]
                values[row, :, width - c.length :] = c.layers[layer][1]
        cache.update(keys, values, layer)
    return cache


def _row_cache(cache: DynamicCache, row: int, valid: torch.Tensor) -> RowCache:
    """The cached keys/values of one batch row at its valid (attended) columns."""
    columns = valid.nonzero().squeeze(-1)
    layers = [(layer.keys[row].index_select(1, columns), layer.values[row].index_select(1, columns)) for layer in cache.layers]
    return RowCache(layers, int(columns.numel()))


@torch.no_grad()
def sample_turns(
    model,
    sequences: list[list[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    pad_id: int,
    stop: StopChecker,
    generator: torch.Generator | None = None,
    caches: list[RowCache | None] | None = None,
) -> list[SampledTurn]:
    """Sample one turn for each sequence. Returns one SampledTurn per input sequence.

    `caches[i]`, when given, holds the KV cache of `sequences[i][:caches[i].length]` from an earlier
    turn, so only the new tokens (observation, chat pieces) are prefilled. Each returned turn carries
    the cache of its sequence plus every sampled token except the last (which was never fed).
    Batch layout per row, left-padded twice: [pad | cached | pad | new tokens] then decoded tokens;
    the attention mask hides the pads and position ids continue each row's own count.
    """
    device = next(model.parameters()).device
    B = len(sequences)
    caches = list(caches) if caches is not None else [None] * B
    past = [c.length if c is not None else 0 for c in caches]
    fresh = [seq[p:] for seq, p in zip(sequences, past)]
    if any(len(f) == 0 for f in fresh):
        raise ValueError("every sequence needs at least one token beyond its cache")
    P, N = max(past), max(len(f) for f in fresh)
    input_ids = torch.full((B, N), pad_id, dtype=torch.long)
    attention = torch.zeros((B, P + N), dtype=torch.long)
    positions = torch.zeros((B, N), dtype=torch.long)
    for i, (f, p) in enumerate(zip(fresh, past)):
        n = len(f)
        input_ids[i, N - n :] = torch.tensor(f, dtype=torch.long)
        attention[i, P - p : P] = 1
        attention[i, P + N - n :] = 1
        positions[i, N - n :] = torch.arange(p, p + n)
    input_ids, attention, positions = input_ids.to(device), attention.to(device), positions.to(device)

    cache = _batch_cache(caches, P)
    cache_kw = cache_kwarg(model)
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, **{cache_kw: cache})
    logits = out.logits[:, -1, :]  # (B, V)
    next_pos = torch.tensor([len(s) for s in sequences], device=device)  # (B,) position of the next token per row

    results: list[SampledTurn | None] = [None] * B
    generated: list[list[int]] = [[] for _ in range(B)]
    logprobs: list[list[float]] = [[] for _ in range(B)]
    alive = list(range(B))  # original row index of each row still in the batch
    scale = 1.0 / max(temperature, 1e-5)

    for step in range(max_new_tokens):
        scaled = logits.float() * scale
        if temperature <= 0:
            tokens = scaled.argmax(-1)
        else:
            tokens = sample_top_p(scaled, top_p, generator)
        token_logprobs = torch.log_softmax(scaled, dim=-1).gather(-1, tokens[:, None]).squeeze(-1)
        tokens_cpu, logprobs_cpu = tokens.tolist(), token_logprobs.tolist()

        keep: list[int] = []
        for row, (token, lp) in enumerate(zip(tokens_cpu, logprobs_cpu)):
            original = alive[row]
            generated[original].append(token)
            logprobs[original].append(lp)
            reason = stop.stop_reason(generated[original])
            if reason is None and step == max_new_tokens - 1:
                reason = "length"
            if reason is None:
                keep.append(row)
            else:
                row_cache = _row_cache(cache, row, attention[row])
                results[original] = SampledTurn(generated[original], logprobs[original], reason, row_cache)
        if not keep:
            break
        if len(keep) < len(alive):
            # Shrinking the batch is cheaper than decoding finished rows to the end of the turn.
            index = torch.tensor(keep, device=device)
            cache.batch_select_indices(index)
            attention = attention.index_select(0, index)
            next_pos = next_pos.index_select(0, index)
            tokens = tokens.index_select(0, index)
            alive = [alive[r] for r in keep]
        attention = torch.cat([attention, attention.new_ones((len(alive), 1))], dim=1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=attention,
            position_ids=next_pos[:, None],
            use_cache=True,
            **{cache_kw: cache},
        )
        next_pos = next_pos + 1
        logits = out.logits[:, -1, :]
    return results  # type: ignore[return-value]
