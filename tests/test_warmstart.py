"""Warm-start data: auxiliary worlds add questions, and each is played in its own corpus."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from tiny_runs import TINY

from agentcredit.testbed.base_policy import base_policy_key, training_sources
from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.run.compose import base_policy_settings, build_components
from agentcredit.common.configs import compose_config
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
    assert [q for _, q in training_sources(base_policy_settings(cfg), components, 0)] == list(train)

    sources = training_sources(base_policy_settings(cfg), components, 2)
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
    sources = training_sources(base_policy_settings(cfg), components, 1)[len(train):][:5]
    rewards = []
    for worker, question in sources:
        env = worker.env_factory()
        env.reset()
        episode = solve(question, env)
        turns = [render_tool_call(a) for a in episode.actions] + [render_answer(episode.answer)]
        rewards.append(worker.replay(question, turns).reward)
    assert all(r >= 1.0 for r in rewards), rewards  # correct (1.0) plus the format score


def test_bad_aux_worlds_is_a_clear_error():
    from agentcredit.testbed.warmstart import WarmStartConfig

    with pytest.raises(ValueError, match="warmstart.aux_worlds must be an integer >= 0, got -1"):
        WarmStartConfig(aux_worlds=-1)


RL_SETTINGS = ["data.prompts_per_step=3", "data.n_val=7", "data.n_test=9", "credit=trace", "trainer.max_steps=9",
               "train.lr=0.5", "model.lora.enabled=true", "rollout.temperature=0.7", "rollout.group_size=4",
               "env.reward.format_score=0.2", "warmstart.rebuild=true", "warmstart.checkpoint_every=7", "seed=3",
               "model.rl_lr=0.1", "logger=csv"]
BASE_SETTINGS = ["warmstart.steps=7", "warmstart.aux_worlds=1", "warmstart.lr=0.1", "model.hidden_size=96",
                 "env.retriever=dense", "env.summary_chars=40", "rollout.max_tool_turns=30", "data.val_fraction=0.3",
                 "data.split_seed=1"]


def test_the_key_covers_what_the_base_policy_depends_on_and_no_rl_setting(setup):
    cfg, components = setup
    key = base_policy_key(base_policy_settings(cfg), components)
    for override in RL_SETTINGS:  # e.g. data.prompts_per_step must never start a rebuild
        assert base_policy_key(base_policy_settings(compose_config([*TINY, *SMALL_WORLD, override])), components) == key, override
    keys = {base_policy_key(base_policy_settings(compose_config([*TINY, *SMALL_WORLD, o])), components) for o in BASE_SETTINGS}
    assert len(keys) == len(BASE_SETTINGS) and key not in keys


def test_a_float64_run_starts_from_the_float32_policy_and_never_builds_one_under_its_key(setup, tmp_path, monkeypatch):
    import agentcredit.testbed.base_policy as bp
    from agentcredit.common.configs import ConfigError

    cfg, components = setup
    double = compose_config([*TINY, *SMALL_WORLD, "model.dtype=float64"])
    assert bp.base_policy_key(base_policy_settings(double), components) == bp.base_policy_key(base_policy_settings(cfg), components)
    assert bp.base_policy_key(base_policy_settings(compose_config([*TINY, *SMALL_WORLD, "model.dtype=bfloat16"])),
                              components) != bp.base_policy_key(base_policy_settings(cfg), components)
    monkeypatch.setattr(bp, "SHIPPED", tmp_path / "none")
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path / "cache"))
    rebuild = compose_config([*TINY, *SMALL_WORLD, "model.dtype=float64", "warmstart.rebuild=true"])
    with pytest.raises(ConfigError, match=r"^the base policy is built in float32 and float64 runs upcast it: .*model\.dtype=float32`$"):
        bp.ensure_base_policy(base_policy_settings(rebuild), components, progress=False)
    key = bp.base_policy_key(base_policy_settings(cfg), components)
    assert not (tmp_path / "cache" / "base_policy" / key).exists()  # nothing written under the float32 key


SHORT_BUILD = ["warmstart.episodes=6", "warmstart.steps=3", "warmstart.window_steps=2", "warmstart.window_mix=2",
               "warmstart.batch_size=2", "warmstart.window_batch_size=4", "warmstart.aux_worlds=0", "warmstart.warmup_steps=1"]


def test_a_short_build_run_twice_with_the_same_seed_gives_identical_weights(setup):
    import torch

    from agentcredit.testbed.base_policy import build_base_policy

    cfg, components = setup
    cfg = compose_config([*TINY, *SMALL_WORLD, *SHORT_BUILD])
    initial = {k: v.clone() for k, v in components.policy.state_dict().items()}
    weights = []
    for _ in range(2):
        components.policy.load_state_dict(initial)
        info = build_base_policy(base_policy_settings(cfg), components, progress=False)
        weights.append({k: v.clone() for k, v in components.policy.state_dict().items()})
    components.policy.load_state_dict(initial)
    assert info["steps"] == 3 and info["examples"] == 6
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in initial)
    assert any(not torch.equal(weights[0][k], initial[k]) for k in initial)  # the build did train


def test_runs_load_the_shipped_policy_by_key_and_otherwise_say_how_to_rebuild(setup, tmp_path, monkeypatch):
    import json

    import torch

    import agentcredit.testbed.base_policy as bp
    from agentcredit.common.configs import ConfigError

    cfg, components = setup
    cfg = compose_config([*TINY, *SMALL_WORLD, *SHORT_BUILD])
    initial = {k: v.clone() for k, v in components.policy.state_dict().items()}
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(bp, "SHIPPED", shipped)
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path / "cache"))
    key = bp.base_policy_key(base_policy_settings(cfg), components)
    marked = {k: torch.full_like(v, 0.5) for k, v in initial.items()}
    shipped.mkdir()
    torch.save(marked, shipped / bp.WEIGHTS)
    (shipped / bp.INFO).write_text(json.dumps({"key": key}))
    try:
        assert bp.ensure_base_policy(base_policy_settings(cfg), components, progress=False)["source"] == "shipped"
        assert all(torch.equal(v, marked[k]) for k, v in components.policy.state_dict().items())
        other = compose_config([*TINY, *SMALL_WORLD, *SHORT_BUILD, "warmstart.steps=4"])
        with pytest.raises(ConfigError) as error:
            bp.ensure_base_policy(base_policy_settings(other), components, progress=False)
        message = str(error.value)
        assert "\n" not in message and "built for other settings" in message
        assert "python scripts/build_base_policy.py" in message and "warmstart.rebuild=true" in message
        rebuild = compose_config([*TINY, *SMALL_WORLD, *SHORT_BUILD, "warmstart.steps=4", "warmstart.rebuild=true"])
        components.policy.load_state_dict(initial)
        assert bp.ensure_base_policy(base_policy_settings(rebuild), components, progress=False)["source"] == "built"
        components.policy.load_state_dict(initial)
        assert bp.ensure_base_policy(base_policy_settings(rebuild), components, progress=False)["source"] == "cache"  # built once
        (shipped / bp.WEIGHTS).write_bytes(b"damaged")
        with pytest.raises(ConfigError, match=r"base policy weights .*policy.pt cannot be loaded"):
            bp.ensure_base_policy(base_policy_settings(cfg), components, progress=False)
    finally:
        components.policy.load_state_dict(initial)


class _LimitedWorker:
    """Replays turn texts like RolloutWorker.replay, ending at `limit` tool calls without an answer."""

    def __init__(self, limit: int):
        self.limit = limit

    def replay(self, question, turns):
        calls = [t for t in turns if t.startswith("<tool_call>")]
        reason = "answer" if len(calls) < self.limit else "tool_limit"
        return SimpleNamespace(turns=list(turns), finish_reason=reason)


def test_episodes_cut_off_by_the_turn_limit_are_played_again_without_find_then_without_added_calls():
    from agentcredit.testbed.warmstart import WarmStartConfig, build_examples
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


def test_the_shipped_base_policy_matches_the_default_settings():
    # `make train` loads testbed/shipped/ by key; a changed default (world, browser view, recipe, model)
    # must come with a rebuild (python scripts/build_base_policy.py), or every default run stops at start
    import agentcredit.testbed.base_policy as bp
    from agentcredit.checks.validation import prepare_config

    cfg = prepare_config(compose_config([]))
    key = bp.base_policy_key(base_policy_settings(cfg), build_components(cfg, progress=False, base_policy=False))
    shipped = bp.read_info(bp.SHIPPED)
    assert shipped is not None and shipped["key"] == key, (
        f"shipped base policy {shipped and shipped.get('key')} was built for other settings than the defaults' {key}")


def test_a_build_can_continue_a_base_policy_with_its_tokens_and_is_keyed_by_it(setup, tmp_path, monkeypatch):
    """warmstart.init_from (data=testbed_long's curriculum stage): the tiny model reads with the base policy's
    tokenizer, starts from its weights, and the key follows the base policy's own key."""
    import json

    import torch

    import agentcredit.testbed.base_policy as bp
    from agentcredit.common.configs import ConfigError
    from agentcredit.checks.validation import prepare_config

    cfg, components = setup
    initial = {k: v.clone() for k, v in components.policy.state_dict().items()}
    stage1 = tmp_path / "stage1"
    marked = {k: torch.full_like(v, 0.25) for k, v in initial.items()}
    components.policy.load_state_dict(marked)
    bp.save_base_policy(components.policy, components.tokenizer, {"key": "first"}, stage1)
    components.policy.load_state_dict(initial)
    # another world's questions fit other merges: the stage reads with stage 1's tokens, not its own world's
    second = [*TINY, *SMALL_WORLD, *SHORT_BUILD, "model.warm_start=true", "data.world.seed=7"]
    own = build_components(compose_config(second), progress=False, base_policy=False)
    assert own.tokenizer.get_vocab() != components.tokenizer.get_vocab()
    cfg2 = compose_config([*second, f"warmstart.init_from={stage1}"])
    continued = build_components(cfg2, progress=False, base_policy=False)
    assert continued.tokenizer.get_vocab() == components.tokenizer.get_vocab()
    key = bp.base_policy_key(base_policy_settings(cfg2), continued)
    bp.start_from(continued, stage1)
    assert all(torch.equal(v, marked[k]) for k, v in continued.policy.state_dict().items())
    (stage1 / bp.INFO).write_text(json.dumps({"key": "rebuilt"}))
    assert bp.base_policy_key(base_policy_settings(cfg2), continued) != key  # a rebuilt first stage means a new second stage
    with pytest.raises(ConfigError, match="another vocabulary") as error:
        bp.start_from(own, stage1)
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match=r"warmstart.init_from='/nowhere': /nowhere holds no base policy"):
        prepare_config(compose_config([*TINY, "warmstart.init_from=/nowhere"]))


