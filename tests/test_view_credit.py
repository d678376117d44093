"""scripts/view_credit.py on samples it did not write (issue 30, items 3-4): every field is escaped, and a
damaged line or config gives a page that names what was left out, never a traceback."""

from __future__ import annotations

import html
import json
import runpy

import pytest

from tiny_runs import ROOT

VIEW = runpy.run_path(str(ROOT / "scripts" / "view_credit.py"))
SCRIPT = "<script>alert(1)</script>"

GOOD = {"question_id": "q1", "question": "Who founded X?", "gold_answer": "Ada", "step": 4, "reward": 1.1,
        "finish_reason": "answer", "num_tool_turns": 2, "group_rewards": [1.1, 0.1], "rollout": 0,
        "turns": ['{"name": "browser.search"}', '{"name": "browser.open"}', "<answer>Ada</answer>"],
        "observations": ["Search results: ...", "[cursor 0] X"], "turn_advantages": [0.4, 0.9],
        "answer_advantage": 0.4, "deltas": [0.1, 0.2], "turn_rewards": [0.3, 0.4]}


def view(tmp_path, lines: bytes | str, config: bytes | str | None = None, *args: str):
    """Writes the samples (and resolved_config.yaml), runs the viewer in this process; (page, stderr lines)."""
    (tmp_path / "credit_samples.jsonl").write_bytes(lines.encode() if isinstance(lines, str) else lines)
    if config is not None:
        (tmp_path / "resolved_config.yaml").write_bytes(config.encode() if isinstance(config, str) else config)
    assert VIEW["main"]([str(tmp_path), *args]) == 0
    return (tmp_path / "credit_view.html").read_text()


def test_script_in_every_field_is_escaped(tmp_path, capsys):
    """Each field in turn holds a <script>: strings are escaped, fields that must be numbers leave the record
    out with a note; no page carries a live tag."""
    for key in GOOD:
        record = {**GOOD, key: SCRIPT}
        if isinstance(GOOD[key], list):  # also as an element of a list field
            record = {**GOOD, key: [SCRIPT] * len(GOOD[key])}
        page = view(tmp_path, json.dumps(record) + "\n", f"credit:\n  name: '{SCRIPT}'\nseed: '{SCRIPT}'\n")
        assert "<script" not in page.lower(), key
        shown = 'class="card"><div><b>step' in page
        assert shown or f"line 1: {key}" in page, key
    both = {**GOOD, "segment": [0, 1, 0.5], "chain_boundaries": [1], "segment_advantages": [0.1, 0.2],
            "chain_values": [0.5], "anchor_sizes": [1, 2, 1], "step_advantages": [0.0, 1.0, 0.0],
            SCRIPT: SCRIPT}
    page = view(tmp_path, json.dumps(both) + "\n")
    assert "<script" not in page.lower() and "turns 0–1" in page and "SPO seg (A_j)" in page


DAMAGED = {
    "truncated line": (json.dumps(GOOD)[:40], "line 2: not a readable record: Invalid control character"),
    "truncated after a comma": (json.dumps(GOOD)[:21], "line 2: not a readable record: Expecting property name"),
    "not JSON": ("hello world", "line 2: not a readable record: Expecting value"),
    "a list, not an object": ("[1, 2]", "line 2: record: Input should be a valid dictionary"),
    "a number": ("3", "line 2: record: Input should be a valid dictionary"),
    "not UTF-8": (b"\xff\xfe{\"step\": 1}", "line 2: not a readable record: 'utf-8' codec can't decode"),
    "step a string": (json.dumps({**GOOD, "step": "4"}), "line 2: step: Input should be a valid integer"),
    "step missing": (json.dumps({k: v for k, v in GOOD.items() if k != "step"}), "line 2: step: Field required"),
    "reward null": (json.dumps({**GOOD, "reward": None}), "line 2: reward: Input should be a valid number"),
    "reward a bool": (json.dumps({**GOOD, "reward": True}), "line 2: reward: Input should be a valid number"),
    "turns a string": (json.dumps({**GOOD, "turns": "abc"}), "line 2: turns: Input should be a valid list"),
    "observations of numbers": (json.dumps({**GOOD, "observations": [1, 2]}), "line 2: observations.0: Input should"),
    "group rewards of strings": (json.dumps({**GOOD, "group_rewards": ["a"]}), "line 2: group_rewards.0: Input"),
    "segment too short": (json.dumps({**GOOD, "segment": [1]}), "line 2: segment.1: Field required"),
    "deltas a dict": (json.dumps({**GOOD, "deltas": {"a": 1}}), "line 2: deltas: Input should be a valid list"),
    "anchor sizes of floats": (json.dumps({**GOOD, "anchor_sizes": [1.5]}), "line 2: anchor_sizes.0: Input should"),
    "chain without advantages": (json.dumps({**GOOD, "chain_boundaries": [1]}), "line 2: record: Value error, "
                                                                                "chain_boundaries and"),
    "num_tool_turns a string": (json.dumps({**GOOD, "num_tool_turns": "2"}), "line 2: num_tool_turns: Input should"),
    # values a file can hold that no credit is (issue 44, item 6): each one line on the page, never a traceback
    "nan advantage": (json.dumps({**GOOD, "answer_advantage": float("nan")}), "line 2: not a readable record: NaN"),
    "Infinity reward": ('{"step": 1, "reward": Infinity}', "line 2: not a readable record: Infinity"),
    "1e400 reward": ('{"step": 1, "reward": 1e400}', "line 2: not a readable record: 1e400 overflows"),
    "-1e308 advantage": ('{"step": 1, "turn_advantages": [-1e308]}', "line 2: turn_advantages.0: Input should be "
                                                                     "greater than or equal to"),
    "400-digit reward": ('{"step": 1, "reward": 1' + "0" * 400 + "}", "line 2: reward: Input should be a valid number"),
    "5000-digit step": ('{"step": 1' + "0" * 5000 + "}", "line 2: not a readable record: Exceeds the limit"),
    "lone surrogate": ('{"step": 1, "question": "\\ud800"}', "line 2: not a readable record: text that is not valid"),
    "200k-deep nesting": ('{"step": 1, "extra": ' + "[" * 200_000 + "]" * 200_000 + "}",
                          "line 2: not a readable record: nesting deeper"),
    "null": ("null", "line 2: record: Input should be a valid dictionary"),
}


