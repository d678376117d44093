"""Warm start for the tiny testbed: supervised training on imperfect oracle trajectories.

A randomly initialised tiny model cannot search, so the testbed plays the part of the research
setup's base policy with a short supervised stage. The oracle's episodes are degraded on purpose
(vague queries, wrong opens, premature answers) so that the resulting policy is an imperfect
searcher whose groups of 8 rollouts are mixed: the regime where credit assignment matters.

The searcher also writes a one-line note at the start of every turn naming what the question asks
for (`goal_note`, e.g. "Goal: count."), a turn's private reasoning in the protocol's terms, and a
premature answer guesses a training answer of the question's kind. Both exist because the tiny model
does not condition on a question 1,000+ tokens back within the budget; see `goal_note`.

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
from agentcredit.credit.tokens import ANSWER_TURN
from agentcredit.env.types import ToolCall
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.world.answer_prior import asked_for
from agentcredit.world.types import Question


@dataclass
class WarmStartConfig:
    episodes: int = 1000  # oracle episodes rendered into training sequences
    steps: int = 250
    batch_size: int = 8
    lr: float = 1e-2  # 3e-3 left the first goal note at chance (13% right); 1e-2 gave 26%
    weight_decay: float = 0.01
    warmup_steps: int = 30
    obs_loss_weight: float = 0.0  # weight of the language-model loss on observations (0.3 measured no better)
    p_vague_query: float = 0.15  # per search: insert a vague query first
    p_wrong_open: float = 0.1  # per open: open a wrong result first
    p_premature_answer: float = 0.1  # per episode: stop early and guess (0.35 taught mostly wrong answers)
    p_use_find: float = 0.5  # per episode: the oracle locates facts with find (else reads the opened page)
    search_topn: int = 3  # the oracle's topn: fewer results keep training sequences short
    aux_worlds: int = 0  # extra synthetic worlds (same knobs, seeds world.seed+1..) whose questions the episodes also draw on
    window_kind: str = "turn"  # turn: each turn after the one before it | copy: turns that copy a name (agent/copy_windows.py)
    window_steps: int = 250  # first phase: steps on windows alone; 0 skips it
    window_batch_size: int = 32
    copy_context_tokens: int = 48  # window_kind=copy: tokens before a copying turn that its window keeps
    window_mix: int = 16  # windows added to every episode step, so the episodes do not erase what they taught
    goal_notes: bool = True  # every turn starts with a note naming what the question asks for ("Goal: count.")
    guess_by_kind: bool = True  # premature answers guess a training answer of the question's kind, not any page title
    answer_loss_weight: float = 4.0  # weight of the answer turn's tokens in the episode loss
    seed: int = 0

    def __post_init__(self):
        for name in ("episodes", "steps", "batch_size", "window_batch_size", "copy_context_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"warmstart.{name} must be an integer >= 1, got {value!r}")
        for name in ("window_steps", "window_mix", "aux_worlds"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"warmstart.{name} must be an integer >= 0, got {value!r}")
        if self.window_kind not in WINDOW_KINDS:
            raise ValueError(f"warmstart.window_kind must be one of {list(WINDOW_KINDS)}, got {self.window_kind!r}")
        if not isinstance(self.answer_loss_weight, (int, float)) or self.answer_loss_weight <= 0:
            raise ValueError(f"warmstart.answer_loss_weight must be a number > 0, got {self.answer_loss_weight!r}")


WINDOW_KINDS = ("turn", "copy")


def goal_note(question) -> str:
    """The note the warm start's searcher writes at the start of every turn: what the question asks
    for, e.g. "Goal: count.". Empty for questions without a program (user data).

    Why: the tiny policy does not condition its answer on a question 1,000+ tokens back (answers are
    numbers exactly where the gold is one in 54% of rollouts, as often as for a policy blind to the
    question). A note in every turn moves that information next to each decision: the first note
    is read off the question just before it, each later note off the note one turn back, and the
    answer off the last note."""
    kind = asked_for(question)
    return f"Goal: {kind}.\n" if kind else ""


def degrade(actions: Sequence[ToolCall], answer: str, rng: random.Random, cfg: WarmStartConfig, guesses: Sequence[str],
            note: str = "") -> list[str]:
    """Turn texts of an imperfect searcher built from an oracle episode; `note` starts every turn."""
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
        turns = turns[: rng.randint(1, len(turns) - 1)] + [render_answer(rng.choice(guesses))]
    else:
        turns = turns + [render_answer(answer)]
    return [note + turn for turn in turns]


def build_examples(
    sources: Sequence[tuple[RolloutWorker, Question]],
    solve: Callable[[RolloutWorker, Question, bool], tuple[Sequence[ToolCall], str]],
    cfg: WarmStartConfig,
    guesses: Sequence[str] | Callable[[Question], Sequence[str]],
    progress: bool = True,
) -> list[Trajectory]:
    """Render `cfg.episodes` degraded oracle episodes as trajectories, cycling over `sources`.

    `guesses` are the premature answers to draw from, or a function giving them for a question.
    With `cfg.goal_notes` every turn starts with the question's `goal_note`.

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
        note = goal_note(question) if cfg.goal_notes else ""
        pool = guesses(question) if callable(guesses) else guesses
        solved = {}  # the oracle is deterministic: one call per find setting, however many attempts
        for attempt in ("as drawn", "without find", "without added calls"):
            find = use_find and attempt == "as drawn"
            if find not in solved:
                solved[find] = solve(worker, question, find)
            actions, answer = solved[find]
            plain = replace(cfg, p_vague_query=0.0, p_wrong_open=0.0) if attempt == "without added calls" else cfg
            example = worker.replay(question, degrade(actions, answer, rng, plain, pool, note))
            if example.finish_reason == "answer":
                break
        examples.append(example)
    return examples


