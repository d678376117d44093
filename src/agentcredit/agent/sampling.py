"""Continuous batched sampling: every live rollout decodes in one batch, each on its own turn clock.

A row whose turn ends (EOS, stop string, token limit) leaves the batch only while its tool runs.
Its next tokens (the unfed last sampled token, chat pieces, observation, header) are queued,
prefilled at the next step, and it samples again at that step. So no row idles until the slowest
row of a turn is done. Each row keeps its keys/values in its own slot of one buffer (SlotCache):
new keys are written at the row's own columns, so nothing is padded in the middle, re-stacked or
concatenated per step. Log-probabilities are recorded under the same temperature-scaled
distribution the loss recomputes (top-p truncation is not part of it, so training and sampling
agree on the ratio's denominator).

Rows whose histories are identical (the rollouts of one question before their first different
token, or continuations from one state) share one cache slot: their pending tokens are fed once,
and each row then samples its own token from the shared logits, drawing the same random number it
would draw alone. Once rows draw different tokens, or their tools return different observations,
each new history gets its own slot with a copy of the shared keys (`share_identical`).

Each step first feeds what every row has pending: a decoding row its last sampled token, a row
back from its tools its queued tokens. For Llama/Qwen3 models that is one packed forward
(agent/lean_forward.py: the same logits without the Hugging Face forward's plumbing, unpadded,
attention reading each run of slots only up to its longest row, `decode_chunks`).
`rollout.lean_forward=false`, or a model the lean forward does not cover, calls the model: one
decode forward over every slot, then the prefill split into forwards of rows of similar length
(`prefill_groups`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Hashable

import torch

from agentcredit.agent.forward_plan import decode_chunks, prefill_groups
from agentcredit.agent.lean_forward import LeanForward, PackedBatch, lean_forward_unsupported
from agentcredit.agent.machine_memory import total_memory
from agentcredit.agent.next_token import StopChecker, sample_top_p, stream_uniforms
from agentcredit.agent.slot_cache import SlotCache

# The most address space a sampler's cache takes at once for the longest history (keys and values, every layer),
# and at most a quarter of the machine's memory (a system that commits address space strictly has room for it).
# Address space, not memory: a page is mapped when a row first writes there. Past this, the buffers grow.
UPFRONT_CACHE_BYTES = 4 << 30


def upfront_cache_bytes() -> int:
    total = total_memory()
    return UPFRONT_CACHE_BYTES if total is None else min(UPFRONT_CACHE_BYTES, total[0] // 4)


@dataclass
class SampledTurn:
    token_ids: list[int]
    logprobs: list[float]
    stop: str  # "eos" | "stop_string" | "length"


def cache_kwarg(model) -> str:
    """transformers 5.x renamed `past_key_values` to `cache`; older releases only know the old name."""
    forward = getattr(model, "get_base_model", lambda: model)().forward
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def _forward_kwargs(model) -> tuple[str, bool]:
    """(name of the cache argument, whether forward takes `logits_to_keep`)."""
    forward = getattr(model, "get_base_model", lambda: model)().forward
    return cache_kwarg(model), "logits_to_keep" in inspect.signature(forward).parameters


def _mask_dtype(model) -> torch.dtype | None:
    """None (a boolean mask) for SDPA attention; else the additive mask's float dtype."""
    base = getattr(model, "get_base_model", lambda: model)()
    if getattr(getattr(base, "config", None), "_attn_implementation", None) == "sdpa":
        return None
    dtype = next(model.parameters()).dtype
    return dtype if dtype.is_floating_point else torch.float32


def _mask(starts: torch.Tensor, n: int, width: int, dtype: torch.dtype | None) -> torch.Tensor:
    """(B, 1, N, width) mask: new token q of a row sees its columns 0..start+q (causal).

    dtype None gives a boolean mask (True = attend), which SDPA takes as is; eager attention adds
    its mask to the scores, so it gets an additive float one."""
    last = starts[:, None] + torch.arange(n, device=starts.device)  # (B, N) column of each query
    allowed = torch.arange(width, device=starts.device)[None, None, :] <= last[:, :, None]  # (B, N, W)
    if dtype is None:
        return allowed[:, None]
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)[:, None]


@dataclass
class _Row:
    key: Hashable
    slot: int
    length: int = 0  # tokens in this row's cache
    queued: list[int] = field(default_factory=list)  # tokens to prefill before the next sample
    max_new: int = 0
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    decoding: bool = False  # inside a turn: its last sampled token is fed at the next step
    generator: torch.Generator | None = None  # the row's own random stream (None: the sampler's)


