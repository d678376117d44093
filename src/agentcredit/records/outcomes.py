"""Per-question test outcomes of a run: ``test_outcomes.jsonl`` in the run folder, one JSON line per test
question, written after the held-out test; exported beside a run's summary as
``<arm>_seed<k>.test_outcomes.jsonl`` (comparison_runs.export_runs) and read back by scripts/compare.py,
which then bootstraps over questions as well as seeds and reports verdicts per hop count.

A line:

    {"id": "q-00017", "hops": 5, "template": "BRIDGE_ENTITY", "success": 1.0, "samples": 1,
     "tool_calls": 12.0, "tokens": 1843.0}

- ``id``: the question's id in the test split (the same question has the same id in every run of a
  comparison: the split is keyed by ``data.split_seed``, not by the run seed);
- ``hops``: its hop count (null where the question is no chain of hops);
- ``template``: its question template;
- ``success``: mean success over its ``samples`` test rollouts (1 or 0 with one sample);
- ``tool_calls``, ``tokens``: means over those rollouts (tool calls made; policy tokens sampled).

A file with a line that fails this schema, or with one question twice, is refused whole (one line naming
the file): a comparison pairs questions by id, and a damaged file would pair the wrong ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from agentcredit.records.files import atomic_write_text, json_line
from agentcredit.records.reading import RecordError, read_jsonl_records
from agentcredit.records.run import Count, Fraction, _no_bool

TEST_OUTCOMES = "test_outcomes.jsonl"
VAL_OUTCOMES = "val_outcomes"  # folder in a run folder: step<NNNNNN>.jsonl per validation (lit/question_outcomes.py)
EXPORTED_OUTCOMES = ".test_outcomes.jsonl"  # <arm>_seed<k>.test_outcomes.jsonl beside <arm>_seed<k>.summary.json
EXPORTED_VAL_OUTCOMES = ".val_outcomes"  # <arm>_seed<k>.val_outcomes/step<NNNNNN>.jsonl, the run's val_outcomes/
_VAL_FILE = re.compile(r"step(\d{6})\.jsonl")


class OutcomeRecord(BaseModel):
    """One line of test_outcomes.jsonl (module docstring); other keys are kept by the file, not read here."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[str, Field(min_length=1, max_length=200)]
    hops: Annotated[int | None, Field(ge=1, le=1000), BeforeValidator(_no_bool)] = None
    template: Annotated[str | None, Field(max_length=200)] = None
    success: Annotated[Fraction, BeforeValidator(_no_bool)]
    samples: Annotated[int, Field(ge=1, le=10**6), BeforeValidator(_no_bool)] = 1
    tool_calls: Annotated[Count, BeforeValidator(_no_bool)]
    tokens: Annotated[Count, BeforeValidator(_no_bool)]


def _refuse(message: str) -> None:
    raise RecordError(message)


def read_outcomes(path: str | Path) -> list[OutcomeRecord]:
    """Every line of a test_outcomes.jsonl; RecordError (one line) for a damaged line or a repeated id."""
    records, seen = [], set()
    for number, record in read_jsonl_records(path, OutcomeRecord, warn=_refuse):
        if record.id in seen:
            raise RecordError(f"{path}:{number}: question {record.id[:80]!r} a second time")
        seen.add(record.id)
        records.append(record)
    if not records:
        raise RecordError(f"{path}: no question")
    return records


def write_outcomes(path: str | Path, records: Iterable[OutcomeRecord | dict]) -> Path:
    """The file whole, replaced atomically; each record checked against the schema first."""
    lines = [json_line((r if isinstance(r, OutcomeRecord) else OutcomeRecord.model_validate(r)).model_dump())
             for r in records]
    return atomic_write_text(path, "".join(lines))


def val_outcomes_name(step: int) -> str:
    """The file of the validation after training step `step` in a val_outcomes folder: step<NNNNNN>.jsonl."""
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= 999_999:
        raise ValueError(f"a validation's step must be an integer from 0 to 999999, got {step!r}")
    return f"step{step:06d}.jsonl"


def read_val_outcomes(folder: str | Path) -> dict[int, list[OutcomeRecord]]:
    """Every validation of a val_outcomes folder by step, in step order ({} when the folder is absent); files
    not named step<NNNNNN>.jsonl are not validations and are passed over. RecordError (one line) for a damaged file."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    steps = {}
    for path in folder.iterdir():
        match = _VAL_FILE.fullmatch(path.name)
        if match and path.is_file():
            steps[int(match.group(1))] = read_outcomes(path)
    return dict(sorted(steps.items()))