def sft_loss(model, batch: dict[str, torch.Tensor], obs_loss_weight: float, answer_weight: float = 1.0) -> torch.Tensor:
    """Cross-entropy on policy tokens, plus `obs_loss_weight` on the other (observation, prompt) tokens;
    the answer turn's tokens weigh `answer_weight` (needs the batch's `turn_ids`)."""
    policy = batch["loss_mask"][:, 1:]
    if answer_weight != 1.0:
        policy = policy * torch.where(batch["turn_ids"][:, 1:] == ANSWER_TURN, answer_weight, 1.0)
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
             extra: dict[str, torch.Tensor] | None = None, answer_weight: float = 1.0) -> float:
    """One clipped update on `sft_loss` (plus the policy-token loss of an `extra` batch); returns the loss."""
    loss = sft_loss(model, batch, obs_loss_weight, answer_weight)
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


def train_window_phase(model, windows, pad_id: int, cfg: WarmStartConfig, generator: torch.Generator, progress: bool) -> dict:
    """First phase: `cfg.window_steps` steps on windows alone, with their own learning-rate schedule.

    Why alone: in whole episodes a turn's dependence on what came just before it (the question, the
    note one turn back, a name on the page) is a few tokens in 1,500, and the tiny model does not
    pick it up within the budget (scripts/probe_copying.py shows the plateau copying has to get
    past); short windows made of nothing but such turns teach it in a few hundred steps."""
    if not windows:
        raise ValueError(f"warmstart.window_steps > 0 but the episodes gave no {cfg.window_kind} windows")
    optimizer, schedule = sft_optimizer(model, replace(cfg, steps=cfg.window_steps))

    def next_batch():
        return pad_rows(sample_windows(windows, cfg.window_batch_size, generator), pad_id), None

    model.train()
    final_loss, seconds = run_sft_steps(model, next_batch, cfg.window_steps, optimizer, schedule, 0.0,
                                        f"warm start: {cfg.window_kind} windows", progress)
    return {"window_final_loss": final_loss, "window_seconds": seconds}


def run_sft_steps(model, next_batch, steps: int, optimizer, schedule, obs_loss_weight: float, desc: str,
                  progress: bool, answer_weight: float = 1.0) -> tuple[float, float]:
    """`steps` updates on the (batch, extra batch or None) pairs `next_batch()` draws, with a
    progress bar; returns (mean loss over the last 20 steps, seconds)."""
    start, losses = time.time(), []
    bar = tqdm(range(steps), desc=desc, disable=not progress)
    for step in bar:
        batch, extra = next_batch()
        losses.append(sft_step(model, batch, optimizer, schedule, obs_loss_weight, extra, answer_weight))
        if step % 10 == 0:
            bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
    return sum(losses[-20:]) / max(len(losses[-20:]), 1), time.time() - start


def train_sft(model, examples: list[Trajectory], pad_id: int, cfg: WarmStartConfig, progress: bool = True,
              windows: Sequence[tuple[list[int], list[int]]] = ()) -> dict:
    """Plain supervised loop (no Lightning): it runs once, before RL, and is cached on disk.

    With `cfg.window_steps`, a phase on `windows` alone comes first; with `cfg.window_mix`, every
    episode step also learns from that many windows (loss of the episodes + loss of the windows)."""
    generator = torch.Generator().manual_seed(cfg.seed)
    if cfg.window_mix and not windows:
        raise ValueError(f"warmstart.window_mix > 0 but the episodes gave no {cfg.window_kind} windows")
    window_stats = train_window_phase(model, windows, pad_id, cfg, generator, progress) if cfg.window_steps else {}
    optimizer, schedule = sft_optimizer(model, cfg)
    # Batches of similar length waste less compute on padding.
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].input_ids))
    chunks = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]

    def next_batch():
        chunk = chunks[int(torch.randint(len(chunks), (1,), generator=generator))]
        mixed = pad_rows(sample_windows(windows, cfg.window_mix, generator), pad_id) if cfg.window_mix else None
        return pad_batch([examples[i] for i in chunk], pad_id), mixed

    model.train()
    final_loss, seconds = run_sft_steps(model, next_batch, cfg.steps, optimizer, schedule, cfg.obs_loss_weight,
                                        "warm start: supervised steps", progress, cfg.answer_loss_weight)
    model.eval()
    return {"final_loss": final_loss, "seconds": seconds, "steps": cfg.steps, **window_stats}
