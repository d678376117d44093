"""Value checks of credit knobs: each method's file declares one for every knob it reads
(``register_credit(..., checks={"K": integer(0), ...})``), the loss's in ``losses.LOSS_CHECKS``, the group
size's in ``budget.GROUP_CHECKS``. ``config.validate_credit_config`` applies them once when a job starts, so
a bad value stops it in one line before any model loads; the pure functions trust their knobs.

A check is a pair (test, what the value must be); the message reads ``credit.<knob> must be <what>, got <value>``.
A number is a finite one: inf would pass every lower bound and NaN fails every comparison without a word.
"""

from __future__ import annotations

import math
from collections.abc import Callable

KnobCheck = tuple[Callable[[object], bool], str]


def is_finite_number(value: object) -> bool:
    """A finite int or float: inf passes every bound and NaN compares false, so neither is a setting."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (isinstance(value, int) or math.isfinite(value))


def number() -> KnobCheck:
    return is_finite_number, "a number"


def integer(low: int, high: int | None = None) -> KnobCheck:
    """An integer >= low (and <= high: a bound where a larger count would only run for days, not mean more)."""
    if high is None:
        return (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low), f"an integer >= {low}"
    return ((lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high),
            f"an integer in [{low}, {high}]")


def positive() -> KnobCheck:
    return (lambda v: is_finite_number(v) and v > 0), "a number > 0"


def non_negative() -> KnobCheck:
    return (lambda v: is_finite_number(v) and v >= 0), "a number >= 0"


def choice(options: tuple[str, ...]) -> KnobCheck:
    return (lambda v: v in options), f"one of {list(options)}"


def unit_interval(closed_low: bool) -> KnobCheck:
    if closed_low:
        return (lambda v: is_finite_number(v) and 0 <= v <= 1), "a number in [0, 1]"
    return (lambda v: is_finite_number(v) and 0 < v <= 1), "a number in (0, 1]"


def boolean() -> KnobCheck:
    return (lambda v: isinstance(v, bool)), "true or false"


def optional_path(when_null: str) -> KnobCheck:
    """null or a non-empty path; `when_null` says what null means."""
    return (lambda v: v is None or (isinstance(v, str) and v != "")), when_null
