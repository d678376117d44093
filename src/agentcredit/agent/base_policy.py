"""The tiny testbed's base search policy: built once by warm start, then cached on disk.

The cache key covers everything the result depends on (world, environment, model and warm-start
settings, and the tokenizer), so a changed setting builds a new base policy instead of silently
reusing a stale one.
"""

from __future__ import annotations

import json
import random
import time

import torch

from agentcredit.agent.rollout import RolloutWorker
from agentcredit.agent.warmstart import WarmStartConfig, build_examples, train_sft
from agentcredit.paths import cache_dir, stable_hash

WEIGHTS = "policy.pt"
INFO = "info.json"
# Bump when the warm-start recipe changes in a way the config does not show.
RECIPE_VERSION = 1


def base_policy_key(cfg, components) -> str:
    from agentcredit.components import plain

    model = {k: v for k, v in plain(cfg.model).items() if k not in ("lora", "reference", "rl_lr")}
    return stable_hash({
        "recipe": RECIPE_VERSION,
        "data": plain(cfg.data),
        "world": components.datamodule.world.hash,
        "env": plain(cfg.env),
        "model": model,
        "warmstart": plain(cfg.warmstart),
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


def build_base_policy(cfg, components, progress: bool = True) -> dict:
    from agentcredit.components import plain
    from agentcredit.world.oracle import solve

    ws = WarmStartConfig(**plain(cfg.warmstart))
    start = time.time()
    torch.manual_seed(ws.seed)
    questions = list(components.datamodule.split_questions("train"))
    random.Random(ws.seed).shuffle(questions)
    worker = RolloutWorker(None, components.chat, components.env_factory, components.reward_fn, components.rollout_cfg)

    rng = random.Random(ws.seed + 1)

    def oracle(question):
        env = components.env_factory()
        env.reset()
        # A mix of reading whole pages and using find keeps episodes short while find stays in the data.
        episode = solve(question, env, use_find=rng.random() < ws.p_use_find, topn=ws.search_topn)
        return episode.actions, episode.answer

    guesses = sorted({d.title for d in components.corpus.documents})
    examples = build_examples(worker, questions, oracle, ws, guesses, progress)
    pad_id = components.tokenizer.pad_token_id
    stats = train_sft(components.policy, examples, pad_id, ws, progress)
    mean_len = sum(len(e.input_ids) for e in examples) / len(examples)
    return {**stats, "examples": len(examples), "mean_tokens": mean_len, "total_seconds": time.time() - start}

