"""Schemas of what a run writes and its readers read back: the run summary (test_summary.json), an exported
summary (<arm>_seed<k>.summary.json), the essentials of resolved_config.yaml a comparison needs, a
per-question outcome (a line of scripts/evaluate.py's trajectories.jsonl) and bench_step's figures line.
Rows of metrics.csv are read by records.metrics.

Numbers a run cannot have written are refused where they would make a statistic meaningless or
overflow it: non-finite values, magnitudes beyond METRIC_LIMIT, fractions outside [0, 1], seeds
beyond 64 bits. Names that become file or folder names (an arm, a job folder) must pass `safe_name`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from agentcredit.records.files import safe_name
from agentcredit.records.reading import RecordError, validate

# No metric of a run comes near this; beyond it a value is damage, and squaring it in a spread overflows.
METRIC_LIMIT = 1e15
MAX_CONFIG_BYTES = 16 * 2**20  # a resolved config is a few KB

Metric = Annotated[float, Field(allow_inf_nan=False, ge=-METRIC_LIMIT, le=METRIC_LIMIT)]
Fraction = Annotated[float, Field(allow_inf_nan=False, ge=0.0, le=1.0)]
Count = Annotated[float, Field(allow_inf_nan=False, ge=0.0, le=METRIC_LIMIT)]
Seed = Annotated[int, Field(ge=-(2**63), lt=2**63)]
Step = Annotated[int, Field(ge=0, lt=2**53)]


def _no_bool(value: Any) -> Any:
    """JSON true/false is not a number or a name here (pydantic's lax mode would read it as 1/0)."""
    if isinstance(value, bool):
        raise ValueError("a true/false where a number or a name belongs")
    return value


def _file_name(value: str) -> str:
    return safe_name(value, "name")


def _empty_is_missing(value: Any) -> Any:
    return None if value == "" else value


# A name that may become one path component (an arm, a job folder).
Name = Annotated[str, Field(max_length=200), AfterValidator(_file_name)]
OptionalName = Annotated[Name | None, BeforeValidator(_empty_is_missing)]
NumberOrNone = Annotated[Metric | None, BeforeValidator(_no_bool)]


class RunSummary(BaseModel):
    """test_summary.json in a run folder (train.write_test_summary): what the run was and its held-out
    metrics. Other keys are kept by the file, not read here."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    arm: OptionalName = None
    seed: Annotated[Seed | None, BeforeValidator(_no_bool)] = None
    test_accuracy: Annotated[Fraction | None, BeforeValidator(_no_bool)] = Field(None, alias="test/accuracy")
    test_format_valid: Annotated[Fraction | None, BeforeValidator(_no_bool)] = Field(None, alias="test/format_valid")
    test_tool_calls: Annotated[Count | None, BeforeValidator(_no_bool)] = Field(None, alias="test/tool_calls")
    test_invalid_tool_calls: Annotated[Count | None, BeforeValidator(_no_bool)] = Field(
        None, alias="test/invalid_tool_calls")

    def test(self) -> dict[str, float]:
        """The held-out metrics it holds, under their logged names, in TEST_KEYS order."""
        values = self.model_dump(by_alias=True, include={"test_accuracy", "test_format_valid", "test_tool_calls",
                                                         "test_invalid_tool_calls"})
        return {k: v for k, v in values.items() if v is not None}


TEST_KEYS = ("test/accuracy", "test/format_valid", "test/tool_calls", "test/invalid_tool_calls")


class ExportedSummary(BaseModel):
    """<arm>_seed<k>.summary.json (comparison.export_runs): the job folder's name, arm, seed and held-out
    metrics. `name` becomes a folder under a sweep (scripts/restore_sweep.py) and `arm` a file name."""

    model_config = ConfigDict(extra="ignore")

    name: Name
    arm: Name
    seed: Annotated[Seed, BeforeValidator(_no_bool)]
    test: dict[Annotated[str, Field(max_length=200)], Annotated[Metric, BeforeValidator(_no_bool)]] = Field(
        default_factory=dict, max_length=1000)

    @field_validator("test")
    @classmethod
    def _held_out_bounds(cls, test: dict[str, float]) -> dict[str, float]:
        """The bounds a run's own test_summary.json has (RunSummary: a rate in [0, 1], a count >= 0): an exported
        accuracy of 7.5 would otherwise be compared as 750% and restored as a finished job."""
        try:
            RunSummary.model_validate({key: value for key, value in test.items() if key in TEST_KEYS})
        except ValidationError as error:
            first = error.errors()[0]
            why = first["msg"][:1].lower() + first["msg"][1:]
            raise ValueError(f"{first['loc'][0]} {first['input']!r}: {why}") from None
        return test


class CreditSection(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: Annotated[str, Field(max_length=200)] = "unknown"


class JudgeSection(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Annotated[str, Field(max_length=200)] | None = None


class RunConfig(BaseModel):
    """What a comparison needs of a run's resolved_config.yaml: the arm (or the credit method and judge it
    is named after) and the seed."""

    model_config = ConfigDict(extra="ignore")

    # the length bound on the string alone: on `str | None` pydantic applies it to a null too (a TypeError)
    arm: Annotated[Annotated[str, Field(max_length=200)] | None, BeforeValidator(_empty_is_missing)] = None
    # The setting the run trained, as its test_summary.json names it (run/recorded_arm.py); written at the start
    # since 2026-12-07, so a run killed before that file is named as it would have been.
    recorded_arm: Annotated[Annotated[str, Field(max_length=200)] | None, BeforeValidator(_empty_is_missing)] = None
    seed: Annotated[Seed, BeforeValidator(_no_bool)] = 0
    credit: CreditSection = Field(default_factory=CreditSection)
    judge: JudgeSection | None = None

    @field_validator("judge", mode="before")
    @classmethod
    def _judge_any(cls, value):
        # judge: null, or a section without a kind, or a non-section (a plain string in old configs) name no judge.
        return value if isinstance(value, dict) else None

    def arm_name(self) -> str:
        """The arm its test_summary.json would name; for a run started before the name was recorded, its `arm=`,
        else its credit method (with the judge for prover)."""
        if self.recorded_arm:
            return self.recorded_arm
        if self.arm:
            return self.arm
        judge = self.judge.kind if self.judge else None
        return f"{self.credit.name}_{judge}" if self.credit.name == "prover" and judge else self.credit.name


def read_run_config(path: str | Path) -> RunConfig:
    """resolved_config.yaml's essentials; RecordError (one line naming the file) when it cannot be read."""
    path = Path(path)
    try:
        data = path.read_bytes()
        if len(data) > MAX_CONFIG_BYTES:
            raise RecordError(f"{path}: {len(data)} bytes is not a resolved config")
        value = yaml.safe_load(data.decode("utf-8-sig"))
    except RecordError:
        raise
    # ValueError: an integer of thousands of digits; RecursionError: deep nesting.
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError, TypeError) as error:
        raise RecordError(f"{path}: unreadable ({type(error).__name__})") from None
    if not isinstance(value, dict) or not isinstance(value.get("credit", {}), dict):
        raise RecordError(f"{path}: not a run's resolved config (no credit section)")
    return validate(RunConfig, value, str(path))


