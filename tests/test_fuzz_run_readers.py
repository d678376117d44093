"""The run-record readers (scripts/compare.py, scripts/restore_sweep.py, scripts/research/success_by_hops.py, bench_step's
child line, train's metric_by_step) on damaged and hostile files: a hostile corpus of the values a file can hold
(integers of 400 and 5,000 digits, Infinity, 1e400, -1e308, NaN, lone surrogates, 200k-deep nesting, lists and
nulls where records belong, strings where numbers belong, cut-short lines, binary) and Hypothesis on any JSON
value or any bytes. Each case ends in a result or one line, never a traceback; a good run beside a damaged one
is still compared; nothing is written outside the folder a command was given.

`python tests/test_fuzz_run_readers.py` prints the corpus' outcome counts (run it with PYTHONPATH=<tree>/src
to count another tree's)."""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentcredit

ROOT = Path(agentcredit.__file__).resolve().parents[2]  # the tree whose scripts run (PYTHONPATH picks it)
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ the hostile corpus

DEEP = "[" * 200_000 + "]" * 200_000
HOSTILE_JSON = {  # JSON text of values a file can hold where a number, a name or a record belongs
    "int400": "7" * 400, "int5000": "7" * 5000, "Infinity": "Infinity", "-Infinity": "-Infinity", "NaN": "NaN",
    "1e400": "1e400", "-1e308": "-1e308", "1e308": "1e308", "surrogate": '"\\ud800"', "list": "[1, 2]",
    "null": "null", "object": '{"a": 1}', "string": '"high"', "true": "true", "deep": DEEP,
    "dotdot": '"../../X"', "absolute": '"/tmp/agentcredit_fuzz_abs"', "dot": '"."', "empty": '""',
}
HOSTILE_CELLS = {  # metrics.csv cells
    "inf": "inf", "nan": "nan", "1e400": "1e400", "-1e308": "-1e308", "1e308": "1e308", "int400": "7" * 400,
    "int5000": "7" * 5000, "word": "abc", "huge_field": "9" * 200_000,
}
GOOD_SUMMARY = {"test/accuracy": 0.5, "arm": "grpo", "seed": 0}
HEADER = "step,train/reward,rollout/generated_tokens\n"
GOOD_ROWS = HEADER + "0,0.5,100\n1,0.7,120\n"
CONFIG = "credit:\n  name: grpo\nseed: 0\n"


def _with(template: dict, key: str, raw: str) -> str:
    """`template` as JSON with `key`'s value replaced by the raw JSON text `raw`."""
    marker = '"__HOSTILE__"'
    return json.dumps({**template, key: "__HOSTILE__"}).replace(marker, raw)


