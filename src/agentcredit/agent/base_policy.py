"""The tiny testbed's base search policy: built once by warm start, then cached on disk.

The cache key covers everything the result depends on (world, environment, model and warm-start
settings, and the tokenizer), so a changed setting builds a new base policy instead of silently
reusing a stale one.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace

import torch

from agentcredit.agent.copy_windows import copy_windows, turn_windows
from agentcredit.agent.rollout import RolloutWorker
from agentcredit.agent.warmstart import WarmStartConfig, build_examples, train_sft
from agentcredit.paths import cache_dir, stable_hash
from agentcredit.world.answer_prior import answers_by_kind, asked_for

WEIGHTS = "policy.pt"
INFO = "info.json"
# Bump when the warm-start recipe changes in a way the config does not show.
# 2: episodes cut off by the rollout limits are played again without find (warmstart.build_examples).
RECIPE_VERSION = 2
# Warm-start settings added after caches existed, with the value that means "not used".
LATER_SETTINGS_OFF = {"aux_worlds": 0, "window_steps": 0, "window_mix": 0, "goal_notes": False,
                      "guess_by_kind": False, "answer_loss_weight": 1.0}
WINDOW_SETTINGS = ("window_kind", "window_batch_size", "copy_context_tokens")  # read only when windows are on


def warmstart_key_settings(warmstart: dict) -> dict:
    """The warm-start settings the cache key covers: later settings left out while they are off,
    so that caches built before they existed stay valid; window settings only while windows are on,
    and the copy context only for copy windows."""
    windows_on = bool(warmstart.get("window_steps") or warmstart.get("window_mix"))
    copy_on = windows_on and warmstart.get("window_kind", "copy") == "copy"

    def counts(k, v):
        if LATER_SETTINGS_OFF.get(k, object()) == v:
            return False
        if k == "copy_context_tokens":
            return copy_on
        return windows_on or k not in WINDOW_SETTINGS

    return {k: v for k, v in warmstart.items() if counts(k, v)}


def base_policy_key(cfg, components) -> str:
    from agentcredit.components import plain

    model = {k: v for k, v in plain(cfg.model).items() if k not in ("lora", "reference", "rl_lr")}
    return stable_hash({
        "recipe": RECIPE_VERSION,
        "data": plain(cfg.data),
        "world": components.datamodule.world.hash,
        "env": plain(cfg.env),
        "model": model,
        "warmstart": warmstart_key_settings(plain(cfg.warmstart)),
        "rollout": {k: plain(cfg.rollout)[k] for k in ("max_tool_turns", "max_obs_tokens", "max_context_tokens")},
        # The vocabulary itself, not just its size: a changed tokenizer recipe must not reuse old weights.
        "vocab": stable_hash(sorted(components.tokenizer.get_vocab().items())),
    })


def ensure_base_policy(cfg, components, progress: bool = True) -> dict:
    """Load the cached base policy into `components.policy`, building it first if it is missing."""
    folder = cache_dir() / "base_policy" / base_policy_key(cfg, components)
    weights = folder / WEIGHTS
    if weights.exists():
        components.policy.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        return json.loads((folder / INFO).read_text())
    print(f"[agentcredit] building the tiny testbed's base policy (once; cached in {folder})", flush=True)
    info = build_base_policy(cfg, components, progress)
    folder.mkdir(parents=True, exist_ok=True)
    # Write to a temporary name first: an interrupted build must not leave a half-written cache entry.
    tmp = folder / (WEIGHTS + ".tmp")
    torch.save(components.policy.state_dict(), tmp)
    (folder / INFO).write_text(json.dumps(info, indent=2))
    tmp.replace(weights)
    return info


def training_sources(cfg, components, aux_worlds: int) -> list:
    """(worker, question) pairs the warm start draws its episodes from: the run world's train split,
    plus every question of `aux_worlds` other worlds made with the same knobs and seeds
    world.seed+1, world.seed+2, ...

    Why auxiliary worlds: the default world has about 700 training questions. Cycling over them,
    the tiny model memorises question -> query instead of learning to copy names from the page.
    Measured on first-turn search queries alone (300 steps of 32): 0.12 exact on validation
    questions with the one world, 0.75 with four auxiliary worlds. The validation and test
    splits stay unseen: auxiliary worlds are other corpora, never the run world itself.
    """
    from agentcredit.components import plain
    from agentcredit.env.corpus import Corpus
    from agentcredit.env.factory import make_env_factory
    from agentcredit.world.cache import load_or_generate_world

    def worker(env_factory):
        return RolloutWorker(None, components.chat, env_factory, components.reward_fn, components.rollout_cfg)

    if aux_worlds < 0:
        raise ValueError(f"warmstart.aux_worlds must be >= 0, got {aux_worlds}")
    if aux_worlds and components.datamodule.corpus_path is not None:
        raise ValueError("warmstart.aux_worlds needs the synthetic world (data.corpus_path is set); use 0")
    main = worker(components.env_factory)
    sources = [(main, q) for q in components.datamodule.split_questions("train")]
    base = components.datamodule.world_config
    for i in range(1, aux_worlds + 1):
        world = load_or_generate_world(replace(base, seed=base.seed + i), components.datamodule.use_cache)
        aux = worker(make_env_factory(Corpus(world.documents), plain(cfg.env)))
        sources += [(aux, q) for q in world.questions]
    return sources


def guesses_by_kind(train, fallback):
    """question -> the premature answers an imperfect searcher guesses from: the run world's training
    answers of the question's kind (with repeats, so a guess follows their frequencies), else `fallback`.

    Why: a searcher that gives up still answers a "how many" with a number. Guessing any page title
    taught the policy that any answer goes with any question (its answers were numbers exactly where
    the gold is one in 54% of rollouts); with kind-true guesses and goal notes, 80%."""
    pools = answers_by_kind(train)

    def guesses(question):
        return pools.get(asked_for(question)) or fallback

    return guesses


def build_base_policy(cfg, components, progress: bool = True) -> dict:
    from agentcredit.components import plain
    from agentcredit.world.oracle import solve

    ws = WarmStartConfig(**plain(cfg.warmstart))
    start = time.time()
    torch.manual_seed(ws.seed)
    sources = training_sources(cfg, components, ws.aux_worlds)
    random.Random(ws.seed).shuffle(sources)

    def oracle(worker, question, use_find: bool):
        env = worker.env_factory()
        env.reset()
        # A mix of reading whole pages and using find keeps episodes short while find stays in the data.
        episode = solve(question, env, use_find=use_find, topn=ws.search_topn)
        return episode.actions, episode.answer

    titles = sorted({d.title for d in components.corpus.documents})
    guesses = guesses_by_kind(components.datamodule.split_questions("train"), titles) if ws.guess_by_kind else titles
    examples = build_examples(sources, oracle, ws, guesses, progress)
    pad_id = components.tokenizer.pad_token_id
    windows = []
    if ws.window_steps or ws.window_mix:
        decode = components.tokenizer.decode
        windows = [w for example in examples for w in
                   (turn_windows(example) if ws.window_kind == "turn" else copy_windows(example, ws.copy_context_tokens, decode))]
    stats = train_sft(components.policy, examples, pad_id, ws, progress, windows)
    mean_len = sum(len(e.input_ids) for e in examples) / len(examples)
    unanswered = sum(e.finish_reason != "answer" for e in examples)
    return {**stats, "examples": len(examples), "windows": len(windows), "examples_without_answer": unanswered, "mean_tokens": mean_len,
            "total_seconds": time.time() - start}