@pytest.mark.parametrize("case", DAMAGED)
def test_a_damaged_line_is_left_out_and_named(tmp_path, capsys, case):
    bad, note = DAMAGED[case]
    bad = bad if isinstance(bad, bytes) else bad.encode()
    page = view(tmp_path, json.dumps(GOOD).encode() + b"\n" + bad + b"\n")
    assert page.count('class="card"><div><b>step') == 1  # the good line is still shown
    assert html.escape(note) in page
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("[view_credit] left out: " + note)


def test_a_byte_order_mark_is_read(tmp_path, capsys):
    page = view(tmp_path, "\ufeff" + json.dumps(GOOD) + "\n")
    assert page.count('class="card"><div><b>step') == 1 and "Left out" not in page
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("content", ["", "\n\n", "{}\n"])
def test_an_empty_file_gives_a_page_that_says_so(tmp_path, content):
    page = view(tmp_path, content)
    assert "No trajectories to show" in page


@pytest.mark.parametrize("config, note", [
    ("credit: [unclosed\n", "resolved_config.yaml unreadable (ParserError)"),
    (b"\xff\xfe\x00", "resolved_config.yaml unreadable (UnicodeDecodeError)"),
    ("- a\n- b\n", "resolved_config.yaml has no credit section"),
    ("credit: grpo\n", "resolved_config.yaml has no credit section"),
    ("just a string", "resolved_config.yaml has no credit section"),
])
def test_a_broken_resolved_config_is_named_and_the_page_still_written(tmp_path, capsys, config, note):
    page = view(tmp_path, json.dumps(GOOD) + "\n", config)
    assert note in page and f"credit samples of {tmp_path.name}" in page
    assert page.count('class="card"><div><b>step') == 1
    assert capsys.readouterr().err.startswith(f"[view_credit] left out: {note}")


def test_what_cannot_be_read_or_written_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit, match="does not exist: the run wrote no credit samples"):
        VIEW["main"]([str(tmp_path)])
    (tmp_path / "credit_samples.jsonl").mkdir()
    with pytest.raises(SystemExit, match="^view_credit: cannot read .*credit_samples.jsonl"):
        VIEW["main"]([str(tmp_path)])
    run = tmp_path / "run"
    run.mkdir()
    (run / "credit_samples.jsonl").write_text(json.dumps(GOOD) + "\n")
    with pytest.raises(SystemExit, match="^view_credit: cannot write .*nowhere"):
        VIEW["main"]([str(run), "--out", str(tmp_path / "nowhere" / "view.html")])
    with pytest.raises(SystemExit):
        VIEW["main"]([str(run), "--last", "0"])
    assert "--last must be at least 1, got 0" in capsys.readouterr().err
    assert VIEW["main"]([str(run / "credit_samples.jsonl")]) == 0  # the file itself names its run
    assert (run / "credit_view.html").exists()


@pytest.mark.parametrize("out", ["credit_samples.jsonl", "resolved_config.yaml", "../run/./credit_samples.jsonl",
                                 "link"])
def test_the_page_never_replaces_a_file_it_is_made_from(tmp_path, out):
    run = tmp_path / "run"
    run.mkdir()
    (run / "credit_samples.jsonl").write_text(json.dumps(GOOD) + "\n")
    (run / "resolved_config.yaml").write_text("credit:\n  name: trace\n")
    (run / "link").symlink_to(run / "credit_samples.jsonl")
    before = {name: (run / name).read_bytes() for name in ("credit_samples.jsonl", "resolved_config.yaml")}
    with pytest.raises(SystemExit, match=r"^view_credit: --out .* is the run's own (credit_samples.jsonl|"
                                         r"resolved_config.yaml), which the page is made from; give another file$"):
        VIEW["main"]([str(run / "credit_samples.jsonl"), "--out", str(run / out)])
    assert {name: (run / name).read_bytes() for name in before} == before


def test_a_run_folder_that_does_not_exist_is_named_as_such(tmp_path):
    with pytest.raises(SystemExit, match=f"^view_credit: the run folder {tmp_path / 'nosuchrun'} does not exist$"):
        VIEW["main"]([str(tmp_path / "nosuchrun")])
