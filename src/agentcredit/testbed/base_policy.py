"""The tiny testbed's base search policy: a shipped artefact, like a pretrained checkpoint.

`python scripts/build_base_policy.py` builds it once (warm start, resumable) and writes it to
`testbed/shipped/` (weights, tokenizer, info.json with its key, build time and evaluation figures),
which the repository carries. A run loads it when its key matches the run's settings; otherwise it
looks in the user cache (`AGENTCREDIT_CACHE`), and else stops with one line naming the rebuild
command, or builds into the cache when asked to with `warmstart.rebuild=true`.

The key covers only what the base policy depends on: the world's content, the train split it draws
episodes from, the environment's observations, the model's architecture and tokenizer, the
warm-start recipe and the rollout limits its episodes are replayed under. RL settings
(`data.prompts_per_step`, credit, trainer, ...) never change it.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from agentcredit.agent.rollout import RolloutWorker
from agentcredit.common.paths import cache_dir, stable_hash
from agentcredit.testbed.answer_prior import answers_by_kind, asked_for
from agentcredit.testbed.warmstart import SHIPPED, Checkpoints, WarmStartConfig, build_examples, init_folder, train_sft
from agentcredit.testbed.windows import turn_windows
from agentcredit.common.configs import ConfigError

WEIGHTS = "policy.pt"
INFO = "info.json"
REBUILD_COMMAND = "python scripts/build_base_policy.py"
# Bump when the warm-start recipe changes in a way the settings do not show.
RECIPE_VERSION = 3
FLOAT64 = "float64"
MODEL_KEYS_NOT_IN_KEY = ("lora", "reference", "rl_lr", "init_path", "warm_start", "answer_note")
WARMSTART_KEYS_NOT_IN_KEY = ("rebuild", "checkpoint_every")


class BasePolicyMissing(ConfigError):
    """No base policy for this run's settings, and no build was asked for: one line for the user."""


@dataclass(frozen=True)
class BasePolicySettings:
    """The config groups a base policy is built from, as plain dicts (`run.compose.base_policy_settings`
    makes one from a run config)."""
    model: dict
    warmstart: dict
    env: dict
    data: dict
    rollout: dict


def refuse_a_float64_build(model: dict) -> None:
    """A float64 run starts from the float32 policy upcast (`base_policy_key` gives both one key), so a
    policy built in float64 would sit under the float32 key: every build, from a run or the script, stops here."""
    if model.get("dtype") == FLOAT64:
        raise BasePolicyMissing(f"the base policy is built in float32 and float64 runs upcast it: build it once with "
                                f"`{REBUILD_COMMAND} <the same overrides> model.dtype=float32`")


def base_policy_key(settings: BasePolicySettings, components) -> str:
    model = {k: v for k, v in settings.model.items() if k not in MODEL_KEYS_NOT_IN_KEY}
    if model.get("dtype") == FLOAT64:  # the float32-built policy, upcast exactly: the same weights, the same key
        model["dtype"] = "float32"
    warmstart = {k: v for k, v in settings.warmstart.items() if k not in WARMSTART_KEYS_NOT_IN_KEY}
    if warmstart.get("init_from"):  # the policy started from, by its own key: wherever it lies, rebuilt means new
        warmstart["init_from"] = (read_info(init_folder(warmstart["init_from"])) or {}).get("key")
    elif "init_from" in warmstart:
        del warmstart["init_from"]  # so that build E's key stays what it was before the setting existed
    env = {k: v for k, v in settings.env.items() if k != "reward"}
    data = settings.data
    split = {k: data.get(k) for k in ("val_fraction", "test_fraction")}
    if data.get("split_seed", 0):  # only when set, so that the shipped policies' keys stay what they were
        split["split_seed"] = data["split_seed"]
    return stable_hash({
        "recipe": RECIPE_VERSION,
        "world": components.datamodule.world.hash,
        "split": split,
        "env": env,
        "model": model,
        "warmstart": warmstart,
        "rollout": {k: settings.rollout[k] for k in ("max_tool_turns", "max_turn_tokens", "max_obs_tokens", "max_context_tokens")},
        # The vocabulary itself, not just its size: a changed tokenizer recipe must not reuse old weights.
        "vocab": stable_hash(sorted(components.tokenizer.get_vocab().items())),
    })


def read_info(folder: Path) -> dict | None:
    try:
        return json.loads((folder / INFO).read_text())
    except (OSError, ValueError):
        return None


def load_weights(policy: torch.nn.Module, folder: Path) -> None:
    try:
        state = torch.load(folder / WEIGHTS, map_location="cpu", weights_only=True)
        policy.load_state_dict(state)
    except Exception as error:
        raise BasePolicyMissing(f"base policy weights {folder / WEIGHTS} cannot be loaded ({type(error).__name__}); "
                                f"rebuild them with {REBUILD_COMMAND}") from None


def shipped_folders() -> list[Path]:
    """Build E's folder, then one subfolder per preset that ships its own base policy (shipped/testbed_long/)."""
    if not SHIPPED.is_dir():
        return []
    return [SHIPPED, *sorted(p for p in SHIPPED.iterdir() if (p / INFO).is_file())]


