"""scripts/plot_run.py on real tiny run folders: one PNG per metric, one line per run, labelled by overrides."""

from __future__ import annotations

import runpy
import subprocess
import sys

import pytest

from tiny_runs import ROOT, read_metrics

PLOT = runpy.run_path(str(ROOT / "scripts" / "plot_run.py"))


def test_sweep_folder_gives_one_png_per_metric_with_one_line_per_run(tiny_sweep, monkeypatch):
    sweep = tiny_sweep[0]
    drawn = {}
    plot_metric = PLOT["plot_metric"]

    def recording(curves, metric, path):
        drawn[metric] = curves
        return plot_metric(curves, metric, path)

    monkeypatch.setitem(PLOT["plot_runs"].__globals__, "plot_metric", recording)
    written = PLOT["plot_runs"](sweep)
    assert set(written) == {"train/reward", "val/accuracy", "rollout/tool_calls"}
    for metric, path in written.items():
        assert path.parent == sweep / "plots" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert sorted(drawn[metric]) == ["credit=grpo", "credit=trace"]  # shared overrides left out
    grpo_job = next(p for p in sweep.iterdir() if "credit:grpo" in p.name)
    rows = [r for r in read_metrics(grpo_job) if r["train/reward"]]
    assert drawn["train/reward"]["credit=grpo"] == ([int(r["step"]) for r in rows], [float(r["train/reward"]) for r in rows])


def test_single_run_from_the_command_line(tiny_sweep, tmp_path):
    job = next(p for p in tiny_sweep[0].iterdir() if "credit:trace" in p.name)
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_run.py"), str(job), "--out", str(tmp_path),
                             "--metrics", "train/reward", "no/such_metric"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"train/reward: {tmp_path / 'train_reward.png'}", "no/such_metric: not logged by any run"]


def test_labels_keep_only_differing_overrides(tmp_path):
    runs = []
    for name, overrides in (("a", ["credit=trace", "credit.K=1", "seed=0"]), ("b", ["credit=trace", "credit.K=3", "seed=0"]),
                            ("c", [])):
        (tmp_path / name / ".hydra").mkdir(parents=True)
        (tmp_path / name / ".hydra" / "overrides.yaml").write_text("\n".join(f"- {o}" for o in overrides) + "\n")
        runs.append(tmp_path / name)
    assert PLOT["run_labels"](runs[:2]) == {runs[0]: "credit.K=1", runs[1]: "credit.K=3"}
    assert PLOT["run_labels"](runs) == {runs[0]: "credit=trace credit.K=1 seed=0", runs[1]: "credit=trace credit.K=3 seed=0",
                                        runs[2]: "c"}
    assert PLOT["run_labels"](runs[:1]) == {runs[0]: "a"}
    assert PLOT["run_labels"](runs[:2], width=12) == {runs[0]: "credit.K=1", runs[1]: "credit.K=3"}


def test_folder_without_metrics_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no metrics.csv under"):
        PLOT["plot_runs"](tmp_path)


def _run(folder, overrides: list[str], csv: bytes = b"step,train/reward\n0,0.1\n1,0.2\n"):
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (folder / "metrics.csv").write_bytes(csv)
    return folder


@pytest.mark.parametrize("below, says", [("", "output folder {out} is an existing file"),
                                         ("plots", "output folder {out}: {afile} is a file, not a folder")])
def test_an_output_that_cannot_be_a_folder_is_one_line_before_anything_is_read(tmp_path, below, says):
    _run(tmp_path / "runs" / "a", ["seed=0"], b"\xff")  # never read: the output is checked first
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / below if below else tmp_path / "afile"
    with pytest.raises(SystemExit) as stopped:
        PLOT["main"]([str(tmp_path / "runs"), "--out", str(out)])
    assert str(stopped.value) == "plot_run: " + says.format(out=out, afile=tmp_path / "afile")


def test_an_output_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    _run(tmp_path / "runs" / "a", ["seed=0"])
    plot_runs = PLOT["plot_runs"]

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(plot_runs.__globals__["tempfile"], "TemporaryFile", read_only)
    with pytest.raises(SystemExit, match=f"^plot_run: cannot write into {tmp_path / 'out'}: Permission denied$"):
        plot_runs(tmp_path / "runs", out=tmp_path / "out")


