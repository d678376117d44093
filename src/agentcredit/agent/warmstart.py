"""Warm start for the tiny testbed: supervised training on imperfect oracle trajectories.

A randomly initialised tiny model cannot search, so the testbed plays the part of the research
setup's base policy with a short supervised stage. The oracle's episodes are degraded on purpose
(vague queries, wrong opens, premature answers) so that the resulting policy is an imperfect
searcher whose groups of 8 rollouts are mixed: the regime where credit assignment matters.

Departure from the papers: they start RL from a pretrained search policy without any supervised
stage; here the supervised stage *is* how the testbed gets a base policy at all.

Examples go through `RolloutWorker.replay`, i.e. the very loop rollouts use, so the training
sequences have exactly the token layout (masks, chat pieces, observations) of sampled rollouts.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import torch
from tqdm.auto import tqdm

from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.agent.rollout import RolloutWorker
from agentcredit.agent.trajectory import Trajectory, pad_batch, pad_rows
from agentcredit.env.types import ToolCall
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.world.types import Question


@dataclass
class WarmStartConfig:
    episodes: int = 1000  # oracle episodes rendered into training sequences
    steps: int = 300
    batch_size: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 30
    obs_loss_weight: float = 0.0  # weight of the language-model loss on observations (0.3 measured no better)
    p_vague_query: float = 0.15  # per search: insert a vague query first
    p_wrong_open: float = 0.1  # per open: open a wrong result first
    p_premature_answer: float = 0.1  # per episode: stop early and guess (0.35 taught mostly wrong answers)
    p_use_find: float = 0.5  # per episode: the oracle locates facts with find (else reads the opened page)
    search_topn: int = 3  # the oracle's topn: fewer results keep training sequences short
    aux_worlds: int = 0  # extra synthetic worlds (same knobs, seeds world.seed+1..) whose questions the episodes also draw on
    copy_steps: int = 0  # first phase: steps on copy windows alone (agent/copy_windows.py); 0 skips it
    copy_batch_size: int = 64
    copy_context_tokens: int = 48  # tokens before a copying turn that its window keeps
    copy_mix: int = 0  # copy windows added to every episode step, so the episodes do not erase the skill
    seed: int = 0

    def __post_init__(self):
        for name in ("episodes", "steps", "batch_size", "copy_batch_size", "copy_context_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"warmstart.{name} must be an integer >= 1, got {value!r}")
        for name in ("copy_steps", "copy_mix", "aux_worlds"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"warmstart.{name} must be an integer >= 0, got {value!r}")


def degrade(actions: Sequence[ToolCall], answer: str, rng: random.Random, cfg: WarmStartConfig, guesses: Sequence[str]) -> list[str]:
    """Turn texts of an imperfect searcher built from an oracle episode."""
    turns: list[str] = []
    for call in actions:
        if call.name == "browser.search" and rng.random() < cfg.p_vague_query:
            words = str(call.arguments.get("query", "")).split()
            if len(words) > 1:
                vague = " ".join(rng.sample(words, k=max(1, len(words) // 3)))
                turns.append(render_tool_call(ToolCall(call.name, {**call.arguments, "query": vague})))
        if call.name == "browser.open" and rng.random() < cfg.p_wrong_open:
            right = call.arguments.get("id", -1)
            if isinstance(right, int) and right >= 0:
                wrong = rng.choice([i for i in range(max(cfg.search_topn, 2)) if i != right])
                turns.append(render_tool_call(ToolCall(call.name, {**call.arguments, "id": wrong})))
        turns.append(render_tool_call(call))
    if rng.random() < cfg.p_premature_answer and len(turns) > 1 and guesses:
        turns = turns[: rng.randint(1, len(turns) - 1)]
        return turns + [render_answer(rng.choice(guesses))]
    return turns + [render_answer(answer)]


def build_examples(
    sources: Sequence[tuple[RolloutWorker, Question]],
    solve: Callable[[RolloutWorker, Question, bool], tuple[Sequence[ToolCall], str]],
    cfg: WarmStartConfig,
    guesses: Sequence[str],
    progress: bool = True,
) -> list[Trajectory]:
    """Render `cfg.episodes` degraded oracle episodes as trajectories, cycling over `sources`.

    `solve(worker, question, use_find)` plays the oracle. Each source pairs a question with the
    worker (hence the environment) of its own world, so that auxiliary worlds' questions are
    played in their own corpus.

    Every example ends with an answer where the rollout limits allow one: an episode that runs out
    of tool turns or context (find costs one call per page, and degradations add calls) is played
    again without find, then without added calls. Measured on the default world: half of the
    find-using episodes hit the 12-turn limit, 26% of all examples; trained on those, the policy
    learnt to stop without answering in 40% of its rollouts.

    `solve` must be deterministic (the world oracle is): its answer for a find setting is reused
    by later attempts instead of being asked again."""
    rng = random.Random(cfg.seed)
    examples = []
    for i in tqdm(range(cfg.episodes), desc="warm start: oracle episodes", disable=not progress):
        worker, question = sources[i % len(sources)]
        use_find = rng.random() < cfg.p_use_find
        solved = {}  # the oracle is deterministic: one call per find setting, however many attempts
        for attempt in ("as drawn", "without find", "without added calls"):
            find = use_find and attempt == "as drawn"
            if find not in solved:
                solved[find] = solve(worker, question, find)
            actions, answer = solved[find]
            plain = replace(cfg, p_vague_query=0.0, p_wrong_open=0.0) if attempt == "without added calls" else cfg
            example = worker.replay(question, degrade(actions, answer, rng, plain, guesses))
            if example.finish_reason == "answer":
                break
        examples.append(example)
    return examples


def sft_loss(model, batch: dict[str, torch.Tensor], obs_loss_weight: float) -> torch.Tensor:
    """Cross-entropy on policy tokens, plus `obs_loss_weight` on the other (observation, prompt) tokens."""
    policy = batch["loss_mask"][:, 1:]
    weights = policy + obs_loss_weight * batch["attention_mask"][:, 1:].float() * (1 - policy)  # (B, L-1)
    # With no weight on observations only policy positions need the vocabulary projection, which is
    # about a third of the step on the tiny model (its output layer is half its parameters).
    positions = batch["loss_mask"] if obs_loss_weight == 0 else None
    logprobs = token_logprobs(model, batch["input_ids"], batch["attention_mask"], positions=positions)[:, 1:]
    return -(logprobs * weights).sum() / weights.sum().clamp(min=1)


def sft_optimizer(model, cfg: WarmStartConfig):
    """AdamW with linear warm-up over `cfg.warmup_steps`, then linear decay to 5% at `cfg.steps`."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / cfg.warmup_steps) * max(0.05, 1 - s / max(cfg.steps, 1)),
    )
    return optimizer, schedule


