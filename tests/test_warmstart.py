"""Warm-start data: auxiliary worlds add questions, and each is played in its own corpus."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from tiny_runs import TINY

from agentcredit.agent.base_policy import base_policy_key, training_sources
from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.components import build_components
from agentcredit.evaluate import compose_config
from agentcredit.world.cache import load_or_generate_world
from agentcredit.world.oracle import solve

SMALL_WORLD = ["data.world.num_documents=80", "data.world.num_questions=60",
               "rollout.max_tool_turns=40", "rollout.max_turn_tokens=256", "rollout.max_obs_tokens=4096"]


@pytest.fixture(scope="module")
def setup():
    cfg = compose_config([*TINY, *SMALL_WORLD])
    return cfg, build_components(cfg)


def test_aux_worlds_add_every_question_of_other_seeds(setup):
    cfg, components = setup
    train = components.datamodule.split_questions("train")
    assert [q for _, q in training_sources(cfg, components, 0)] == list(train)

    sources = training_sources(cfg, components, 2)
    base = components.datamodule.world_config
    aux = [load_or_generate_world(replace(base, seed=base.seed + i)) for i in (1, 2)]
    assert len(sources) == len(train) + sum(len(w.questions) for w in aux)
    main_texts = {q.text for q in components.datamodule.world.questions}
    aux_texts = [q.text for _, q in sources[len(train):]]
    assert aux_texts == [q.text for w in aux for q in w.questions]
    assert any(t not in main_texts for t in aux_texts)  # other worlds, not copies of this one
    assert len({id(w) for w, _ in sources}) == 3  # one worker (environment) per world


def test_aux_questions_are_solved_in_their_own_world(setup):
    cfg, components = setup
    train = components.datamodule.split_questions("train")
    sources = training_sources(cfg, components, 1)[len(train):][:5]
    rewards = []
    for worker, question in sources:
        env = worker.env_factory()
        env.reset()
        episode = solve(question, env)
        turns = [render_tool_call(a) for a in episode.actions] + [render_answer(episode.answer)]
        rewards.append(worker.replay(question, turns).reward)
    assert all(r >= 1.0 for r in rewards), rewards  # correct (1.0) plus the format score


def test_bad_aux_worlds_is_a_clear_error(setup):
    cfg, components = setup
    with pytest.raises(ValueError, match="aux_worlds must be >= 0"):
        training_sources(cfg, components, -1)


def test_cache_key_keeps_old_entries_at_the_default_and_changes_with_aux_worlds(setup):
    cfg, components = setup
    plain_key = base_policy_key(cfg, components)
    with_aux = compose_config([*TINY, *SMALL_WORLD, "warmstart.aux_worlds=2"])
    assert base_policy_key(with_aux, components) != plain_key
    legacy = compose_config([*TINY, *SMALL_WORLD, "~warmstart.aux_worlds"])
    assert base_policy_key(legacy, components) == plain_key


OFF = ["warmstart.window_steps=0", "warmstart.window_mix=0", "warmstart.goal_notes=false",
       "warmstart.guess_by_kind=false", "warmstart.answer_loss_weight=1.0"]
LATER_KEYS = ("window_steps", "window_mix", "window_kind", "window_batch_size", "copy_context_tokens", "goal_notes",
              "guess_by_kind", "answer_loss_weight")


def test_cache_key_leaves_out_later_settings_while_they_are_off(setup):
    cfg, components = setup
    off_key = base_policy_key(compose_config([*TINY, *SMALL_WORLD, *OFF]), components)
    # A config from before these settings existed keeps its cache entry: with all of them off the key is the same.
    legacy = compose_config([*TINY, *SMALL_WORLD, *(f"~warmstart.{k}" for k in LATER_KEYS)])
    assert base_policy_key(legacy, components) == off_key
    # Window sizes and kind count only while windows are on.
    for extra in ("warmstart.window_kind=copy", "warmstart.window_batch_size=8", "warmstart.copy_context_tokens=32"):
        assert base_policy_key(compose_config([*TINY, *SMALL_WORLD, *OFF, extra]), components) == off_key
    # Each setting changes the key once it is on; the default (all on) differs from all off.
    keys = {base_policy_key(cfg, components), off_key}
    for extra in ("warmstart.window_steps=10", "warmstart.window_mix=8", "warmstart.goal_notes=true",
                  "warmstart.guess_by_kind=true", "warmstart.answer_loss_weight=2.0"):
        keys.add(base_policy_key(compose_config([*TINY, *SMALL_WORLD, *OFF, extra]), components))
    assert len(keys) == 7


def test_copy_context_counts_only_for_copy_windows(setup):
    _, components = setup
    turn = [*TINY, *SMALL_WORLD, "warmstart.window_kind=turn"]
    assert base_policy_key(compose_config(turn), components) == base_policy_key(
        compose_config([*turn, "warmstart.copy_context_tokens=32"]), components)
    copy = [*TINY, *SMALL_WORLD, "warmstart.window_kind=copy"]
    assert len({base_policy_key(compose_config(turn), components), base_policy_key(compose_config(copy), components),
                base_policy_key(compose_config([*copy, "warmstart.copy_context_tokens=32"]), components)}) == 3


class _LimitedWorker:
    """Replays turn texts like RolloutWorker.replay, ending at `limit` tool calls without an answer."""

    def __init__(self, limit: int):
        self.limit = limit

    def replay(self, question, turns):
        calls = [t for t in turns if t.startswith("<tool_call>")]
        reason = "answer" if len(calls) < self.limit else "tool_limit"
        return SimpleNamespace(turns=list(turns), finish_reason=reason)


def test_episodes_cut_off_by_the_turn_limit_are_played_again_without_find_then_without_added_calls():
    from agentcredit.agent.warmstart import WarmStartConfig, build_examples
    from agentcredit.env.types import ToolCall

    search = ToolCall("browser.search", {"query": "Ada Fenn Lovelace"})
    page = [search, ToolCall("browser.open", {"id": 0})]
    find = ToolCall("browser.find", {"pattern": "founder"})
    asked = []

    def solve(worker, question, use_find):
        asked.append(use_find)
        return (page + [find]) * 2 if use_find else page * 2, "Ada"

    cfg = WarmStartConfig(episodes=3, p_use_find=1.0, p_vague_query=0.0, p_wrong_open=0.0, p_premature_answer=0.0)
    worker = _LimitedWorker(limit=5)  # 6 calls with find, 4 without
    examples = build_examples([(worker, "q")], solve, cfg, ["guess"], progress=False)
    assert [e.finish_reason for e in examples] == ["answer"] * 3
    assert asked == [True, False] * 3
    assert all(len(e.turns) == 5 and "browser.find" not in "".join(e.turns) for e in examples)

    # Vague queries before every search push even the find-less episode over the limit: the third
    # attempt drops the added calls and keeps the oracle's own.
    asked.clear()
    vague = WarmStartConfig(episodes=2, p_use_find=1.0, p_vague_query=1.0, p_wrong_open=0.0, p_premature_answer=0.0)
    examples = build_examples([(worker, "q")], solve, vague, ["guess"], progress=False)
    assert asked == [True, False] * 2  # the third attempt reuses the find-less episode
    assert [len(e.turns) for e in examples] == [5, 5] and all(e.finish_reason == "answer" for e in examples)

    # Where no attempt fits, the last one is kept (it is still a well-formed demonstration).
    asked.clear()
    examples = build_examples([(_LimitedWorker(limit=2), "q")], solve, cfg, ["guess"], progress=False)
    assert asked == [True, False] * 3 and [e.finish_reason for e in examples] == ["tool_limit"] * 3

    # An episode drawn without find asks the oracle once for all three attempts.
    asked.clear()
    plain = WarmStartConfig(episodes=2, p_use_find=0.0, p_vague_query=1.0, p_wrong_open=0.0, p_premature_answer=0.0)
    examples = build_examples([(_LimitedWorker(limit=2), "q")], solve, plain, ["guess"], progress=False)
    assert asked == [False] * 2 and len(examples) == 2
