"""Bring your own corpus and questions: `load_user_world(corpus_path, questions_path) -> World`.

Corpus: JSONL (one object per line) or parquet, with fields id, title, text and optionally url.
`id` is a string or an integer; `title` and `url` are strings; `text` is a string or a list of
strings (paragraphs). `text` becomes the page's numbered lines: split at newlines, blank lines
dropped, and paragraphs longer than `LONG_LINE` characters split at sentence ends (the browser cuts
over-long lines).
Questions: JSONL with fields question and answer (strings), optionally id and supporting_facts (the page
lines the answer rests on, which credit=gold-evidence needs: `world/supporting_facts.py` gives the forms).
Every answer must occur in the corpus (in a page title or line, compared after answer normalisation). Files
are UTF-8.
Anything else is a `UserDataError`: one line naming the file, the line (parquet: row) and the field.
Every question gets template "USER" and is its own anchor, so splits only keep questions apart.
User questions carry no program, so the structural checks of `verify.py` do not apply to them.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from agentcredit.env.arguments import short_repr
from agentcredit.env.reward import normalize_answer
from agentcredit.world import supporting_facts
from agentcredit.world.generator import World
from agentcredit.world.types import Document, Question

LONG_LINE = 200
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _text_lines(text: str) -> tuple[str, ...]:
    lines: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        lines.extend(_SENTENCE_END.split(line) if len(line) > LONG_LINE else [line])
    return tuple(lines)


class UserDataError(ValueError):
    """A user corpus or question file that cannot be used as it is; the message is one line naming the
    file, the line (or parquet row) and the field."""


def read_jsonl(path: Path, what: str) -> list[tuple[str, dict]]:
    """(where, record) for every non-blank line; where is "line N"."""
    records = []
    with path.open("rb") as fh:
        for n, raw_bytes in enumerate(fh, start=1):
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as err:
                raise UserDataError(f"{path} line {n}: not UTF-8 text (byte {err.start}); save the file as UTF-8") from None
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as err:
                raise UserDataError(f"{path} line {n}: not valid JSON ({err.msg}); {what} must be one JSON object per line") from None
            if not isinstance(record, dict):
                raise UserDataError(f"{path} line {n}: expected a JSON object, got {type(record).__name__}")
            records.append((f"line {n}", record))
    return records


def _read_parquet(path: Path) -> list[tuple[str, dict]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # a dependency of the project; missing only from a hand-made environment
        raise UserDataError(f"reading {path} needs pyarrow: pip install pyarrow (or convert the corpus to .jsonl)") from None
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as err:  # noqa: BLE001 -- pyarrow raises its own error types for damaged files
        raise UserDataError(f"{path}: not a readable parquet file ({type(err).__name__}: {err})") from None
    return [(f"row {n}", rec) for n, rec in enumerate(rows, start=1)]


def _require(record: dict, fields: tuple[str, ...], path: Path, where: str) -> None:
    missing = [f for f in fields if record.get(f) is None or (isinstance(record.get(f), str) and not record[f].strip())]
    if missing:
        raise UserDataError(f"{path} {where}: missing or blank field(s) {missing}; each record needs {list(fields)}")


def _string(record: dict, field: str, path: Path, where: str) -> str:
    value = record[field]
    if not isinstance(value, str):
        raise UserDataError(f"{path} {where}: field {field!r} must be a string, got {type(value).__name__} "
                            f"{short_repr(value)}")
    return value


def _doc_id(record: dict, path: Path, where: str) -> str:
    """Ids may be strings or integers (documented); anything else would be stored as its repr."""
    value = record["id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UserDataError(f"{path} {where}: field 'id' must be a string or an integer, got {type(value).__name__} "
                            f"{short_repr(value)}")
    return str(value)


def _page_text(record: dict, path: Path, where: str) -> str:
    """`text` is a string, or a list of strings (one per paragraph, documented)."""
    value = record["text"]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if not isinstance(value, str):
        raise UserDataError(f"{path} {where}: field 'text' must be a string or a list of strings, got "
                            f"{type(value).__name__} {short_repr(value)}")
    return value


def _existing(path: str | Path, flag: str) -> Path:
    if path is None or str(path) == "":
        raise UserDataError(f"no path given; set {flag}=<path>")
    p = Path(path).expanduser()
    if p.is_dir():
        raise UserDataError(f"{p} is a folder, not a file; set {flag}=<path to an existing file>")
    if not p.is_file():
        raise FileNotFoundError(f"{p} does not exist; set {flag}=<path to an existing file>")
    return p


def load_user_corpus(corpus_path: str | Path) -> tuple[Document, ...]:
    return _read_corpus(corpus_path)[0]


def _one_line_per_sentence(text: object) -> bool:
    """Whether each sentence of `text` (a list's items, or a string's lines) became exactly one page line."""
    sentences = text if isinstance(text, list) else str(text).splitlines()
    return all(len(_text_lines(s)) == 1 for s in sentences)


def _read_corpus(corpus_path: str | Path) -> tuple[tuple[Document, ...], frozenset[str]]:
    """The pages, and the ids of those whose lines are their sentences one for one (``supporting_facts``)."""
    path = _existing(corpus_path, "data.corpus_path")
    if path.suffix == ".jsonl":
        records = read_jsonl(path, "the corpus")
    elif path.suffix == ".parquet":
        records = _read_parquet(path)
    else:
        raise UserDataError(f"{path}: unsupported corpus format {path.suffix!r}; use .jsonl or .parquet")
    docs, seen, aligned = [], set(), set()
    for where, rec in records:
        _require(rec, ("id", "title", "text"), path, where)
        doc_id = _doc_id(rec, path, where)
        if doc_id in seen:
            raise UserDataError(f"{path} {where}: duplicate id {doc_id!r}; document ids must be unique")
        seen.add(doc_id)
        title = " ".join(_string(rec, "title", path, where).split())
        url = _string(rec, "url", path, where) if rec.get("url") not in (None, "") else f"corpus://{doc_id}"
        lines = _text_lines(_page_text(rec, path, where))
        if not lines:
            raise UserDataError(f"{path} {where}: field 'text' holds no words; give the page's text")
        docs.append(Document(doc_id, title, url, lines))
        if _one_line_per_sentence(rec["text"]):
            aligned.add(doc_id)
    if not docs:
        raise UserDataError(f"{path} holds no documents")
    return tuple(docs), frozenset(aligned)


def load_user_questions(questions_path: str | Path) -> tuple[tuple[str, Question], ...]:
    """(where, question) pairs, so later checks can name the line."""
    path = _existing(questions_path, "data.questions_path")
    if path.suffix != ".jsonl":
        raise UserDataError(f"{path}: questions must be a .jsonl file with fields question and answer")
    out = []
    for n, (where, rec) in enumerate(read_jsonl(path, "questions"), start=1):
        _require(rec, ("question", "answer"), path, where)
        text = _string(rec, "question", path, where).strip()
        answer = _string(rec, "answer", path, where).strip()
        if not normalize_answer(answer):
            raise UserDataError(f"{path} {where}: field 'answer' {answer!r} is only punctuation or articles, which no "
                                "answer can match; give the answer text")
        qid = _doc_id(rec, path, where) if rec.get("id") not in (None, "") else f"u{n - 1:05d}"
        # Kept as written until the corpus is read (load_user_world resolves them against its pages).
        meta = {supporting_facts.FIELD: rec[supporting_facts.FIELD]} if supporting_facts.FIELD in rec else {}
        out.append((where, Question(qid, text, answer, "USER", anchor=qid, meta=meta)))
    if not out:
        raise UserDataError(f"{path} holds no questions")
    seen: dict[str, str] = {}
    for where, q in out:
        if q.id in seen:
            raise UserDataError(f"{path} {where}: question id {q.id!r} repeats ({seen[q.id]}); give each question a "
                                "unique id or drop the id field")
        seen[q.id] = where
    return tuple(out)


def check_answers_in_corpus(questions, documents, questions_path) -> None:
    """Every answer must occur (normalised, as whole words) in some page title or line: an answer the
    corpus never shows cannot be found by searching it, and its reward would never be earned."""
    haystack = " " + " \n ".join(normalize_answer(" ".join((d.title, *d.lines))) for d in documents) + " "
    for where, q in questions:
        if f" {normalize_answer(q.answer)} " not in haystack:
            raise UserDataError(f"{questions_path} {where}: field 'answer' {short_repr(q.answer, 60)} appears in no page "
                                "of the corpus; fix the answer or add the page that holds it")


def with_supporting_facts(questions, documents, aligned: frozenset[str], questions_path) -> tuple[Question, ...]:
    """Each question with its supporting facts (if its record has them) as its evidence."""
    out = []
    for where, q in questions:
        if supporting_facts.FIELD not in q.meta:
            out.append(q)
            continue
        facts = supporting_facts.resolve(q.meta[supporting_facts.FIELD], documents, aligned)
        if isinstance(facts, str):
            raise UserDataError(f"{questions_path} {where}: {facts}")
        out.append(replace(q, evidence=facts, meta={}))
    return tuple(out)


def load_user_world(corpus_path: str | Path, questions_path: str | Path) -> World:
    documents, aligned = _read_corpus(corpus_path)
    questions = load_user_questions(questions_path)
    path = Path(questions_path).expanduser()
    check_answers_in_corpus(questions, documents, path)
    return World(documents, with_supporting_facts(questions, documents, aligned, path), stats={"source": "user"})
