"""User corpus + questions: loading, line splitting, and one-line errors."""

from __future__ import annotations

import importlib.util
import json

import pytest

from agentcredit.world.user import LONG_LINE, load_user_world


def _write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


@pytest.fixture
def files(tmp_path):
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [
        {"id": "d1", "title": "Harbor  Press", "url": "https://x/1", "text": "Line one.\n\nLine two."},
        {"id": "d2", "title": "Anna Voss", "text": "She was born in 1978. " * 20},
    ])
    questions = _write_jsonl(tmp_path / "questions.jsonl", [
        {"question": "Who founded Harbor Press?", "answer": "Anna Voss"},
        {"id": "x7", "question": "When was she born?", "answer": "1978"},
    ])
    return corpus, questions


def test_loads_documents_and_questions(files):
    world = load_user_world(*files)
    d1, d2 = world.documents
    assert (d1.id, d1.title, d1.url, d1.lines) == ("d1", "Harbor Press", "https://x/1", ("Line one.", "Line two."))
    assert d2.url == "corpus://d2"
    assert len(d2.lines) == 20 and all(len(line) <= LONG_LINE for line in d2.lines)  # long paragraph split
    q1, q2 = world.questions
    assert (q1.id, q1.template, q1.anchor, q1.answer) == ("u00000", "USER", "u00000", "Anna Voss")
    assert q2.id == "x7"


def test_missing_files_say_which_setting_to_fix(files, tmp_path):
    corpus, questions = files
    with pytest.raises(FileNotFoundError, match="data.corpus_path"):
        load_user_world(tmp_path / "nope.jsonl", questions)
    with pytest.raises(FileNotFoundError, match="data.questions_path"):
        load_user_world(corpus, tmp_path / "nope.jsonl")


def test_missing_fields_are_named(files, tmp_path):
    corpus, questions = files
    bad_corpus = _write_jsonl(tmp_path / "bad.jsonl", [{"id": "d1", "text": "x"}])
    with pytest.raises(ValueError, match=r"record 1: missing field\(s\) \['title'\]"):
        load_user_world(bad_corpus, questions)
    bad_q = _write_jsonl(tmp_path / "badq.jsonl", [{"question": "Who?"}])
    with pytest.raises(ValueError, match=r"missing field\(s\) \['answer'\]"):
        load_user_world(corpus, bad_q)


def test_malformed_inputs(files, tmp_path):
    corpus, questions = files
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "d1", "title": "t", "text": "x"}\n{not json\n')
    with pytest.raises(ValueError, match="line 2: not valid JSON"):
        load_user_world(broken, questions)
    dup = _write_jsonl(tmp_path / "dup.jsonl", [{"id": "a", "title": "t", "text": "x"}] * 2)
    with pytest.raises(ValueError, match="duplicate id 'a'"):
        load_user_world(dup, questions)
    csv = tmp_path / "corpus.csv"
    csv.write_text("id,title,text\n")
    with pytest.raises(ValueError, match="use .jsonl or .parquet"):
        load_user_world(csv, questions)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_parquet_without_pyarrow_says_what_to_install(files, tmp_path):
    path = tmp_path / "corpus.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(ImportError, match="pip install pyarrow"):
        load_user_world(path, files[1])


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="needs pyarrow")
def test_parquet_corpus_loads(files, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "d1", "title": "T", "url": "u", "text": "a\nb"}]), path)
    assert load_user_world(path, files[1]).documents[0].lines == ("a", "b")