def test_runs_find_a_preset_base_policy_in_its_shipped_subfolder(setup, tmp_path, monkeypatch):
    import json

    import torch

    import agentcredit.testbed.base_policy as bp

    cfg, components = setup
    cfg = compose_config([*TINY, *SMALL_WORLD, *SHORT_BUILD])
    initial = {k: v.clone() for k, v in components.policy.state_dict().items()}
    monkeypatch.setattr(bp, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "shipped").mkdir()
    (tmp_path / "shipped" / bp.INFO).write_text(json.dumps({"key": "build E"}))
    marked = {k: torch.full_like(v, 0.75) for k, v in initial.items()}
    components.policy.load_state_dict(marked)
    bp.save_base_policy(components.policy, components.tokenizer, {"key": bp.base_policy_key(base_policy_settings(cfg), components)},
                        tmp_path / "shipped" / "some_preset")
    components.policy.load_state_dict(initial)
    try:
        assert bp.shipped_folders() == [tmp_path / "shipped", tmp_path / "shipped" / "some_preset"]
        assert bp.ensure_base_policy(base_policy_settings(cfg), components, progress=False)["source"] == "shipped"
        assert all(torch.equal(v, marked[k]) for k, v in components.policy.state_dict().items())
    finally:
        components.policy.load_state_dict(initial)


