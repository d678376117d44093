"""Outcome reward: normalisation, answer-span extraction, format validity and the score."""

import pytest

from agentcredit.env.reward import (
    answer_is_correct,
    answer_is_well_formed,
    extract_answer,
    normalize_answer,
    score_answer,
)


@pytest.mark.parametrize("raw,expected", [
    ("The Eiffel Tower", "eiffel tower"),
    ("  an   apple, a pear  ", "apple pear"),
    ("U.S.A.", "usa"),
    ("mid-2010s", "mid2010s"),
    ("1,024", "1024"),
    ("Théâtre  «Royal»", "théâtre royal"),  # Unicode punctuation goes too
    ("Anthem of the Sea", "anthem of sea"),  # "an" inside a word stays, the article goes
    ("THE", ""),
    ("ﬁve", "five"),  # NFKC folds the ligature
    ("$5 + tax", "5 tax"),
])
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


@pytest.mark.parametrize("text,expected", [
    ("I think <answer> Paris </answer>", "Paris"),
    ("<answer>a\nb</answer>", "a\nb"),
    ("<answer>first</answer> then <answer>second</answer>", "second"),
    ("<answer>unclosed", None),
    ("no tags", None),
    ("", None),
    (None, None),
    ("<answer></answer>", ""),
])
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("<answer>Paris</answer>", True),
    ("reasoning... <answer>Paris</answer>\n", True),
    ("<answer>   </answer>", False),
    ("<answer>a</answer><answer>b</answer>", False),
    ("</answer>x<answer>", False),
    ("<answer>a <answer>b</answer>", False),
    ("<ANSWER>Paris</ANSWER>", False),
    (None, False),
])
def test_answer_is_well_formed(text, expected):
    assert answer_is_well_formed(text) is expected


@pytest.mark.parametrize("text,gold,expected", [
    ("<answer>The Eiffel Tower.</answer>", "eiffel tower", 1.1),  # correct + well formed
    ("<answer>Louvre</answer>", "eiffel tower", 0.1),  # wrong, well formed
    ("<answer>x</answer><answer>Eiffel Tower</answer>", "Eiffel Tower", 1.0),  # correct, two blocks
    ("Eiffel Tower", "Eiffel Tower", 0.0),  # no block at all
    (None, "Eiffel Tower", 0.0),  # rollout ended without an answer
    ("<answer>the</answer>", "The", 0.1),  # nothing left after normalisation is never correct
    ("<answer>1,024</answer>", ["1024", "one thousand twenty-four"], 1.1),  # aliases
])
def test_score_answer_defaults(text, gold, expected):
    assert score_answer(text, gold) == pytest.approx(expected)


def test_score_answer_weights_are_configurable():
    assert score_answer("<answer>Oslo</answer>", "oslo", correct_score=2.0, format_score=0.0) == 2.0
    assert score_answer("<answer>Rome</answer>", "oslo", correct_score=2.0, format_score=0.5) == 0.5
    assert answer_is_correct("<answer>OSLO!</answer>", "Oslo") is True
