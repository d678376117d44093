"""The shared reader and writer of run records: what a damaged or hostile file may hold."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentcredit.records import (
    RecordError,
    atomic_write_text,
    check_output_path,
    json_line,
    parse_json,
    read_json_record,
    read_jsonl_records,
    safe_name,
)


class Point(BaseModel):
    x: float
    name: str = ""


@pytest.mark.parametrize("text", [
    "NaN", "Infinity", "-Infinity", '{"x": 1e400}', '{"x": -1e400}', "1" * 5000,
    "[" * 200_000 + "]" * 200_000, '"\\ud800"', '{"\\udfff": 1}',
])
def test_parse_json_refuses_what_no_record_may_hold(text):
    with pytest.raises(ValueError):
        parse_json(text)


def test_parse_json_keeps_ordinary_values():
    assert parse_json('{"x": -1e308, "y": [1, "é", null]}') == {"x": -1e308, "y": [1, "é", None]}
    assert parse_json('"[[[{"') == "[[[{"  # brackets inside strings do not count as nesting


def test_read_json_record_one_line_errors(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"x": 2, "name": "a"}')
    assert read_json_record(path, Point).x == 2.0
    for bad in ('[1, 2]', 'null', '{"x": "many"}', '{"x": Infinity}', "{"):
        path.write_text(bad)
        with pytest.raises(RecordError) as err:
            read_json_record(path, Point)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(RecordError):
        read_json_record(tmp_path / "absent.json", Point)


def test_jsonl_leaves_out_bad_lines_and_a_cut_short_tail(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"x": 1}\n{"x": NaN}\nnull\n\n{"x": 4}\n{"x": 5, "na')
    warnings = []
    got = [(n, r.x) for n, r in read_jsonl_records(path, Point, warn=warnings.append)]
    assert got == [(1, 1.0), (5, 4.0)]
    assert len(warnings) == 3
    assert warnings[0].startswith(f"{path}:2:") and "cut short" in warnings[2]


def test_atomic_write_leaves_the_old_file_whole_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    atomic_write_text(path, json.dumps({"x": 1}))

    def full_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError):
        atomic_write_text(path, json.dumps({"x": 2}))
    assert json.loads(path.read_text()) == {"x": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temp file left


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077, 0o002])
def test_an_atomic_write_gives_the_permissions_a_plain_open_would(tmp_path, umask):
    import stat

    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "atomic.md", "x\n")
        (tmp_path / "plain.md").write_text("x\n")
        atomic_write_text(tmp_path / "plain.md", "y\n")  # a replaced file too, not only a new one
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "atomic.md").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "plain.md").stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("name", ["", ".", "..", "../../x", "/abs", "a/b", "a\\b", "a\0b", "\ud800", "x" * 300, None, 3])
def test_safe_name_refuses_what_cannot_be_one_path_component(name):
    with pytest.raises(ValueError):
        safe_name(name)


def test_safe_name_keeps_ordinary_names():
    assert safe_name("trace_k0") == "trace_k0"
    assert safe_name("budget-grpo.v2") == "budget-grpo.v2"


def test_check_output_path(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.json").write_text("{}")
    with pytest.raises(ValueError, match="is a folder"):
        check_output_path(tmp_path / "full", kind="file")
    with pytest.raises(ValueError, match="is a file"):
        check_output_path(tmp_path / "file" / "out.md", kind="file")
    with pytest.raises(ValueError, match="existing file"):
        check_output_path(tmp_path / "file", kind="folder")
    with pytest.raises(ValueError, match="not empty"):
        check_output_path(tmp_path / "full", kind="folder", fresh=True)
    assert check_output_path(tmp_path / "new" / "out.md") == tmp_path / "new" / "out.md"
    assert check_output_path(tmp_path / "full", kind="folder") == tmp_path / "full"


def test_json_line_writes_non_finite_numbers_as_null():
    import numpy as np

    line = json_line({"a": float("nan"), "b": [1.5, float("inf"), np.float32("-inf")], "c": np.float64(2.0), "d": "x"})
    assert line.endswith("\n")
    assert parse_json(line) == {"a": None, "b": [1.5, None, None], "c": 2.0, "d": "x"}


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_published_cache_folder_gets_the_permissions_a_plain_mkdir_would(tmp_path, umask):
    import stat

    from agentcredit.models.cache_io import publish_directory

    old = os.umask(umask)
    try:
        target = publish_directory(tmp_path / "entry", lambda scratch: (scratch / "done").write_text("x"), "done")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~umask
