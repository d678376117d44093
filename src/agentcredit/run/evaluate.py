"""Evaluation of a policy on held-out questions: one rollout per question (split=test: k =
data.test_samples_per_question), summary metrics, trajectories, per-question outcomes.

    python scripts/evaluate.py split=val n=200                 # the configured model's base policy
    python scripts/evaluate.py ckpt_path=outputs/runs/<run>/checkpoints/last.ckpt split=test

`scripts/evaluate.py` is the command; this module is what it does, in the order it does it:
`evaluation_config` (a checkpoint's training overrides first, then the command's; every key checked
before a model loads), `evaluate_policy` (load the checkpoint's weights, roll out),
`write_trajectories` (and beside it `<split>_outcomes.jsonl`, one line per question) and `result_line` (the
JSON line's generic figures; `n` counts rollouts). The synthetic world's own
figures (the answer prior, the oracle's searches) come from `agentcredit.testbed.report`, which
imports this module and never the other way round. The command's keys (split, n, temperature,
eval_seed, batch_size, oracle_queries) are declared in conf/eval.yaml.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import yaml
from omegaconf import DictConfig

from agentcredit.agent.engines import build_engine
from agentcredit.agent.rollout import RolloutConfig, RolloutWorker
from agentcredit.agent.trajectory import Trajectory
from agentcredit.common.configs import ConfigError, compose_config
from agentcredit.common.secret_keys import override_key
from agentcredit.env.reward import normalize_answer
from agentcredit.records import atomic_write_text, json_line
from agentcredit.checks.validation import prepare_config
from agentcredit.world.types import Question

SPLITS = ("train", "val", "test")


# ----- the config of an evaluation ----------------------------------------------------------------


def training_overrides(ckpt_path: str | None) -> list[str]:
    """The overrides the checkpoint's run was started with (`<run>/.hydra/overrides.yaml`), if recorded."""
    if not ckpt_path:
        return []
    recorded = Path(ckpt_path).resolve().parents[1] / ".hydra" / "overrides.yaml"
    if not recorded.exists():
        return []
    try:
        overrides = yaml.safe_load(recorded.read_bytes().decode("utf-8"))
    # ValueError: an integer of thousands of digits; RecursionError: deep nesting.
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as err:
        raise ConfigError(f"{recorded} cannot be read ({type(err).__name__}); pass the run's overrides "
                          "on the command line instead") from None
    if overrides is None:
        return []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(f"{recorded} is not a list of overrides; pass the run's overrides on the command line")
    return [o for o in overrides if not o.startswith(("ckpt_path=", "resume=", "hydra."))]


