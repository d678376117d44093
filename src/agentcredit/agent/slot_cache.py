"""KV cache with one slot per rollout row, written in place at each row's own columns.

TurnSampler (agent/sampling.py) gives every live rollout a slot; the Hugging Face attention layers
(through `update`) and the lean forward (through `put`) write new keys there, so a step never pads,
re-stacks or concatenates the cache.

Where every reader reads a slot only up to its own length (the lean forward with the decode kernel:
agent/decode_kernel.py and the prefill's attention), `zero_unwritten=False` leaves columns no row has
written uninitialised, and `capacity` sizes the buffers once for the longest history the rollout allows:
the buffers never grow (a grow copies every slot's columns into new memory), and the operating system
maps a page only when a row first writes there, so memory follows the histories' lengths, not the
capacity. Where a reader attends over a run of slots through a mask (SDPA; the Hugging Face attention
layers), a masked column still goes through the arithmetic, so the buffers are zeroed and grow as
needed (a stray NaN there would survive the mask).
"""

from __future__ import annotations

import torch


class SlotCache:
    """KV cache with one slot per row: per layer (S, H_kv, capacity, D) key and value buffers.

    Slot s holds its row's first `length` tokens at columns 0..length-1. Before each forward,
    `plan` says which slots take part and at which column each one's new tokens start; `update`
    (called by every attention layer) writes them there and returns the keys/values up to `width`.
    Columns past a row's length may hold stale keys; the attention mask hides them.
    """

    def __init__(self, num_slots: int, *, zero_unwritten: bool = True, capacity: int | None = None):
        self.num_slots = num_slots
        self.zero_unwritten = zero_unwritten
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        # The first reserve takes `capacity` at once (only without zeroing: zeroing would write all of it).
        self.initial_capacity = 0 if zero_unwritten or capacity is None else int(capacity)
        self.capacity = 0
        self._slots: torch.Tensor | None = None  # None = every slot, in order
        self._run: tuple[int, int] | None = None  # the slots as a range lo..hi-1, when consecutive
        self._columns: torch.Tensor | None = None  # (B, N) column of each new token
        self._width = 0

    def plan(self, slots: torch.Tensor | None, starts: torch.Tensor, n: int) -> int:
        """Prepare a forward of n new tokens per row starting at `starts` (B,); returns the key width."""
        self._width = int(starts.max()) + n
        self.reserve(self._width)
        self._slots = slots
        # A single row or a run of consecutive slots is read as a view of the buffers (no copy).
        self._run = None
        if slots is not None and bool((slots[1:] - slots[:-1] == 1).all()):
            self._run = (int(slots[0]), int(slots[0]) + len(slots))
        self._columns = starts[:, None] + torch.arange(n, device=starts.device)  # (B, N)
        return self._width

    def _grow(self, capacity: int) -> None:
        for buffers in (self.keys, self.values):
            for i, old in enumerate(buffers):
                buffers[i] = _copied(old, None, self.capacity, capacity, zero=self.zero_unwritten)
        self.capacity = capacity

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Store (B, H_kv, N, D) new keys/values at the planned columns; return (B, H_kv, width, D)
        keys/values to attend to."""
        rows = self._slots if self._slots is not None else torch.arange(self.num_slots, device=key_states.device)
        # (B, N) slot and column of each new token; the target view is (B, N, H_kv, D).
        keys, values = self.put(key_states.transpose(1, 2), value_states.transpose(1, 2), layer_idx,
                                rows[:, None].expand_as(self._columns), self._columns)
        if self._slots is None:
            return keys[:, :, : self._width], values[:, :, : self._width]  # views: no copy per step
        if self._run is not None:
            lo, hi = self._run
            return keys[lo:hi, :, : self._width], values[lo:hi, :, : self._width]
        return keys[:, :, : self._width].index_select(0, rows), values[:, :, : self._width].index_select(0, rows)

    def reserve(self, width: int) -> None:
        """Make room for `width` columns per slot (a forward that calls put directly, without plan)."""
        if width > self.capacity:
            # Grow geometrically so a rollout pays for O(log L) copies, not one per token.
            self._grow(max(width, 2 * self.capacity, 64, self.initial_capacity))

    def put(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, slots: torch.Tensor,
            columns: torch.Tensor):
        """Store (..., H_kv, D) keys/values of tokens at `slots` and `columns` (both shaped like the
        tokens' leading dims); returns the layer's whole (S, H_kv, capacity, D) buffers."""
        if layer_idx == len(self.keys):  # first forward: buffers take the model's head shape and dtype
            shape = (self.num_slots, key_states.shape[-2], self.capacity, key_states.shape[-1])
            self.keys.append(_allocate(key_states, shape, zero=self.zero_unwritten))
            self.values.append(_allocate(value_states, shape, zero=self.zero_unwritten))
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        # Advanced indices on dims 0 and 2 put the tokens' dims first: the target is (..., H_kv, D).
        keys[slots, :, columns] = key_states
        values[slots, :, columns] = value_states
        return keys, values

    def keep(self, slots: torch.Tensor, used: int | None = None, num_slots: int | None = None) -> None:
        """Drop every slot not in `slots`; the kept ones are renumbered 0..len(slots)-1 in that order
        (ascending slots: moved down in place; any other order: copied into new buffers, zeroed past the copy
        where unwritten columns must be zero).
        used: how many columns any kept slot holds (only those are copied; None = all).
        num_slots: slots to hold from now on (at least len(slots); the ones after the kept are free)."""
        used = self.capacity if used is None else min(used, self.capacity)
        rows = max(int(slots.numel()), num_slots or 0)
        order = slots.tolist()
        if self.keys and rows <= self.keys[0].shape[0] and order == sorted(set(order)):
            # Kept in their own order (the sampler's compaction): slot order[j] moves down to j in place, j
            # ascending, so no slot is overwritten before it moves (order[j] >= j). Only the slots that move
            # are copied, and no buffer is allocated or zeroed: a slot's columns past its row's length keep
            # what was there (keys some row wrote, or zeros where unwritten columns must be zero), which
            # nothing reads unmasked.
            for j, slot in enumerate(order):
                if slot != j:
                    for buffer in (*self.keys, *self.values):
                        buffer[j, :, :used] = buffer[slot, :, :used]
            self.keys = [k[:rows] for k in self.keys]
            self.values = [v[:rows] for v in self.values]
        else:
            self.keys = [_copied(k, slots, used, self.capacity, rows, zero=self.zero_unwritten) for k in self.keys]
            self.values = [_copied(v, slots, used, self.capacity, rows, zero=self.zero_unwritten) for v in self.values]
        self.num_slots = rows

    def copy_slot(self, source: int, target: int, used: int) -> None:
        """Slot `target` takes columns :used of slot `source` (a history that split from another)."""
        for buffer in (*self.keys, *self.values):
            buffer[target, :, :used] = buffer[source, :, :used]


def _copied(buffer: torch.Tensor, slots: torch.Tensor | None, used: int, capacity: int,
            rows: int | None = None, *, zero: bool = True) -> torch.Tensor:
    """A (rows, H, capacity, D) buffer whose first len(slots) (or S) slots hold columns :used of
    `slots` (None = all) of `buffer`; everywhere else zero, or with zero=False uninitialised (for
    readers that never read past a slot's length)."""
    kept = buffer.shape[0] if slots is None else len(slots)
    rows = kept if rows is None else rows
    new = _allocate(buffer, (rows, buffer.shape[1], capacity, buffer.shape[3]), zero=False)
    head = buffer[:, :, :used]
    new[:kept, :, :used] = head if slots is None else head.index_select(0, slots)
    if zero:  # only what the copy left unwritten: the columns are written once, not zeroed and then overwritten
        new[:kept, :, used:].zero_()
        new[kept:].zero_()
    return new


def _allocate(like: torch.Tensor, shape: tuple[int, ...], *, zero: bool) -> torch.Tensor:
    """A buffer of `like`'s dtype and device: zeros, or uninitialised (its pages mapped only when written)."""
    return like.new_zeros(shape) if zero else like.new_empty(shape)
