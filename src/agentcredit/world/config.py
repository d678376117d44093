"""Knobs of the synthetic world. `conf/data/default.yaml` mirrors these fields."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

LINE_STYLES = ("sentence", "relation")
QUESTION_STYLES = ("nested", "chain")
TEMPLATES = ("BRIDGE_ENTITY", "INTERSECTION", "COUNTING_FILTERED", "COMPARATIVE", "REVERSE_LOOKUP")
# Longest evidence chain a question may need: data=testbed_long asks 4..6 hops; 8 leaves room to go further.
MAX_HOPS = 8


@dataclass(frozen=True)
class WorldConfig:
    seed: int = 0
    num_documents: int = 300  # one page per entity
    num_questions: int = 1500
    hops_min: int = 2  # distinct evidence documents per question
    hops_max: int = 4
    distractors_min: int = 2  # filler lines per page
    distractors_max: int = 5
    near_duplicate_rate: float = 0.5  # chance a name reuses a word of an existing name
    max_page_lines: int = 14
    max_answer_words: int = 4
    max_attempts: int = 60  # regenerations per question slot before giving up on it
    templates: tuple[str, ...] = field(default=TEMPLATES)
    # Page lines: "sentence" states each fact in one of a few sentence forms ("Its founder is X.");
    # "relation" states it as "<cue>: <value>" (one form per relation, the testbed preset).
    line_style: str = "sentence"
    # Bridge questions: "nested" reads outside-in ("the hometown of the founder of X"); "chain" lists
    # the hops in reading order ("X > founder > hometown?"). Other templates keep their wording.
    question_style: str = "nested"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.templates) - set(TEMPLATES))
        if unknown:
            raise ValueError(f"unknown question templates {unknown}; choose from {list(TEMPLATES)}")
        if not 2 <= self.hops_min <= self.hops_max <= MAX_HOPS:
            raise ValueError(f"need 2 <= hops_min <= hops_max <= {MAX_HOPS}, got {self.hops_min}..{self.hops_max}")
        if self.num_documents < 40:
            raise ValueError(f"num_documents={self.num_documents} is too small for multi-hop questions; use >= 40")
        if not 0 <= self.distractors_min <= self.distractors_max:
            raise ValueError("need 0 <= distractors_min <= distractors_max")
        if self.line_style not in LINE_STYLES:
            raise ValueError(f"data.world.line_style must be one of {list(LINE_STYLES)}, got {self.line_style!r}")
        if self.question_style not in QUESTION_STYLES:
            raise ValueError(f"data.world.question_style must be one of {list(QUESTION_STYLES)}, got {self.question_style!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | "WorldConfig" | None) -> "WorldConfig":
        """Build from a plain or OmegaConf mapping; unknown keys are an error, not silently ignored."""
        if isinstance(values, WorldConfig):
            return values
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown data.world keys {unknown}; known keys: {sorted(known)}")
        if "templates" in values:
            values["templates"] = tuple(values["templates"])
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["templates"] = list(self.templates)
        return out