def _composed_with_recorded(recorded: list[str], command_overrides: Sequence[str], ckpt_path: str) -> DictConfig:
    """conf/eval.yaml with the run's recorded overrides, then the command's. A recorded override that no longer
    composes (a key renamed or removed since the run, a damaged line) is one ConfigError line naming the file:
    Hydra's own message would blame the command line and suggest a `+` that adds the stale key."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return compose_config(merge_overrides(recorded, command_overrides), config_name="eval")
    except (HydraException, OmegaConfBaseException) as err:
        try:
            compose_config(list(command_overrides), config_name="eval")
        except (HydraException, OmegaConfBaseException):
            raise err from None  # the command's own override: Hydra's message is the right one
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        where = Path(ckpt_path).resolve().parents[1] / ".hydra" / "overrides.yaml"
        raise ConfigError(f"the run's recorded overrides ({where}) do not compose with this version's configs: "
                          f"{first_line[:300]}; pass the run's settings on the command line instead") from None


def merge_overrides(first: Sequence[str], then: Sequence[str]) -> list[str]:
    """`first` then `then`, a key given in both keeping its value from `then`."""
    later = {override_key(o) for o in then}
    return [o for o in first if override_key(o) not in later] + list(then)


def check_evaluation_settings(cfg: DictConfig) -> None:
    """The keys conf/eval.yaml adds to the run config, each failure one ConfigError line."""
    from agentcredit.checks import config_checks as checks

    settings = {key: cfg.get(key) for key in ("split", "n", "temperature", "batch_size", "eval_seed", "oracle_queries")}
    try:
        checks.need_choice(settings, "split", "", SPLITS)
        if settings["n"] is not None:  # null: data.n_test or data.n_val questions, the whole train split
            checks.need_int(settings, "n", "", low=1)
        checks.need_number(settings, "temperature", "", 0.0)
        checks.need_int(settings, "batch_size", "", low=1)
        checks.need_int(settings, "eval_seed", "")
        checks.need_bool(settings, "oracle_queries", "")
    except checks.ValueProblem as err:
        raise ConfigError(str(err)) from None
    # Checked here, not after the rollout: the oracle replays the synthetic world's question programs.
    if settings["oracle_queries"] and cfg.data.get("questions_path") is not None:
        raise ConfigError("oracle_queries=true needs synthetic questions: the oracle cannot solve questions from "
                          "data.questions_path")


def evaluation_config(cfg: DictConfig, command_overrides: Sequence[str] = ()) -> DictConfig:
    """The checked config to evaluate under. With a checkpoint, conf/eval.yaml is composed again with the
    training run's own overrides first and `command_overrides` after them, so that the model, data
    (and its split seed) and rollout settings are the run's unless the command says otherwise."""
    from agentcredit.checks import config_checks as checks

    try:  # before its folder is read for the run's overrides: a folder or a number is one line, not a traceback
        checks.check_ckpt_path(cfg.get("ckpt_path"))
    except checks.ValueProblem as err:
        raise ConfigError(str(err)) from None
    recorded = training_overrides(cfg.get("ckpt_path"))
    if recorded:
        cfg = _composed_with_recorded(recorded, command_overrides, cfg.get("ckpt_path"))
    try:
        check_evaluation_settings(cfg)
        return prepare_config(cfg)
    except ConfigError as err:
        source = _recorded_source(str(err), recorded, command_overrides)
        if source is None:
            raise
        where = Path(cfg.ckpt_path).resolve().parents[1] / ".hydra" / "overrides.yaml"
        raise ConfigError(f"{err} (from the training run's own override {source}, recorded in {where}; give the key "
                          "another value on this command line)") from None


def _recorded_source(message: str, recorded: Sequence[str], command_overrides: Sequence[str]) -> str | None:
    """The recorded training override whose key a config error names, when this command does not set that key: the
    user did not type the value the error is about."""
    typed = {override_key(o) for o in command_overrides}
    for override in recorded:
        key = override_key(override)
        if key and key not in typed and message.startswith(key) and message[len(key):len(key) + 1] in (" ", "=", ""):
            return override
    return None


# ----- rollouts ------------------------------------------------------------------------------------


def read_policy_state(ckpt_path: str) -> tuple[dict, int]:
    """(the policy's weights, the training step) of a Lightning checkpoint of this project (its `policy.`
    state_dict entries); a checkpoint that holds none is one CheckpointError line."""
    from agentcredit.common.checkpoint_file import CheckpointError, read_checkpoint

    prefix = "policy."
    checkpoint = read_checkpoint(ckpt_path, weights_only=False)  # our own file: trusted
    weights = checkpoint.get("state_dict")
    state = {k[len(prefix):]: v for k, v in weights.items() if str(k).startswith(prefix)} if isinstance(weights, dict) else {}
    if not state:
        raise CheckpointError(f"{ckpt_path} holds no policy weights; give a checkpoint written by train.py")
    return state, int(checkpoint.get("global_step", 0))


def check_policy_fits(policy, state: dict, ckpt_path: str) -> None:
    """One CheckpointError line when `state` (from `ckpt_path`) does not fit the configured policy's names and shapes."""
    from agentcredit.common.checkpoint_file import CheckpointError, state_dict_problem

    problem = state_dict_problem(policy.state_dict(), state)
    if problem:
        raise CheckpointError(f"{ckpt_path} is a checkpoint of another model: it does not fit the configured model "
                              f"({problem}); pass the model overrides the run was trained with")


def apply_policy_state(policy, state: dict, ckpt_path: str) -> None:
    check_policy_fits(policy, state, ckpt_path)
    policy.load_state_dict(state, strict=True)


def load_policy_weights(policy, ckpt_path: str) -> None:
    """The policy's weights from a Lightning checkpoint of this project; a checkpoint that holds none, or
    weights of another shape, is one CheckpointError line."""
    apply_policy_state(policy, read_policy_state(ckpt_path)[0], ckpt_path)


