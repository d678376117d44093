"""Adding credit methods to a finished measurement, without measuring its ground truth again.

    python scripts/credit_fidelity.py add_to=docs/results/fidelity/<name> methods=[m1,m2] <its overrides>

The ground truth is the measurement's cost (30 min on the long preset); a new method needs only its own
credit on the same rollouts. So, in the order it runs:

    plan = plan_addition(folder, cfg)         # the folder read and checked before any model loads
    records = add_methods(cfg, overrides, plan)   # per question: re-sample, compare, the new credit

Each question's G rollouts are sampled again with the measurement's own seed (`run.question_seed`) and
compared with the stored ones: reward, finish reason, action kinds and turn texts. Any difference is one
error naming the question, and nothing of it is written: credit on other rollouts than the stored A*'s
would be no measurement. Only the listed methods' credit and cost are computed (each with its own seed, as
a measurement does, and over whole steps of `data.prompts_per_step` questions for a method whose credit
depends on the step); values, A*, its halves and the other methods' credit stay as stored.

Progress goes to adding.jsonl in the folder, one line per question as it finishes, so a stopped run started
again continues where it stopped (and `n` smaller than the folder's count adds to the first n questions
only: a cheap check that this machine re-samples the measurement). turns.jsonl and the reports are
untouched until every question has the methods; then turns.jsonl is rewritten whole (atomically) with
them, fidelity.json keeps the measured config with this addition listed under `added`, and adding.jsonl
is removed. Viewer samples (view/<method>/) are written by a measurement only.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig

from agentcredit.common.configs import ConfigError
from agentcredit.records import RecordError, atomic_write_text, parse_json, read_jsonl_records
from agentcredit.records.fidelity import AddedCredit, TurnsRecord
from agentcredit.records.reading import validate
from agentcredit.world.user import UserDataError

PROGRESS = "adding.jsonl"
# Measured settings that decide which rollouts and which A* a folder holds (checked against fidelity.json).
MEASURED = ("group_size", "mc", "split", "ckpt_path")


class ResampleMismatch(UserDataError):
    """A question's rollouts sampled again differ from the stored ones (this machine or code does not
    reproduce the measurement); one line naming the question."""


@dataclass
class Addition:
    folder: Path
    records: list[dict]  # turns.jsonl as stored, in file order
    stored: list[str]  # the methods the folder holds
    new: list[str]  # the methods to add
    settings: str  # the records' settings key once the methods are added
    config: dict | None  # fidelity.json's measured config
    done: dict[int, dict] = field(default_factory=dict)  # question index -> its adding.jsonl entry
    written: bool = False  # turns.jsonl already holds the methods (stopped before the reports)


def _read_turns(path: Path) -> list[dict]:
    """Every record of turns.jsonl, raw as written; one ConfigError line for any line that is not one
    (a measurement still to finish or repair: its question would lack the added methods)."""
    records, seen = [], set()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                value = parse_json(raw.decode("utf-8-sig" if number == 1 else "utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise ConfigError(f"add_to: {where}: not a readable record; finish the measurement "
                                  "(hydra.run.dir=<folder>) before adding methods") from None
            try:
                record = validate(TurnsRecord, value, where)
            except RecordError as err:
                raise ConfigError(f"add_to: {str(err)[:200]}; finish or repair the measurement before adding methods") from None
            if record.index in seen:
                raise ConfigError(f"add_to: {where}: question {record.index} is already on an earlier line")
            if records and record.methods != records[0]["methods"]:
                raise ConfigError(f"add_to: {where}: methods {record.methods} differ from line 1's {records[0]['methods']}")
            seen.add(record.index)
            records.append(value)
    if not records:
        raise ConfigError(f"add_to: {path} holds no record")
    return records


def _read_progress(path: Path, addition: Addition) -> dict[int, dict]:
    """adding.jsonl's finished questions of this same addition; a line cut short by a kill is left out
    (that question is added again); an unfinished addition of other methods is one ConfigError line."""
    from agentcredit.fidelity.run import end_on_a_line

    if not path.exists():
        return {}
    done = {}
    for _, entry in read_jsonl_records(path, AddedCredit):
        if entry.methods != addition.new or entry.settings != addition.settings:
            raise ConfigError(f"add_to: {path} holds an unfinished addition of {entry.methods} (other methods or "
                              f"settings than methods={addition.new}); finish that one or remove the file")
        done[entry.index] = entry.model_dump()
    end_on_a_line(path)
    return done


def plan_addition(folder: str | Path, cfg: DictConfig) -> Addition:
    """The folder's records, the methods to add and the progress so far, checked before any model loads:
    each failure is one ConfigError line."""
    from agentcredit.fidelity.run import check_outputs, settings_key
    from agentcredit.fidelity.summary import read_config

    folder = Path(folder)
    if not (folder / "turns.jsonl").is_file():
        raise ConfigError(f"add_to: {folder}/turns.jsonl does not exist")
    check_outputs(folder)
    records = _read_turns(folder / "turns.jsonl")
    stored = list(records[0]["methods"])
    listed = [str(m) for m in cfg.methods]
    already = [m for m in listed if m in stored]
    config = read_config(folder / "fidelity.json")
    if already == listed and stored[-len(listed):] == listed and (folder / PROGRESS).is_file():
        # stopped after turns.jsonl was rewritten with the methods and before the reports: only those remain
        return Addition(folder, records, stored[: -len(listed)], listed, records[0]["settings"], config, written=True)
    if already:
        raise ConfigError(f"add_to: {folder} already holds {already}; list only methods it lacks (it holds {stored})")
    if config:
        for key in MEASURED:
            if key in config and config[key] != cfg.get(key):
                raise ConfigError(f"add_to: {folder} was measured with {key}={config[key]}, this command has "
                                  f"{key}={cfg.get(key)}; give the measurement's overrides {config.get('overrides')}")
    if records[0]["settings"] != settings_key(cfg, stored):
        # The key hashes the whole composed config, which grows as the code gains knobs; the re-sampled
        # rollouts, compared question by question, decide whether this is still the measurement.
        print(f"warning: add_to: the config composed now differs from the one {folder} was measured with "
              "(new defaults since, or other overrides); each question's rollouts are sampled again and "
              "compared with the stored ones", file=sys.stderr, flush=True)
    addition = Addition(folder, records, stored, listed, settings_key(cfg, stored + listed), config)
    if (folder / PROGRESS).exists() and not (folder / PROGRESS).is_file():
        raise ConfigError(f"add_to: {folder / PROGRESS} is not a file")
    try:
        addition.done = _read_progress(folder / PROGRESS, addition)
    except RecordError as err:
        raise ConfigError(f"add_to: {err}") from None
    return addition


def compare_rollouts(record: dict, trajectories, question) -> None:
    """ResampleMismatch (one line) at the first difference between the stored rollouts and `trajectories`."""
    from agentcredit.fidelity.ground_truth import acted_at_end
    from agentcredit.fidelity.run import rollout_kinds

    name = f"question {record['index']} ({record['question_id']})"
    if question.id != record["question_id"]:
        raise ResampleMismatch(f"add_to: {name}: the split's question {record['index']} is now {question.id!r}")
    if len(trajectories) != len(record["rollouts"]):
        raise ResampleMismatch(f"add_to: {name}: {len(trajectories)} rollouts sampled, {len(record['rollouts'])} stored")
    for g, (traj, stored) in enumerate(zip(trajectories, record["rollouts"])):
        now = {"reward": traj.reward, "finish_reason": traj.finish_reason,
               "kinds": rollout_kinds(traj, acted_at_end(traj)), "turns": list(traj.turn_texts)}
        for key, value in now.items():
            if value != stored[key]:
                shown = (f"turn {next(i for i, (a, b) in enumerate(zip(value + [None], stored[key] + [None])) if a != b)}"
                         if key in ("kinds", "turns") else f"{stored[key]!r} stored, {value!r} now")
                raise ResampleMismatch(f"add_to: {name} re-sampled differently: rollout {g}'s {key} ({shown}); "
                                       "this machine or code does not reproduce the measurement, so methods cannot "
                                       "be added to it (nothing written for this question)")


def add_step(cfg: DictConfig, records: list[dict], questions, components, methods, engine, settings: str) -> list[dict]:
    """The adding.jsonl entries of one step's questions (`records`, consecutive): each question's rollouts
    sampled again and compared, then each added method's credit on them (over the whole step for a method with
    a step-level hook, as in training) and its cost."""
    from agentcredit.fidelity.ground_truth import acted_at_end
    from agentcredit.fidelity.run import credits_of_step, group_rollouts, methods_on_group

    sampled, groups, costs = [], [], []
    for record in records:
        index = int(record["index"])
        t0 = time.perf_counter()
        trajectories = group_rollouts(cfg, index, questions[index], components, engine)
        compare_rollouts(record, trajectories, questions[index])
        resampled_s = time.perf_counter() - t0
        by_method, cost = methods_on_group(cfg, index, questions[index], trajectories, components, methods, engine)
        print(f"add_to: question {index} re-sampled identically ({resampled_s:.1f} s)", file=sys.stderr, flush=True)
        sampled.append(trajectories)
        groups.append(by_method)
        costs.append(cost)
    credits = credits_of_step(methods, groups, sampled, [[acted_at_end(t) for t in ts] for ts in sampled])
    return [{"index": int(record["index"]), "question_id": record["question_id"], "settings": settings,
             "methods": [m.label for m in methods],
             "credit": [{label: credits[label][q][g] for label in credits} for g in range(len(sampled[q]))],
             "cost": costs[q], "notes": {m.label: m.note for m in methods if m.note}}
            for q, record in enumerate(records)]


def merged(addition: Addition) -> list[dict]:
    """The folder's records with every added method's credit and cost, and the settings key that says so."""
    out = []
    for record in addition.records:
        entry = addition.done[int(record["index"])]
        record = dict(record, settings=addition.settings, methods=addition.stored + addition.new)
        record["rollouts"] = [dict(r, credit={**r["credit"], **c}) for r, c in zip(record["rollouts"], entry["credit"])]
        record["cost"] = dict(record["cost"], methods={**record["cost"]["methods"], **entry["cost"]})
        notes = {**record.get("notes", {}), **entry.get("notes", {})}
        if notes:
            record["notes"] = notes
        out.append(record)
    return out


def add_methods(cfg: DictConfig, command_overrides: Sequence[str], addition: Addition,
                progress: bool = True) -> list[dict] | None:
    """The folder's records with the methods added (turns.jsonl rewritten), or None when questions at or
    beyond `n` are still without them (their progress is in adding.jsonl)."""
    from tqdm import tqdm

    from agentcredit.fidelity.run import (hooked_in_a_cut_step, load_policy_and_methods, measured_overrides,
                                         record_line, step_questions, steps_of)

    if addition.written:
        return addition.records
    by_index = {int(r["index"]): r for r in addition.records}
    count = min(int(cfg.n), max(by_index) + 1)
    if hooked_in_a_cut_step(count, cfg, addition.new, measured_overrides(cfg, command_overrides)):
        # n itself was checked (run.check_whole_steps); here the folder holds fewer questions than n
        raise ConfigError(f"add_to: {addition.folder} holds {count} questions, not a multiple of "
                          f"data.prompts_per_step={step_questions(cfg)}: {addition.new} computes credit over whole steps")
    if any(i < count and i not in addition.done for i in by_index):
        import torch

        components, methods, questions, engine, _ = load_policy_and_methods(cfg, command_overrides, progress)
        # Whole steps, as a measurement takes them: a step with any question still to add is added whole.
        steps = [[by_index[i] for i in indices if i in by_index]
                 for indices in steps_of(count, step_questions(cfg, methods))]
        todo = [step for step in steps if any(int(r["index"]) not in addition.done for r in step)]
        try:
            with torch.no_grad(), (addition.folder / PROGRESS).open("a") as out:
                for step in tqdm(todo, desc="adding methods", unit="step", disable=not progress, file=sys.stderr):
                    for entry in add_step(cfg, step, questions, components, methods, engine, addition.settings):
                        if entry["index"] in addition.done:
                            continue
                        out.write(json.dumps(entry, default=float) + "\n")
                        out.flush()
                        addition.done[entry["index"]] = entry
        finally:
            if engine is not None:
                engine.close()
    missing = [int(r["index"]) for r in addition.records if int(r["index"]) not in addition.done]
    if missing:
        print(f"add_to: {len(addition.records) - len(missing)} of {len(addition.records)} questions have "
              f"{addition.new} (in {addition.folder / PROGRESS}); run again with n>{max(missing)} to add the rest",
              file=sys.stderr, flush=True)
        return None
    records = merged(addition)
    lines = [record_line(record) for record in records]
    if not all(usable for _, usable in lines):
        raise RecordError(f"add_to: a merged record fails its schema (see the warning above); {addition.folder}/turns.jsonl kept")
    atomic_write_text(addition.folder / "turns.jsonl", "".join(line + "\n" for line, _ in lines))
    return records


def added_config(addition: Addition, command_overrides: Sequence[str]) -> dict:
    """fidelity.json's config: the measured one, with this addition listed under `added`."""
    config = dict(addition.config or {})
    config["added"] = [*config.get("added", []), {"methods": addition.new, "overrides": list(command_overrides)}]
    return config


def finish(addition: Addition) -> None:
    """The progress file of a finished addition, removed (its credit is in turns.jsonl now)."""
    (addition.folder / PROGRESS).unlink(missing_ok=True)
