"""A per-step time budget for the judge, shared by every judge call of one training step.

    with judge_deadline(time.monotonic() + 20):   # judge.verification sets it around each judge call
        judge.propose(context)                     # backends read `remaining_s()` to cap their timeouts

A judge that never answers would otherwise stall a step for (1 + retries) x timeout per eligible
group. Once the deadline has passed, `check_budget()` raises `JudgeBudgetSpent` (a JudgeError: the
group keeps GRPO credit) and the verifier skips the judge for the step's remaining groups.
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar
from typing import Iterator

from agentcredit.judge.base import JudgeError

_DEADLINE: ContextVar[float | None] = ContextVar("judge_deadline", default=None)


class JudgeBudgetSpent(JudgeError):
    """The step's judge time budget ran out (judge.step_budget_s)."""


@contextlib.contextmanager
def judge_deadline(deadline: float | None) -> Iterator[None]:
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining_s() -> float | None:
    """Seconds left of the step's judge budget; None when no budget is set."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def check_budget() -> None:
    left = remaining_s()
    if left is not None and left <= 0:
        raise JudgeBudgetSpent("the step's judge time budget (judge.step_budget_s) is spent")


# Less than this left of the budget counts as spent: a timed-out call can return a hair before the deadline, and a
# request sent in what is left cannot get a reply; it would only load the endpoint once more.
MIN_CALL_S = 0.05


def capped_timeout(timeout_s: float) -> float:
    """`timeout_s`, or what is left of the budget when that is less; raises once (almost) nothing is left."""
    left = remaining_s()
    if left is not None and left < MIN_CALL_S:  # covers check_budget's left <= 0 too
        raise JudgeBudgetSpent("the step's judge time budget (judge.step_budget_s) is spent")
    return timeout_s if left is None else min(timeout_s, left)
