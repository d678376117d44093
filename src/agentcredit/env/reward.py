"""Outcome reward (TRACE App. A.3): normalised exact match of the `<answer>` span, plus a small
format score for a well-formed answer block.

    reward = correct_score · [norm(answer span) == norm(gold)] + format_score · [block well formed]

so a correct, well-formed answer earns correct_score + format_score (1.1 with the defaults).
Details the paper leaves open, fixed here:
- Normalisation is SQuAD-style (lower-case, drop punctuation, drop the articles a/an/the, collapse
  white space), preceded by Unicode NFKC so equivalent encodings of a character compare equal, and
  dropping all Unicode punctuation and ASCII symbols, not only ASCII punctuation.
- "Well formed" means exactly one `<answer>` opener, exactly one `</answer>` closer after it, and
  non-blank content. Tags are matched case-sensitively, as the prompt spells them.
- With several spans the last complete one is the answer (it is also not well formed).
- `gold` may be one string or a sequence of accepted aliases.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

OPEN_TAG = "<answer>"
CLOSE_TAG = "</answer>"
_SPAN = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _is_punctuation(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def normalize_answer(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(ch for ch in text if not _is_punctuation(ch))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def extract_answer(text: str | None) -> str | None:
    """Content of the last complete <answer>…</answer> span, stripped; None if there is none."""
    if not text:
        return None
    spans = _SPAN.findall(text)
    return spans[-1].strip() if spans else None


def answer_is_well_formed(text: str | None) -> bool:
    if not text or text.count(OPEN_TAG) != 1 or text.count(CLOSE_TAG) != 1:
        return False
    if text.index(OPEN_TAG) > text.index(CLOSE_TAG):
        return False
    return bool(extract_answer(text))


def answer_is_correct(text: str | None, gold: str | Sequence[str]) -> bool:
    """Normalised exact match of the answer span against the gold answer (or any alias)."""
    predicted = extract_answer(text)
    if predicted is None:
        return False
    predicted = normalize_answer(predicted)
    if not predicted:  # "the" or "." is not an answer, even when the gold normalises to nothing
        return False
    golds = [gold] if isinstance(gold, str) else list(gold)
    return any(predicted == normalize_answer(g) for g in golds)


def score_answer(
    answer_text: str | None,
    gold: str | Sequence[str],
    correct_score: float = 1.0,
    format_score: float = 0.1,
) -> float:
    """Reward of a final response. `answer_text` is the whole final assistant turn (or None if the
    rollout ended without one); the <answer> span is found inside it."""
    return correct_score * answer_is_correct(answer_text, gold) + format_score * answer_is_well_formed(answer_text)


@dataclass(frozen=True)
class AnswerReward:
    """The rollout worker's reward: `reward(final_text, question) -> (reward, extracted answer, well-formed)`.
    `correct_score` is also the bar of success (accuracy counts rewards >= it)."""

    correct_score: float = 1.0
    format_score: float = 0.1

    def __call__(self, final_text: str | None, question) -> tuple[float, str | None, bool]:
        reward = score_answer(final_text, question.answer, self.correct_score, self.format_score)
        return reward, extract_answer(final_text), answer_is_well_formed(final_text)

    def is_success(self, reward: float) -> bool:
        return reward >= self.correct_score


def make_reward_fn(env_cfg: dict) -> AnswerReward:
    """The reward of an `env` group (conf/env/default.yaml: `reward.correct_score`, `reward.format_score`)."""
    return AnswerReward(**{k: float(v) for k, v in (env_cfg.get("reward") or {}).items()})
