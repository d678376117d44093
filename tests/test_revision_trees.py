"""benchmarks/revision_trees.py: the before/after worktrees of the --against benchmarks."""

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("revision_trees", ROOT / "benchmarks" / "revision_trees.py")
trees_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trees_module)


def _git(repo: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_a_revision_and_this_tree_with_its_uncommitted_change(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    (repo / "f.txt").write_text("one\n")
    _git(repo, "add", "f.txt")
    _git(repo, "commit", "-q", "-m", "one")
    first = _git(repo, "rev-parse", "--short", "HEAD")
    (repo / "f.txt").write_text("two\n")
    _git(repo, "commit", "-q", "-am", "two")
    (repo / "f.txt").write_text("three\n")  # uncommitted: the after side holds it
    monkeypatch.setattr(trees_module, "ROOT", repo)
    with trees_module.revision_trees(first, prefix="test_rev_") as (trees, names):
        assert (trees["before"] / "f.txt").read_text() == "one\n"
        assert (trees["after"] / "f.txt").read_text() == "three\n"
        assert names["before"] == first and names["after"].endswith("+changes")
        (repo / "f.txt").write_text("four\n")  # edits while it runs change neither side
        assert (trees["after"] / "f.txt").read_text() == "three\n"
    assert not trees["before"].exists() and not trees["after"].exists()
    assert _git(repo, "worktree", "list").count("\n") == 0  # both worktrees removed
