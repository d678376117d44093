"""Reading JSON and JSON-lines records against a pydantic schema, one warning per record left out."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)

MAX_DEPTH = 64  # records are a few levels deep; 200k-deep nesting must not reach the parser's recursion
MAX_RECORD_BYTES = 64 * 2**20


class RecordError(ValueError):
    """A file or record that cannot be read; its message is one line naming the file (and line)."""


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number a record may hold")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} overflows a float")
    return value


def _depth_ok(text: str) -> bool:
    """Nesting depth of a JSON text without parsing it (brackets inside strings are skipped)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def _check_text(value) -> None:
    """Refuse strings that cannot be written back out (lone surrogates), anywhere in a parsed value."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")
        elif isinstance(item, dict):
            for k, v in item.items():
                k.encode("utf-8")
                stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)


def parse_json(text: str):
    """`json.loads` that refuses what no record may hold: NaN/Infinity, floats that overflow (1e400),
    integers of thousands of digits, nesting deeper than MAX_DEPTH, lone surrogates. Raises ValueError."""
    if len(text) > MAX_RECORD_BYTES:
        raise ValueError(f"record of {len(text)} characters is larger than {MAX_RECORD_BYTES}")
    if not _depth_ok(text):
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("nesting too deep") from None
    except ValueError as err:  # JSONDecodeError, int digit limit, refused constants
        raise ValueError(str(err).splitlines()[0][:200]) from None
    try:
        _check_text(value)
    except UnicodeEncodeError:
        raise ValueError("text that is not valid UTF-8 (a lone surrogate)") from None
    return value


def _first_problem(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "record"
    return f"{where}: {first.get('msg', 'invalid')}"


def validate(model: type[Model], value, where: str) -> Model:
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise RecordError(f"{where}: {_first_problem(err)}") from None


def read_json_record(path: str | Path, model: type[Model]) -> Model:
    """The one record a JSON file holds, validated; RecordError (one line naming the file) otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not part of the record
    except (OSError, UnicodeDecodeError) as err:
        raise RecordError(f"{path}: cannot be read ({type(err).__name__})") from None
    try:
        value = parse_json(text)
    except ValueError as err:
        raise RecordError(f"{path}: not a readable record ({err})") from None
    return validate(model, value, str(path))


def warn_left_out(message: str) -> None:
    print(f"warning: {message}; left out", file=sys.stderr, flush=True)


def read_jsonl_records(path: str | Path, model: type[Model], *, warn=warn_left_out) -> Iterator[tuple[int, Model]]:
    """(line number, record) for every line of a JSON-lines file that holds a valid record. A line that
    fails is left out with one warning naming the file and line; a cut-short last line (a kill during
    its write: no closing newline) is left out the same way, so a rerun can append after it."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as err:
        raise RecordError(f"{path}: cannot be read ({type(err).__name__})") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                # a byte-order mark, which some editors put at the start of a file, is not part of a record
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                value = parse_json(text)
            except (UnicodeDecodeError, ValueError) as err:
                cut = "" if raw.endswith(b"\n") else " (cut short: no line end)"
                warn(f"{path}:{number}: not a readable record{cut}: {str(err)[:120]}")
                continue
            try:
                yield number, validate(model, value, f"{path}:{number}")
            except RecordError as err:
                warn(str(err))
