"""Warm start for the tiny testbed: supervised training on imperfect oracle trajectories.

A randomly initialised tiny model cannot search, so the testbed plays the part of the research
setup's base policy with a supervised stage. The oracle's episodes are degraded on purpose (vague
queries, wrong opens, premature answers) so that the resulting policy is an imperfect searcher whose
groups of 8 rollouts are mixed: the regime where credit assignment matters.

Every turn starts with a plan note (testbed/notes.py): what is left to read, and, right after a page
that answered a hop, the fact copied off that page. Premature answers guess a training answer of
the question's kind.

Departure from the papers: they start RL from a pretrained search policy without any supervised
stage; here the supervised stage *is* how the testbed gets a base policy at all.

Examples go through `RolloutWorker.replay`, i.e. the very loop rollouts use, so the training
sequences have exactly the token layout (masks, chat pieces, observations) of sampled rollouts.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import torch
from tqdm.auto import tqdm

from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.agent.rollout import RolloutWorker
from agentcredit.agent.trajectory import Trajectory, pad_batch, pad_rows
from agentcredit.credit.tokens import ANSWER_TURN
from agentcredit.env.types import ToolCall
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.testbed.notes import fact_note, hop_cues, then_note
from agentcredit.world.types import Question

# The base policies the package carries: build E in the folder itself, a preset's in a subfolder named after it.
SHIPPED = Path(__file__).parent / "shipped"


def init_folder(value: str) -> Path:
    """The base policy folder `warmstart.init_from` names: "shipped" (build E), "shipped/<preset>", or a path."""
    folder = SHIPPED.parent / value if value == "shipped" or value.startswith("shipped/") else Path(value)
    if not (folder / "policy.pt").is_file() or not (folder / "info.json").is_file():
        raise ValueError(f"warmstart.init_from={value!r}: {folder} holds no base policy (policy.pt and info.json)")
    return folder


@dataclass
class WarmStartConfig:
    episodes: int = 3000  # oracle episodes rendered into training sequences
    steps: int = 900
    batch_size: int = 16
    lr: float = 5e-3
    weight_decay: float = 0.01
    warmup_steps: int = 50
    obs_loss_weight: float = 0.0  # weight of the language-model loss on observations
    p_vague_query: float = 0.15  # per search: insert a vague query first
    p_wrong_open: float = 0.0  # per open: open a wrong result first
    p_premature_answer: float = 0.15  # per episode: stop early and guess (0.35 taught mostly wrong answers)
    p_use_find: float = 1.0  # per episode: the oracle locates facts with find (else reads the opened page); 1.0 made hops learnable
    search_topn: int = 3  # the oracle's topn: fewer results keep training sequences short
    aux_worlds: int = 4  # extra synthetic worlds (same knobs, seeds world.seed+1..) whose questions the episodes also draw on
    window_steps: int = 2400  # first phase: steps on turn windows alone; 0 skips it
    window_batch_size: int = 32
    window_mix: int = 16  # windows added to every episode step, so the episodes do not erase what they taught
    guess_by_kind: bool = True  # premature answers guess a training answer of the question's kind, not any page title
    answer_loss_weight: float = 2.0  # weight of the answer turn's tokens in the episode loss
    checkpoint_every: int = 100  # steps between resumable checkpoints of a build
    rebuild: bool = False  # a run with no matching base policy builds one into the cache (else it stops and says how)
    seed: int = 0
    # A base policy to continue from instead of random weights (init_folder): a curriculum stage. The long
    # preset starts from build E, which already reads 2-3-hop chains, and only learns the longer ones.
    init_from: str | None = None

    def __post_init__(self):
        for name in ("episodes", "steps", "batch_size", "window_batch_size", "checkpoint_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"warmstart.{name} must be an integer >= 1, got {value!r}")
        for name in ("window_steps", "window_mix", "aux_worlds", "warmup_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"warmstart.{name} must be an integer >= 0, got {value!r}")
        for name in ("p_vague_query", "p_wrong_open", "p_premature_answer", "p_use_find"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"warmstart.{name} must be a probability in [0, 1], got {value!r}")
        def finite(value) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

        for name in ("lr", "answer_loss_weight"):
            value = getattr(self, name)
            if not finite(value) or value <= 0:
                raise ValueError(f"warmstart.{name} must be a finite number > 0, got {value!r}")
        for name in ("weight_decay", "obs_loss_weight"):
            value = getattr(self, name)
            if not finite(value) or value < 0:
                raise ValueError(f"warmstart.{name} must be a finite number >= 0, got {value!r}")
        for name in ("search_topn", "seed"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "search_topn" else 0):
                raise ValueError(f"warmstart.{name} must be an integer >= {1 if name == 'search_topn' else 0}, "
                                 f"got {value!r}")
        for name in ("guess_by_kind", "rebuild"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"warmstart.{name} must be true or false, got {getattr(self, name)!r}")
        if self.init_from is not None:
            if not isinstance(self.init_from, str) or not self.init_from:
                raise ValueError(f"warmstart.init_from must be null or a base policy folder, got {self.init_from!r}")
            init_folder(self.init_from)


def degrade(actions: Sequence[ToolCall], answer: str, rng: random.Random, cfg: WarmStartConfig, guesses: Sequence[str],
            cues: Sequence[str] = ()) -> list[str]:
    """Turn texts of an imperfect searcher built from an oracle episode, each opened by its plan note
    (testbed/notes.py) when `cues`, the question's hop cues in reading order, are given.

    The oracle searches each hop's page by the value it read on the page before, so its i-th search
    starts hop i, and that query is the fact the turn copies ("founder: Anna Voss")."""
    turns: list[str] = []
    hops: list[int] = []  # the hop each turn belongs to
    hop = 0
    searches = 0
    for call in actions:
        fact = ""
        if call.name == "browser.search":
            hop = searches
            searches += 1
            if 1 <= hop <= len(cues):
                fact = fact_note(cues[hop - 1], str(call.arguments.get("query", "")))
        note = then_note(list(cues[hop:]))

        def add(text: str) -> None:
            nonlocal fact
            turns.append(fact + note + text)
            hops.append(hop)
            fact = ""  # the fact is copied once, on the first turn after the page

        if call.name == "browser.search" and rng.random() < cfg.p_vague_query:
            words = str(call.arguments.get("query", "")).split()
            if len(words) > 1:
                vague = " ".join(rng.sample(words, k=max(1, len(words) // 3)))
                add(render_tool_call(ToolCall(call.name, {**call.arguments, "query": vague})))
        if call.name == "browser.open" and rng.random() < cfg.p_wrong_open:
            right = call.arguments.get("id", -1)
            if isinstance(right, int) and right >= 0:
                wrong = rng.choice([i for i in range(max(cfg.search_topn, 2)) if i != right])
                add(render_tool_call(ToolCall(call.name, {**call.arguments, "id": wrong})))
        add(render_tool_call(call))
    if rng.random() < cfg.p_premature_answer and len(turns) > 1 and guesses:
        cut = rng.randint(1, len(turns) - 1)
        return turns[:cut] + [then_note(list(cues[hops[cut - 1]:])) + render_answer(rng.choice(guesses))]
    return turns + [then_note(list(cues[-1:])) + render_answer(answer)]


def build_examples(
    sources: Sequence[tuple[RolloutWorker, Question]],
    solve: Callable[[RolloutWorker, Question, bool], tuple[Sequence[ToolCall], str]],
    cfg: WarmStartConfig,
    guesses: Sequence[str] | Callable[[Question], Sequence[str]],
    progress: bool = True,
) -> list[Trajectory]:
    """Render `cfg.episodes` degraded oracle episodes as trajectories, cycling over `sources`.

    `guesses` are the premature answers to draw from, or a function giving them for a question.
    Every turn starts with its plan note (none for questions without a program).

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
        cues = hop_cues(question)
        pool = guesses(question) if callable(guesses) else guesses
        solved = {}  # the oracle is deterministic: one call per find setting, however many attempts
        for attempt in ("as drawn", "without find", "without added calls"):
            find = use_find and attempt == "as drawn"
            if find not in solved:
                solved[find] = solve(worker, question, find)
            actions, answer = solved[find]
            plain = replace(cfg, p_vague_query=0.0, p_wrong_open=0.0) if attempt == "without added calls" else cfg
            example = worker.replay(question, degrade(actions, answer, rng, plain, pool, cues))
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


