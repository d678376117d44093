"""Every file the repository holds can be checked out on every system: no name Windows refuses (issue 46's
tuning archive once named its jobs `credit.K:3+...`)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "docs", "tests", "scripts", "benchmarks", ".ci")
# Characters Windows refuses in a file name, and names it reserves (with or without an extension).
REFUSED = re.compile(r'[<>:"\\|?*\x00-\x1f]')
RESERVED = re.compile(r"^(CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9])(\..*)?$", re.IGNORECASE)


def windows_problem(name: str) -> str | None:
    if REFUSED.search(name):
        return f"holds {REFUSED.search(name).group()!r}"
    if RESERVED.match(name):
        return "is a name Windows reserves"
    if name.endswith((" ", ".")):
        return "ends in a space or a dot"
    return None


def test_the_check_catches_what_windows_refuses():
    assert windows_problem("train.lr:0.0003_seed10") == "holds ':'"
    assert windows_problem("aux.txt") == "is a name Windows reserves"
    assert windows_problem("train.lr@0.0003_seed10") is None and windows_problem("credit.K@3+x@0.2_seed11") is None


def test_no_path_in_the_repository_is_refused_by_windows():
    problems = [f"{path.relative_to(ROOT)}: {why}" for folder in FOLDERS if (ROOT / folder).is_dir()
                for path in (ROOT / folder).rglob("*") if "__pycache__" not in path.parts
                for why in [windows_problem(path.name)] if why]
    assert not problems, f"{len(problems)} paths Windows cannot check out, e.g. {problems[:3]}"