def test_the_build_script_ships_a_preset_beside_build_e():
    import importlib.util
    from pathlib import Path

    import agentcredit.testbed.base_policy as bp

    spec = importlib.util.spec_from_file_location("build_base_policy", Path(__file__).parents[1] / "scripts" / "build_base_policy.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.shipped_folder([]) == bp.SHIPPED
    assert script.shipped_folder(["warmstart.steps=3", "data=testbed"]) == bp.SHIPPED
    assert script.shipped_folder(["data=testbed_long"]) == bp.SHIPPED / "testbed_long"


def test_the_shipped_long_base_policy_matches_the_long_preset():
    # data=testbed_long loads testbed/shipped/testbed_long/ by key, and its key covers build E's own key:
    # a changed preset, or a rebuilt build E, must come with `python scripts/build_base_policy.py data=testbed_long`
    import agentcredit.testbed.base_policy as bp
    from agentcredit.checks.validation import prepare_config

    cfg = prepare_config(compose_config(["data=testbed_long"]))
    key = bp.base_policy_key(base_policy_settings(cfg), build_components(cfg, progress=False, base_policy=False))
    shipped = bp.read_info(bp.SHIPPED / "testbed_long")
    assert shipped is not None and shipped["key"] == key, (
        f"the long base policy {shipped and shipped.get('key')} was built for other settings than data=testbed_long's {key}")
    assert 0.10 <= shipped["evaluation"]["success"] <= 0.30 and shipped["evaluation"]["well_formed_turns"] >= 0.95