def hostile_corpus() -> list[tuple[str, str, bytes]]:
    """(kind, label, file content): the damaged variants of each file kind the readers take."""
    cases: list[tuple[str, str, bytes]] = []
    whole = {**HOSTILE_JSON, "truncated": '{"test/accuracy": 0.5, "ar', "not_json": "{not json"}
    for label, raw in whole.items():
        cases.append(("summary", f"whole {label}", raw.encode()))
        cases.append(("exported", f"whole {label}", raw.encode()))
    for kind, template, keys in (
            ("summary", GOOD_SUMMARY, ("test/accuracy", "seed", "arm", "test/tool_calls")),
            ("exported", {"name": "job_b", "arm": "trace", "seed": 1, "test": {"test/accuracy": 0.5}},
             ("name", "arm", "seed", "test"))):
        for key in keys:
            for label, raw in HOSTILE_JSON.items():
                cases.append((kind, f"{key}={label}", _with(template, key, raw).encode()))
    for label, raw in HOSTILE_JSON.items():  # a test metric inside the exported test section
        cases.append(("exported", f"test.accuracy={label}", json.dumps(
            {"name": "job_b", "arm": "trace", "seed": 1, "test": {"test/accuracy": "__H__"}}).replace(
                '"__H__"', raw).encode()))
    for label, cell in HOSTILE_CELLS.items():
        cases.append(("steps", f"reward={label}", (HEADER + f"0,{cell},100\n").encode()))
        cases.append(("steps", f"step={label}", (HEADER + f"{cell},0.5,100\n").encode()))
    for label, data in {"cut short": GOOD_ROWS.encode()[:-6], "extra cells": (HEADER + "0,0.5,100,9,9\n").encode(),
                        "NUL": (HEADER + "0,0.\x005,100\n").encode(), "binary": b"\xff\x00\xfe",
                        "surrogate bytes": HEADER.encode() + b"0,\xed\xa0\x80,1\n", "empty": b"",
                        "step negative": (HEADER + "-1,0.5,100\n").encode(), "step fraction": (HEADER + "1.5,0.5,1\n").encode(),
                        "quote": (HEADER + '0,"0.5\n').encode()}.items():
        cases.append(("steps", label, data))
    for label, text in {"seed inf": "credit:\n  name: grpo\nseed: .inf\n", "seed 1e400": "credit: {name: grpo}\nseed: 1.0e+400\n",
                        "seed int5000": "credit: {name: grpo}\nseed: " + "7" * 5000 + "\n",
                        "seed nan": "credit: {name: grpo}\nseed: .nan\n", "deep": "credit: " + DEEP + "\n",
                        "credit list": "credit: [1]\n", "credit name list": "credit: {name: [1]}\n",
                        "arm dotdot": "credit: {name: grpo}\narm: ../../X\n", "arm list": "credit: {name: grpo}\narm: [1]\n",
                        "arm null": "credit: {name: grpo}\narm:\n", "arm null, int key": "0:\narm:\n",
                        "judge list": "credit: {name: prover}\njudge: [1]\n", "binary": "\udcff",
                        "broken": "credit: [unclosed\n", "list": "- a\n", "seed word": "credit: {name: grpo}\nseed: one\n"}.items():
        cases.append(("config", label, text.encode("utf-8", "surrogateescape")))
    record = {"question": "A > r1 > r2?", "gold_answer": "x", "reward": 1.0, "num_tool_turns": 2}
    for key in ("reward", "num_tool_turns", "question"):
        for label, raw in HOSTILE_JSON.items():
            cases.append(("trajectories", f"{key}={label}", (_with(record, key, raw) + "\n").encode()))
    for label, raw in {**HOSTILE_JSON, "cut short": json.dumps(record)[:-3], "not_json": "{not json"}.items():
        cases.append(("trajectories", f"line {label}", raw.encode() + (b"" if label == "cut short" else b"\n")))
    cases.append(("trajectories", "binary", b"\xff\xfe\x00\n"))
    return cases


# ------------------------------------------------------------------ running a script on one case

def script_main(name: str):
    folder = ROOT / "scripts" / ("research" if name == "success_by_hops.py" else "")
    main = runpy.run_path(str(folder / name))["main"]
    if name == "compare.py":  # the picture is matplotlib's work, not a reader: left out to keep the cases fast
        def without_picture(argv):
            # main's globals are agentcredit.cli.compare's own: patched for this call only
            with mock.patch.dict(main.__globals__, learning_curves_png=lambda runs, *a, **k: b""):
                return main(argv)
        return without_picture
    return main


def outcome(main, argv: list[str]) -> tuple[str, int | str | None, str]:
    """("ok" | "refused" | "traceback", exit code or the exception's name, stderr) of one in-process run."""
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except SystemExit as stop:
        return "refused", stop.code if isinstance(stop.code, int) else str(stop.code), err.getvalue()
    except BaseException as error:  # noqa: BLE001  (what the corpus counts)
        return "traceback", type(error).__name__, err.getvalue()
    return "ok", code, err.getvalue()


