"""Lines of /proc/cpuinfo by their label: the processor's model name, its instruction-set flags; the cores a process
may use."""

from __future__ import annotations

import os
from pathlib import Path

CPUINFO = "/proc/cpuinfo"


def cpuinfo_value(labels: tuple[str, ...], cpuinfo: str | Path = CPUINFO) -> str | None:
    """The value after the colon of the first line that starts with one of `labels` (x86 names its flags "flags",
    ARM "Features"); None where no line does or the file is missing (macOS)."""
    try:
        with open(cpuinfo, errors="replace") as info:
            line = next((line for line in info if line.startswith(labels)), None)
    except OSError:
        return None
    return None if line is None else line.split(":", 1)[-1].strip()


def cpu_flags(cpuinfo: str | Path = CPUINFO) -> set[str]:
    """The instruction-set extensions the processor reports (empty where the file is missing)."""
    return set((cpuinfo_value(("flags", "Features"), cpuinfo) or "").split())


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it, else every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
