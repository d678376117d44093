"""Every reader of the credit-fidelity instrument and the credit viewer against values a file can hold
(issue 44, item 6): a hostile corpus of damaged variants of each file kind (turns.jsonl, fidelity.json,
credit_samples.jsonl), then Hypothesis on any JSON value or any bytes. Each input gives a result or one
warning line naming file and line, never a traceback; the good records beside a damaged one are kept."""

from __future__ import annotations

import copy
import json
import runpy
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentcredit

ROOT = Path(agentcredit.__file__).resolve().parents[2]  # the tree whose package is imported (src/agentcredit)
FIDELITY = ROOT / "scripts" / "credit_fidelity.py"
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ----- the hostile corpus ----------------------------------------------------------------------------


def turns_record(index: int) -> dict:
    """A small valid turns.jsonl record: 2 rollouts of 3 turns, credit of grpo and trace."""
    def rollout(g: int) -> dict:
        truth = [0.5 - 0.25 * k + 0.1 * g + 0.05 * index for k in range(3)]
        return {"reward": 1.1 if g else 0.1, "success": bool(g), "finish_reason": "answer",
                "kinds": ["search", "open", "answer"], "values": [0.5, 0.6, 0.7, 0.8], "truth": truth,
                "truth_halves": [[t + 0.1 for t in truth], [t - 0.1 for t in truth]],
                "credit": {"grpo": [0.7 * (2 * g - 1)] * 3, "trace": [t * 2 - 0.1 * k for k, t in enumerate(truth)]},
                "turns": ["<tool_call>a</tool_call>", "<tool_call>b</tool_call>", "<answer>X</answer>"],
                "observations": ["Search results", "[cursor 0] X"], "answer": "X"}

    return {"index": index, "question_id": f"q{index}", "question": "Who?", "gold_answer": "X", "settings": "abc",
            "methods": ["grpo", "trace"], "rollouts": [rollout(0), rollout(1)],
            "cost": {"rollout": {"tokens": 10.0, "seconds": 0.5},
                     "truth": {"tokens": 20.0, "seconds": 1.0, "states": 6.0, "measured": 4.0},
                     "methods": {"grpo": {"seconds": 0.0, "extra_tokens": 0.0},
                                 "trace": {"seconds": 0.1, "extra_tokens": 0.0}}}}


SAMPLE = {"question_id": "q1", "question": "Who founded X?", "gold_answer": "Ada", "step": 4, "reward": 1.1,
          "finish_reason": "answer", "num_tool_turns": 2, "group_rewards": [1.1, 0.1], "rollout": 0,
          "turns": ["<tool_call>a</tool_call>", "<tool_call>b</tool_call>", "<answer>Ada</answer>"],
          "observations": ["Search results: ...", "[cursor 0] X"], "turn_advantages": [0.4, 0.9],
          "answer_advantage": 0.4, "a_star": [0.1, -0.2], "answer_a_star": 0.3}

# JSON texts a field can hold that no record means: huge integers, non-finite and overflowing numbers,
# numbers near the float limit, a string for a number, a lone surrogate, a list or null for an object.
HOSTILE_VALUES = {
    "int400": "1" + "0" * 400, "int5000": "1" + "0" * 5000, "Infinity": "Infinity", "-Infinity": "-Infinity",
    "NaN": "NaN", "1e400": "1e400", "-1e308": "-1e308", "string": '"3"', "surrogate": '"\\ud800"', "null": "null",
    "list": "[1, 2]", "object": '{"a": 1}', "bool": "true",
}
SENTINEL = "__HOSTILE__"


