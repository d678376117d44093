"""How the comparison's reports write a figure in points and its interval, shared by every section so that one
number reads the same wherever it appears."""

from __future__ import annotations


def points(x: float, sign: bool = False) -> str:
    """`x` with one decimal; a leading sign when `sign`; never "-0.0" or "+0.0" for a value that rounds to zero."""
    text = f"{x + 0.0:+.1f}" if sign else f"{x + 0.0:.1f}"
    return text.replace("-0.0", "0.0").replace("+0.0", "0.0")


def points_interval(ci: tuple[float, float] | None) -> str:
    """"[lo, hi]", or "–" when there is no interval (a single seed or question)."""
    return "–" if ci is None else f"[{points(ci[0])}, {points(ci[1])}]"


def points_cell(mean: float, ci: tuple[float, float] | None, sign: bool = False) -> str:
    """A table cell: the figure, followed by its interval when there is one."""
    return points(mean, sign) if ci is None else f"{points(mean, sign)} {points_interval(ci)}"
