"""A revision and this tree, each checked out into a temporary git worktree, for benchmarks that run both sides.

    with revision_trees("f9b0bad", prefix="bench_step_rev_") as (trees, names):
        trees["before"], trees["after"]   # worktree paths; names: the revision's short hash, this tree's

This tree is frozen as it is at the start (uncommitted changes to tracked files included, untracked files not), so
that editing the sources while a benchmark runs changes neither side. Both worktrees are removed afterwards.
"""

from __future__ import annotations

import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git(*argv: str, cwd: Path | None = None) -> str:
    """git's output in `cwd` (default: this checkout)."""
    return subprocess.run(["git", *argv], cwd=cwd or ROOT, check=True, capture_output=True, text=True).stdout.strip()


@contextmanager
def revision_trees(revision: str, prefix: str):
    """({"before": path, "after": path}, {"before": short hash, "after": this tree's name}) for the block's duration."""
    short = git("rev-parse", "--short", revision)
    head = git("rev-parse", "HEAD")
    here = git("stash", "create") or head
    names = {"before": short, "after": git("rev-parse", "--short", "HEAD") + ("+changes" if here != head else "")}
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        trees = {"before": Path(tmp) / "before", "after": Path(tmp) / "after"}
        git("worktree", "add", "--detach", str(trees["before"]), short)
        git("worktree", "add", "--detach", str(trees["after"]), here)
        try:
            yield trees, names
        finally:
            for tree in trees.values():
                git("worktree", "remove", "--force", str(tree))