def rollout_questions(components, questions: Sequence[Question], temperature: float, batch_size: int = 32,
                      seed: int = 0, rollout_cfg: RolloutConfig | None = None, samples: int = 1) -> list[Trajectory]:
    """`samples` rollouts per question, a question's next to each other, in question order (samples=1: one
    rollout each, as evaluation always sampled)."""
    cfg = rollout_cfg or components.rollout_cfg
    cfg = RolloutConfig(**{**vars(cfg), "temperature": temperature})
    generator = torch.Generator().manual_seed(seed)
    components.policy.eval()
    engine = build_engine(cfg, components.policy, components.tokenizer, seed=seed)  # None for rollout.engine=hf
    worker = RolloutWorker(components.policy, components.chat, components.env_factory, components.reward_fn, cfg, generator,
                           engine=engine)
    out: list[Trajectory] = []
    try:
        for start in range(0, len(questions), batch_size):
            groups = worker.rollout(questions[start : start + batch_size], group_size=samples)
            out.extend(t for g in groups for t in g)
    finally:
        if engine is not None:
            engine.close()
    return out


@dataclass
class Evaluation:
    cfg: DictConfig  # as `evaluation_config` returned it
    components: Any  # agentcredit.run.compose.Components
    questions: list[Question]  # the question of each rollout: each question `samples` times in a row
    trajectories: list[Trajectory]  # one per entry of `questions`, in order
    seconds: float  # the rollouts' wall time (building and loading excluded)
    samples: int = 1  # rollouts per question (split=test: data.test_samples_per_question)


def evaluation_questions(datamodule, cfg: DictConfig) -> list[Question]:
    """The first `n` questions of the split; `n: null` takes as many as training's own evaluation does."""
    from agentcredit.lit.datamodule import first_questions  # (Lightning: imported once a model is built, not before)

    n = cfg.n if cfg.n is not None else {"test": cfg.data.n_test, "val": cfg.data.n_val}.get(cfg.split)
    asked_by = "n" if cfg.n is not None else f"data.n_{cfg.split}"
    return first_questions(list(datamodule.split_questions(cfg.split)), n, cfg.split, asked_by, "evaluated")


def evaluate_policy(cfg: DictConfig, components) -> Evaluation:
    """One rollout per question of the checkpoint's policy (`cfg.ckpt_path`), else of the configured
    model as training would start it (after its warm start). `components` come from
    `compose.build_components(cfg, base_policy=not cfg.ckpt_path)`: a checkpoint's weights replace
    the base policy's, so it need not be loaded (or built) first."""
    if cfg.ckpt_path:
        load_policy_weights(components.policy, cfg.ckpt_path)
    questions = evaluation_questions(components.datamodule, cfg)
    samples = samples_per_question(cfg)
    start = time.time()
    trajectories = rollout_questions(components, questions, float(cfg.temperature), int(cfg.batch_size),
                                     int(cfg.eval_seed), samples=samples)
    rows = [q for q in questions for _ in range(samples)]
    return Evaluation(cfg, components, rows, trajectories, time.time() - start, samples)


def samples_per_question(cfg: DictConfig) -> int:
    """Rollouts per question: data.test_samples_per_question on the test split, one on the others."""
    return int(cfg.data.get("test_samples_per_question", 1)) if cfg.split == "test" else 1


# ----- figures -------------------------------------------------------------------------------------


def is_number(answer: str) -> bool:
    return normalize_answer(answer).replace(" ", "").isdigit()


def answer_kind_match(answers: Sequence[str | None], golds: Sequence[str]) -> float:
    """Share of given answers that are a number exactly when the gold answer is one: whether a policy
    at least answers a "how many" or "what year" question with a number and the others with a name.
    Missing answers (None) are left out; 0.0 when there are none."""
    pairs = [(a, g) for a, g in zip(answers, golds) if a is not None]
    return sum(is_number(a) == is_number(g) for a, g in pairs) / len(pairs) if pairs else 0.0


