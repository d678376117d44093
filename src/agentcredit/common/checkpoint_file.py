"""Checkpoints that say when they are damaged: a digest inside every checkpoint, checked on load.

    checkpoint = read_checkpoint(path)   # scripts, the reference loader and Lightning (lit/checkpoint_io.py)

Saving adds `checkpoint["integrity"] = {"sha256": ..., "version": 1}`: a SHA-256 over every tensor's
bytes, dtype and shape and every other value, in key order. Loading reads the file, recomputes the
digest, and checks that every floating-point tensor of the weights and the optimiser state is finite.
Each failure is a `CheckpointError` whose message is one line naming the file:
- missing, empty, truncated or otherwise unreadable (torch.load fails);
- digest mismatch (bytes changed after writing: a disk error, a copy cut short, an edit);
- non-finite values (a run that wrote NaN before this check existed, or a hand-made checkpoint).
A checkpoint written before digests existed loads with one warning line.

Why inside rather than beside the file: the finished file is renamed into place, so a digest inside it is
always the digest of that file; a second file could be left stale by a kill between the two writes, and
would then reject a good checkpoint.

`write_checkpoint` writes every checkpoint to a temporary file in the checkpoint's own folder, fsync'd and
renamed over the old one. Lightning's own save writes to the system temp folder and moves the file into
place, which on another filesystem than the run folder (the usual cluster case) is a copy over the old
file: a kill during it truncated the previous good last.ckpt, and left the temporary file behind.
"""

from __future__ import annotations

import hashlib
import io
import logging
import zipfile
from pathlib import Path
from typing import Any

import torch

from agentcredit.records import atomic_write_bytes

log = logging.getLogger(__name__)

INTEGRITY_KEY = "integrity"
VERSION = 1


class CheckpointError(Exception):
    """A checkpoint that cannot be trusted; the message is one line naming the file."""


