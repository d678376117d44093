"""The one reader of metrics.csv (and of an exported .steps.csv, the same columns): the training run's
closing line, budget-matched GRPO's match_metrics, compare, plot and same_metrics all read rows through it.

Lightning's CSV logger writes one row per logging call under the union of every column logged so far, so a
row holds a value only in the columns logged at that call: an empty cell is a metric not logged there, not
a zero. A row cut short by a kill (no line end, or fewer cells than the header) and a cell that is not a
finite number are left out with one warning naming the file and line; a file that is not CSV text is one
RecordError. Of several rows for one step (a resumed run that kept its earlier rows) the last value of each
metric counts (`metrics_by_step`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel, field_validator

from agentcredit.records.reading import RecordError, validate, warn_left_out
from agentcredit.records.run import Metric, Step

MAX_CSV_BYTES = 256 * 2**20  # a 100k-step run's metrics.csv is tens of MB


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


def metrics_by_step(path: str | Path, columns: Sequence[str] | None = None, *, prefixes: Sequence[str] = (),
                    warn=warn_left_out) -> dict[int, dict[str, float]]:
    """step -> {metric: value} of the columns asked for (as `read_steps_rows`), steps in increasing order;
    every step of a readable row is present (with {} when it logged none of them), and of several rows for
    one step the last value of each metric counts."""
    steps: dict[int, dict[str, float]] = {}
    for _, row in read_steps_rows(path, columns, prefixes=prefixes, warn=warn):
        steps.setdefault(row.step, {}).update(row.values)
    return dict(sorted(steps.items()))
