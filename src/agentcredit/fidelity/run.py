"""One credit-fidelity measurement, in the order it runs (scripts/credit_fidelity.py is the command):

    cfg = fidelity_config(cfg, overrides)      # checked before any model loads (method names, mc >= 2, ...)
    measure(cfg, overrides, out_dir)           # rollouts, ground truth, every method's credit, per question
    write_reports(records, cfg, out_dir)       # fidelity.json, fidelity.md, fidelity.png, viewer samples

Per question: G rollouts of the policy (the base policy, or `ckpt_path`'s weights), the Monte Carlo
ground truth of every acting state (`fidelity.ground_truth`), then each method's turn credit on those
same rollouts (`fidelity.methods`). When a method's credit depends on the whole step (turn-critic's whitening
over the batch), questions are measured in steps of `data.prompts_per_step` consecutive ones, as training
rolls them out, so that it gets that credit over as many groups; otherwise one at a time. Each step's records
are appended to turns.jsonl as it finishes, each question with its own seeds, so a run stopped part way and
started again in the same folder (`hydra.run.dir=<folder>`) measures only the steps it has not finished, and
gives the same table.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Sequence

import torch
from omegaconf import DictConfig

from agentcredit.common.configs import ConfigError, compose_config, plain
from agentcredit.common.paths import stable_hash

# Keys of conf/fidelity.yaml that change no measured question (how many, how reported, how batched).
REPORT_KEYS = ("n", "bootstrap", "export", "from_turns", "add_to", "samples", "max_batch", "threshold")


def check_fidelity_settings(cfg: DictConfig) -> None:
    """conf/fidelity.yaml's keys, each failure one ConfigError line (the method names included)."""
    from agentcredit.checks import config_checks as checks
    from agentcredit.run.evaluate import SPLITS
    from agentcredit.fidelity.methods import method_override

    settings = {key: cfg.get(key) for key in ("split", "n", "group_size", "mc", "bootstrap", "threshold", "eval_seed",
                                               "max_batch", "samples")}
    try:
        checks.need_choice(settings, "split", "", SPLITS)
        checks.need_int(settings, "n", "", low=1)
        checks.need_int(settings, "group_size", "", low=2)
        checks.need_int(settings, "mc", "", low=2)
        checks.need_int(settings, "bootstrap", "", low=0)
        checks.need_number(settings, "threshold", "", 0.0)
        checks.need_int(settings, "eval_seed", "")
        checks.need_int(settings, "max_batch", "", low=1)
        checks.need_int(settings, "samples", "", low=0)
    except checks.ValueProblem as err:
        raise ConfigError(str(err)) from None
    # group_size=100000000 was accepted and grew without bound: rows decoded together against the machine
    from agentcredit.models.memory_bounds import fidelity_memory_problem

    problem = fidelity_memory_problem(settings, plain(cfg.model), plain(cfg.rollout), plain(cfg.trainer))
    if problem:
        raise ConfigError(problem)
    methods = cfg.get("methods")
    if isinstance(methods, str):
        raise ConfigError(f"methods must be a list such as methods=[grpo,trace], got {methods!r}")
    if not methods:
        raise ConfigError("methods is empty; give at least one, e.g. methods=[grpo,trace]")
    labels = [str(m) for m in methods]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"methods lists a method twice: {labels}")
    for label in labels:
        method_override(label)


def fidelity_config(cfg: DictConfig, command_overrides: Sequence[str] = ()) -> DictConfig:
    """The checked config. With a checkpoint, its run's own overrides come first (as scripts/evaluate.py
    does), so the model and data are the run's."""
    from agentcredit.run.evaluate import merge_overrides, training_overrides
    from agentcredit.checks.validation import prepare_config

    recorded = training_overrides(cfg.get("ckpt_path"))
    if recorded:
        cfg = compose_config(merge_overrides(recorded, command_overrides), config_name="fidelity")
    check_fidelity_settings(cfg)
    check_whole_steps(cfg, measured_overrides(cfg, command_overrides))
    if cfg.get("ckpt_path") and not Path(cfg.ckpt_path).is_file():
        raise ConfigError(f"ckpt_path {cfg.ckpt_path!r} is not a file")
    return prepare_config(cfg)


