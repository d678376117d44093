"""Shared fixtures. The workflow tests shrink the real configs with `tiny_runs.TINY` (a 2-layer,
64-wide tiny policy without warm start, 2 questions x 2 rollouts per step, BM25 retrieval)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/ helpers import as plain modules

import contextlib  # noqa: E402
import io  # noqa: E402

from tiny_runs import TINY, ensure_signal_credit, hydra_cli  # noqa: E402


@pytest.fixture
def tiny_overrides() -> list[str]:
    return list(TINY)


@pytest.fixture(scope="session")
def signal_credit() -> str:
    """A credit method with a fixed non-zero advantage, registered for this session: credit.name=signal."""
    ensure_signal_credit()
    return "signal"


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory) -> tuple[Path, str]:
    """`python train.py -m credit=grpo,trace credit.K=1` at tiny sizes with CSV logs: (sweep dir, its stdout).
    Shared by the multirun, evaluation and plotting tests."""
    sweep = tmp_path_factory.mktemp("sweep") / "multirun"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        hydra_cli("-m", "credit=grpo,trace", "credit.K=1", *TINY, "logger=csv", f"hydra.sweep.dir={sweep}")
    return sweep, stdout.getvalue()


@pytest.fixture(scope="session")
def small_base_cache(tmp_path_factory):
    """AGENTCREDIT_CACHE in a temporary folder for this session's small base-policy builds (tiny_runs.SMALL_WARM_START)."""
    import os

    path = tmp_path_factory.mktemp("cache")
    old = os.environ.get("AGENTCREDIT_CACHE")
    os.environ["AGENTCREDIT_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("AGENTCREDIT_CACHE", None)
    else:
        os.environ["AGENTCREDIT_CACHE"] = old
