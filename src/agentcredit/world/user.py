"""Bring your own corpus and questions: `load_user_world(corpus_path, questions_path) -> World`.

Corpus: JSONL (one object per line) or parquet, with fields id, title, text and optionally url.
`text` becomes the page's numbered lines: split at newlines, blank lines dropped, and paragraphs
longer than `LONG_LINE` characters split at sentence ends (the browser cuts over-long lines).
Questions: JSONL with fields question and answer, optionally id. Every question gets template
"USER" and is its own anchor, so splits only keep questions apart. User questions carry no
program, so the structural checks of `verify.py` do not apply to them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

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


def _read_jsonl(path: Path, what: str) -> list[dict]:
    records = []
    with path.open(encoding="utf-8") as fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {n}: not valid JSON ({err.msg}); {what} must be one JSON object per line") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path} line {n}: expected a JSON object, got {type(record).__name__}")
            records.append(record)
    return records


def _read_parquet(path: Path) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow (or convert the corpus to .jsonl)") from None
    return pq.read_table(path).to_pylist()


def _require(record: dict, fields: tuple[str, ...], path: Path, n: int) -> None:
    missing = [f for f in fields if record.get(f) in (None, "")]
    if missing:
        raise ValueError(f"{path} record {n}: missing field(s) {missing}; each record needs {list(fields)}")


def _existing(path: str | Path, flag: str) -> Path:
    if path is None or str(path) == "":
        raise ValueError(f"no path given; set {flag}=<path>")
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"{p} does not exist; set {flag}=<path to an existing file>")
    return p


def load_user_corpus(corpus_path: str | Path) -> tuple[Document, ...]:
    path = _existing(corpus_path, "data.corpus_path")
    if path.suffix == ".jsonl":
        records = _read_jsonl(path, "the corpus")
    elif path.suffix == ".parquet":
        records = _read_parquet(path)
    else:
        raise ValueError(f"{path}: unsupported corpus format {path.suffix!r}; use .jsonl or .parquet")
    docs, seen = [], set()
    for n, rec in enumerate(records, start=1):
        _require(rec, ("id", "title", "text"), path, n)
        doc_id = str(rec["id"])
        if doc_id in seen:
            raise ValueError(f"{path} record {n}: duplicate id {doc_id!r}; document ids must be unique")
        seen.add(doc_id)
        url = str(rec.get("url") or f"corpus://{doc_id}")
        docs.append(Document(doc_id, " ".join(str(rec["title"]).split()), url, _text_lines(str(rec["text"]))))
    if not docs:
        raise ValueError(f"{path} holds no documents")
    return tuple(docs)


def load_user_questions(questions_path: str | Path) -> tuple[Question, ...]:
    path = _existing(questions_path, "data.questions_path")
    if path.suffix != ".jsonl":
        raise ValueError(f"{path}: questions must be a .jsonl file with fields question and answer")
    out = []
    for n, rec in enumerate(_read_jsonl(path, "questions"), start=1):
        _require(rec, ("question", "answer"), path, n)
        qid = str(rec.get("id") or f"u{n - 1:05d}")
        out.append(Question(qid, str(rec["question"]).strip(), str(rec["answer"]).strip(), "USER", anchor=qid))
    if not out:
        raise ValueError(f"{path} holds no questions")
    ids = [q.id for q in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: question ids repeat; give each question a unique id or drop the id field")
    return tuple(out)


def load_user_world(corpus_path: str | Path, questions_path: str | Path) -> World:
    return World(load_user_corpus(corpus_path), load_user_questions(questions_path), stats={"source": "user"})