def ensure_base_policy(settings: BasePolicySettings, components, progress: bool = True) -> dict:
    """Load the base policy whose key matches this run into `components.policy`: the shipped one,
    else one in the user cache, else build it into the cache if `warmstart.rebuild` is set."""
    key = base_policy_key(settings, components)
    for candidate in shipped_folders():
        info = read_info(candidate)
        if info and info.get("key") == key:
            load_weights(components.policy, candidate)
            return {**info, "source": "shipped"}
    shipped = read_info(SHIPPED)
    folder = cache_dir() / "base_policy" / key
    cached = read_info(folder)
    if cached and (folder / WEIGHTS).exists():
        load_weights(components.policy, folder)
        return {**cached, "source": "cache"}
    if not settings.warmstart.get("rebuild", False):
        why = "no base policy is shipped" if not shipped else "the shipped base policy was built for other settings"
        raise BasePolicyMissing(
            f"{why} (key {key[:12]}, shipped {str((shipped or {}).get('key'))[:12]}): build it once with "
            f"`{REBUILD_COMMAND} <the same overrides>` or add warmstart.rebuild=true to build it into the cache")
    refuse_a_float64_build(settings.model)
    print(f"[agentcredit] building the tiny testbed's base policy (once; cached in {folder})", flush=True)
    info = build_base_policy(settings, components, progress, checkpoint_folder=folder)
    save_base_policy(components.policy, components.tokenizer, {**info, "key": key}, folder)
    return {**info, "key": key, "source": "built"}


def save_base_policy(policy, tokenizer, info: dict, folder: Path) -> None:
    """Weights, tokenizer and info.json into `folder`; the weights go last, under a temporary name
    first, so an interrupted save never leaves a folder that looks complete."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(folder))
    (folder / INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    tmp = folder / (WEIGHTS + ".tmp")
    torch.save(policy.state_dict(), tmp)
    tmp.replace(folder / WEIGHTS)


def training_sources(settings: BasePolicySettings, components, aux_worlds: int) -> list:
    """(worker, question) pairs the warm start draws its episodes from: the run world's train split,
    plus every question of `aux_worlds` other worlds made with the same knobs and seeds
    world.seed+1, world.seed+2, ...

    Why auxiliary worlds: the default world has about 700 training questions. Cycling over them,
    the tiny model memorises question -> query instead of learning to copy names. The validation
    and test splits stay unseen: auxiliary worlds are other corpora, never the run world itself.
    """
    from agentcredit.env.corpus import Corpus
    from agentcredit.env.factory import make_env_factory
    from agentcredit.world.cache import load_or_generate_world

    def worker(env_factory):
        return RolloutWorker(None, components.chat, env_factory, components.reward_fn, components.rollout_cfg)

    if aux_worlds and components.datamodule.corpus_path is not None:
        raise ValueError("warmstart.aux_worlds needs the synthetic world (data.corpus_path is set); use 0")
    main = worker(components.env_factory)
    sources = [(main, q) for q in components.datamodule.split_questions("train")]
    base = components.datamodule.world_config
    for i in range(1, aux_worlds + 1):
        world = load_or_generate_world(replace(base, seed=base.seed + i), components.datamodule.use_cache)
        aux = worker(make_env_factory(Corpus(world.documents), settings.env))
        sources += [(aux, q) for q in world.questions]
    return sources


def guesses_by_kind(train, fallback):
    """question -> the premature answers an imperfect searcher guesses from: the run world's training
    answers of the question's kind (with repeats, so a guess follows their frequencies), else `fallback`.

    Why: a searcher that gives up still answers a "what year" with a year."""
    pools = answers_by_kind(train)

    def guesses(question):
        return pools.get(asked_for(question)) or fallback

    return guesses


def start_from(components, folder: Path) -> None:
    """Load the base policy in `folder` into `components.policy`, after checking that it reads the same tokens."""
    theirs = type(components.tokenizer).from_pretrained(str(folder)).get_vocab()
    if theirs != components.tokenizer.get_vocab():
        raise BasePolicyMissing(f"warmstart.init_from: the base policy in {folder} was built with another vocabulary "
                                "(a different corpus or tokenizer); start from random weights (init_from=null)")
    load_weights(components.policy, folder)


def build_base_policy(settings: BasePolicySettings, components, progress: bool = True,
                      checkpoint_folder: Path | None = None) -> dict:
    """Warm-start `components.policy` in place; returns the build's figures. With `checkpoint_folder`
    the build saves its state there as it goes and resumes from it when run again."""
    from agentcredit.world.oracle import solve

    ws = WarmStartConfig(**settings.warmstart)
    start = time.time()
    if ws.init_from:
        start_from(components, init_folder(ws.init_from))
    torch.manual_seed(ws.seed)
    sources = training_sources(settings, components, ws.aux_worlds)
    random.Random(ws.seed).shuffle(sources)

    def oracle(worker, question, use_find: bool):
        env = worker.env_factory()
        env.reset()
        episode = solve(question, env, use_find=use_find, topn=ws.search_topn)
        return episode.actions, episode.answer

    titles = sorted({d.title for d in components.corpus.documents})
    guesses = guesses_by_kind(components.datamodule.split_questions("train"), titles) if ws.guess_by_kind else titles
    examples = build_examples(sources, oracle, ws, guesses, progress)
    windows = [w for example in examples for w in turn_windows(example)] if (ws.window_steps or ws.window_mix) else []
    checkpoints = Checkpoints(checkpoint_folder, ws.checkpoint_every)
    stats = train_sft(components.policy, examples, components.tokenizer.pad_token_id, ws, progress, windows, checkpoints)
    mean_len = sum(len(e.input_ids) for e in examples) / len(examples)
    unanswered = sum(e.finish_reason != "answer" for e in examples)
    return {**stats, "examples": len(examples), "windows": len(windows), "examples_without_answer": unanswered,
            "mean_tokens": mean_len, "total_seconds": time.time() - start}
