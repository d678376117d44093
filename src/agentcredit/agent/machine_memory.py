"""How much memory this machine (or its CUDA device) has: the limits that settings are checked against
before any model loads (models/memory_bounds.py, agent/engines/vllm_settings.py)."""

from __future__ import annotations

import os


def _psutil():
    try:
        import psutil
    except ImportError:  # not a dependency of the project: os.sysconf below
        return None
    return psutil


def available_memory() -> tuple[int, str] | None:
    """(bytes, what) of host memory a new allocation can take now; None where the platform does not say."""
    psutil = _psutil()
    if psutil is not None:
        return int(psutil.virtual_memory().available), "available RAM"
    try:  # free pages only (no reclaimable cache): lower than psutil's figure, so never a looser bound
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free RAM"
    except (AttributeError, ValueError, OSError):
        return None


def total_memory() -> tuple[int, str] | None:
    """(bytes, what) of this machine's RAM (or the container's limit where psutil reports it); None where unknown."""
    psutil = _psutil()
    if psutil is not None:
        return int(psutil.virtual_memory().total), "RAM on this machine"
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "RAM on this machine"
    except (AttributeError, ValueError, OSError):
        return None


def device_memory() -> tuple[int, str] | None:
    """(bytes, what) of CUDA device 0's memory where CUDA is usable, else None."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return int(props.total_memory), f"memory on CUDA device 0 ({props.name})"


def gib(n: float) -> str:
    """Bytes as a short figure (MiB up to a GiB, then GiB, TiB, PiB)."""
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 2**20:.1f} MiB"
