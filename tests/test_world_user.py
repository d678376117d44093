"""User corpus + questions: loading, line splitting, and one-line errors."""

from __future__ import annotations

import json

import pytest

from agentcredit.world.user import LONG_LINE, UserDataError, load_user_world


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
    with pytest.raises(ValueError, match=r"line 1: missing or blank field\(s\) \['title'\]"):
        load_user_world(bad_corpus, questions)
    bad_q = _write_jsonl(tmp_path / "badq.jsonl", [{"question": "Who?"}])
    with pytest.raises(ValueError, match=r"missing or blank field\(s\) \['answer'\]"):
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


def test_a_parquet_corpus_loads_like_its_jsonl(files, tmp_path):
    """pyarrow is a dependency: the README's parquet corpus works (issue 30, item 4)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus, questions = files
    records = [json.loads(line) for line in corpus.read_text().splitlines()]
    records[1]["url"] = None  # a column parquet fills with null where JSONL leaves the key out
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "corpus.parquet")
    assert load_user_world(tmp_path / "corpus.parquet", questions).documents == load_user_world(corpus, questions).documents
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(UserDataError, match=r"bad\.parquet: not a readable parquet file"):
        load_user_world(tmp_path / "bad.parquet", questions)


def test_parquet_without_pyarrow_says_what_to_install(files, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyarrow.parquet", None)  # import fails as if not installed
    path = tmp_path / "corpus.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(UserDataError, match="pip install pyarrow"):
        load_user_world(path, files[1])


def test_a_folder_as_corpus_is_one_line(files, tmp_path):
    with pytest.raises(UserDataError, match=r"is a folder, not a file; set data\.corpus_path="):
        load_user_world(tmp_path, files[1])


# ---------------------------------------------------------------- issue 20, item 7: nothing coerced silently

GOOD_DOC = {"id": "d1", "title": "Harbor Press", "text": "Founded by Anna Voss in 1978."}
GOOD_Q = {"question": "Who founded Harbor Press?", "answer": "Anna Voss"}

BAD_CORPUS = {
    "text as a number": ({**GOOD_DOC, "text": 12}, r"line 1: field 'text' must be a string or a list of strings, got int 12"),
    "text as a dict": ({**GOOD_DOC, "text": {"a": 1}}, r"line 1: field 'text' must be a string or a list of strings, got dict"),
    "text as a mixed list": ({**GOOD_DOC, "text": ["a", 2]}, r"field 'text' must be a string or a list of strings, got list"),
    "text blank": ({**GOOD_DOC, "text": "  \n "}, r"line 1: missing or blank field\(s\) \['text'\]"),
    "numeric title": ({**GOOD_DOC, "title": 1984}, r"line 1: field 'title' must be a string, got int 1984"),
    "list title": ({**GOOD_DOC, "title": ["a"]}, r"field 'title' must be a string, got list"),
    "float id": ({**GOOD_DOC, "id": 1.5}, r"field 'id' must be a string or an integer, got float 1.5"),
    "bool id": ({**GOOD_DOC, "id": True}, r"field 'id' must be a string or an integer, got bool"),
    "numeric url": ({**GOOD_DOC, "url": 7}, r"field 'url' must be a string, got int"),
}

BAD_QUESTIONS = {
    "answer not in the corpus": ({**GOOD_Q, "answer": "Otto Brandt"}, r"line 1: field 'answer' 'Otto Brandt' appears in no page"),
    "blank answer": ({**GOOD_Q, "answer": "   "}, r"line 1: missing or blank field\(s\) \['answer'\]"),
    "punctuation answer": ({**GOOD_Q, "answer": "the ."}, r"line 1: field 'answer' 'the .' is only punctuation"),
    "list answer": ({**GOOD_Q, "answer": ["a", "b"]}, r"line 1: field 'answer' must be a string, got list \['a', 'b'\]"),
    "numeric answer": ({**GOOD_Q, "answer": 1978}, r"line 1: field 'answer' must be a string, got int 1978"),
    "dict question": ({**GOOD_Q, "question": {"q": 1}}, r"line 1: field 'question' must be a string, got dict"),
    "part of a word only": ({**GOOD_Q, "answer": "Vo"}, r"field 'answer' 'Vo' appears in no page"),
}


@pytest.mark.parametrize("case", BAD_CORPUS)
def test_bad_corpus_records_are_one_line_errors_naming_file_line_and_field(tmp_path, case):
    from agentcredit.world.user import UserDataError

    record, message = BAD_CORPUS[case]
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [record])
    questions = _write_jsonl(tmp_path / "q.jsonl", [GOOD_Q])
    with pytest.raises(UserDataError, match=message) as err:
        load_user_world(corpus, questions)
    assert str(err.value).startswith(str(corpus)) and "\n" not in str(err.value)


@pytest.mark.parametrize("case", BAD_QUESTIONS)
def test_bad_questions_are_one_line_errors_naming_file_line_and_field(tmp_path, case):
    from agentcredit.world.user import UserDataError

    record, message = BAD_QUESTIONS[case]
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [GOOD_DOC])
    questions = _write_jsonl(tmp_path / "q.jsonl", [record])
    with pytest.raises(UserDataError, match=message) as err:
        load_user_world(corpus, questions)
    assert str(err.value).startswith(str(questions)) and "\n" not in str(err.value)


def test_documented_forms_are_accepted(tmp_path):
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [
        {"id": 7, "title": "Harbor Press", "text": ["Founded by Anna Voss.", "", "In 1978."]}])
    questions = _write_jsonl(tmp_path / "q.jsonl", [
        {"question": "Who?", "answer": "anna voss"},  # normalised match
        {"id": 3, "question": "When?", "answer": "1978"},
        {"question": "Which press?", "answer": "Harbor Press"}])  # a title counts
    world = load_user_world(corpus, questions)
    assert world.documents[0].id == "7" and world.documents[0].lines == ("Founded by Anna Voss.", "In 1978.")
    assert [q.id for q in world.questions] == ["u00000", "3", "u00002"]


def test_non_utf8_files_name_the_file_and_line(tmp_path):
    from agentcredit.world.user import UserDataError

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(json.dumps(GOOD_DOC).encode() + b"\n" + '{"id": "d2", "title": "Caf\u00e9", "text": "x"}'.encode("latin-1") + b"\n")
    questions = _write_jsonl(tmp_path / "q.jsonl", [GOOD_Q])
    with pytest.raises(UserDataError, match=rf"^{corpus} line 2: not UTF-8 text \(byte \d+\); save the file as UTF-8$"):
        load_user_world(corpus, questions)
    bad_q = tmp_path / "bad_q.jsonl"
    bad_q.write_bytes(b'\n\n{"question": "\xff", "answer": "x"}\n')
    with pytest.raises(UserDataError, match=rf"^{bad_q} line 3: not UTF-8"):
        load_user_world(_write_jsonl(tmp_path / "c.jsonl", [GOOD_DOC]), bad_q)
