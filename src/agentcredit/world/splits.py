"""Train / val / test splits that share no question and no anchor entity.

All questions of one anchor go to one split, so a model cannot meet a test question's anchor page
during training. Anchors are visited in a seeded hash order. Anchors
carry very different numbers of questions: each anchor goes to the split that keeps every
(split, template) count closest to its target share, so each split holds every template.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from agentcredit.common.paths import stable_hash
from agentcredit.world.types import Question

SPLITS = ("train", "val", "test")


def split_questions(questions, val_fraction: float = 0.2, test_fraction: float = 0.2,
                    seed: int = 0) -> dict[str, tuple[Question, ...]]:
    """{"train", "val", "test"} -> questions, each split in the questions' original order.

    `questions` is a World or any sequence of Question."""
    questions = tuple(getattr(questions, "questions", questions))
    if not (0 <= val_fraction and 0 <= test_fraction and val_fraction + test_fraction < 1):
        raise ValueError(f"need val_fraction + test_fraction < 1, got {val_fraction} + {test_fraction}")
    by_anchor: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        by_anchor[q.anchor or q.id].append(q)
    targets = {"train": 1 - val_fraction - test_fraction, "val": val_fraction, "test": test_fraction}
    templates = sorted({q.template for q in questions})
    sizes = {s: dict.fromkeys(templates, 0) for s in SPLITS}  # questions per split and template
    totals = dict.fromkeys(templates, 0)
    assigned: dict[str, str] = {}
    for anchor in sorted(by_anchor, key=lambda a: stable_hash([seed, a])):
        adds = Counter(q.template for q in by_anchor[anchor])
        for t in adds:
            totals[t] += adds[t]

        def error(choice: str) -> float:
            # Squared distance of every (split, template) count from its target share.
            return sum((sizes[s][t] + (adds[t] if s == choice else 0) - targets[s] * totals[t]) ** 2
                       for s in SPLITS for t in templates)

        split = min(SPLITS, key=lambda s: (error(s), SPLITS.index(s)))
        assigned[anchor] = split
        for t in adds:
            sizes[split][t] += adds[t]
    out: dict[str, list[Question]] = {s: [] for s in SPLITS}
    for q in questions:
        out[assigned[q.anchor or q.id]].append(q)
    return {s: tuple(qs) for s, qs in out.items()}


# The first questions of the val split serve other readers: in-training validation (data.n_val, 64 by default),
# the base policy's held-out figure (scripts/build_base_policy.py: 200), credit fidelity (its first n, 20).
# The tuning set is taken from the other end, so that none of them ever reads a tuning question.
VAL_HEAD_RESERVED = 200


def tuning_questions(val_questions, size: int) -> tuple[Question, ...]:
    """The tuning set: the last `size` questions of the val split, in their order.

    It shares no question and no anchor with train or test (it is part of val), and none with the first
    VAL_HEAD_RESERVED val questions. A hyperparameter sweep scores its settings on it, and nothing else
    reads it, so a chosen setting is never chosen on test questions."""
    val_questions = tuple(val_questions)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"the tuning set's size must be an integer >= 1, got {size!r}")
    spare = len(val_questions) - VAL_HEAD_RESERVED
    if size > spare:
        raise ValueError(f"a tuning set of {size} questions does not fit: the val split has {len(val_questions)}, "
                         f"of which the first {VAL_HEAD_RESERVED} are kept for validation; raise data.val_fraction "
                         f"or data.world.num_questions, or ask for at most {max(spare, 0)}")
    return val_questions[len(val_questions) - size:]