class Checkpoints:
    """Where a build saves its state every `every` steps, so an interrupted build resumes where it
    stopped (same weights as an uninterrupted one: model, optimiser, schedule and sampler state all
    travel). `folder=None` keeps nothing."""

    def __init__(self, folder, every: int):
        self.path = None if folder is None else folder / "build_state.pt"
        self.every = every
        self.carry: dict = {}  # saved with every state (e.g. the first phase's figures)

    def load(self) -> dict | None:
        if self.path is None or not self.path.exists():
            return None
        try:
            return torch.load(self.path, map_location="cpu", weights_only=False)
        except Exception as error:  # a damaged state must not be silently ignored nor crash obscurely
            raise RuntimeError(f"build state {self.path} cannot be read ({type(error).__name__}); delete it to start over") from None

    def save(self, state: dict) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(self.path)  # an interruption while saving keeps the previous state

    def clear(self) -> None:
        if self.path is not None and self.path.exists():
            self.path.unlink()


def run_phase(model, phase: str, next_batch, steps: int, optimizer, schedule, generator: torch.Generator,
              obs_loss_weight: float, progress: bool, checkpoints: Checkpoints, resume: dict | None,
              answer_weight: float = 1.0) -> tuple[float, float]:
    """`steps` updates on the (batch, extra batch or None) pairs `next_batch()` draws, with a progress
    bar and a checkpoint every `checkpoints.every` steps; returns (mean loss of the last 20 steps, seconds).
    `resume`, a saved state of this phase, restarts it at its step."""
    first, losses, seconds = 0, [], 0.0
    if resume is not None and resume["phase"] == phase:
        model.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        schedule.load_state_dict(resume["schedule"])
        generator.set_state(resume["generator"])
        first, losses, seconds = resume["step"], resume["losses"], resume["seconds"]
    start = time.time() - seconds
    model.train()
    bar = tqdm(range(first, steps), desc=f"warm start: {phase}", disable=not progress, initial=first, total=steps)
    for step in bar:
        batch, extra = next_batch()
        losses.append(sft_step(model, batch, optimizer, schedule, obs_loss_weight, extra, answer_weight))
        if step % 10 == 0:
            bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
        if (step + 1) % checkpoints.every == 0 and step + 1 < steps:
            checkpoints.save({"phase": phase, "step": step + 1, "model": model.state_dict(),
                              "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                              "generator": generator.get_state(), "losses": losses, "seconds": time.time() - start,
                              **checkpoints.carry})
    return sum(losses[-20:]) / max(len(losses[-20:]), 1), time.time() - start


