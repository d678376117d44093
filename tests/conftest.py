"""Shared fixtures. The workflow tests shrink the real configs with `tiny_runs.TINY` (a 2-layer,
64-wide tiny policy without warm start, 2 questions x 2 rollouts per step, BM25 retrieval)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/ helpers import as plain modules

from tiny_runs import TINY, ensure_signal_credit  # noqa: E402


@pytest.fixture
def tiny_overrides() -> list[str]:
    return list(TINY)


@pytest.fixture(scope="session")
def signal_credit() -> str:
    """A credit method with a fixed non-zero advantage, registered for this session: credit.name=signal."""
    ensure_signal_credit()
    return "signal"