def leaf_paths(value, prefix=()) -> list[tuple]:
    """Paths to every leaf of a JSON value (dict keys and list positions)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaf_paths(v, prefix + (k,))]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in leaf_paths(v, prefix + (i,))]
    return [prefix]


def with_text_at(record: dict, path: tuple, text: str) -> bytes:
    """`record` as one JSON line whose value at `path` is the raw JSON `text` (which json.dumps cannot write)."""
    value = copy.deepcopy(record)
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = SENTINEL
    return json.dumps(value).replace(json.dumps(SENTINEL), text).encode()


def hostile_lines(good: dict, leaves: int = 6) -> dict[str, bytes]:
    """Damaged variants of one JSON-lines record: whole-line damage, then each hostile value at a few
    leaves spread over the record (first, last and between)."""
    line = json.dumps(good).encode()
    out = {"cut short": line[: len(line) // 2], "not UTF-8": b"\xff\xfe" + line[2:], "null": b"null",
           "a list": b"[1, 2]", "a number": b"3", "a string": b'"record"', "empty object": b"{}",
           "200k-deep nesting": b"[" * 200_000 + b"]" * 200_000,
           "200k-deep inside": line[:-1] + b', "deep": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
           "huge integer key": line[:-1] + b', "n": 1' + b"0" * 5000 + b"}"}
    paths = leaf_paths(good)
    chosen = [paths[round(i * (len(paths) - 1) / (leaves - 1))] for i in range(leaves)]
    for path in chosen:
        for name, text in HOSTILE_VALUES.items():
            out[f"{'.'.join(map(str, path))}={name}"] = with_text_at(good, path, text)
    for key in good:  # a list or null where a whole field (often an object or a list) belongs
        out[f"{key}=null"] = with_text_at(good, (key,), "null")
        out[f"{key}=list"] = with_text_at(good, (key,), '[{"a": 1}]')
    return out


def hostile_json_files() -> dict[str, bytes]:
    """Damaged variants of fidelity.json (which from_turns= reads for the config it was measured with)."""
    good = {"n_questions": 2, "config": {"n": 2, "split": "val"}}
    lines = hostile_lines(good, leaves=3)
    return {**lines, "empty": b"", "config a list": b'{"config": [1]}', "Infinity": b'{"config": {"n": Infinity}}'}


TURNS_CORPUS = hostile_lines(turns_record(1), leaves=8)
TURNS_CORPUS.update({f"{where}={name}": with_text_at(turns_record(1), path, HOSTILE_VALUES[name])
                     for where, path in (("credit", ("rollouts", 0, "credit", "grpo", 0)), ("truth", ("rollouts", 0, "truth", 0)))
                     for name in HOSTILE_VALUES})  # the figures' own inputs: a nan credit was averaged silently
SAMPLES_CORPUS = hostile_lines(SAMPLE, leaves=8)
JSON_CORPUS = hostile_json_files()


# ----- running the readers as the commands do ---------------------------------------------------------


def fidelity_cli(*args: str) -> None:
    with mock.patch.object(sys, "argv", [str(FIDELITY), *args]):
        runpy.run_path(str(FIDELITY), run_name="__main__")


VIEW = runpy.run_path(str(ROOT / "scripts" / "view_credit.py"))


def write_turns(folder: Path, damaged: bytes) -> Path:
    """Two good records around a damaged one (line 2)."""
    good = [json.dumps(turns_record(i)).encode() for i in (0, 2)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "turns.jsonl").write_bytes(good[0] + b"\n" + damaged + b"\n" + good[1] + b"\n")
    return folder / "turns.jsonl"


def summarised(path: Path, warn) -> dict:
    """What from_turns= computes from a turns.jsonl, short of writing it: the records, the figures, the table."""
    from agentcredit.fidelity.summary import json_ready, markdown, read_records, summarise

    summary = json_ready(summarise(read_records(path, warn=warn), n_boot=3))
    markdown(summary)
    return summary


@pytest.mark.parametrize("case", TURNS_CORPUS)
def test_a_hostile_turns_line_is_left_out_in_one_line(tmp_path, case):
    """Two good records around a damaged one: the figures of the good ones, and one warning naming the
    file and line 2 when the damaged one is left out (a variant that is still a valid record is kept)."""
    path = write_turns(tmp_path, TURNS_CORPUS[case])
    warned = []
    summary = summarised(path, warned.append)
    assert summary["n_questions"] == (2 if warned else 3)
    assert len(warned) <= 1 and all(w.startswith(f"{path}:2: ") and "\n" not in w for w in warned)


# Kinds of damage through the whole command too (the rest above through its reader: a command costs seconds,
# so two in the default suite and the others under -m slow).
COMMAND_CASES = ["cut short", "credit=NaN"] + [
    pytest.param(case, marks=pytest.mark.slow)
    for case in ("200k-deep nesting", "huge integer key", "truth=int400", "truth=-1e308", "credit=string", "cost=list",
                 "rollouts=null", "rollouts.0.turns.1=surrogate")]


@pytest.mark.parametrize("case", COMMAND_CASES)
def test_the_command_leaves_a_hostile_turns_line_out_in_one_line(tmp_path, capsys, case):
    folder = tmp_path / "fid"
    write_turns(folder, TURNS_CORPUS[case])
    fidelity_cli(f"from_turns={folder}", "bootstrap=0", f"hydra.run.dir={tmp_path / 'run'}")
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["n_questions"] == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"warning: {folder / 'turns.jsonl'}:2: "), err
    assert (folder / "fidelity.md").is_file()


@pytest.mark.parametrize("case", JSON_CORPUS)
def test_a_hostile_fidelity_json_is_one_warning(tmp_path, case):
    from agentcredit.fidelity.summary import read_config

    (tmp_path / "fidelity.json").write_bytes(JSON_CORPUS[case])
    warned = []
    config = read_config(tmp_path / "fidelity.json", warn=warned.append)
    assert (config is None or isinstance(config, dict)) and len(warned) <= 1
    assert all(w.startswith(str(tmp_path / "fidelity.json")) and "\n" not in w for w in warned)


@pytest.mark.parametrize("case", ["Infinity", *(pytest.param(case, marks=pytest.mark.slow)
                                               for case in ("config.n=int5000", "not UTF-8", "config=list"))])
def test_the_command_keeps_the_figures_of_a_damaged_fidelity_json(tmp_path, capsys, case):
    folder = tmp_path / "fid"
    folder.mkdir()
    (folder / "turns.jsonl").write_text(json.dumps(turns_record(0)) + "\n" + json.dumps(turns_record(1)) + "\n")
    (folder / "fidelity.json").write_bytes(JSON_CORPUS[case])
    fidelity_cli(f"from_turns={folder}", "bootstrap=0", f"hydra.run.dir={tmp_path / 'run'}")
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["n_questions"] == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("warning: ") and "fidelity.json" in err
    assert json.loads((folder / "fidelity.json").read_text()).get("config") is None


@pytest.mark.parametrize("case", SAMPLES_CORPUS)
def test_a_hostile_credit_sample_is_left_out_in_one_line(tmp_path, capsys, case):
    (tmp_path / "credit_samples.jsonl").write_bytes(json.dumps(SAMPLE).encode() + b"\n" + SAMPLES_CORPUS[case] + b"\n")
    assert VIEW["main"]([str(tmp_path)]) == 0
    page = (tmp_path / "credit_view.html").read_text()
    shown = page.count('class="card"><div><b>step')
    err = capsys.readouterr().err.strip().splitlines()
    assert shown in (1, 2) and len(err) == (2 - shown)
    assert all(line.startswith("[view_credit] left out: line 2: ") for line in err)


# ----- Hypothesis: any JSON value, any bytes -------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12)


def replaced(record: dict, data) -> dict:
    """`record` with one leaf (or one whole field) replaced by any JSON value."""
    paths = leaf_paths(record) + [(k,) for k in record]
    path = data.draw(st.sampled_from(paths))
    value = copy.deepcopy(record)
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = data.draw(JSON_VALUES)
    return value


@FUZZ
@given(data=st.data())
def test_fuzz_turns_records_any_value_anywhere(tmp_path, data):
    lines = [json.dumps(turns_record(0)), json.dumps(replaced(turns_record(1), data), allow_nan=True)]
    (tmp_path / "turns.jsonl").write_text("\n".join(lines) + "\n")
    summarised(tmp_path / "turns.jsonl", warn=lambda message: None)


@FUZZ
@given(raw=st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_fuzz_turns_records_any_bytes(tmp_path, raw):
    (tmp_path / "turns.jsonl").write_bytes(json.dumps(turns_record(0)).encode() + b"\n" + raw)
    summarised(tmp_path / "turns.jsonl", warn=lambda message: None)


@FUZZ
@given(raw=st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps({"config": v}).encode()))
def test_fuzz_fidelity_json(tmp_path, raw):
    from agentcredit.fidelity.summary import read_config

    (tmp_path / "fidelity.json").write_bytes(raw)
    config = read_config(tmp_path / "fidelity.json", warn=lambda message: None)
    assert config is None or isinstance(config, dict)


@FUZZ
@given(data=st.data())
def test_fuzz_credit_samples_any_value_anywhere(tmp_path, data):
    line = json.dumps(replaced(SAMPLE, data), allow_nan=True).encode()
    raw = data.draw(st.sampled_from([line, line[: data.draw(st.integers(0, len(line)))]]))
    (tmp_path / "credit_samples.jsonl").write_bytes(json.dumps(SAMPLE).encode() + b"\n" + raw)
    records, notes = VIEW["load_records"](tmp_path)
    assert len(records) + len(notes) in (1, 2) and len(records) >= 1
    VIEW["render_page"](records, "title", notes).encode("utf-8")


@FUZZ
@given(raw=st.binary(max_size=300))
def test_fuzz_credit_samples_any_bytes(tmp_path, raw):
    (tmp_path / "credit_samples.jsonl").write_bytes(raw)
    records, notes = VIEW["load_records"](tmp_path)
    VIEW["render_page"](records, "title", notes).encode("utf-8")


@FUZZ
@given(tail=st.binary(max_size=120))
def test_fuzz_a_cut_tail_never_glues_the_next_record(tmp_path, tail):
    """Whatever a kill left after the last full line, the next appended record is read back, and every
    complete record before it is kept."""
    from agentcredit.fidelity.run import end_on_a_line
    from agentcredit.fidelity.summary import read_records

    path = tmp_path / "turns.jsonl"
    path.write_bytes(json.dumps(turns_record(0)).encode() + b"\n" + tail)
    with mock.patch("sys.stderr"):
        end_on_a_line(path)
    with path.open("a") as out:
        out.write(json.dumps(turns_record(1)) + "\n")
    indices = [r["index"] for r in read_records(path, warn=lambda message: None)]
    assert indices[0] == 0 and indices[-1] == 1


def test_records_without_a_single_turn_are_one_line(tmp_path, capsys):
    """Valid records whose rollouts all ended before acting leave nothing to draw from: one data error
    line, not the bootstrap's traceback."""
    record = turns_record(0)
    for rollout in record["rollouts"]:
        rollout.update(kinds=[], truth=[], truth_halves=[[], []], credit={label: [] for label in rollout["credit"]})
    (tmp_path / "turns.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        fidelity_cli(f"from_turns={tmp_path}", "bootstrap=3", f"hydra.run.dir={tmp_path / 'run'}")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("data error: no rollout") and "took a turn" in err[0]
