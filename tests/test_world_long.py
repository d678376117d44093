"""The long-horizon testbed (data=testbed_long): the testbed's pages with 4-6-hop bridge chains, its rollout limit
and the base-policy recipe it carries (a second stage that continues build E with build E's tokens)."""

from __future__ import annotations

from collections import Counter

import pytest
from test_scripts import run_json

from agentcredit.common.configs import compose_config, plain
from agentcredit.world.config import MAX_HOPS, WorldConfig
from agentcredit.world.generator import generate_world


def long_world(**knobs):
    world = plain(compose_config(["data=testbed_long"]).data.world)
    return WorldConfig.from_mapping({**world, "num_documents": 120, "num_questions": 60, **knobs})


def test_the_long_preset_is_the_testbed_world_with_longer_chains_and_more_tool_turns():
    short, long = compose_config([]), compose_config(["data=testbed_long"])
    assert (long.data.world.hops_min, long.data.world.hops_max) == (4, 6)
    assert plain(long.data.world) == {**plain(short.data.world), "hops_min": 4, "hops_max": 6, "num_questions": 5200}
    assert plain(long.env) == plain(short.env)  # the same browser view
    assert (short.rollout.max_tool_turns, long.rollout.max_tool_turns) == (12, 24)
    assert long.warmstart.init_from == "shipped" and short.warmstart.init_from is None
    # the command line still wins over the preset
    assert compose_config(["data=testbed_long", "rollout.max_tool_turns=30"]).rollout.max_tool_turns == 30
    assert compose_config(["data=testbed_long", "data.world.hops_max=5"]).data.world.hops_max == 5


def test_chains_of_up_to_eight_hops_are_generated_and_every_hop_is_a_distinct_page():
    world = generate_world(long_world(hops_min=6, hops_max=MAX_HOPS))
    hops = Counter(q.hops for q in world.questions)
    assert set(hops) <= set(range(6, MAX_HOPS + 1)) and hops[MAX_HOPS] > 0
    for q in world.questions:
        assert q.hops == len(q.doc_ids) == q.text.count(" > ")  # "X > cue > ... > cue?": one cue per page read
    with pytest.raises(ValueError, match=f"hops_max <= {MAX_HOPS}"):
        WorldConfig(hops_max=MAX_HOPS + 1)


def test_the_same_seed_gives_the_same_pages_as_build_e():
    """Why the long base policy may continue build E: its world differs only in its questions."""
    short = generate_world(long_world(hops_min=2, hops_max=3))
    long = generate_world(long_world())
    assert [d.text for d in short.documents] == [d.text for d in long.documents]
    assert {q.text for q in short.questions}.isdisjoint(q.text for q in long.questions)


def test_the_long_preset_passes_the_world_check():
    out = run_json("-m", "agentcredit.world.check", "--preset", "testbed_long", "--n", "40", "--split", "val",
                   "--retriever", "bm25")
    assert out["n"] == 40 and out["oracle_success"] >= 0.95 and out["single_doc_success"] <= 0.05
    assert out["mean_tool_calls"] > 10 and out["max_tool_calls"] <= 24  # within the preset's tool-turn limit
