"""Where agentcredit finds its config groups and keeps derived artefacts (indexes, tokenizers,
warm-start policies). Everything in the cache is rebuilt on demand, so it can be deleted at any time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def config_dir() -> Path:
    """The Hydra config groups, shipped inside the package (the checkout's `conf/` links here), so that
    scripts and an installed package compose the same config as `python train.py`."""
    return Path(__file__).resolve().parents[1] / "conf"


def cache_dir() -> Path:
    """Root of the on-disk cache: $AGENTCREDIT_CACHE, else ~/.cache/agentcredit."""
    root = Path(os.environ.get("AGENTCREDIT_CACHE", Path.home() / ".cache" / "agentcredit"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hash of any JSON-serialisable object, independent of dict order; used as a cache key."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]