def _write_run(sweep: Path, name: str, metrics: bytes = GOOD_ROWS.encode(), summary: bytes | None = None,
               config: bytes = CONFIG.encode()) -> Path:
    run = sweep / name
    run.mkdir(parents=True)
    (run / "metrics.csv").write_bytes(metrics)
    (run / "test_summary.json").write_bytes(summary if summary is not None else json.dumps(GOOD_SUMMARY).encode())
    (run / "resolved_config.yaml").write_bytes(config)
    return run


def _write_export(folder: Path, stem: str, summary: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.summary.json").write_bytes(summary)
    (folder / f"{stem}.steps.csv").write_bytes(GOOD_ROWS.encode())


GOOD_EXPORT = json.dumps({"name": "job_a", "arm": "grpo", "seed": 0, "test": {"test/accuracy": 0.5}}).encode()
OUTSIDE = Path("/tmp/agentcredit_fuzz_abs")


def run_case(kind: str, content: bytes, tmp: Path) -> list[dict]:
    """Each script that reads `kind` on `content` beside a good record: its outcome, whether the good run's row
    was lost or mixed with the damaged one's, whether anything was written outside the folders it was given."""
    results = []
    box = tmp / "box"  # everything a command may write lies under box/<its folder>
    if kind in ("summary", "steps", "config"):
        sweep = box / "sweep"
        _write_run(sweep, "a_good")
        _write_run(sweep, "b_bad", **{{"summary": "summary", "steps": "metrics", "config": "config"}[kind]: content})
        status, code, err = outcome(script_main("compare.py"), [str(sweep), "--out", str(sweep / "report")])
        report = (sweep / "report" / "compare.md").read_text() if (sweep / "report" / "compare.md").exists() else ""
        results.append({"script": "compare.py", "status": status, "code": code, "err": err,
                        "lost": status != "traceback" and "| grpo | 1 | 50.0 |" not in report,
                        "leaked": _leaked(tmp, box)})
    elif kind == "exported":
        exported, sweep = box / "exported", box / "sweep"
        _write_export(exported, "grpo_seed0", GOOD_EXPORT)
        _write_export(exported, "trace_seed1", content)
        status, code, err = outcome(script_main("compare.py"), [str(exported), "--out", str(box / "report")])
        report = (box / "report" / "compare.md").read_text() if (box / "report" / "compare.md").exists() else ""
        results.append({"script": "compare.py", "status": status, "code": code, "err": err,
                        "lost": status != "traceback" and "| grpo | 1 | 50.0 |" not in report,
                        "leaked": _leaked(tmp, box)})
        status, code, err = outcome(script_main("restore_sweep.py"), [str(exported), str(sweep)])
        results.append({"script": "restore_sweep.py", "status": status, "code": code, "err": err,
                        "lost": status != "traceback" and not (sweep / "job_a" / "test_summary.json").exists(),
                        # a summary named "." would mark the sweep folder itself finished
                        "misplaced": any((sweep / f).exists() for f in ("test_summary.json", "metrics.csv")),
                        "leaked": _leaked(tmp, box)})
    else:
        good, bad = box / "good.jsonl", box / "bad.jsonl"
        box.mkdir(parents=True)
        good.write_text(json.dumps({"question": "A > r1?", "reward": 1.0, "num_tool_turns": 1}) + "\n")
        bad.write_bytes(content)
        status, code, err = outcome(script_main("success_by_hops.py"), [str(good), str(bad)])
        results.append({"script": "success_by_hops.py", "status": status, "code": code, "err": err, "lost": False,
                        "leaked": _leaked(tmp, box)})
    for result in results:
        result["leaked"] = result["leaked"] or result.pop("misplaced", False)
    shutil.rmtree(OUTSIDE, ignore_errors=True)
    return results


def _leaked(tmp: Path, box: Path) -> bool:
    """Whether a command wrote outside box/ (a name read from a file taken as a path)."""
    return OUTSIDE.exists() or any(box not in p.parents and p != box for p in tmp.rglob("*"))


def count_outcomes() -> Counter:
    counts: Counter = Counter()
    for kind, label, content in hostile_corpus():
        with tempfile.TemporaryDirectory() as tmp:
            for result in run_case(kind, content, Path(tmp)):
                counts["cases"] += 1
                counts[result["status"]] += 1
                counts["lost"] += result["lost"]
                counts["leaked"] += result["leaked"]
                for what in ("lost", "leaked"):
                    if result[what]:
                        counts[f"{what}: {result['script']} {kind} {label}"] += 1
                if result["status"] == "traceback":
                    counts[f"traceback in {result['script']}"] += 1
    return counts


CORPUS = hostile_corpus()


@pytest.mark.parametrize("kind, label, content", CORPUS, ids=[f"{k}:{l}" for k, l, _ in CORPUS])
def test_the_hostile_corpus_gives_a_result_or_one_line(kind, label, content, tmp_path):
    for result in run_case(kind, content, tmp_path):
        assert result["status"] != "traceback", (result["script"], result["code"])
        assert not result["lost"] and not result["leaked"], result
        # argparse's usage lines come before its one error line
        lines = [line for line in result["err"].splitlines() if line.strip() and not line.startswith(("usage:", " "))]
        assert all("Traceback" not in line for line in lines)
        assert len(lines) <= 2, lines  # one line for what was left out (a cut-short last line: one more)



# ------------------------------------------------------------------ Hypothesis: any JSON value, any bytes

HUGE = st.sampled_from([10**400, -(10**400), 2**64, float("inf"), float("nan"), -1e308, 1e308])
PATHS = st.sampled_from(["../../X", ".", "..", str(OUTSIDE), "", "a/b"])
# Hostile leaves drawn as often as ordinary ones, so that a small budget meets them.
SCALARS = st.one_of(HUGE, PATHS, st.floats(), st.integers(), st.text(max_size=20), st.none() | st.booleans())
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


def _json(value) -> bytes:
    # Python's json writes NaN/Infinity and arbitrary ints: what a hand-edited or hostile file may hold.
    return json.dumps(value).encode("utf-8", "surrogatepass")


def _one_case(kind: str, content: bytes) -> None:
    """No traceback, nothing written outside; a value drawn may be a valid one (seed 1: one more seed of
    grpo), so what is checked of the report is that the good run is in it and no non-finite figure is."""
    with tempfile.TemporaryDirectory() as tmp:
        for result in run_case(kind, content, Path(tmp)):
            assert result["status"] != "traceback", (result["script"], result["code"], result["err"][-500:])
            assert not result["leaked"], result
            report = Path(tmp) / "box" / ("sweep/report" if kind != "exported" else "report") / "compare.md"
            if result["script"] == "compare.py":
                text = report.read_text()
                assert "| grpo |" in text and " nan" not in text and " inf" not in text, text


@FUZZ
@given(key=st.sampled_from(["test/accuracy", "seed", "arm", "test/format_valid", None]), value=JSON_VALUES)
def test_any_json_value_in_a_run_summary(key, value):
    _one_case("summary", _json(value if key is None else {**GOOD_SUMMARY, key: value}))


@FUZZ
@given(key=st.sampled_from(["name", "arm", "seed", "test", None]), value=JSON_VALUES)
def test_any_json_value_in_an_exported_summary(key, value):
    template = {"name": "job_b", "arm": "trace", "seed": 1, "test": {"test/accuracy": 0.5}}
    _one_case("exported", _json(value if key is None else {**template, key: value}))


CELLS = st.one_of(st.text(max_size=12), st.floats().map(repr), st.integers().map(str), st.sampled_from(
    ["inf", "nan", "-inf", "1e400", "7" * 5000, ""]))


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), st.lists(st.lists(CELLS, min_size=1, max_size=4), max_size=4).map(
    lambda rows: (HEADER + "".join(",".join(r) + "\n" for r in rows)).encode("utf-8", "surrogatepass"))))