def summarise(trajectories: Sequence[Trajectory], questions: Sequence[Question], correct_score: float = 1.0) -> dict:
    n = len(trajectories)
    correct = [t.reward >= correct_score for t in trajectories]
    turns = sum(len(t.turn_texts) for t in trajectories)
    invalid = sum(int(t.diagnostics.get("invalid_tool_calls", 0)) for t in trajectories)
    per_template: dict[str, list[bool]] = {}
    for q, ok in zip(questions, correct):
        per_template.setdefault(q.template, []).append(ok)
    tool_calls = [t.num_tool_turns for t in trajectories]
    diag_keys = ("repeated_queries", "reopened_documents", "repeated_finds", "navigation_errors", "invalid_calls")
    return {
        "n": n,
        "success": sum(correct) / max(n, 1),
        "format_valid": sum(bool(t.diagnostics.get("answer_format_valid")) for t in trajectories) / max(n, 1),
        "well_formed_turns": 1 - invalid / max(turns, 1),
        # Of the rollouts that answer: a number exactly where the gold answer is one ("how many", "what year").
        "answer_kind_match": answer_kind_match([t.answer for t in trajectories], [q.answer for q in questions]),
        "mean_tool_calls": sum(tool_calls) / max(n, 1),
        "max_tool_calls": max(tool_calls, default=0),
        "per_template": {k: sum(v) / len(v) for k, v in sorted(per_template.items())},
        "finish_reasons": dict(Counter(t.finish_reason for t in trajectories)),
        "diagnostics": {k: sum(float(t.diagnostics.get(k, 0)) for t in trajectories) / max(n, 1) for k in diag_keys},
    }


def write_trajectories(evaluation: Evaluation, path: Path) -> Path:
    """One JSON line per rollout: `Trajectory.summary()` with the question, its gold answer and template
    (records.run.QuestionOutcome is what scripts/success_by_hops.py reads back), and beside it
    `<split>_outcomes.jsonl` (`write_question_outcomes`). Replaced whole: a kill while it is written leaves no
    half of a file that looks like a smaller evaluation."""
    lines = []
    for question, trajectory in zip(evaluation.questions, evaluation.trajectories):
        record = {"question": question.text, "gold_answer": question.answer, "template": question.template,
                  **trajectory.summary()}
        lines.append(json_line(record))  # a non-finite figure as null: every reader refuses NaN
    atomic_write_text(path, "".join(lines))
    write_question_outcomes(evaluation, path.parent / f"{evaluation.cfg.split}_outcomes.jsonl")
    return path


def write_question_outcomes(evaluation: Evaluation, path: Path) -> Path:
    """One line per question (schema: agentcredit.records.outcomes; test_outcomes.jsonl for split=test, the file
    a run's final test writes): its success, tool calls and tokens, each the mean over its samples."""
    from agentcredit.lit.question_outcomes import question_record
    from agentcredit.records.outcomes import write_outcomes

    k, rows = evaluation.samples, list(zip(evaluation.questions, evaluation.trajectories))
    is_success = evaluation.components.reward_fn.is_success
    records = [question_record(rows[i][0], [t for _, t in rows[i:i + k]], is_success) for i in range(0, len(rows), k)]
    return write_outcomes(path, sorted(records, key=lambda record: record["id"]))


def model_name(cfg: DictConfig) -> str:
    """The model as the command names it: `tiny`, `smollm2_135m`, or a Hugging Face model's id or path."""
    return str(cfg.model.get("name_or_path") or cfg.model.kind)


def result_line(evaluation: Evaluation, trajectories_path: Path | None = None, more_figures: dict | None = None) -> dict:
    """What was evaluated and the figures any policy on any questions gets (`summarise`), then
    `more_figures` (the caller's: the testbed's, say), then the base policy's info.json record when the
    policy started from one (last: it is long)."""
    cfg = evaluation.cfg
    summary = summarise(evaluation.trajectories, evaluation.questions, float(cfg.env.reward.correct_score))
    result = {"model": model_name(cfg), "ckpt_path": cfg.ckpt_path, "split": cfg.split, **summary,
              "samples_per_question": evaluation.samples, "temperature": float(cfg.temperature), "eval_seed": int(cfg.eval_seed),
              "seconds": round(evaluation.seconds, 1)}
    if trajectories_path is not None:
        result["trajectories"] = str(trajectories_path)
    result.update(more_figures or {})
    if evaluation.components.base_policy_info:
        result["base_policy"] = evaluation.components.base_policy_info
    return result
