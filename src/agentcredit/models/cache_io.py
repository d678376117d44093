"""Write a cache directory so that concurrent writers and readers never see it half-written."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from agentcredit.records import new_dir_mode


def publish_directory(target: Path, write: Callable[[Path], None], marker: str) -> Path:
    """Run `write(scratch)` in a private directory, then rename it to `target`.

    Several processes (DDP ranks, parallel sweeps) may build the same entry at once: each writes
    its own scratch directory and the first rename wins; the others' identical copies are dropped.
    `marker` is a file whose presence means `target` is complete.
    """
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write(scratch)
        scratch.chmod(new_dir_mode())  # mkdtemp makes it private whatever the umask; a shared cache should not be
        os.replace(scratch, target)
    except OSError:
        if not (target / marker).exists():
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
