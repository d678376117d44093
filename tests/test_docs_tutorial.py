"""docs/add-a-method.md followed step by step (issue 45, items 2 and 5): in a temporary copy of the repository,
every code block of the page that names a file is written into that file (three new files: the method's
module, its yaml and its test; no existing file is edited), then every command of its ```bash blocks runs there, in order, as a user would run it
(train.py and the fidelity script with the tests' tiny sizes appended). The toy method then trains 2 steps
and the credit-fidelity instrument measures it beside GRPO, with no change to either.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiny_runs import ROOT, TINY

PAGE = ROOT / "docs" / "add-a-method.md"
BLOCK = re.compile(r'```(\w+)(?: title="([^"]+)")?\n(.*?)```', re.S)


def page_blocks() -> list[tuple[str, str | None, str]]:
    """(language, title, text) of every fenced block of the page, in order."""
    return [(lang, title, text) for lang, title, text in BLOCK.findall(PAGE.read_text())]


def copy_repository(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in ("src", "scripts", "tests"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("train.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, dest / name)
    (dest / "conf").symlink_to("src/agentcredit/conf")


def apply_block(dest: Path, title: str, text: str) -> None:
    """Write one titled block into the copy as the new file its title names (a method touches no existing file)."""
    target = dest / title
    assert ": " not in title, f"block {title!r} edits an existing file; a new method should need none"
    assert not target.exists(), f"{title} already exists: the tutorial's method name is taken"
    target.write_text(text)


def run(dest: Path, command: str) -> subprocess.CompletedProcess:
    """One command of the page in the copy, with the copy's package first on the path (before the editable
    install of this checkout) and the tiny sizes for training and measuring."""
    args = shlex.split(command)
    if args[:2] == ["python", "train.py"]:
        args += [*TINY[:-1], "logger=csv", f"hydra.run.dir={dest / 'run'}"]
    elif args[:2] == ["python", "scripts/credit_fidelity.py"]:
        args += [*TINY, "group_size=2", "bootstrap=20", "samples=2", f"hydra.run.dir={dest / 'fidelity'}"]
    if args[0] in ("python", ".venv/bin/python"):
        args[0] = sys.executable
    env = {**os.environ, "PYTHONPATH": str(dest / "src"), "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    return subprocess.run(args, cwd=dest, env=env, capture_output=True, text=True, timeout=600)


def test_the_page_names_its_files_and_commands():
    blocks = page_blocks()
    titles = [t for _, t, _ in blocks if t]
    # One file plus one yaml plus one test (issue 45's goal 3).
    assert titles == ["src/agentcredit/credit/answer_weighted.py", "src/agentcredit/conf/credit/answer-weighted.yaml",
                      "tests/test_answer_weighted.py"], titles
    commands = [c for lang, _, text in blocks if lang == "bash" for c in text.strip().splitlines()]
    assert [c.split()[1] for c in commands] == ["-m", "train.py", "train.py", "scripts/credit_fidelity.py"], commands


@pytest.mark.slow  # four commands in subprocesses (imports, 2 training steps, a fidelity run): minutes on 2 shared cores
def test_the_tutorial_adds_a_method_that_trains_and_is_measured(tmp_path):
    dest = tmp_path / "repo"
    copy_repository(dest)
    outputs = []
    for lang, title, text in page_blocks():
        if title:
            apply_block(dest, title, text)
        elif lang == "bash":
            for command in text.strip().splitlines():
                start = time.monotonic()
                outputs.append((command, run(dest, command)))
                print(f"{time.monotonic() - start:.1f} s  {command}")

    (test, test_done), (bad, bad_done), (train, train_done), (measure, measure_done) = outputs
    assert test_done.returncode == 0 and "1 passed" in test_done.stdout, test_done.stdout[-2000:]
    # A bad value: one line, before any model loads.
    assert bad_done.returncode != 0
    assert "credit.tool_weight must be a number >= 0, got -1" in bad_done.stderr, bad_done.stderr[-2000:]
    assert "Traceback" not in bad_done.stderr
    # Two training steps with the new method.
    assert train_done.returncode == 0, train_done.stderr[-3000:]
    rows = [line for line in (dest / "run" / "metrics.csv").read_text().splitlines()[1:] if line]
    header = (dest / "run" / "metrics.csv").read_text().splitlines()[0].split(",")
    steps = {row.split(",")[header.index("step")] for row in rows if row.split(",")[header.index("train/reward")]}
    assert steps == {"0", "1"}, rows
    # The fidelity instrument measures it beside GRPO: a row of its own, its credit on every turn.
    assert measure_done.returncode == 0, measure_done.stderr[-3000:]
    summary = json.loads((dest / "fidelity" / "fidelity.json").read_text())
    assert set(summary["methods"]) == {"grpo", "answer-weighted"}, summary["methods"].keys()
    assert "| answer-weighted |" in (dest / "fidelity" / "fidelity.md").read_text()
    records = [json.loads(x) for x in (dest / "fidelity" / "turns.jsonl").read_text().splitlines()]
    for rollout in (r for record in records for r in record["rollouts"]):
        assert len(rollout["credit"]["answer-weighted"]) == len(rollout["truth"])
    # The toy method lives only in the copy: this checkout is unchanged.
    assert not (ROOT / "src" / "agentcredit" / "credit" / "answer_weighted.py").exists()
