"""The records the credit-fidelity instrument and the credit viewer read, one schema per kind:

- `TurnsRecord`: one question of a fidelity measurement (a line of turns.jsonl), holding its `Rollout`s
  (each rollout's turns with their Monte Carlo advantage A* and every method's turn credit) and `Cost`;
- `AddedCredit`: one question of methods being added to a finished measurement (a line of adding.jsonl,
  `add_to=`), the listed methods' credit of each stored rollout and their cost;
- `FidelitySummary`: fidelity.json, of which `from_turns=` keeps only the `config` it was measured with;
- `CreditSample`: one trajectory of credit_samples.jsonl (written by training at each validation and by
  scripts/credit_fidelity.py under view/<method>/), shown by scripts/view_credit.py.

Numbers are strict (a string or a bool is not a number) and finite within ±1e15: a credit, an advantage
or a cost outside that range is no measured value, and sums of such values over a file would overflow to
inf and turn every figure into nan. Lists that the figures zip together (A*, its halves, the action kinds,
each method's credit) must be equally long, so that a damaged record is left out whole instead of
shifting every later turn onto the wrong question.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentcredit.records.files import safe_name

LIMIT = 1e15
Number = Annotated[float, Field(allow_inf_nan=False, ge=-LIMIT, le=LIMIT)]
Amount = Annotated[float, Field(allow_inf_nan=False, ge=0.0, le=LIMIT)]  # tokens, seconds, counts
Count = Annotated[int, Field(ge=0, le=2**53)]
Integer = Annotated[int, Field(ge=-(2**53), le=2**53)]
# Every key of a record may be extra (later versions add fields); the ones read are checked.
STRICT = ConfigDict(strict=True, extra="allow")


class Rollout(BaseModel):
    """One rollout of a question: per acting turn its kind, A* (and A* from each half of the
    continuations) and each method's credit; the texts the viewer shows."""

    model_config = STRICT
    reward: Number
    success: bool
    finish_reason: str
    kinds: list[str]
    values: list[Number]
    truth: list[Number]
    truth_halves: Annotated[list[list[Number]], Field(min_length=2, max_length=2)]
    credit: dict[str, list[Number]]
    turns: list[str]
    observations: list[str]
    answer: str | None

    @model_validator(mode="after")
    def _one_entry_per_turn(self):
        n = len(self.truth)
        lengths = {"kinds": len(self.kinds), "truth_halves[0]": len(self.truth_halves[0]),
                   "truth_halves[1]": len(self.truth_halves[1]),
                   **{f"credit[{label!r}]": len(v) for label, v in self.credit.items()}}
        wrong = {name: size for name, size in lengths.items() if size != n}
        if wrong:
            name, size = next(iter(wrong.items()))
            raise ValueError(f"{name} has {size} entries for {n} turns of truth")
        return self


class MeasureCost(BaseModel):
    model_config = STRICT
    tokens: Amount
    seconds: Amount


class TruthCost(MeasureCost):
    states: Amount
    measured: Amount


class Cost(BaseModel):
    model_config = STRICT
    rollout: MeasureCost
    truth: TruthCost
    methods: dict[str, dict[str, Amount]]


class TurnsRecord(BaseModel):
    """One line of turns.jsonl: a question, its rollouts and every listed method's credit on them."""

    model_config = STRICT
    index: Count
    question_id: str
    question: str
    gold_answer: str
    settings: str
    methods: Annotated[list[str], Field(min_length=1)]
    rollouts: Annotated[list[Rollout], Field(min_length=1)]
    cost: Cost

    @field_validator("methods")
    @classmethod
    def _methods_are_names(cls, methods: list[str]) -> list[str]:
        # a method's name becomes a folder (view/<method>/) and a column: one path component, listed once
        for label in methods:
            safe_name(label, "method")
        if len(set(methods)) != len(methods):
            raise ValueError(f"a method is listed twice: {methods}")
        return methods

    @model_validator(mode="after")
    def _every_method_everywhere(self):
        for g, rollout in enumerate(self.rollouts):
            missing = [m for m in self.methods if m not in rollout.credit]
            if missing:
                raise ValueError(f"rollout {g} has no credit of {missing[0]!r}")
        missing = [m for m in self.methods if m not in self.cost.methods]
        if missing:
            raise ValueError(f"cost has no entry for {missing[0]!r}")
        return self


class AddedCredit(BaseModel):
    """One line of adding.jsonl: the added methods' credit of every rollout of one question, and their cost."""

    model_config = STRICT
    index: Count
    question_id: str
    settings: str
    methods: Annotated[list[str], Field(min_length=1)]
    credit: Annotated[list[dict[str, list[Number]]], Field(min_length=1)]  # one entry per rollout
    cost: dict[str, dict[str, Amount]]

    @model_validator(mode="after")
    def _every_method_everywhere(self):
        for g, credit in enumerate(self.credit):
            if sorted(credit) != sorted(self.methods):
                raise ValueError(f"rollout {g} has credit of {sorted(credit)}, not of {self.methods}")
        if sorted(self.cost) != sorted(self.methods):
            raise ValueError(f"cost has entries {sorted(self.cost)}, not {self.methods}")
        return self


class FidelitySummary(BaseModel):
    """fidelity.json as `from_turns=` reads it back: only what was measured (`config`) is kept."""

    model_config = STRICT
    config: dict[str, Any] | None = None


class CreditSample(BaseModel):
    """One trajectory of credit_samples.jsonl. Only `step` is required (training's samples and the
    fidelity instrument's carry different columns); every column present must have its type."""

    model_config = STRICT
    step: Integer
    rollout: Integer | None = None
    reward: Number = 0.0
    num_tool_turns: Count = 0  # absent: one per observation (the page reads it so); null is refused
    question: str | None = None
    question_id: str | None = None
    gold_answer: str | None = None
    finish_reason: str | None = None
    group_rewards: list[Number] | None = None
    turns: list[str] | None = None
    observations: list[str] | None = None
    segment: tuple[Integer, Integer, Number] | None = None
    chain_boundaries: list[Integer] | None = None
    chain_values: list[Number] | None = None
    segment_advantages: list[Number] | None = None
    anchor_sizes: list[Count | None] | None = None
    answer_advantage: Number | None = None
    answer_a_star: Number | None = None
    deltas: list[Number | None] | None = None
    turn_rewards: list[Number | None] | None = None
    step_advantages: list[Number | None] | None = None
    turn_advantages: list[Number | None] | None = None
    a_star: list[Number | None] | None = None

    @field_validator("segment", mode="before")
    @classmethod
    def _segment_from_json(cls, value):
        # JSON has no tuple: [first turn, last turn, Δ] arrives as a list
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _chain_matches(self):
        cuts, advs = self.chain_boundaries, self.segment_advantages
        if (cuts is None) != (advs is None) or (cuts is not None and len(advs) <= len(cuts)):
            raise ValueError("chain_boundaries and segment_advantages do not match")
        return self

    def shown(self) -> dict:
        """The record as the page reads it: the fields the file had (absent stays absent), checked."""
        return self.model_dump(exclude_unset=True)
