"""Splits share no question and no anchor, are deterministic, and hold every template."""

from __future__ import annotations

import pytest

from agentcredit.world.config import TEMPLATES, WorldConfig
from agentcredit.world.generator import generate_world
from agentcredit.world.splits import split_questions
from agentcredit.world.types import Question


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(seed=5, num_documents=150, num_questions=300))


def test_splits_partition_questions_and_anchors(world):
    splits = split_questions(world, 0.2, 0.2, seed=0)
    ids = [q.id for qs in splits.values() for q in qs]
    assert sorted(ids) == sorted(q.id for q in world.questions)  # every question exactly once
    anchors = {name: {q.anchor for q in qs} for name, qs in splits.items()}
    assert not anchors["train"] & anchors["val"]
    assert not anchors["train"] & anchors["test"]
    assert not anchors["val"] & anchors["test"]


def test_splits_are_deterministic_and_seeded(world):
    a = split_questions(world, seed=0)
    assert a == split_questions(world, seed=0)
    assert a != split_questions(world, seed=1)


def test_split_sizes_follow_fractions_and_cover_templates(world):
    splits = split_questions(world, 0.2, 0.2, seed=0)
    n = len(world.questions)
    for name in ("val", "test"):
        assert abs(len(splits[name]) - 0.2 * n) <= 0.06 * n
        assert {q.template for q in splits[name]} == set(TEMPLATES)


def test_bad_fractions_are_rejected(world):
    with pytest.raises(ValueError, match="val_fraction"):
        split_questions(world, 0.6, 0.5)


def test_questions_without_anchor_split_by_id():
    qs = [Question(f"u{i}", f"q{i}?", "a", "USER") for i in range(50)]
    splits = split_questions(qs, 0.2, 0.2)
    assert sum(len(s) for s in splits.values()) == 50 and all(splits.values())