def _update(digest, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        digest.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            digest.update(t.reshape(-1).view(torch.uint8).numpy().data)
    elif isinstance(value, dict):
        digest.update(b"D%d" % len(value))
        for key in sorted(value, key=repr):
            digest.update(repr(key).encode())
            _update(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(b"L%d" % len(value))
        for item in value:
            _update(digest, item)
    else:
        digest.update(f"V{type(value).__name__}:{value!r}".encode())


def checkpoint_digest(checkpoint: dict) -> str:
    digest = hashlib.sha256()
    _update(digest, {k: v for k, v in checkpoint.items() if k != INTEGRITY_KEY})
    return digest.hexdigest()


def non_finite_entries(checkpoint: dict, limit: int = 3) -> list[str]:
    """Names of floating-point tensors with NaN or inf in the weights and the optimiser state."""
    found: list[str] = []

    def walk(value: Any, name: str) -> None:
        if len(found) >= limit:
            return
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                found.append(name)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{name}.{key}" if name else str(key))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{name}[{i}]")

    walk(checkpoint.get("state_dict", {}), "state_dict")
    walk(checkpoint.get("optimizer_states", []), "optimizer_states")
    return found


def whole_checkpoint_problem(path: str | Path) -> str | None:
    """One line when `path` cannot be a whole checkpoint, from its size and its zip archive's end record alone (torch.save
    writes a zip; a truncated or interrupted copy loses the end record first), without reading it: cheap enough to
    check before a model loads. A file that passes may still fail `read_checkpoint`'s digest."""
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            return f"{path} is empty (0 bytes): an interrupted copy or write"
        if not zipfile.is_zipfile(path):
            return f"{path} is not a whole checkpoint (truncated, or not written by torch.save)"
    except OSError as err:
        return f"{path} cannot be read ({err.strerror or err})"
    return None


def other_checkpoints(path: str | Path) -> str:
    """Where else to continue from than the damaged `path`: the whole-looking .ckpt files beside it, the newest first
    (give one as ckpt_path=, with resume=true to continue the run in its folder), or that there is none."""
    path = Path(path)
    try:
        others = sorted((p for p in path.parent.glob("*.ckpt")
                         if p.name != path.name and p.is_file() and whole_checkpoint_problem(p) is None),
                        key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        others = []
    if not others:
        return "no other checkpoint lies beside it"
    named = ", ".join(p.name for p in others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    return f"other checkpoints beside it, newest first: {named} (give one as ckpt_path=)"


def _first_sentence(text: str, limit: int = 160) -> str:
    """The first line of an error's text, cut at its first sentence's end, or at `limit` characters with an ellipsis."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    end = line.find(". ")
    if 0 < end < limit:
        return line[: end + 1]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def verify_checkpoint(checkpoint: Any, path: str | Path) -> dict:
    """`checkpoint` as loaded from `path`, or a CheckpointError saying why it cannot be used."""
    if not isinstance(checkpoint, dict):
        raise CheckpointError(f"{path} is not a checkpoint of this project (it holds a {type(checkpoint).__name__})")
    integrity = checkpoint.get(INTEGRITY_KEY)
    if integrity is None:
        log.warning(f"{path} carries no integrity digest (written before digests existed); loading it unchecked")
    elif not isinstance(integrity, dict) or integrity.get("sha256") != checkpoint_digest(checkpoint):
        raise CheckpointError(f"{path} is corrupted: its content no longer matches the digest written with it; "
                              f"{other_checkpoints(path)}")
    bad = non_finite_entries(checkpoint)
    if bad:
        raise CheckpointError(f"{path} holds non-finite values (NaN or inf) in {', '.join(bad)}; "
                              f"{other_checkpoints(path)}")
    return checkpoint


def state_dict_problem(expected: dict[str, torch.Tensor], state: Any, strict: bool = True) -> str | None:
    """Why the weights `state` cannot load into a model whose own state_dict is `expected`, or None:
    the first shape that differs, then (with `strict`) a missing or unexpected entry. One line, where
    torch's load_state_dict prints one line per differing tensor inside a traceback."""
    if not isinstance(state, dict) or not state:
        return "it holds no model weights (no state_dict)"
    not_tensors = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        return f"{not_tensors[0]} is a {type(state[not_tensors[0]]).__name__}, not a tensor"
    shapes = [k for k in expected if k in state and tuple(state[k].shape) != tuple(expected[k].shape)]
    if shapes:
        k = shapes[0]
        return (f"{k} has shape {tuple(state[k].shape)} in the checkpoint but {tuple(expected[k].shape)} in the "
                f"configured model; {len(shapes)} tensor(s) differ")
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if strict and missing:
        return f"it lacks {len(missing)} tensor(s) of the configured model, e.g. {missing[0]}"
    if strict and unexpected:
        return f"it holds {len(unexpected)} tensor(s) the configured model has not, e.g. {unexpected[0]}"
    return None


def resume_problem(expected: dict[str, torch.Tensor], checkpoint: dict, strict: bool = True) -> str | None:
    """Why a trainer cannot resume from `checkpoint`: `state_dict_problem`, or no optimiser state."""
    problem = state_dict_problem(expected, checkpoint.get("state_dict"), strict)
    if problem is None and not isinstance(checkpoint.get("optimizer_states"), list):
        problem = "it holds weights only (no optimizer_states), so training cannot resume from it"
    return problem


def write_checkpoint(checkpoint: dict, path: str | Path) -> Path:
    """`torch.save` of `checkpoint` that replaces `path` all at once (see the module docstring): a kill or a
    full disk leaves the previous file whole and nothing in the system temp folder. The bytes are built in
    memory first, as Lightning's own save does, so that torch's writer never meets a failing file (it would
    turn the OSError of a full disk into a RuntimeError)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    with buffer.getbuffer() as data:
        return atomic_write_bytes(path, data)


def read_checkpoint(path: str | Path, weights_only: bool | None = None) -> dict:
    """torch.load + `verify_checkpoint`, with every read failure as one CheckpointError line."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist; give the path of a .ckpt file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty (0 bytes): an interrupted copy or write; {other_checkpoints(path)}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as err:  # noqa: BLE001 -- torch.load raises many types for damaged files; all mean the same
        raise CheckpointError(f"{path} cannot be read: truncated or corrupted ({type(err).__name__}: "
                              f"{_first_sentence(str(err))}); {other_checkpoints(path)}") from None
    return verify_checkpoint(checkpoint, path)