def step_questions(cfg: DictConfig, methods=None) -> int:
    """Questions measured together: a training step's (`data.prompts_per_step`) when a method's credit depends on
    the whole step (of `methods`, the measured MethodUnderTest entries; None: any method), else one at a time."""
    from agentcredit.fidelity.methods import has_step_hook

    if methods is not None and not any(has_step_hook(m) for m in methods):
        return 1
    return int(cfg.data.prompts_per_step)


def step_hooked(labels: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """The methods among `labels` whose advantages depend on the whole step (composed as each is measured)."""
    from agentcredit.credit.registry import get_credit
    from agentcredit.fidelity.methods import compose_method

    return [label for label in labels if get_credit(str(compose_method(label, overrides).credit.name)).step_advantages]


def hooked_in_a_cut_step(count: int, cfg: DictConfig, labels: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """The methods among `labels` whose credit depends on the whole step, when `count` questions end inside a step
    (their last questions' credit would depend on where it ends); [] at a whole number of steps. The methods are
    composed only in that case."""
    if count % step_questions(cfg) == 0:  # before any method is composed: the step a hooked method would take
        return []
    return step_hooked(labels, overrides)


def check_whole_steps(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """One ConfigError line when a method with a step-level hook would be measured over a step cut short by `n`."""
    hooked = hooked_in_a_cut_step(int(cfg.n), cfg, [str(m) for m in cfg.methods], overrides)
    if hooked:
        per_step = step_questions(cfg)
        raise ConfigError(f"n={cfg.n}: {', '.join(hooked)} computes credit over a whole step of "
                          f"data.prompts_per_step={per_step} questions; give n a multiple of {per_step}")


def measured_overrides(cfg: DictConfig, command_overrides: Sequence[str]) -> list[str]:
    """The overrides every method's config is composed from: the checkpoint run's, then the command's."""
    from agentcredit.run.evaluate import merge_overrides, training_overrides

    return merge_overrides(training_overrides(cfg.get("ckpt_path")), command_overrides)


def settings_key(cfg: DictConfig, methods: Sequence[str] | None = None) -> str:
    """What a question's record depends on: the whole config less the reporting keys (with `methods` in
    place of cfg.methods when given: the key of a folder's records once methods are added to them)."""
    tree = {k: v for k, v in plain(cfg).items() if k not in REPORT_KEYS}
    if methods is not None:
        tree["methods"] = list(methods)
    return stable_hash(tree)


def question_seed(cfg: DictConfig, purpose: str, index: int, label: str = "") -> int:
    return int(stable_hash([int(cfg.eval_seed), purpose, index, label]), 16) % (2**63)


def _worker(components, cfg: DictConfig, seed: int, engine):
    from agentcredit.agent.rollout import RolloutWorker

    generator = torch.Generator().manual_seed(seed)
    return RolloutWorker(components.policy, components.chat, components.env_factory, components.reward_fn,
                         components.rollout_cfg, generator, engine=engine)


def group_rollouts(cfg: DictConfig, index: int, question, components, engine) -> list:
    """Question `index`'s G rollouts with the measurement's own seed: what `add_to` samples again and compares."""
    return _worker(components, cfg, question_seed(cfg, "rollout", index), engine).rollout([question], int(cfg.group_size))[0]


def methods_on_group(cfg: DictConfig, index: int, question, trajectories, components, methods,
                     engine) -> tuple[dict, dict]:
    """Every method's (credit group, token advantages) on question `index`'s rollouts, each method sampling with
    its own seed (`fidelity.methods.method_advantages`), and each method's cost: two dicts by label."""
    from agentcredit.fidelity.methods import method_advantages

    groups, costs = {}, {}
    for entry in methods:
        worker = _worker(components, cfg, question_seed(cfg, "method", index, entry.label), engine)
        group, advantages, costs[entry.label] = method_advantages(entry, trajectories, question, worker)
        groups[entry.label] = (group, advantages)
    return groups, costs


def credits_of_step(methods, groups: Sequence[dict], trajectories: Sequence[list], answered: Sequence[list[bool]]) -> dict:
    """label -> the turn credit of every rollout of every question of one step (`methods_on_group`'s groups, in
    question order), the step-level hook applied where a method has one."""
    from agentcredit.fidelity.methods import step_credits

    return {entry.label: step_credits(entry, [g[entry.label] for g in groups], trajectories, answered)
            for entry in methods}


def measure_step(cfg: DictConfig, indices: Sequence[int], questions, components, methods, engine,
                 settings: str) -> list[dict]:
    """The records of one step's questions (`indices`, consecutive): each question's rollouts, their ground
    truth, every method's turn credit and the costs; `settings` is `settings_key(cfg)`, computed once per
    measurement. A method with a step-level hook gets it over these questions' groups, as in training."""
    import time

    from agentcredit.fidelity.ground_truth import group_truth

    sampled, truths, groups, costs = [], [], [], []
    for index in indices:
        t0 = time.perf_counter()
        trajectories = group_rollouts(cfg, index, questions[index], components, engine)
        rollout_cost = {"tokens": float(sum(t.num_policy_tokens for t in trajectories)),
                        "seconds": time.perf_counter() - t0}
        truth, truth_cost = group_truth(_worker(components, cfg, question_seed(cfg, "truth", index), engine),
                                        trajectories, questions[index], int(cfg.mc), int(cfg.max_batch))
        by_method, method_costs = methods_on_group(cfg, index, questions[index], trajectories, components, methods,
                                                   engine)
        sampled.append(trajectories)
        truths.append(truth)
        groups.append(by_method)
        costs.append({"rollout": rollout_cost, "truth": truth_cost, "methods": method_costs})
    credits = credits_of_step(methods, groups, sampled, [[t.answered for t in truth] for truth in truths])
    success = float(components.reward_fn.correct_score)
    records = []
    for q, index in enumerate(indices):
        question = questions[index]
        rollouts = [{
            "reward": traj.reward, "success": traj.reward >= success, "finish_reason": traj.finish_reason,
            "kinds": rollout_kinds(traj, truth.answered),
            "values": truth.values, "truth": truth.truth, "truth_halves": list(truth.truth_halves),
            "credit": {label: credits[label][q][g] for label in credits},
            "turns": traj.turn_texts, "observations": traj.observations, "answer": traj.answer,
        } for g, (traj, truth) in enumerate(zip(sampled[q], truths[q]))]
        records.append({"index": index, "question_id": question.id, "question": question.text,
                        "gold_answer": question.answer, "settings": settings, "methods": [m.label for m in methods],
                        "rollouts": rollouts, "notes": {m.label: m.note for m in methods if m.note}, "cost": costs[q]})
    return records


def steps_of(count: int, per_step: int) -> list[range]:
    """Question indices 0..count−1 in steps of `per_step` consecutive ones (the last may be shorter)."""
    return [range(start, min(start + per_step, count)) for start in range(0, count, per_step)]


def load_finished(path: Path, key: str) -> dict[int, dict]:
    """Records already measured in this folder with the same settings (question index -> record); a line
    left out by `read_records` (one warning each) is a question measured again."""
    from agentcredit.fidelity.summary import read_records

    if not path.exists():
        return {}
    finished = {}
    for record in read_records(path):
        if record["settings"] != key:
            raise ConfigError(f"{path} was measured with other settings; measure into another folder "
                              "(hydra.run.dir=...) or remove it")
        finished[record["index"]] = record
    return finished


def end_on_a_line(path: Path) -> None:
    """Make turns.jsonl end on a line boundary before appending to it. A kill while a record was written
    leaves its line cut short: `read_records` left it out (that question is measured again), and the next
    record must not be glued onto it. An unreadable tail is cut off (it holds no record a reader could
    use); a readable one that only lacks its newline gets one."""
    from agentcredit.records import parse_json

    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        parse_json(data[start:].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        with path.open("r+b") as f:
            f.truncate(start)
            f.flush()
            os.fsync(f.fileno())
        print(f"warning: {path}: the last line was cut short by an earlier stop ({len(data) - start} bytes); "
              "removed, its question is measured again", file=sys.stderr, flush=True)
        return
    with path.open("ab") as f:
        f.write(b"\n")


def record_line(record: dict) -> tuple[str, bool]:
    """The JSON line of a measured record, and whether a reader will use it: a record that fails its
    schema (a method's credit that is nan, say) is still written, so nothing measured is lost, but it is
    left out of the table now exactly as `read_records` will leave it out later."""
    from agentcredit.records import RecordError, parse_json
    from agentcredit.records.fidelity import TurnsRecord
    from agentcredit.records.reading import validate

    line = json.dumps(record, default=float)
    try:
        validate(TurnsRecord, parse_json(line), f"question {record.get('index')}")
    except (RecordError, ValueError) as err:
        print(f"warning: {str(err)[:300]}; written to turns.jsonl but left out of the table", file=sys.stderr,
              flush=True)
        return line, False
    return line, True


def load_policy_and_methods(cfg: DictConfig, command_overrides: Sequence[str], progress: bool = True):
    """(components, methods, questions, engine, step): what measuring (or adding to) a folder samples with,
    step being the training step of the measured weights (0 for the base policy)."""
    from agentcredit.agent.engines import build_engine
    from agentcredit.run.compose import build_components
    from agentcredit.run.evaluate import apply_policy_state, check_policy_fits, evaluation_questions, read_policy_state
    from agentcredit.fidelity.methods import build_methods, set_critic_heads

    # The checkpoint is read once, before any model loads; its weights replace the initial ones only after
    # the references copied those, as in training.
    state, step = read_policy_state(cfg.ckpt_path) if cfg.ckpt_path else (None, 0)
    components = build_components(cfg, progress=progress)
    if state is not None:
        check_policy_fits(components.policy, state, cfg.ckpt_path)  # another model: one line, before the references
    methods = build_methods([str(m) for m in cfg.methods], measured_overrides(cfg, command_overrides), components)
    set_critic_heads(methods, cfg.ckpt_path)  # a learned critic's trained head, or one line saying why not
    if state is not None:
        apply_policy_state(components.policy, state, cfg.ckpt_path)
    components.policy.eval()
    questions = evaluation_questions(components.datamodule, cfg)
    engine = build_engine(components.rollout_cfg, components.policy, components.tokenizer, seed=int(cfg.eval_seed))
    return components, methods, questions, engine, step


def rollout_kinds(trajectory, answered: bool) -> list[str]:
    """The kind of each action of a rollout (search, open, ..., invalid for an unparsable tool turn, answer)."""
    from agentcredit.agent.protocol import parse_turn

    parsed = [parse_turn(text) for text in trajectory.turn_texts]
    kinds = [p.call.name.split(".")[-1] if p.kind == "tool" else "invalid" for p in parsed[: trajectory.num_tool_turns]]
    return kinds + (["answer"] if answered else [])


def measure(cfg: DictConfig, command_overrides: Sequence[str], out_dir: Path,
            progress: bool = True) -> tuple[list[dict], int]:
    """Every question's record, in question order (measured now or earlier into the same folder), and the
    training step of the measured weights (0 for the base policy)."""
    from tqdm import tqdm

    path = out_dir / "turns.jsonl"
    settings = settings_key(cfg)
    finished = load_finished(path, settings)
    end_on_a_line(path)
    components, methods, questions, engine, step = load_policy_and_methods(cfg, command_overrides, progress)
    records = []
    try:
        with torch.no_grad(), path.open("a") as out:
            for indices in tqdm(steps_of(len(questions), step_questions(cfg, methods)), desc="credit fidelity",
                                unit="step", disable=not progress, file=sys.stderr):
                if all(index in finished for index in indices):
                    measured = [finished[index] for index in indices]
                else:  # the whole step again (its seeds give the same records); only the missing ones are written
                    measured = measure_step(cfg, indices, questions, components, methods, engine, settings)
                for record in measured:
                    if record["index"] in finished:
                        records.append(finished[record["index"]])
                        continue
                    line, usable = record_line(record)
                    out.write(line + "\n")
                    out.flush()
                    if usable:
                        records.append(record)
    finally:
        if engine is not None:
            engine.close()
    return records, step


def viewer_samples(records: list[dict], label: str, limit: int, step: int = 0) -> list[dict]:
    """Records for scripts/view_credit.py: the first `limit` rollouts with `label`'s credit and A* per turn."""
    out = []
    for record in records:
        rewards = [r["reward"] for r in record["rollouts"]]
        for g, r in enumerate(record["rollouts"]):
            if len(out) >= limit:
                return out
            answered = bool(r["kinds"]) and r["kinds"][-1] == "answer"
            credit, truth = r["credit"][label], r["truth"]
            tools = len(truth) - (1 if answered else 0)
            out.append({"step": step, "method": label, "question_id": record["question_id"], "question": record["question"],
                        "gold_answer": record["gold_answer"], "rollout": g, "group_rewards": rewards,
                        "reward": r["reward"], "finish_reason": r["finish_reason"], "answer": r["answer"],
                        "turns": r["turns"], "observations": r["observations"], "num_tool_turns": tools,
                        "turn_advantages": credit[:tools], "answer_advantage": credit[tools] if answered else None,
                        "a_star": truth[:tools], "answer_a_star": truth[tools] if answered else None})
    return out


REPORTS = ("fidelity.json", "fidelity.md", "fidelity.png")


def check_outputs(out_dir: Path, export_to: str | Path | None = None, labels: Sequence[str] = ()) -> None:
    """Every path a measurement writes, checked before any model loads (one ConfigError line): a report
    name that is a folder, or an export target that is a file, would otherwise fail only after the
    whole measurement."""
    from agentcredit.records import check_output_path

    try:
        for name in ("turns.jsonl", *REPORTS):
            check_output_path(out_dir / name)
        if (out_dir / "turns.jsonl").exists() and not (out_dir / "turns.jsonl").is_file():
            raise ValueError(f"{out_dir / 'turns.jsonl'} is not a file")
        for label in labels:  # the viewer's samples, view/<method>/credit_samples.jsonl
            check_output_path(out_dir / "view" / label / "credit_samples.jsonl")
        if export_to:
            # Not fresh=True: export replaces each of its files whole and from_turns reads only those,
            # so an earlier export into the same folder has nothing stale left to mix in.
            check_output_path(export_to, kind="folder")
            for name in ("turns.jsonl", *REPORTS):
                check_output_path(Path(export_to) / name)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def write_reports(records: list[dict], out_dir: Path, *, threshold: float, n_boot: int, samples: int = 0,
                  config: dict | None = None, step: int = 0) -> dict:
    """fidelity.json (every figure), fidelity.md (the table), fidelity.png; viewer samples per method.
    Each file is replaced whole (a kill or a full disk leaves the earlier one)."""
    from agentcredit.fidelity.summary import json_ready, markdown, plot, summarise
    from agentcredit.records import atomic_write_text, json_line, safe_name
    from agentcredit.world.user import UserDataError

    if not any(rollout["truth"] for record in records for rollout in record["rollouts"]):
        # every figure is over turns: with none, the bootstrap over questions has nothing to draw from
        raise UserDataError(f"no rollout of the {len(records)} record(s) took a turn; there is no credit to compare")
    summary = summarise(records, threshold=threshold, n_boot=n_boot)
    if config is not None:
        summary["config"] = config
    summary = json_ready(summary)
    atomic_write_text(out_dir / "fidelity.json", json.dumps(summary, indent=1, allow_nan=False) + "\n")
    atomic_write_text(out_dir / "fidelity.md", markdown(summary))
    plot(records, out_dir / "fidelity.png")
    if samples and records:
        for label in records[0]["methods"]:
            folder = out_dir / "view" / safe_name(label, "method")
            folder.mkdir(parents=True, exist_ok=True)
            lines = [json_line(sample) for sample in viewer_samples(records, label, samples, step)]  # NaN as null, as training writes them
            atomic_write_text(folder / "credit_samples.jsonl", "".join(lines))
    return summary


def export(out_dir: Path, target: Path) -> Path:
    """The committed copy (docs/results/...): turns.jsonl and the reports, from which `from_turns=`
    regenerates them; each file replaced whole, through a temp file beside it."""
    from agentcredit.records import atomic_write_bytes

    target.mkdir(parents=True, exist_ok=True)
    for name in ("turns.jsonl", *REPORTS):
        if (out_dir / name).resolve() != (target / name).resolve():
            atomic_write_bytes(target / name, (out_dir / name).read_bytes())
    return target
