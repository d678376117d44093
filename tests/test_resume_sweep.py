"""One command continues an interrupted sweep: `python train.py -m <same args> hydra.sweep.dir=<sweep> resume=true`
skips the finished jobs, resumes the unfinished one from its last.ckpt, and its folder ends up holding what an
uninterrupted sweep's does (tests/die_in_job.py kills the sweep in its second job with SIGKILL)."""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch

from tiny_runs import TINY, cli, hydra_cli, read_metrics

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SWEEP = ["-m", "credit=grpo,trace", "credit.K=1", *TINY, "logger=csv"]  # the tiny_sweep fixture's command


def rows(job) -> list[dict]:
    """metrics.csv without wall-clock timings (time/*, credit/scoring_s, ...) and empty cells."""
    return [{k: v for k, v in r.items() if v != "" and not k.startswith("time/") and not k.endswith("_s")}
            for r in read_metrics(job)]


def same_rows(want: list[dict], have: list[dict]) -> bool:
    return [r.keys() for r in want] == [r.keys() for r in have] and all(
        math.isclose(float(a[k]), float(b[k]), rel_tol=1e-5, abs_tol=1e-6) for a, b in zip(want, have) for k in a)


def files_of(job) -> dict:
    """Each file of a job folder -> (mtime, bytes), but for what Hydra itself writes at every launch (.hydra/,
    and train.log, to which it appends) and the folder's lock, which every launch takes (lit/run_lock.py)."""
    from agentcredit.lit.run_lock import LOCK_FILE

    return {p.relative_to(job): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(job.rglob("*"))
            if p.is_file() and ".hydra" not in p.parts and p.name not in ("train.log", LOCK_FILE)}


