"""Multi-turn rollouts: every live rollout of every question decodes in one batch, each on its own turns.

Stopping rules (TRACE Appendix A.3): an <answer> span, the tool-turn limit, the per-turn token
limit, the observation-token budget, or the context limit. A turn that is neither a valid tool call
nor an answer gets an error observation and the rollout goes on.

A rollout whose turn ends runs its tool and rejoins the batch at the next step (agent/sampling.py),
so rollouts never wait for each other between turns.

Departures from the paper: the observation budget is per rollout (observations are truncated to
what is left of it and the rollout stops once it is spent), which bounds context growth on small
machines the same way the paper's context limit does on large ones.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Callable, Iterator, Sequence

import torch

from agentcredit.agent.chat import ChatFormat
from agentcredit.agent.protocol import STOP_STRINGS, ParsedTurn, error_observation, parse_turn
from agentcredit.agent.next_token import StopChecker
from agentcredit.agent.sampling import TurnSampler
from agentcredit.agent.trajectory import ANSWER_TURN, NON_POLICY, Trajectory
from agentcredit.common.configs import ConfigError
from agentcredit.credit.knobs import is_finite_number
from agentcredit.world.types import Question

TRUNCATION_NOTE = " [observation truncated]"


@dataclass
class RolloutConfig:
    group_size: int = 8  # G rollouts per question in training
    max_tool_turns: int = 8
    max_turn_tokens: int = 96
    max_obs_tokens: int = 2048
    max_context_tokens: int = 4096
    temperature: float = 1.0
    top_p: float = 1.0
    lean_forward: bool = True  # sample through agent/lean_forward.py where the architecture allows
    share_identical: bool = True  # rows with identical histories share a cache slot and a forward (agent/sampling.py)
    threads: int | None = 1  # torch intra-op threads while the policy samples (engine hf on CPU); None = the process's
    engine: str = "hf"  # hf: the policy samples its own turns (agent/sampling.py) | vllm: a colocated vLLM engine
    vllm: dict = field(default_factory=dict)  # agent/engines/vllm_settings.py VLLMSettings

    def __post_init__(self):
        for name in ("max_tool_turns", "max_turn_tokens", "max_obs_tokens", "max_context_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"rollout.{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.group_size, int) or self.group_size < 2:
            raise ValueError(f"rollout.group_size must be an integer >= 2 (group-relative advantages need "
                             f"at least two rollouts), got {self.group_size!r}")
        if not is_finite_number(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"rollout.top_p must be a number in (0, 1], got {self.top_p!r}")
        for name in ("lean_forward", "share_identical"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"rollout.{name} must be true or false, got {getattr(self, name)!r}")
        if not is_finite_number(self.temperature) or self.temperature < 0:
            raise ValueError(f"rollout.temperature must be a finite number >= 0 (0: greedy), got {self.temperature!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"rollout.threads must be null or an integer >= 1, got {self.threads!r}")
        if self.engine not in ("hf", "vllm"):
            raise ValueError(f"rollout.engine must be hf or vllm, got {self.engine!r}")


def context_problem(chat: ChatFormat, prompts: Sequence[list[int]], max_context_tokens: int, which: str) -> str | None:
    """One line when not one of `prompts` (token ids) leaves room for a first turn within max_context_tokens."""
    opened = [len(prompt) + len(chat.assistant_header) for prompt in prompts]
    if not opened or min(opened) < max_context_tokens:
        return None
    return (f"rollout.max_context_tokens={max_context_tokens} leaves no room for a first turn: {which} take "
            f"{min(opened)} to {max(opened)} tokens with the assistant header; raise it above that plus "
            "rollout.max_turn_tokens")


@contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op threads set to n inside the block (None: left alone), restored after.

    A decode forward's operations are small (one token per rollout), so splitting one across threads
    gains little and costs a thread barrier per operation; where another process holds the other
    core, every barrier waits out a scheduler time slice. Thread counts change no result here: the
    sampled tokens and their log-probabilities are the same (tests/test_rollout.py)."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


RewardFn = Callable[[str | None, Question], tuple[float, str | None, bool]]
"""(final turn text or None, question) -> (reward, extracted answer, answer block well formed)."""


class _Live:
    """A rollout in progress: its growing trajectory, its environment and its budgets."""

    def __init__(self, question: Question, trajectory: Trajectory, env, obs_tokens_used: int = 0, request: int = 0):
        self.question = question
        self.request = request  # which of several continuation requests (boundaries) this rollout serves
        self.traj = trajectory
        self.env = env
        self.obs_tokens_used = obs_tokens_used
        self.invalid_turns = int(trajectory.diagnostics.get("invalid_tool_calls", 0))
        self.final_text: str | None = None

    def append(self, ids: Sequence[int], *, sampled_turn: int | None = None, logprobs: Sequence[float] | None = None):
        t = self.traj
        t.input_ids.extend(ids)
        if sampled_turn is None:
            t.loss_mask.extend([0] * len(ids))
            t.turn_ids.extend([NON_POLICY] * len(ids))
            t.old_logprobs.extend([0.0] * len(ids))
        else:
            t.loss_mask.extend([1] * len(ids))
            t.turn_ids.extend([sampled_turn] * len(ids))
            t.old_logprobs.extend(logprobs)


class RolloutWorker:
    def __init__(
        self,
        model,
        chat: ChatFormat,
        env_factory: Callable[[], object],
        reward_fn: RewardFn,
        cfg: RolloutConfig,
        generator: torch.Generator | None = None,
        engine=None,
    ):
        self.model = model
        self.engine = engine  # None: the model samples its own turns; else a colocated engine (agent/engines/)
        self.chat = chat
        self.env_factory = env_factory
        self.reward_fn = reward_fn
        self.cfg = cfg
        self.generator = generator
        tok = chat.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else chat.eos_ids[0]
        self.stop = StopChecker(tok, STOP_STRINGS, chat.eos_ids)

    # ------------------------------------------------------------------ entry points
    def rollout(self, questions: Sequence[Question], group_size: int,
                generators: Sequence[torch.Generator] | None = None) -> list[list[Trajectory]]:
        """G rollouts for each question; returns one list of G trajectories per question.

        generators: one per question, the random stream its rollouts sample from (None: the worker's). The
        questions of one stream sample what a call of only them with that generator samples, so several
        batches, each with its own stream, run in one call with the outcomes of one call each (the held-out
        test: a decode step costs little more with more rows)."""
        if generators is not None and len(generators) != len(questions):
            raise ValueError(f"{len(generators)} generators for {len(questions)} questions; give one per question")
        if generators is not None and self.engine is not None:
            return self._rollout_per_stream(questions, group_size, generators)
        live, streams = [], []
        prompts = [self.chat.prompt_ids(question.text) for question in questions]
        self._refuse_a_context_no_prompt_fits(prompts)
        for qi, (question, prompt) in enumerate(zip(questions, prompts)):
            live.extend(self._start(question, prompt, qi) for _ in range(group_size))
            streams.extend([generators[qi] if generators is not None else None] * group_size)
        finished = self._run(live, streams)
        groups: list[list[Trajectory]] = [[] for _ in questions]
        for item in finished:
            groups[item.traj.group].append(item.traj)
        return groups

    def _refuse_a_context_no_prompt_fits(self, prompts: Sequence[list[int]]) -> None:
        """A context too short for every prompt would end each rollout before its first token, and a run
        would train on nothing without a word; one prompt too long is a rollout cut short (finish "context")."""
        problem = context_problem(self.chat, prompts, self.cfg.max_context_tokens, "this batch's prompts")
        if problem:
            raise ConfigError(problem)

    def _rollout_per_stream(self, questions, group_size: int, generators) -> list[list[Trajectory]]:
        """An engine draws one seed per call from the worker's generator: one call per stream, as a worker
        of each stream's own would make."""
        own, out = self.generator, [None] * len(questions)
        order = list(dict.fromkeys(id(g) for g in generators))  # streams in the order their questions come
        try:
            for stream in order:
                index = [i for i, g in enumerate(generators) if id(g) == stream]
                self.generator = generators[index[0]]
                for i, groups in zip(index, self.rollout([questions[i] for i in index], group_size)):
                    out[i] = groups
        finally:
            self.generator = own
        return out

    def continue_from(self, trajectory: Trajectory, boundary: int, question: Question, n: int) -> list[Trajectory]:
        """n fresh continuations of `trajectory` from its state S_boundary (environment restored, prefix kept)."""
        return self.continue_from_many(trajectory, [boundary], question, n)[0]

    def continue_from_many(self, trajectory: Trajectory, boundaries: Sequence[int], question: Question,
                           n: int) -> list[list[Trajectory]]:
        """n continuations from each of several states S_b of `trajectory`, all sampled in one batch.

        ProVer verifies a segment from the states before and after it; one batch for both halves
        the number of sequential decode steps."""
        return self.continue_from_states([(trajectory, b) for b in boundaries], question, n)

    def continue_from_states(self, states: Sequence[tuple[Trajectory, int]], question: Question,
                             n: int) -> list[list[Trajectory]]:
        """n continuations from each state S_b of the (trajectory, b) pairs, possibly of several rollouts of
        one question, all sampled in one batch (the credit-fidelity ground truth measures every state of a
        group at once)."""
        for trajectory, boundary in states:
            if not 0 <= boundary <= trajectory.num_tool_turns:
                raise ValueError(f"boundary {boundary} is outside 0..{trajectory.num_tool_turns}")
        used = self._observation_tokens_before(states)
        live = [self._resume(trajectory, boundary, question, index, used[index])
                for index, (trajectory, boundary) in enumerate(states) for _ in range(n)]
        out: list[list[Trajectory]] = [[] for _ in states]
        for item in self._run(live):
            out[item.request].append(item.traj)
        return out

    def _observation_tokens_before(self, states: Sequence[tuple[Trajectory, int]]) -> list[int]:
        """Per (trajectory, b): the observation tokens its first b turns used, which count against
        max_obs_tokens in a continuation. Each observation is encoded once, however many states of its
        rollout are continued and however many continuations each state has."""
        totals: dict[int, list[int]] = {}  # id(trajectory) -> running totals over its observations, from 0
        for trajectory, _ in states:
            if id(trajectory) not in totals:
                lengths = (len(self.chat.encode(o)) for o in trajectory.observations)
                totals[id(trajectory)] = list(accumulate(lengths, initial=0))
        # (as a slice observations[:b] would: a b past the observations counts them all)
        return [totals[id(t)][min(b, len(t.observations))] for t, b in states]

    def _resume(self, trajectory: Trajectory, boundary: int, question: Question, request: int,
                obs_used: int) -> _Live:
        """A rollout positioned at S_boundary of `trajectory`, `obs_used` observation tokens already spent:
        its environment restored, its prefix kept."""
        cut = trajectory.boundaries[boundary]
        env = self.env_factory()
        env.restore(trajectory.snapshots[boundary])
        traj = Trajectory(
            question_id=trajectory.question_id,
            input_ids=trajectory.input_ids[:cut],
            loss_mask=trajectory.loss_mask[:cut],
            turn_ids=trajectory.turn_ids[:cut],
            boundaries=trajectory.boundaries[: boundary + 1],
            snapshots=trajectory.snapshots[: boundary + 1],
            old_logprobs=trajectory.old_logprobs[:cut],
            turn_texts=trajectory.turn_texts[:boundary],
            observations=trajectory.observations[:boundary],
            group=trajectory.group,
            continued_from=boundary,
        )
        return _Live(question, traj, env, obs_tokens_used=obs_used, request=request)

    def _start(self, question: Question, prompt: list[int], group: int) -> _Live:
        """A fresh rollout at S_0: a reset environment and the prompt as its only tokens."""
        env = self.env_factory()
        env.reset()
        traj = Trajectory(
            question_id=question.id,
            input_ids=list(prompt),
            loss_mask=[0] * len(prompt),
            turn_ids=[NON_POLICY] * len(prompt),
            boundaries=[len(prompt)],
            snapshots=[env.snapshot()],
            old_logprobs=[0.0] * len(prompt),
            group=group,
        )
        return _Live(question, traj, env)

    def replay(self, question: Question, turn_texts: Sequence[str]) -> Trajectory:
        """Teacher-forced rollout: scripted turn texts go through exactly the loop a sampled turn goes
        through (same parsing, environment steps, masks and boundaries), so warm-start data has the
        layout of real rollouts. Scripted tokens get loss_mask 1 and log-probability 0."""
        item = self._start(question, self.chat.prompt_ids(question.text), group=0)
        header = list(self.chat.assistant_header)
        for text in turn_texts:
            item.append(header)
            tokens = self.chat.encode(text)
            budget = self.cfg.max_context_tokens - len(item.traj.input_ids)
            if budget <= 0:
                self._finish(item, "context")
                break
            tokens = tokens[:budget]
            if not self._step(item, tokens, [0.0] * len(tokens), "stop_string", budget, self._read(tokens)):
                break
        else:
            self._finish(item, "no_answer")
        return item.traj

    # ------------------------------------------------------------------ the loop
    def _run(self, live: list[_Live], streams: Sequence[torch.Generator | None] | None = None) -> list[_Live]:
        on_cpu = self.engine is None and (self.model is None or next(self.model.parameters()).device.type == "cpu")
        with intra_op_threads(self.cfg.threads if on_cpu else None):
            return self._run_all(live, streams or [None] * len(live))

    def _run_all(self, live: list[_Live], streams: Sequence[torch.Generator | None]) -> list[_Live]:
        finished: list[_Live] = []
        sampler = self._sampler()
        for item, stream in zip(live, streams):
            max_new = self._open_turn(item)
            if max_new:
                # an engine's sampler takes no generator; rollout gives an engine one stream per call
                sampler.add(item, item.traj.input_ids, max_new, **({"generator": stream} if stream is not None else {}))
            else:
                finished.append(item)
        while sampler.live:
            ended = []
            for item, turn in sampler.step():
                budget = self.cfg.max_context_tokens - len(item.traj.input_ids)
                tokens = turn.token_ids[:budget]
                ended.append((item, tokens, turn.logprobs[:budget], turn.stop, budget, self._read(tokens)))
            self._prefetch_tools(ended)
            for item, *step in ended:
                if self._step(item, *step):
                    max_new = self._open_turn(item)
                    if max_new:
                        sampler.next_turn(item, item.traj.input_ids, max_new)
                        continue
                sampler.release(item)
                finished.append(item)
        return finished

    def _sampler(self):
        """Only sampling differs between engines; everything on the environment side is shared."""
        if self.engine is None:
            return TurnSampler(self.model, temperature=self.cfg.temperature, top_p=self.cfg.top_p, pad_id=self.pad_id,
                               stop=self.stop, generator=self.generator, use_lean_forward=self.cfg.lean_forward,
                               share_identical=self.cfg.share_identical, max_length=self.cfg.max_context_tokens)
        # One seed per batch from the worker's generator (itself a function of run seed, step and rank).
        seed = 0
        if self.generator is not None:
            seed = int(torch.randint(0, 2**62, (1,), generator=self.generator, device=self.generator.device))
        return self.engine.turn_sampler(temperature=self.cfg.temperature, top_p=self.cfg.top_p,
                                        stop_strings=STOP_STRINGS, eos_ids=self.chat.eos_ids, seed=seed)

    def _read(self, tokens: list[int]) -> tuple[str, ParsedTurn]:
        """A sampled turn's text and what it asks for; decoded and parsed once per turn."""
        text = self.chat.tokenizer.decode(tokens, skip_special_tokens=False)
        return text, parse_turn(text)

    def _prefetch_tools(self, ended: list[tuple]) -> None:
        """Turns that ended at the same step share their tools' batchable work (one query-embedding
        call for all their searches) before each call runs on its own in _step."""
        calls = [read[1].call for *_, read in ended if read[1].kind == "tool"]
        prefetch = getattr(ended[0][0].env, "prefetch", None) if len(calls) > 1 else None
        if prefetch is not None:
            prefetch(calls)

    def _open_turn(self, item: _Live) -> int:
        """Append the assistant header; returns how many tokens the turn may sample (0: context full, finished)."""
        item.append(list(self.chat.assistant_header))
        budget = self.cfg.max_context_tokens - len(item.traj.input_ids)
        if budget <= 0:
            self._finish(item, "context")
            return 0
        return min(self.cfg.max_turn_tokens, budget)

    def _step(self, item: _Live, tokens: list[int], logprobs: list[float], stop: str, budget: int,
              read: tuple[str, ParsedTurn]) -> bool:
        """Apply one sampled turn (`read` = self._read(tokens)); returns whether the rollout goes on."""
        text, parsed = read
        k = item.traj.num_tool_turns
        cut_short = stop == "length" or len(tokens) >= budget
        is_final = parsed.kind == "answer" or cut_short
        item.append(tokens, sampled_turn=ANSWER_TURN if is_final else k, logprobs=logprobs)
        item.traj.turn_texts.append(text)
        # The chat template closes the turn; a sampled end-of-turn token already did part of it.
        end = list(self.chat.assistant_end)
        if tokens and end and tokens[-1] == end[0]:
            end = end[1:]
        if parsed.kind == "answer":
            item.append(end)
            item.final_text = text
            self._finish(item, "answer")
            return False
        if cut_short:
            self._finish(item, "context" if len(tokens) >= budget else "turn_tokens")
            return False

        if parsed.kind == "tool":
            observation = item.env.step(parsed.call)
        else:
            item.invalid_turns += 1
            observation = error_observation(parsed.error)
        obs_ids = self.chat.encode(observation)
        room = self.cfg.max_obs_tokens - item.obs_tokens_used
        # An observation that fills the room left exactly is shown whole; only one longer than it is cut (and
        # then the rollout ends: gold evidence reads a cut last observation as showing nothing).
        spent = len(obs_ids) > room
        if spent:
            obs_ids = obs_ids[: max(room, 0)] + self.chat.encode(TRUNCATION_NOTE)
        item.obs_tokens_used += len(obs_ids)
        item.append(end)
        item.append(self.chat.observation_ids(obs_ids))
        item.traj.observations.append(observation)
        item.traj.boundaries.append(len(item.traj.input_ids))
        item.traj.snapshots.append(item.env.snapshot())
        if spent:
            self._finish(item, "obs_budget")
            return False
        if item.traj.num_tool_turns >= self.cfg.max_tool_turns:
            self._finish(item, "tool_limit")
            return False
        return True

    def _finish(self, item: _Live, reason: str) -> None:
        t = item.traj
        t.finish_reason = reason
        reward, answer, well_formed = self.reward_fn(item.final_text, item.question)
        t.reward, t.answer = float(reward), answer
        diagnostics = dict(item.env.diagnostics.as_dict())
        diagnostics.update(
            invalid_tool_calls=item.invalid_turns,
            answer_format_valid=bool(well_formed),
            num_tool_turns=t.num_tool_turns,
            policy_tokens=t.num_policy_tokens,
            finish_reason=reason,
        )
        t.diagnostics = diagnostics
