"""Obfuscations applied to question constraints (TRACE Appendix A.4.2).

Each returns the wording shown in the question and the exact predicate a program checks, so the
blurred wording and the verifiable constraint can never drift apart. Masked entities and role
descriptions are produced by the relation phrases themselves ("the founder of Harbor Press").
"""

from __future__ import annotations

import random

# Decade thirds are disjoint so that "the mid-2010s" has one meaning: 2014-2016.
DECADE_PARTS = {"early": (0, 3), "mid": (4, 6), "late": (7, 9)}

# Work awards and sales are drawn from two separated bands (see entities.py), so these words are
# never borderline: (relation, band) -> (wording, predicate).
QUALITATIVE = {
    ("awards", "high"): ("won many awards", {"ge": 6}),
    ("awards", "low"): ("won few awards", {"le": 2}),
    ("sales", "high"): ("sold many copies", {"ge": 40000}),
    ("sales", "low"): ("sold few copies", {"le": 4000}),
}


def blur_year(year: int, rng: random.Random, whole_decade: bool = False) -> tuple[str, tuple[int, int]]:
    """Approximate wording for `year` and the inclusive year range it stands for."""
    decade = year - year % 10
    if whole_decade:
        return rng.choice(("in the {d}s", "during the {d}s")).format(d=decade), (decade, decade + 9)
    part = next(name for name, (lo, hi) in DECADE_PARTS.items() if lo <= year % 10 <= hi)
    lo, hi = DECADE_PARTS[part]
    period = f"mid-{decade}s" if part == "mid" else f"{part} {decade}s"
    wording = rng.choice(("around the {}", "in the {}")).format(period)
    return wording, (decade + lo, decade + hi)


def qualitative_constraint(rel: str, band: str) -> tuple[str, dict]:
    """("won many awards", {"ge": 6}) and the like."""
    return QUALITATIVE[(rel, band)]


def passes(value: int, pred: dict) -> bool:
    if "ge" in pred:
        return value >= pred["ge"]
    if "le" in pred:
        return value <= pred["le"]
    lo, hi = pred["range"]
    return lo <= value <= hi