def test_any_bytes_in_metrics_csv(data):
    _one_case("steps", data)
    from agentcredit.run.train import metric_by_step

    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(io.StringIO()):
        path = Path(tmp) / "metrics.csv"
        path.write_bytes(data)
        values = metric_by_step(path, "train/reward")
        assert all(isinstance(v, float) and abs(v) <= 1e15 for v in values)


@FUZZ
@given(text=st.one_of(st.text(max_size=80), st.builds(
    lambda key, v: f"credit: {{name: grpo}}\n{key}: {v}\n", st.sampled_from(["seed", "arm", "credit", "judge"]),
    st.one_of(JSON_VALUES.map(json.dumps), st.sampled_from([".inf", ".nan", "1.0e+400", "7" * 5000, "[" * 5000])))))
def test_any_text_in_resolved_config(text):
    _one_case("config", text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(lines=st.lists(st.one_of(JSON_VALUES, st.fixed_dictionaries({"question": st.one_of(st.just(
    "A > b?"), JSON_VALUES), "reward": JSON_VALUES, "num_tool_turns": JSON_VALUES})), min_size=1, max_size=3))
def test_any_json_lines_in_trajectories(lines):
    _one_case("trajectories", b"".join(_json(line) + b"\n" for line in lines))


@FUZZ
@given(value=st.one_of(JSON_VALUES, st.fixed_dictionaries(
    {k: st.one_of(st.floats(), HUGE, JSON_VALUES) for k in ("step_s", "step_cpu_s", "tokens_per_s", "rollout_s")})))
def test_any_json_line_of_a_bench_child(value):
    bench = runpy.run_path(str(ROOT / "benchmarks" / "bench_step.py"))
    child_figures, launch_time = bench["child_figures"], bench["launch_time"]
    assert [launch_time(t) for t in ("abc", "inf", "nan", "-1", None, "1e400", "12.5")] == [None] * 6 + [12.5]
    try:
        figures = child_figures(json.dumps(value), Path("tree"))
    except SystemExit as stop:
        assert str(stop.code).startswith("bench_step: ") and "\n" not in str(stop.code)
    else:
        assert figures["step_s"] > 0 and all(v == v for v in figures.values() if isinstance(v, float))


# ------------------------------------------------------------------ item 7: names from files never become paths

def _written(folder: Path) -> dict:  # every file under `folder` -> its bytes
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_restore_writes_only_job_folders_directly_under_the_sweep_and_never_over_an_unfinished_job(tmp_path, capsys):
    exported, sweep = tmp_path / "exported" / "results", tmp_path / "sweep" / "multirun"
    _write_export(exported, "grpo_seed0", GOOD_EXPORT)
    for i, name in enumerate(["../../X", str(OUTSIDE), ".", "..", "a/b", "", "job_u"]):
        _write_export(exported, f"trace_seed{i}", json.dumps(
            {"name": name, "arm": "trace", "seed": i, "test": {"test/accuracy": 0.5}}).encode())
    unfinished = sweep / "job_u"
    unfinished.mkdir(parents=True)
    (unfinished / "metrics.csv").write_text(HEADER + "0,0.1,5\n")  # killed at step 1: resume=true continues it
    before = _written(unfinished)
    try:
        assert script_main("restore_sweep.py")([str(exported), str(sweep)]) == 0
        out, err = capsys.readouterr()
        assert not OUTSIDE.exists() and not (tmp_path / "X").exists() and not (tmp_path / "sweep" / "a").exists()
    finally:
        shutil.rmtree(OUTSIDE, ignore_errors=True)
    assert sorted(p.name for p in sweep.iterdir()) == ["job_a", "job_u"]
    assert not (sweep / "test_summary.json").exists() and not (sweep / "metrics.csv").exists()
    assert _written(unfinished) == before  # its metrics.csv is not replaced, nor is it marked finished
    assert "1 finished jobs restored" in out and "(7 left out, listed above)" in out
    warnings = err.strip().splitlines()
    assert len(warnings) == 7 and all(w.startswith("[restore] warning: ") for w in warnings)
    assert sum("cannot be a file name" in w or "non-empty string" in w for w in warnings) == 6
    assert "job_u holds an unfinished job's files" in err


def test_an_arm_named_like_a_path_never_becomes_one(tmp_path, capsys):
    sweep, export = tmp_path / "box" / "sweep", tmp_path / "box" / "export"
    _write_run(sweep, "a_good")
    _write_run(sweep, "b_bad", summary=json.dumps({**GOOD_SUMMARY, "arm": "../../X", "seed": 1}).encode())
    assert script_main("compare.py")([str(sweep), "--export", str(export)]) == 0
    assert "b_bad left out" in capsys.readouterr().err and "cannot be a file name" in (export / "compare.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box"] and sorted(p.name for p in (tmp_path / "box").iterdir()) == [
        "export", "sweep"]
    assert sorted(p.name for p in export.glob("*.summary.json")) == ["grpo_seed0.summary.json"]

    from agentcredit.analysis.comparison import Run, export_runs

    with pytest.raises(ValueError, match="cannot be a file name"):  # refused before anything is written
        export_runs([Run("j", "grpo", 0, {"test/accuracy": 0.5}, {0: {"train/reward": 0.1}}),
                     Run("k", "../../X", 0, {"test/accuracy": 0.5}, {0: {"train/reward": 0.1}})], tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


def test_export_into_an_older_export_is_refused_and_a_refresh_drops_its_stale_files(tmp_path, capsys):
    old = tmp_path / "results"
    _write_export(old, "prover_seed3", json.dumps(
        {"name": "job_p", "arm": "prover", "seed": 3, "test": {"test/accuracy": 0.9}}).encode())
    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    before = _written(old)
    with pytest.raises(SystemExit) as stop:  # a comparison of another sweep must not mix in the older arm
        script_main("compare.py")([str(sweep), "--export", str(old)])
    assert stop.value.code == 2 and "is not empty; give a new or empty folder" in capsys.readouterr().err
    assert _written(old) == before  # checked before any work: nothing written

    # Refreshing an export in place (it is one of the folders read): what it held is read, then rewritten.
    # A run left out this time (here: cut short, no test result: in an export only damage does that) keeps its
    # files, with one line saying so: a refresh never deletes what it could not read.
    _write_export(old, "trace_seed9", json.dumps({"name": "job_t", "arm": "trace", "seed": 9, "test": {}}).encode())
    capsys.readouterr()
    assert script_main("compare.py")([str(sweep), str(old), "--export", str(old)]) == 0
    assert sorted(p.name for p in old.glob("*.summary.json")) == [
        "grpo_seed0.summary.json", "prover_seed3.summary.json", "trace_seed9.summary.json"]
    assert (old / "trace_seed9.steps.csv").exists()
    printed = capsys.readouterr()
    assert "kept: " in printed.out + printed.err


def test_an_output_path_that_is_a_file_is_one_line_before_any_work(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    _write_run(sweep, "a_good")
    (tmp_path / "file").write_text("x")
    for option in ("--out", "--export"):
        with pytest.raises(SystemExit) as stop:
            script_main("compare.py")([str(sweep), option, str(tmp_path / "file")])
        assert stop.value.code == 2 and "is an existing file" in capsys.readouterr().err
    assert not (sweep / "compare.md").exists()
    with pytest.raises(SystemExit) as stop:
        script_main("restore_sweep.py")([str(sweep), str(tmp_path / "file")])
    assert stop.value.code == 2


if __name__ == "__main__":
    print("\n".join(f"{key}: {value}" for key, value in sorted(count_outcomes().items())))
