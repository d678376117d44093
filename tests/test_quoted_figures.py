"""Every interval the README and the docs quote ("+2.8 [0.9, 4.7]", across a line break, with a `%` or `points`
before the bracket) is one a committed result file under docs/results holds, at the precision quoted: a figure
left behind when a report is regenerated, or copied wrong, fails here rather than reaching a reader. It checks
that some result file holds it, not that it is the one the sentence cites.

A result file (a report or a JSON; not the hand-written docs/results/README.md, which is checked as a page) holds
an interval as `x [lo, hi]` or `x ± h` (reports), as {value or mean, lo, hi} or as a list [x, lo, hi] (JSON). Dated
log entries (a paragraph opening
`**2026-12-07, 09:45.**`) give the figures of their time and are not checked; the few figures measured without a
committed output are listed below, each with why. Every page is held to its `x ± h` figures as well (with a unit
between, `22.4% ± 3.1`), but the three pages of PLUS_MINUS_FROM_LOGS, whose `±` figures come from logs of earlier
builds and readiness checks that were not kept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), RESULTS / "README.md"]
# Pages whose `x ± h` figures are not checked (their `x [lo, hi]` still are), and why.
PLUS_MINUS_FROM_LOGS = {
    "docs/results-history.md": "earlier builds' comparisons and probes, from run folders that were not kept",
    "docs/testbed.md": "the testbed builds' readiness and probe figures, from logs that were not kept",
    "docs/testbed-status.md": "the shipped base policy's readiness line (scripts/research/readiness.py), printed, not written",
}

NUMBER = r"[+\-−–]?\d+(?:\.\d+)?"
# `x [lo, hi]`, across a line break, with a unit between (`42.3% [39.2, 45.3]`, `+2.8 points [2.2, 3.5]`)
INTERVAL = re.compile(rf"(?<![\w.])({NUMBER})(?:%| points)?\s+\[({NUMBER}),\s+({NUMBER})\]")
PLUS_MINUS = re.compile(rf"(?<![\w.])({NUMBER})(?:%| points)?\s+±\s+({NUMBER})")
DATED = re.compile(r"\*\*\d{4}-\d{2}-\d{2}, \d{2}:\d{2}\.\*\*")

# (page, figure as quoted): why no committed file holds it.
NOT_IN_A_FILE = {
    ("docs/fidelity.md", "0.07 [0.04, 0.11]"): "the critic's row before the instrument applied a step's whitening "
                                               "(2026-12-05); its file was measured again",
    ("docs/fidelity.md", "0.53 [0.46, 0.59]"): "the same superseded row",
    ("docs/fidelity.md", "0.01 [−0.04, 0.07]"): "the same superseded row (a report's ± figure held it by chance "
                                                "until 2026-12-07)",
}


def value(text: str) -> float:
    return float(text.replace("−", "-").replace("–", "-"))


def decimals(text: str) -> int:
    return len(text.partition(".")[2])


def _json_intervals(node, found: list) -> None:
    if isinstance(node, dict):
        centre = next((node[k] for k in ("value", "mean", "rho") if _is_number(node.get(k))), None)
        if centre is not None and _is_number(node.get("lo")) and _is_number(node.get("hi")):
            found.append((centre, node["lo"], node["hi"]))
        for child in node.values():
            _json_intervals(child, found)
    elif isinstance(node, list):
        if len(node) == 3 and all(map(_is_number, node)) and node[1] <= node[0] <= node[2]:
            found.append(tuple(node))
        for child in node:
            _json_intervals(child, found)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def committed_intervals() -> list[tuple[float, float, float]]:
    found: list = []
    for path in sorted(RESULTS.rglob("*")):
        if path.name == "README.md":  # written by hand: a page that quotes, not a result
            continue
        if path.suffix == ".md":
            text = path.read_text(encoding="utf-8")
            found += [tuple(map(value, m.groups())) for m in INTERVAL.finditer(text)]
            for m in PLUS_MINUS.finditer(text):
                centre, half = value(m.group(1)), value(m.group(2))
                found.append((centre, centre - half, centre + half))
        elif path.suffix == ".json":
            _json_intervals(json.loads(path.read_text(encoding="utf-8")), found)
    return found


def undated_paragraphs(path: Path) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")) if not DATED.match(p.lstrip())]


def quoted_intervals(path: Path) -> list[str]:
    """The intervals a page quotes, outside its dated log entries."""
    return [" ".join(m.group(0).split()) for p in undated_paragraphs(path) for m in INTERVAL.finditer(p)]


def quoted_plus_minus(path: Path) -> list[str]:
    """The `x ± h` a page quotes, written as the interval `x [x − h, x + h]` at the places quoted."""
    found = []
    for m in (m for p in undated_paragraphs(path) for m in PLUS_MINUS.finditer(p)):
        centre, half = value(m.group(1)), value(m.group(2))
        places = max(map(decimals, m.groups()))
        found.append(f"{centre:.{places}f} [{centre - half:.{places}f}, {centre + half:.{places}f}]")
    return found


def held(figure: str, intervals) -> bool:
    parts = INTERVAL.fullmatch(figure).groups()
    places = max(map(decimals, parts))
    wanted = [value(p) for p in parts]
    half_unit = 0.5 * 10 ** -places + 1e-9
    return any(all(abs(got - want) <= half_unit for got, want in zip(interval, wanted)) for interval in intervals)


@pytest.fixture(scope="module")
def intervals():
    return committed_intervals()


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_interval_a_page_quotes_is_in_a_committed_result_file(page, intervals):
    name = str(page.relative_to(ROOT))
    quoted = quoted_intervals(page) + (quoted_plus_minus(page) if name not in PLUS_MINUS_FROM_LOGS else [])
    missing = [f for f in quoted if (name, f) not in NOT_IN_A_FILE and not held(f, intervals)]
    assert not missing, f"{name} quotes intervals no file under docs/results holds (regenerate, correct or list " \
                        f"them in NOT_IN_A_FILE with why): {missing}"


def test_the_figures_listed_as_in_no_file_are_still_quoted_and_still_in_none(intervals):
    stale = [key for key in NOT_IN_A_FILE if key[1] not in quoted_intervals(ROOT / key[0]) or held(key[1], intervals)]
    assert not stale, f"NOT_IN_A_FILE lists figures a page no longer quotes or a file now holds: {stale}"
    gone = [page for page in PLUS_MINUS_FROM_LOGS if not (ROOT / page).is_file()]
    assert not gone, f"PLUS_MINUS_FROM_LOGS names pages that no longer exist: {gone}"


def test_a_figure_is_held_only_at_the_precision_quoted():
    """By hand: 2.84 [0.93, 4.71] is 2.8 [0.9, 4.7] quoted to one place, not 2.9 [0.9, 4.7]; a ± half-width
    gives its own interval; a stale figure is caught."""
    intervals = [(2.84, 0.93, 4.71), (1.0, 1.0 - 0.5, 1.0 + 0.5)]
    assert held("+2.8 [0.9, 4.7]", intervals) and held("2.84 [0.93, 4.71]", intervals)
    assert not held("2.9 [0.9, 4.7]", intervals) and not held("2.841 [0.93, 4.71]", intervals)
    assert held("1.0 [0.5, 1.5]", intervals) and not held("−1.0 [0.5, 1.5]", intervals)
    found: list = []
    _json_intervals({"a": {"value": 0.214, "lo": 0.125, "hi": 0.303}, "b": [[0.04, 0.01, 0.07], [3, 2]]}, found)
    assert found == [(0.214, 0.125, 0.303), (0.04, 0.01, 0.07)]


def test_a_dated_log_entry_is_not_checked(tmp_path):
    page = tmp_path / "log.md"
    page.write_text("Now 1.0 [0.5, 1.5], +3.1 ± 1.6.\n\n**2026-12-07, 09:45.** Then 9.9 [9.0, 9.9], 2 ± 1.\n",
                    encoding="utf-8")
    assert quoted_intervals(page) == ["1.0 [0.5, 1.5]"]
    assert quoted_plus_minus(page) == ["3.1 [1.5, 4.7]"]


def test_a_figure_is_found_across_a_line_break_with_its_unit_and_an_en_dash(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("at 42.3% [39.2,\n45.3], +2.8 points [2.2, 3.5] and –1.0\n[–1.5, –0.5]; seeds [0, 1]\n",
                    encoding="utf-8")
    figures = quoted_intervals(page)
    assert figures == ["42.3% [39.2, 45.3]", "+2.8 points [2.2, 3.5]", "–1.0 [–1.5, –0.5]"]
    assert held(figures[2], [(-1.04, -1.46, -0.5)]) and not held(figures[2], [(1.0, 1.5, 0.5)])


def test_a_plus_minus_with_its_unit_between_is_checked(tmp_path):
    """By hand: 22.4% ± 3.1 is the interval 22.4 [19.3, 25.5]; +2.0 points ± 0.55 is 2.00 [1.45, 2.55]."""
    page = tmp_path / "page.md"
    page.write_text("at 22.4% ± 3.1 and +2.0 points ± 0.55\n", encoding="utf-8")
    assert quoted_plus_minus(page) == ["22.4 [19.3, 25.5]", "2.00 [1.45, 2.55]"]