class TurnSampler:
    """Samples turns for many rows at once; the caller runs tools between a row's turns.

        sampler = TurnSampler(model, ...)
        sampler.add(key, sequence, max_new)          # every row, before the first step (generator=: its own stream)
        while sampler.live:
            for key, turn in sampler.step():         # the turns that ended at this step
                sampler.next_turn(key, longer_sequence, max_new)  # or sampler.release(key)

    Every row whose turn ended must get next_turn or release before the next step. A row's
    sequence only ever grows: next_turn prefills what was appended since the row's cache.
    """

    def __init__(self, model, *, temperature: float, top_p: float, pad_id: int, stop: StopChecker,
                 generator: torch.Generator | None = None, use_lean_forward: bool = True,
                 share_identical: bool = True, max_length: int | None = None):
        self.model = model
        self.max_length = max_length  # the longest history a row can reach (the rollout's context limit), if known
        self.temperature, self.top_p, self.pad_id = temperature, top_p, pad_id
        self.stop, self.generator = stop, generator
        self.share_identical = share_identical
        self.device = next(model.parameters()).device
        self.lean = LeanForward(model) if use_lean_forward and lean_forward_unsupported(model) is None else None
        # The decode kernel reads each slot only up to its own length, and so does the prefill's attention: the
        # cache need not zero what no row wrote.
        self.reads_own_lengths = self.lean is not None and self.lean.decode_kernel
        self.cache_kw, self.keeps_logits = _forward_kwargs(model)
        self.mask_dtype = _mask_dtype(model)
        self.rows: dict[Hashable, _Row] = {}  # live rows in the order they were added (the order they sample in)
        self.slots: list[list[_Row] | None] = []  # the rows of each cache slot, all with one history; None = free
        self._added: dict[tuple, int] = {}  # before the first step: (sequence, max_new) -> its slot
        self.cache: SlotCache | None = None
        self.logits: torch.Tensor | None = None  # (S, V) next-token logits per slot

    @property
    def live(self) -> bool:
        return bool(self.rows)

    def add(self, key: Hashable, sequence: list[int], max_new: int, generator: torch.Generator | None = None) -> None:
        if self.cache is not None:
            raise RuntimeError("add every row before the first step")
        row = _Row(key, slot=len(self.slots), generator=generator if generator is not None else self.generator)
        self.rows[key] = row
        self.next_turn(key, sequence, max_new)
        same = None
        if self.share_identical:
            same = self._added.setdefault((tuple(sequence), max_new), row.slot)
        if same is None or same == row.slot:
            self.slots.append([row])
        else:
            row.slot = same
            self.slots[same].append(row)

    def next_turn(self, key: Hashable, sequence: list[int], max_new: int) -> None:
        row = self.rows[key]
        if row.decoding or len(sequence) <= row.length:
            raise ValueError("a new turn needs its row's turn to have ended and at least one new token")
        row.queued = list(sequence[row.length :])
        row.max_new, row.generated, row.logprobs = max_new, [], []

    def release(self, key: Hashable) -> None:
        row = self.rows.pop(key)
        members = self.slots[row.slot]
        members.remove(row)
        if not members:
            self.slots[row.slot] = None

    @torch.no_grad()
    def step(self) -> list[tuple[Hashable, SampledTurn]]:
        """Sample one token for every live row; returns the rows whose turn ended, in slot order.

        The step first feeds what every row has pending: a decoding row its last sampled token, a
        row back from its tools its queued tokens. With the lean forward that is one forward for
        both; otherwise a decode forward over every slot and the prefill forwards."""
        if not self.rows:
            return []
        ready = list(self.rows.values())
        if any(bool(r.queued) == r.decoding for r in ready):
            raise RuntimeError("every row whose turn ended needs next_turn or release before the next step")
        if self.cache is None:
            self.cache = self._new_cache(len(self.rows))  # at most one history per row
            self._added = {}
        self._split_diverged()
        if 4 * self.slots.count(None) >= len(self.slots):
            self._compact()
        # Each slot's first row stands for all of its rows: one history, one pending feed.
        heads = [m[0] for m in self.slots if m is not None]
        decoding = [r for r in heads if r.decoding]
        queued = [r for r in heads if r.queued]
        if self.lean is not None:
            self._packed(decoding, queued)
        else:
            if decoding:
                self._decode([m[0].generated[-1] if m is not None and m[0].decoding else self.pad_id for m in self.slots])
            lengths = [len(r.queued) for r in queued]
            for group in prefill_groups(lengths, [r.length for r in queued]):
                self._prefill([queued[i] for i in group])
        for members in self.slots:
            for r in members[1:] if members is not None else ():
                r.length, r.queued = members[0].length, []
        # Every row samples from its slot's logits, in the order the rows were added.
        logits = self.logits
        slot_of_row = [r.slot for r in ready]
        if slot_of_row != list(range(len(self.slots))):
            logits = logits.index_select(0, torch.tensor(slot_of_row, device=self.device))
        scaled = logits.float()  # (B, V)
        if self.temperature != 1.0:  # x / 1.0 is x: the division is skipped, not changed
            scaled = scaled / max(self.temperature, 1e-5)
        if self.temperature <= 0:
            tokens = scaled.argmax(-1)
        else:  # one number per row from the row's own stream (stream_uniforms)
            uniforms = stream_uniforms([r.generator for r in ready], self.device, scaled.dtype)
            tokens = sample_top_p(scaled, self.top_p, self.generator, uniforms)
        token_logprobs = torch.log_softmax(scaled, dim=-1).gather(-1, tokens[:, None]).squeeze(-1)

        ended: list[tuple[Hashable, SampledTurn]] = []
        for row, token, lp in zip(ready, tokens.tolist(), token_logprobs.tolist()):
            row.generated.append(token)
            row.logprobs.append(lp)
            reason = self.stop.stop_reason(row.generated)
            if reason is None and len(row.generated) >= row.max_new:
                reason = "length"
            # A row that goes on feeds this token at the next step; one that stops leaves it
            # unfed, and next_turn prefills it with the observation.
            row.decoding = reason is None
            if not row.decoding:
                ended.append((row.key, SampledTurn(row.generated, row.logprobs, reason)))
        return ended

    def _packed(self, decoding: list[_Row], queued: list[_Row]) -> None:
        """One lean forward for the decoding rows' fed tokens and the queued rows' prefill."""
        ids, positions, written, slots, columns, keys = [], [], [], [], [], []
        if decoding:  # one token per slot, a stand-in where the slot feeds nothing
            for slot, members in enumerate(self.slots):
                r = members[0] if members is not None else None
                fed = r is not None and r.decoding
                ids.append(r.generated[-1] if fed else self.pad_id)
                positions.append(r.length if fed else 0)
                # A stand-in's output is never read: the kernel reads no key for it (a slot no row has written
                # holds no key to read), a masked run one.
                keys.append(r.length + 1 if fed else 0 if self.reads_own_lengths else 1)
                if fed:
                    written.append(slot)
                    slots.append(slot)
                    columns.append(r.length)
        # A history that is a prefix of another's (continuations from several states of one rollout) is not
        # fed: its keys and values are the longer history's first columns, its logits those of its own last
        # token inside that history's run.
        hosts = self._nested_prefills(queued) if self.share_identical and not decoding else {}
        guests = [r for r in queued if r.slot in hosts]
        queued = [r for r in queued if r.slot not in hosts]
        prefill, first_of = [], {}
        for r in queued:
            n, first = len(r.queued), len(ids)
            first_of[r.slot] = first
            ids.extend(r.queued)
            positions.extend(range(r.length, r.length + n))
            written.extend(range(first, first + n))
            slots.extend([r.slot] * n)
            columns.extend(range(r.length, r.length + n))
            prefill.append((r.slot, first, n, r.length))
        self.cache.reserve(max(columns) + 1)
        tensor = lambda values: torch.tensor(values, dtype=torch.long, device=self.device)  # noqa: E731
        batch = PackedBatch(ids=tensor(ids), positions=tensor(positions), written=tensor(written),
                            slots=tensor(slots), columns=tensor(columns), decode_keys=keys,
                            decode_runs=decode_chunks(keys) if keys and not self.lean.decode_kernel else [],
                            prefill=prefill,  # (the kernel reads each slot to its own length: no runs to plan)
                            extra=[(hosts[r.slot], first_of[hosts[r.slot]] + len(r.queued) - 1, len(r.queued) - 1)
                                   for r in guests])
        logits = self.lean.packed(batch, self.cache)
        if decoding:
            self.logits = logits[: len(self.slots)]
        elif self.logits is None or self.logits.shape[0] != len(self.slots):
            self.logits = logits.new_zeros((len(self.slots), logits.shape[-1]))
        if queued or guests:
            self.logits[torch.tensor([r.slot for r in queued + guests], device=self.device)] = logits[len(keys):]
        for r in guests:
            self.cache.copy_slot(hosts[r.slot], r.slot, len(r.queued))
        for r in decoding:
            r.length += 1
        for r in queued + guests:
            r.length += len(r.queued)
            r.queued = []

    @staticmethod
    def _nested_prefills(queued: list[_Row]) -> dict[int, int]:
        """slot -> the slot whose prefill serves it: for each history that starts from nothing and is a prefix
        of (or equal to) another such history, a longer one that is a prefix of no other.

        Sorted, the histories that extend a history h follow it in one block, and the block's last one extends
        nothing in the batch (whatever extended it would extend h and come after it in the block)."""
        fresh = [r for r in queued if r.length == 0]
        if len(fresh) < 2:
            return {}
        order = sorted(fresh, key=lambda r: r.queued)
        hosts = {}
        for i, r in enumerate(order):
            n, j = len(r.queued), i
            while j + 1 < len(order) and order[j + 1].queued[:n] == r.queued:
                j += 1
            if j > i:
                hosts[r.slot] = order[j].slot
        return hosts

    def _forward(self, ids: torch.Tensor, starts: torch.Tensor, slots: torch.Tensor | None,
                 keep: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, N or len(keep), V) of one forward of (B, N) new tokens whose row caches end at
        `starts` (B,); keep: the positions to project onto the vocabulary (None = all)."""
        n = ids.shape[1]
        width = self.cache.plan(slots, starts, n)
        mask = _mask(starts, n, width, self.mask_dtype)
        positions = starts[:, None] + torch.arange(n, device=self.device)  # each row counts its own positions
        kwargs = {} if keep is None else {"logits_to_keep": keep}
        return self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                          **{self.cache_kw: self.cache}, **kwargs).logits

    def _decode(self, feed: list[int]) -> None:
        """Feed every slot one token; rows outside a turn feed a pad whose key lands at their next free
        column, where their prefill overwrites it (dead slots write garbage that nothing attends to)."""
        heads = [m[0] if m is not None else None for m in self.slots]
        starts = torch.tensor([r.length if r is not None else 0 for r in heads], device=self.device)
        slots = torch.arange(len(heads), device=self.device)  # the slots in use (the cache may hold more)
        self.logits = self._forward(torch.tensor(feed, device=self.device)[:, None], starts, slots)[:, -1, :]  # (S, V)
        for r in heads:
            if r is not None and r.decoding:
                r.length += 1

    def _prefill(self, rows: list[_Row]) -> None:
        """Prefill each row's queued tokens (right-padded), then store its next-token logits."""
        lengths = [len(r.queued) for r in rows]
        ids = torch.full((len(rows), max(lengths)), self.pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r.queued)] = torch.tensor(r.queued, dtype=torch.long)
        slots = torch.tensor([r.slot for r in rows], device=self.device)
        starts = torch.tensor([r.length for r in rows], device=self.device)
        last = torch.tensor(lengths, device=self.device) - 1  # (B,) position of each row's last real token
        keep, pick = None, last
        if self.keeps_logits:  # project only the positions some row needs onto the vocabulary
            keep, pick = torch.unique(last, return_inverse=True)
        logits = self._forward(ids.to(self.device), starts, slots, keep)[torch.arange(len(rows), device=self.device), pick]  # (B, V)
        if self.logits is None:
            self.logits = logits.new_zeros((len(self.slots), logits.shape[-1]))
        self.logits[slots] = logits
        for r, n in zip(rows, lengths):
            r.length += n
            r.queued = []

    def _split_diverged(self) -> None:
        """Give every set of a slot's rows whose pending feeds differ (they drew different tokens, or
        their tools returned different observations) a slot of its own, holding a copy of the keys
        and values they share so far."""
        for slot in range(len(self.slots)):
            members = self.slots[slot]
            if members is None or len(members) < 2:
                continue
            parts: dict[tuple, list[_Row]] = {}
            for r in members:
                feed = (r.generated[-1],) if r.decoding else tuple(r.queued)
                parts.setdefault((r.decoding, feed, r.max_new), []).append(r)
            if len(parts) == 1:
                continue
            first, *rest = parts.values()
            self.slots[slot] = first
            for part in rest:
                new = self._free_slot()
                self.cache.copy_slot(slot, new, part[0].length)
                for r in part:
                    r.slot = new
                self.slots[new] = part

    def _new_cache(self, slots: int) -> SlotCache:
        """Unzeroed buffers of the longest history's capacity where the readers allow it (SlotCache) and their
        address space stays under upfront_cache_bytes(); zeroed buffers that grow otherwise."""
        if not self.reads_own_lengths:
            return SlotCache(slots)
        upfront = self.max_length and slots * self.max_length * self.lean.column_bytes() <= upfront_cache_bytes()
        return SlotCache(slots, zero_unwritten=False, capacity=self.max_length if upfront else None)

    def _free_slot(self) -> int:
        if None in self.slots:
            return self.slots.index(None)
        self.slots.append(None)
        return len(self.slots) - 1

    def _compact(self) -> None:
        """Drop released slots so the decode batch is only as wide as the histories still running."""
        kept = [m for m in self.slots if m is not None]
        index = torch.tensor([m[0].slot for m in kept], device=self.device)
        # Columns past every length are never read; room stays for one slot per live row.
        self.cache.keep(index, used=max(m[0].length for m in kept), num_slots=len(self.rows))
        self.logits = None  # every live slot is fed at this step, which sets its logits anew
        for slot, members in enumerate(kept):
            for r in members:
                r.slot = slot
        self.slots = kept
