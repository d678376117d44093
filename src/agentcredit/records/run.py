"""Schemas of what a run writes and its readers read back: the run summary (test_summary.json), an exported
summary (<arm>_seed<k>.summary.json), the essentials of resolved_config.yaml a comparison needs, a steps
row (one row of metrics.csv or of an exported .steps.csv), a per-question outcome (a line of
scripts/evaluate.py's trajectories.jsonl) and bench_step's figures line.

Numbers a run cannot have written are refused where they would make a statistic meaningless or
overflow it: non-finite values, magnitudes beyond METRIC_LIMIT, fractions outside [0, 1], seeds
beyond 64 bits. Names that become file or folder names (an arm, a job folder) must pass `safe_name`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from agentcredit.records.files import safe_name
from agentcredit.records.reading import RecordError, validate, warn_left_out

# No metric of a run comes near this; beyond it a value is damage, and squaring it in a spread overflows.
METRIC_LIMIT = 1e15
MAX_CSV_BYTES = 256 * 2**20  # a 100k-step run's metrics.csv is tens of MB
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

    arm: Annotated[str | None, BeforeValidator(_empty_is_missing), Field(max_length=200)] = None
    seed: Annotated[Seed, BeforeValidator(_no_bool)] = 0
    credit: CreditSection = Field(default_factory=CreditSection)
    judge: JudgeSection | None = None

    @field_validator("judge", mode="before")
    @classmethod
    def _judge_any(cls, value):
        # judge: null, or a section without a kind, or a non-section (a plain string in old configs) name no judge.
        return value if isinstance(value, dict) else None

    def arm_name(self) -> str:
        """The arm as the run named it, else its credit method (with the judge for prover)."""
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


class StepsRow(BaseModel):
    """One row of metrics.csv (or an exported .steps.csv): its step and the numbers asked for; an empty
    cell is a metric not logged at that step."""

    step: Step
    values: dict[str, Metric]

    @field_validator("step", mode="before")
    @classmethod
    def _integral_step(cls, value):
        # Lightning writes "3"; "3.0" is the same step, "3.5" or "inf" is damage.
        if isinstance(value, str):
            number = float(value)
            if not math.isfinite(number) or number != int(number):
                raise ValueError(f"step {value[:20]!r} is not a whole number")
            return int(number)
        return value


def _csv_lines(path: Path, warn) -> tuple[list[str], bool]:
    """The file's lines, and whether its last line was cut short (no line end: a kill during its write);
    a cut-short line is left out with a warning, as a half-written number would read as another value."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CSV_BYTES + 1)
    except OSError as error:
        raise RecordError(f"{path}: cannot be read ({type(error).__name__})") from None
    if len(data) > MAX_CSV_BYTES:
        raise RecordError(f"{path}: larger than {MAX_CSV_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(f"{path}: not UTF-8 text") from None
    lines = text.split("\n")
    cut = lines.pop() if lines else ""
    if cut.strip():
        warn(f"{path}:{len(lines) + 1}: cut short (no line end)")
    return lines, bool(cut.strip())


def read_steps_rows(path: str | Path, columns: Sequence[str] | None = None, *, prefixes: Sequence[str] = (),
                    warn=warn_left_out) -> Iterator[tuple[int, StepsRow]]:
    """(line, row) for each row of a metrics CSV that holds a valid step and valid numbers in the columns
    asked for (`columns` and any starting with one of `prefixes`; None: every column). A row that fails
    is left out with one warning naming the file and line; a file that is not CSV text is one RecordError."""
    path = Path(path)
    lines, _ = _csv_lines(path, warn)
    wanted = None if columns is None else set(columns)
    try:
        reader = csv.reader(io.StringIO("\n".join(lines) + "\n" if lines else ""))
        header = next(reader, None)
        if header is None:
            return
        for number, cells in enumerate(reader, start=2):
            if not cells or cells == [""]:
                continue
            if len(cells) != len(header):
                warn(f"{path}:{number}: {len(cells)} cells under a header of {len(header)}")
                continue
            row = dict(zip(header, cells))
            if not row.get("step"):
                continue
            values = {k: v for k, v in row.items() if k != "step" and v != "" and (
                wanted is None or k in wanted or k.startswith(tuple(prefixes)))}
            try:
                yield number, validate(StepsRow, {"step": row["step"], "values": values}, f"{path}:{number}")
            except RecordError as error:
                warn(str(error))
    except csv.Error as error:
        raise RecordError(f"{path}: not CSV ({str(error)[:120]})") from None


class QuestionOutcome(BaseModel):
    """A line of scripts/evaluate.py's trajectories.jsonl, the figures read back from it (Trajectory.summary()
    with the question, its gold answer and template; other keys are kept by the file)."""

    model_config = ConfigDict(extra="ignore")

    question: Annotated[str, Field(max_length=100_000)]
    reward: Annotated[Metric, BeforeValidator(_no_bool)]
    num_tool_turns: Annotated[int, Field(ge=0, lt=2**31), BeforeValidator(_no_bool)]


class BenchFigures(BaseModel):
    """The JSON line a `scripts/bench_step.py --child` run prints: its step figures (seconds, shares,
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
