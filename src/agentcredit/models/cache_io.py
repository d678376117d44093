"""Write a cache directory so that concurrent writers and readers never see it half-written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentcredit.records import publish_folder


def publish_directory(target: Path, write: Callable[[Path], None], marker: str) -> Path:
    """Run `write(scratch)` in a private directory, then rename it to `target`.

    Several processes (DDP ranks, parallel sweeps) may build the same entry at once: each writes
    its own scratch directory and the first rename wins; the others' identical copies are dropped.
    `marker` is a file whose presence means `target` is complete.
    """
    if (target / marker).exists():
        return target
    try:
        publish_folder(target, write)
    except OSError:
        if not (target / marker).exists():
            raise
    return target