def test_a_sweep_killed_in_its_second_job_resumes_with_one_command(tiny_sweep, tmp_path):
    reference, _ = tiny_sweep
    sweep = tmp_path / "multirun"
    killed = cli("tests/die_in_job.py", "1", "1", *SWEEP, f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert killed.returncode == -9, killed.stderr[-2000:]
    first, second = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert (first / "test_summary.json").exists() and not (second / "test_summary.json").exists()
    assert torch.load(second / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 1
    before = files_of(first)

    with pytest.raises(SystemExit, match=r"2 job\(s\) of the sweep failed"):  # the same command without resume=true
        hydra_cli(*SWEEP, f"hydra.sweep.dir={sweep}")
    assert "add resume=true" in (second / "error.txt").read_text()

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        hydra_cli(*SWEEP, f"hydra.sweep.dir={sweep}", "resume=true")
    stdout = out.getvalue()
    assert f"finished already ({first / 'test_summary.json'}), skipped" in stdout
    assert f"continuing from {second / 'checkpoints' / 'last.ckpt'}" in stdout
    assert f"sweep finished, all jobs ran: {sweep}" in stdout
    assert files_of(first) == before  # the finished job was not run again: not one file touched
    for job, uninterrupted in zip((first, second), sorted(p for p in reference.iterdir() if p.is_dir())):
        assert job.name == uninterrupted.name
        assert same_rows(rows(uninterrupted), rows(job)), job.name
        assert (job / "credit_samples.jsonl").read_text() == (uninterrupted / "credit_samples.jsonl").read_text()
        theirs, ours = (torch.load(j / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"] for j in (uninterrupted, job))
        assert all(torch.equal(theirs[k], ours[k]) for k in theirs), job.name  # bit-equal weights
        assert sorted(p.name for p in (job / "checkpoints").iterdir()) == ["last.ckpt"]
        assert not list(job.rglob("*-v*.ckpt")) and not (job / "error.txt").exists()
    assert [r["step"] for r in rows(second)] == ["0", "1", "1", "2"]  # train 0 | train 1, validation, test
    assert torch.load(second / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 2


def test_a_sweep_restored_from_its_committed_summaries_skips_its_finished_jobs(tiny_sweep, tmp_path):
    """On a fresh checkout outputs/ is empty: scripts/restore_sweep.py gives the sweep folder back the finished
    jobs from what `compare.py --export` committed, and resume=true then skips them instead of training them again."""
    reference, _ = tiny_sweep
    exported, sweep = tmp_path / "results", tmp_path / "multirun"
    assert cli("scripts/compare.py", str(reference), "--export", str(exported), cwd=tmp_path).returncode == 0
    restored = cli("scripts/restore_sweep.py", str(exported), str(sweep), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert "2 finished jobs restored" in restored.stdout
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [j.name for j in jobs] == sorted(p.parent.name for p in reference.glob("*/metrics.csv"))  # (other tests add plots/)
    again = cli("scripts/restore_sweep.py", str(exported), str(sweep), cwd=tmp_path)  # nothing left to restore
    assert "0 finished jobs restored" in again.stdout
    before = {job: files_of(job) for job in jobs}

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        hydra_cli(*SWEEP, f"hydra.sweep.dir={sweep}", "resume=true")
    for job in jobs:
        assert f"finished already ({job / 'test_summary.json'}), skipped" in out.getvalue()
        assert files_of(job) == before[job]  # not trained again: no checkpoint, no new row
        assert not (job / "checkpoints").exists()
    for folder, name in ((exported, "exported"), (sweep, "restored")):
        assert cli("scripts/compare.py", str(folder), "--out", str(tmp_path / name), cwd=tmp_path).returncode == 0
    assert (tmp_path / "restored" / "compare.md").read_text() == (tmp_path / "exported" / "compare.md").read_text()


def test_restore_of_a_folder_without_summaries_is_one_line(tmp_path):
    result = cli("scripts/restore_sweep.py", str(tmp_path), str(tmp_path / "sweep"), cwd=tmp_path)
    assert result.returncode == 2 and "holds no exported *.summary.json" in result.stderr.strip().splitlines()[-1]


@pytest.mark.slow  # a killed sweep, export, carry, restore and resume; carry alone: tests/test_carry.py (default suite)
def test_a_session_ends_mid_sweep_and_a_fresh_checkout_finishes_it_from_committed_files(tiny_sweep, tmp_path):
    """The tuned comparison's session workflow (docs/tuning.md, "Across sessions"): the sweep is killed in its second
    job; its finished job is exported and its unfinished one carried; outputs/ is deleted (a fresh clone); restore
    and carry load give it back, and resume=true ends with what an uninterrupted sweep holds."""
    import shutil

    reference, _ = tiny_sweep
    sweep, exported, carried = tmp_path / "multirun", tmp_path / "results", tmp_path / "carry"
    killed = cli("tests/die_in_job.py", "1", "1", *SWEEP, f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert killed.returncode == -9, killed.stderr[-2000:]
    export = cli("scripts/compare.py", str(sweep), "--export", str(exported), cwd=tmp_path)
    assert export.returncode == 0 and "cut short" in export.stderr, export.stderr[-2000:]
    assert len(list(exported.glob("*.summary.json"))) == 1
    saved = cli("scripts/carry.py", "save", str(sweep), str(carried), cwd=tmp_path)
    assert saved.returncode == 0 and saved.stdout.strip().endswith("save: 1 saved"), saved.stdout + saved.stderr
    shutil.rmtree(sweep)

    assert cli("scripts/restore_sweep.py", str(exported), str(sweep), cwd=tmp_path).returncode == 0
    loaded = cli("scripts/carry.py", "load", str(carried), str(sweep), cwd=tmp_path)
    assert loaded.returncode == 0 and "(step 1): loaded" in loaded.stdout, loaded.stdout + loaded.stderr
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        hydra_cli(*SWEEP, f"hydra.sweep.dir={sweep}", "resume=true")
    first, second = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert f"finished already ({first / 'test_summary.json'}), skipped" in out.getvalue()
    assert f"continuing from {second / 'checkpoints' / 'last.ckpt'}" in out.getvalue()
    uninterrupted = sorted(p for p in reference.iterdir() if p.is_dir())[1]
    assert second.name == uninterrupted.name and same_rows(rows(uninterrupted), rows(second))
    theirs, ours = (torch.load(j / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"] for j in (uninterrupted, second))
    assert all(torch.equal(theirs[k], ours[k]) for k in theirs)
    assert cli("scripts/carry.py", "save", str(sweep), str(carried), cwd=tmp_path).stdout.strip().endswith(
        "save: 1 dropped")  # finished now: the carried copy is stale and goes


def test_a_sweep_run_from_a_pinned_worktree_imports_the_worktrees_code(tmp_path):
    """docs/running.md's pinned sweep: with PYTHONPATH=src in a worktree, the process and the launcher's worker
    processes (joblib's loky, as the comparisons' launcher) import the worktree's package, not the checkout's
    editable install, and write into the checkout's outputs/ through the link."""
    import os
    import subprocess
    import sys

    from tiny_runs import ROOT

    tree = tmp_path / "sweep-code"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), "HEAD"], check=True,
                   capture_output=True)
    try:
        subprocess.run(["rm", "-r", str(tree / "outputs")], check=True)
        (tree / "outputs").symlink_to(ROOT / "outputs")
        probe = ("import agentcredit, joblib, pathlib; "
                 "where = lambda: agentcredit.__file__; "
                 "workers = joblib.Parallel(n_jobs=2, backend='loky')(joblib.delayed(where)() for _ in range(2)); "
                 "print(agentcredit.__file__, *workers, pathlib.Path('outputs').resolve())")
        env = {**os.environ, "PYTHONPATH": "src"}
        out = subprocess.run([sys.executable, "-c", probe], cwd=tree, env=env, check=True, capture_output=True,
                             text=True).stdout.split()
        assert out[:3] == [str(tree / "src/agentcredit/__init__.py")] * 3, out
        assert out[3] == str((ROOT / "outputs").resolve())
        bare = subprocess.run([sys.executable, "-c", "import agentcredit; print(agentcredit.__file__)"], cwd=tree,
                              env={k: v for k, v in env.items() if k != "PYTHONPATH"}, check=True, capture_output=True,
                              text=True).stdout.strip()
        assert bare != out[0]  # without it, the editable install's package: the link alone would not pin the code
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