def sft_step(model, batch: dict[str, torch.Tensor], optimizer, schedule, obs_loss_weight: float,
             extra: dict[str, torch.Tensor] | None = None) -> float:
    """One clipped update on `sft_loss` (plus the policy-token loss of an `extra` batch); returns the loss."""
    loss = sft_loss(model, batch, obs_loss_weight)
    if extra is not None:
        loss = loss + sft_loss(model, extra, 0.0)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    return float(loss.detach())


def sample_windows(windows, n: int, generator: torch.Generator) -> list:
    return [windows[int(i)] for i in torch.randint(len(windows), (n,), generator=generator)]


def train_copy_phase(model, windows, pad_id: int, cfg: WarmStartConfig, generator: torch.Generator, progress: bool) -> dict:
    """First phase: `cfg.copy_steps` steps on copy windows alone, with their own learning-rate schedule.

    Why alone: the tiny model learns to copy a name it has just read only after a plateau of several
    hundred steps made of nothing but such turns (scripts/probe_copying.py shows the same plateau on
    random tokens); in whole episodes they are a few tokens in 1,500 and the plateau is never left."""
    if not windows:
        raise ValueError("warmstart.copy_steps > 0 but no episode has a turn that copies out of its context")
    optimizer, schedule = sft_optimizer(model, replace(cfg, steps=cfg.copy_steps))

    def next_batch():
        return pad_rows(sample_windows(windows, cfg.copy_batch_size, generator), pad_id), None

    model.train()
    final_loss, seconds = run_sft_steps(model, next_batch, cfg.copy_steps, optimizer, schedule, 0.0,
                                        "warm start: copy windows", progress)
    return {"copy_final_loss": final_loss, "copy_seconds": seconds}


def run_sft_steps(model, next_batch, steps: int, optimizer, schedule, obs_loss_weight: float, desc: str,
                  progress: bool) -> tuple[float, float]:
    """`steps` updates on the (batch, extra batch or None) pairs `next_batch()` draws, with a
    progress bar; returns (mean loss over the last 20 steps, seconds)."""
    start, losses = time.time(), []
    bar = tqdm(range(steps), desc=desc, disable=not progress)
    for step in bar:
        batch, extra = next_batch()
        losses.append(sft_step(model, batch, optimizer, schedule, obs_loss_weight, extra))
        if step % 10 == 0:
            bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
    return sum(losses[-20:]) / max(len(losses[-20:]), 1), time.time() - start


def train_sft(model, examples: list[Trajectory], pad_id: int, cfg: WarmStartConfig, progress: bool = True,
              windows: Sequence[tuple[list[int], list[int]]] = ()) -> dict:
    """Plain supervised loop (no Lightning): it runs once, before RL, and is cached on disk.

    With `cfg.copy_steps`, a phase on copy `windows` alone comes first; with `cfg.copy_mix`, every
    episode step also learns from that many windows (loss of the episodes + loss of the windows)."""
    generator = torch.Generator().manual_seed(cfg.seed)
    if cfg.copy_mix and not windows:
        raise ValueError("warmstart.copy_mix > 0 but no episode has a turn that copies out of its context")
    copy_stats = train_copy_phase(model, windows, pad_id, cfg, generator, progress) if cfg.copy_steps else {}
    optimizer, schedule = sft_optimizer(model, cfg)
    # Batches of similar length waste less compute on padding.
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].input_ids))
    chunks = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]

    def next_batch():
        chunk = chunks[int(torch.randint(len(chunks), (1,), generator=generator))]
        mixed = pad_rows(sample_windows(windows, cfg.copy_mix, generator), pad_id) if cfg.copy_mix else None
        return pad_batch([examples[i] for i in chunk], pad_id), mixed

    model.train()
    final_loss, seconds = run_sft_steps(model, next_batch, cfg.steps, optimizer, schedule, cfg.obs_loss_weight,
                                        "warm start: supervised steps", progress)
    model.eval()
    return {"final_loss": final_loss, "seconds": seconds, "steps": cfg.steps, **copy_stats}
