"""How much reward a policy can collect without reading: answers guessed from what a question asks for.

A counting question asks for a count, and in the default world most counts are 1 or 2; a policy that
recognises the kind of question and guesses a typical answer scores on it without searching. This
module measures that floor-without-reading (the "answer prior") so that a base policy's success,
and what credit methods gain over it, can be read against it:

    python scripts/research/answer_prior.py --split val --n 200

The kind of a question is what its program ends in: the last hop's relation (`creator`, `born`,
`population`, ...) or its last operation (`count`, `argmax`, `argmin`, `where`). It is a function of
the question alone (the text is rendered from the program), so a policy could in principle know it.
Whether a policy's answers are at least of the right kind (a number where the gold answer is one) is
`agentcredit.run.evaluate.answer_kind_match`: it needs no program, so it is a figure of any questions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Sequence

from agentcredit.env.reward import normalize_answer
from agentcredit.world.types import Question


def asked_for(question: Question) -> str | None:
    """The kind of answer a synthetic question asks for; None for anything without a program (user
    data, or a bare question id such as the warm-start tests pass)."""
    program = (getattr(question, "meta", None) or {}).get("program")
    if not program:
        return None
    last = program[-1]
    if last.get("op") == "hop":
        return str(last.get("rel"))
    return str(last.get("op"))


def answers_by_kind(questions: Sequence[Question]) -> dict[str, list[str]]:
    """kind -> the answers of the questions of that kind, in order and with repeats; questions
    without a kind are left out."""
    answers: dict[str, list[str]] = defaultdict(list)
    for question in questions:
        kind = asked_for(question)
        if kind is not None:
            answers[kind].append(question.answer)
    return dict(answers)


def answer_prior(train: Sequence[Question], questions: Sequence[Question]) -> dict:
    """Success on `questions` of two policies that never read, both knowing each question's kind:

    `mode_success`: always answer the most frequent training answer of that kind;
    `sampled_success`: sample an answer from the training answers of that kind (what a policy that
    has learnt only the answer distribution gets at temperature 1), in expectation.
    Answers are compared as the reward compares them (normalised exact match). A kind with no
    training question scores 0; questions without a kind are counted in `without_kind`."""
    by_kind = {kind: Counter(normalize_answer(a) for a in answers) for kind, answers in answers_by_kind(train).items()}
    per_kind: dict[str, dict] = {}
    without_kind = 0
    for question in questions:
        kind = asked_for(question)
        if kind is None:
            without_kind += 1
            continue
        answers = by_kind.get(kind, Counter())
        total = sum(answers.values())
        gold = normalize_answer(question.answer)
        mode = answers.most_common(1)[0][0] if answers else None
        row = per_kind.setdefault(kind, {"n": 0, "mode": mode, "mode_correct": 0, "sampled_correct": 0.0})
        row["n"] += 1
        row["mode_correct"] += int(mode is not None and gold == mode)
        row["sampled_correct"] += answers[gold] / total if total else 0.0
    n = len(questions)
    return {
        "n": n,
        "mode_success": sum(r["mode_correct"] for r in per_kind.values()) / max(n, 1),
        "sampled_success": sum(r["sampled_correct"] for r in per_kind.values()) / max(n, 1),
        "without_kind": without_kind,
        "kinds": {
            kind: {"n": r["n"], "mode": r["mode"], "mode_success": r["mode_correct"] / r["n"],
                   "sampled_success": r["sampled_correct"] / r["n"]}
            for kind, r in sorted(per_kind.items(), key=lambda kv: -kv[1]["n"])
        },
    }


__all__ = ["asked_for", "answers_by_kind", "answer_prior"]