def test_a_full_disk_leaves_the_earlier_png_whole(tmp_path):
    from write_faults import failing_writes

    _run(tmp_path / "runs" / "a", ["seed=0"])
    written = PLOT["plot_runs"](tmp_path / "runs", ["train/reward"], tmp_path / "out")
    before = written["train/reward"].read_bytes()
    (tmp_path / "runs" / "a" / "metrics.csv").write_text("step,train/reward\n0,0.5\n1,0.9\n2,0.1\n")
    with failing_writes(lambda path: "train_reward.png" in path.name, after_bytes=100, fault="full"):
        with pytest.raises(SystemExit, match="^plot_run: cannot write .*train_reward.png: No space left on device"):
            PLOT["plot_runs"](tmp_path / "runs", ["train/reward"], tmp_path / "out")
    assert written["train/reward"].read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["train_reward.png"]  # no temp file left


@pytest.mark.parametrize("name, content, says", [
    ("metrics.csv", b"step,train/reward\n0,\xff\n", "metrics.csv: not UTF-8 text"),
    (".hydra/overrides.yaml", b"5\n", "overrides.yaml: not a list of overrides"),
    (".hydra/overrides.yaml", b"- [unclosed\n", "overrides.yaml: not YAML (while parsing a flow sequence)"),
    (".hydra/overrides.yaml", b"- seed=\xff\n", "overrides.yaml: not UTF-8 text"),
])
def test_a_run_whose_file_is_damaged_is_named_and_left_out(tmp_path, capsys, name, content, says):
    good = _run(tmp_path / "runs" / "good", ["credit=grpo", "seed=0"])
    bad = _run(tmp_path / "runs" / "bad", ["credit=trace", "seed=0"])
    (bad / name).write_bytes(content)
    drawn = {}
    plot_metric = PLOT["plot_metric"]

    def recording(curves, metric, path):
        drawn[metric] = curves
        return plot_metric(curves, metric, path)

    globals_ = PLOT["plot_runs"].__globals__
    original, globals_["plot_metric"] = globals_["plot_metric"], recording
    try:
        assert PLOT["main"]([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--metrics", "train/reward"]) == 0
    finally:
        globals_["plot_metric"] = original
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {bad / name}: {says.split(': ', 1)[1]}; that run left out"]
    assert list(drawn["train/reward"]) == [good.name]  # the one run left is labelled by its folder
    with pytest.raises(SystemExit, match="no run under .* could be read"):
        (good / "metrics.csv").write_bytes(b"\xff")
        PLOT["plot_runs"](tmp_path / "runs", ["train/reward"], tmp_path / "out")


def test_runs_of_the_same_label_are_told_apart_by_their_folders(tmp_path):
    one = _run(tmp_path / "s1" / "0_a", ["credit=grpo", "seed=0"])
    two = _run(tmp_path / "s2" / "0_a", ["credit=grpo", "seed=0"])
    other = _run(tmp_path / "s2" / "1_b", ["credit=trace", "seed=0"])
    assert PLOT["run_labels"]([one, two, other]) == {one: "credit=grpo (s1/0_a)", two: "credit=grpo (s2/0_a)",
                                                     other: "credit=trace"}
    bare = [_run(tmp_path / "x" / "r", []), _run(tmp_path / "y" / "r", [])]  # no overrides: folder names alike too
    assert PLOT["run_labels"](bare) == {bare[0]: "x/r", bare[1]: "y/r"}


def test_a_cut_short_metrics_csv_is_named_once_not_once_per_metric(tmp_path, capsys):
    run = _run(tmp_path / "runs" / "a", ["seed=0"], b"step,train/reward,val/accuracy\n0,0.1,0.5\n1,0.2,0.6\n2,0.3")
    written = PLOT["plot_runs"](tmp_path / "runs", ["train/reward", "val/accuracy"], tmp_path / "out")
    assert set(written) == {"train/reward", "val/accuracy"}
    assert capsys.readouterr().err.splitlines() == [f"warning: {run / 'metrics.csv'}:4: cut short (no line end); left out"]
