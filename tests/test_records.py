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


def _fill(text):
    def write(folder):
        (folder / "sub").mkdir()
        (folder / "sub" / "f.txt").write_text(text)
    return write


def _tree(folder):
    return sorted((p.relative_to(folder).as_posix(), p.read_text() if p.is_file() else None)
                  for p in folder.rglob("*"))


def test_publish_folder_builds_beside_and_renames_into_an_absent_or_empty_target(tmp_path):
    from agentcredit.records import publish_folder

    (tmp_path / ".job.restoring.tmp").mkdir()  # what a killed earlier build left
    (tmp_path / ".job.restoring.tmp" / "stale").write_text("old")
    assert publish_folder(tmp_path / "job", _fill("a"), scratch="restoring") == tmp_path / "job"
    (tmp_path / "empty").mkdir()
    publish_folder(tmp_path / "empty", _fill("b"), scratch="restoring")
    assert _tree(tmp_path / "job") == [("sub", None), ("sub/f.txt", "a")]
    assert _tree(tmp_path / "empty") == [("sub", None), ("sub/f.txt", "b")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "job"]  # no scratch folder left


def test_publish_folder_leaves_the_target_as_it_was_when_anything_fails(tmp_path):
    from agentcredit.records import publish_folder

    def broken(folder):
        (folder / "half").write_text("x")
        raise OSError(28, "No space left on device")

    publish_folder(tmp_path / "job", _fill("kept"))
    for replace in (False, True):
        with pytest.raises(OSError, match="No space"):
            publish_folder(tmp_path / "job", broken, scratch="building", replace=replace)
        assert _tree(tmp_path / "job") == [("sub", None), ("sub/f.txt", "kept")]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["job"]
    # Without `replace` a folder that holds files is not taken over.
    with pytest.raises(OSError):
        publish_folder(tmp_path / "job", _fill("new"), scratch="building")
    assert _tree(tmp_path / "job") == [("sub", None), ("sub/f.txt", "kept")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job"]


def test_publish_folder_with_replace_swaps_the_old_folder_out_and_puts_it_back_if_the_rename_fails(tmp_path,
                                                                                                 monkeypatch):
    from agentcredit.records import files, publish_folder

    publish_folder(tmp_path / "job", _fill("v1"))
    publish_folder(tmp_path / "job", _fill("v2"), scratch="building", replace=True)
    assert _tree(tmp_path / "job") == [("sub", None), ("sub/f.txt", "v2")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job"]  # the old one deleted after the swap

    real_replace, calls = os.replace, []

    def second_rename_fails(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:  # the first moves the old folder out; the second would rename the new one in
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", second_rename_fails)
    with pytest.raises(OSError, match="Input/output"):
        publish_folder(tmp_path / "job", _fill("v3"), scratch="building", replace=True)
    assert calls[:2] == [("job", ".job.old.tmp"), (".job.building.tmp", "job")]
    assert _tree(tmp_path / "job") == [("sub", None), ("sub/f.txt", "v2")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job"]


def test_replace_together_writes_every_file_or_none(tmp_path, monkeypatch):
    import errno

    from agentcredit.records import files, replace_together

    report, picture = tmp_path / "report.md", tmp_path / "chart.png"
    assert replace_together({report: b"v1", picture: b"p1"}) == (report, picture)
    real_write = files.atomic_write_bytes

    def full_at_the_picture(path, data):
        if path.name.startswith(".chart.png"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(files, "atomic_write_bytes", full_at_the_picture)
    with pytest.raises(OSError, match="No space"):
        replace_together({report: b"v2", picture: b"p2"})
    assert (report.read_bytes(), picture.read_bytes()) == (b"v1", b"p1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.png", "report.md"]  # no staged copy left