def train_sft(model, examples: list[Trajectory], pad_id: int, cfg: WarmStartConfig, progress: bool = True,
              windows: Sequence[tuple[list[int], list[int]]] = (), checkpoints: Checkpoints | None = None) -> dict:
    """Plain supervised loop (no Lightning): it runs once, before RL, and its result ships as a file.

    With `cfg.window_steps`, a phase on turn `windows` alone comes first: in whole episodes a turn's
    dependence on what came just before it (the note one turn back, a line of the page) is a few
    tokens in hundreds, and short windows made of nothing but such turns teach it much faster.
    With `cfg.window_mix`, every episode step also learns from that many windows, so the episodes
    do not erase what the first phase taught."""
    checkpoints = checkpoints or Checkpoints(None, cfg.checkpoint_every)
    resume = checkpoints.load()
    generator = torch.Generator().manual_seed(cfg.seed)
    if (cfg.window_steps or cfg.window_mix) and not windows:
        raise ValueError("warmstart.window_steps or window_mix > 0 but the episodes gave no turn windows")
    stats = {}
    if cfg.window_steps:
        optimizer, schedule = sft_optimizer(model, replace(cfg, steps=cfg.window_steps))

        def window_batch():
            return pad_rows(sample_windows(windows, cfg.window_batch_size, generator), pad_id), None

        if resume is None or resume["phase"] == "turn windows":
            loss, seconds = run_phase(model, "turn windows", window_batch, cfg.window_steps, optimizer, schedule,
                                      generator, 0.0, progress, checkpoints, resume)
            stats = {"window_final_loss": loss, "window_seconds": seconds}
            checkpoints.carry = {"window_stats": stats}
            checkpoints.save({"phase": "episodes", "step": 0, "model": model.state_dict(),
                              "optimizer": None, "generator": generator.get_state(), **checkpoints.carry})
            resume = checkpoints.load()
    optimizer, schedule = sft_optimizer(model, cfg)
    if resume is not None and resume["phase"] == "episodes":
        stats = resume.get("window_stats", stats)
        checkpoints.carry = {"window_stats": stats}
        if resume["optimizer"] is None:  # saved between the phases: only the weights and sampler carry over
            model.load_state_dict(resume["model"])
            generator.set_state(resume["generator"])
            resume = None
    # Batches of similar length waste less compute on padding.
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].input_ids))
    chunks = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]

    def episode_batch():
        chunk = chunks[int(torch.randint(len(chunks), (1,), generator=generator))]
        mixed = pad_rows(sample_windows(windows, cfg.window_mix, generator), pad_id) if cfg.window_mix else None
        return pad_batch([examples[i] for i in chunk], pad_id), mixed

    final_loss, seconds = run_phase(model, "episodes", episode_batch, cfg.steps, optimizer, schedule, generator,
                                    cfg.obs_loss_weight, progress, checkpoints, resume, cfg.answer_loss_weight)
    model.eval()
    checkpoints.clear()
    return {"final_loss": final_loss, "seconds": seconds, "steps": cfg.steps, **stats}
