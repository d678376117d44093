"""Schema check of tool-call arguments (TRACE Table 7), before the browser acts on them.

Types are strict on purpose: integers must be real integers (not "3", 3.0, True or None) and
strings must be strings. A lenient parse would let the policy learn a dialect the schema does
not define; a clear error teaches it the schema instead.
"""

from __future__ import annotations

import numbers
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class InvalidCall(Exception):
    """A call that breaks the tool schema; its message becomes the error observation."""


@dataclass(frozen=True)
class Arg:
    name: str
    kind: type  # int or str
    default: Any = None  # None = required


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 80, 80, 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8


def short_repr(value: Any, limit: int = 40) -> str:
    """repr(value) cut to `limit` characters; never raises. reprlib bounds the work on huge nested
    values, which plain repr would render in full before the cut."""
    try:
        text = _REPR.repr(value)
    except ValueError:  # ints beyond Python's digit limit refuse to print
        return f"<{type(value).__name__} too large to show>"
    except Exception:  # noqa: BLE001 -- a value's own __repr__ may raise anything; the message must still be made
        return f"<{type(value).__name__} that cannot be shown>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_arguments(tool: str, arguments: Any, spec: tuple[Arg, ...]) -> dict[str, Any]:
    """Fill defaults and check names and types; raises InvalidCall with a one-line fix."""
    allowed = ", ".join(a.name for a in spec)
    if not isinstance(arguments, Mapping):
        raise InvalidCall(
            f"{tool} arguments must be an object with keys from ({allowed}), got {type(arguments).__name__}."
        )
    unknown = [k for k in arguments if not (isinstance(k, str) and k in {a.name for a in spec})]
    if unknown:
        names = ", ".join(short_repr(k, 30) for k in unknown[:3])
        raise InvalidCall(f"{tool} got unknown argument(s) {names}; allowed: {allowed}.")
    out: dict[str, Any] = {}
    for arg in spec:
        if arg.name not in arguments:
            if arg.default is None:
                raise InvalidCall(f"{tool} needs the argument '{arg.name}'.")
            out[arg.name] = arg.default
            continue
        value = arguments[arg.name]
        if arg.kind is int:
            # bool is an int subclass in Python, but True is not a result index.
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InvalidCall(
                    f"{tool} argument '{arg.name}' must be an integer, got {type(value).__name__} {short_repr(value)}."
                )
            out[arg.name] = int(value)
        else:
            if not isinstance(value, str):
                raise InvalidCall(
                    f"{tool} argument '{arg.name}' must be a string, got {type(value).__name__} {short_repr(value)}."
                )
            out[arg.name] = value
    return out


def check_text(tool: str, name: str, text: str, max_chars: int) -> str:
    """Strip; reject empty and over-long text rather than silently cutting it."""
    text = text.strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from a bad JSON escape crash tokenizers downstream
        raise InvalidCall(f"{tool} argument '{name}' contains characters that are not valid text.") from None
    if not text:
        raise InvalidCall(f"{tool} argument '{name}' is empty; give the text to look for.")
    if len(text) > max_chars:
        raise InvalidCall(
            f"{tool} argument '{name}' is {len(text)} characters; the limit is {max_chars}. Use a shorter one."
        )
    return text


def check_range(tool: str, name: str, value: int, low: int, high: int, also: int | None = None) -> int:
    """value in [low, high] (or equal to `also`, the -1 'default' sentinel)."""
    if value == also or low <= value <= high:
        return value
    allowed = f"{low}..{high}" + (f" or {also}" if also is not None else "")
    raise InvalidCall(f"{tool} argument '{name}' must be in {allowed}, got {short_repr(value)}.")