class QuestionOutcome(BaseModel):
    """A line of scripts/evaluate.py's trajectories.jsonl, the figures read back from it (Trajectory.summary()
    with the question, its gold answer and template; other keys are kept by the file)."""

    model_config = ConfigDict(extra="ignore")

    question: Annotated[str, Field(max_length=100_000)]
    reward: Annotated[Metric, BeforeValidator(_no_bool)]
    num_tool_turns: Annotated[int, Field(ge=0, lt=2**31), BeforeValidator(_no_bool)]


class BenchFigures(BaseModel):
    """The JSON line a `benchmarks/bench_step.py --child` run prints: its step figures (seconds, shares,
    token counts) and each timed step's time."""

    model_config = ConfigDict(extra="allow")

    # Ratios divide by these: a step takes some time.
    step_s: Annotated[Count, Field(gt=0), BeforeValidator(_no_bool)]
    step_cpu_s: Annotated[Count, Field(gt=0), BeforeValidator(_no_bool)]
    tokens_per_s: Annotated[Count, BeforeValidator(_no_bool)]
    rollout_s: Annotated[Metric, BeforeValidator(_no_bool)]
    credit_s: Annotated[Metric, BeforeValidator(_no_bool)]
    update_s: Annotated[Metric, BeforeValidator(_no_bool)]
    startup_s: Annotated[Metric, BeforeValidator(_no_bool)]
    steps: list[Annotated[Metric, BeforeValidator(_no_bool)]]

    @model_validator(mode="after")
    def _numeric_extras(self):
        # The parent takes the median of every figure across repeats: each must be a finite number.
        for key, value in (self.model_extra or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or abs(value) > METRIC_LIMIT:
                raise ValueError(f"figure {key[:40]!r} is not a finite number")
        return self
