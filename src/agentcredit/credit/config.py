"""Validation and splitting of a ``credit`` config group (``conf/credit/<name>.yaml``).

A credit config is flat: ``name`` plus knobs, so ``credit.K=3`` works on the command line. Its knobs
fall into three sets, and ``split_credit_config`` hands each consumer its own:
- advantage knobs: the keyword arguments of the method's registered ``advantages`` function;
- loss knobs (``LOSS_KNOBS``, shared by all methods): the keyword arguments of ``losses.policy_loss``;
- run knobs: read by the orchestrator itself (reference checkpoint, continuation budget, …).
Each knob's default lives once, in those signatures (run knobs: in the registration), and
``knob_defaults`` collects them; an unknown key is an error, so a misspelt knob cannot be silently
ignored. Values are checked once, by ``validate_credit_config`` when a job starts; the pure functions
trust the knobs they are given (they check only their tensors).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentcredit.credit.grpo import OUTCOME_SCALES
from agentcredit.credit.igpo import GAINS, NORM_MODES
from agentcredit.credit.losses import AGG_MODES, RATIO_LEVELS, policy_loss
from agentcredit.credit.registry import get_credit
from agentcredit.credit.trace import ANSWER_TAIL_RULES, TRANSFORMS

# The loss's settings are policy_loss's keyword arguments, less the tensors the module hands it.
_LOSS_PARAMS = inspect.signature(policy_loss).parameters
LOSS_KNOBS = tuple(k for k, p in _LOSS_PARAMS.items() if p.kind == p.KEYWORD_ONLY
                   and k not in ("ref_logprobs", "behaviour_logprobs"))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(low: int) -> tuple[Callable[[object], bool], str]:
    return (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low), f"an integer >= {low}"


def _positive() -> tuple[Callable[[object], bool], str]:
    return (lambda v: _number(v) and v > 0), "a number > 0"


def _non_negative() -> tuple[Callable[[object], bool], str]:
    return (lambda v: _number(v) and v >= 0), "a number >= 0"


def _choice(options: tuple[str, ...]) -> tuple[Callable[[object], bool], str]:
    return (lambda v: v in options), f"one of {list(options)}"


def _unit_interval(closed_low: bool) -> tuple[Callable[[object], bool], str]:
    if closed_low:
        return (lambda v: _number(v) and 0 <= v <= 1), "a number in [0, 1]"
    return (lambda v: _number(v) and 0 < v <= 1), "a number in (0, 1]"


_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    # TRACE
    "eps": _positive(),
    "K": _integer(0),
    "gamma": _unit_interval(closed_low=False),
    "lambda_term": _non_negative(),
    "alpha_out": _non_negative(),
    "alpha_turn": _non_negative(),
    "transform": _choice(TRANSFORMS),
    "normalize": ((lambda v: isinstance(v, bool)), "true or false"),
    "answer_tail_scale": _non_negative(),
    "answer_tail_rule": _choice(ANSWER_TAIL_RULES),
    "reference_path": ((lambda v: v is None or (isinstance(v, str) and v != "")),
                       "null (the initial policy weights) or a checkpoint path"),
    # all methods
    "outcome_scale": _choice(OUTCOME_SCALES),
    # ProVer
    "lam": _non_negative(),
    "num_continuations": _integer(1),
    "max_segment_turns": _integer(1),
    "max_judge_corrections": _integer(0),
    "eligible_low": _unit_interval(closed_low=True),
    "eligible_high": _unit_interval(closed_low=True),
    "success_threshold": ((lambda v: _number(v)), "a number (rewards >= it count as success)"),
    # budget-matched GRPO
    "extra_rollouts": _integer(0),
    "match_metrics": ((lambda v: v is None or (isinstance(v, str) and v != "")),
                      "null (use extra_rollouts) or the metrics.csv of a ProVer run"),
    # SPO-chain
    "max_segments": _integer(1),
    # Monte Carlo value credit (num_continuations is checked with ProVer's)
    "only_mixed_groups": ((lambda v: isinstance(v, bool)), "true or false"),
    # IGPO (gamma is checked with TRACE's)
    "gain": _choice(GAINS),
    "norm_mode": _choice(NORM_MODES),
    "reward_scale": _choice(OUTCOME_SCALES),
    # turn-level critic (gamma is checked with TRACE's)
    "gae_lambda": _unit_interval(closed_low=True),
    "whiten": ((lambda v: isinstance(v, bool)), "true or false"),
    "critic_lr": _positive(),
    "critic_epochs": _integer(1),
    # gold evidence (gamma, normalize, alpha_out, alpha_turn are checked with TRACE's)
    "redundancy_coef": _non_negative(),
    # GiGPO (gamma is checked with TRACE's)
    "omega": _non_negative(),
    "step_scale": _choice(OUTCOME_SCALES),
    # loss
    "ratio_level": ((lambda v: v is None or v in RATIO_LEVELS),
                    f"null (the method's own) or one of {list(RATIO_LEVELS)}"),
    "clip_low": ((lambda v: _number(v) and 0 < v < 1), "a number in (0, 1)"),
    "clip_high": _positive(),
    "loss_agg": _choice(AGG_MODES),
    "kl_coef": _non_negative(),
    "tis_cap": ((lambda v: v is None or (_number(v) and v > 0)), "null (off) or a number > 0"),
}


@dataclass(frozen=True)
class CreditConfig:
    name: str
    advantage: dict
    loss: dict
    run: dict


def allowed_knobs(name: str) -> tuple[str, ...]:
    """The knobs method ``name`` reads: advantage, loss and run knobs."""
    method = get_credit(name)
    return method.advantage_knobs + LOSS_KNOBS + tuple(method.run_knobs)


def knob_defaults(name: str) -> dict:
    """Every knob of method ``name`` at its default (``ratio_level``: null, the method's own ratio)."""
    loss = {k: _LOSS_PARAMS[k].default for k in LOSS_KNOBS}
    return {**get_credit(name).defaults, **loss, "ratio_level": None}


def validate_credit_config(name: str, knobs: Mapping) -> None:
    """Raise ValueError with a one-line message on the first unknown key or out-of-range value.

    ``knobs`` may include ``name`` (as in the yaml); it must then agree with ``name``.
    """
    allowed = allowed_knobs(name)
    for key, value in knobs.items():
        if key == "name":
            if value != name:
                raise ValueError(f"credit.name is {value!r} but the method is {name!r}")
            continue
        if key not in allowed:
            raise ValueError(f"unknown knob credit.{key} for credit={name}; allowed: {', '.join(allowed)}")
        if key not in _CHECKS:
            continue  # a knob of a method registered elsewhere; its function validates it
        check, expected = _CHECKS[key]
        if not check(value):
            raise ValueError(f"credit.{key} must be {expected}, got {value!r}")
    if "eligible_low" in knobs or "eligible_high" in knobs:
        band = {**knob_defaults(name), **knobs}
        low, high = band["eligible_low"], band["eligible_high"]
        if not low < high:
            raise ValueError(f"credit.eligible_low ({low}) must be < credit.eligible_high ({high})")


def split_credit_config(knobs: Mapping) -> CreditConfig:
    """Split a flat credit config (with ``name``), checked at start by ``validate_credit_config``, into
    advantage, loss and run knobs; knobs it does not set take their defaults (``knob_defaults``).

    Pass a plain dict (``OmegaConf.to_container(cfg.credit, resolve=True)``). The orchestrator calls
    ``get_credit(c.name).advantages(group, **c.advantage)`` and ``policy_loss(..., **c.loss,
    ratio_level=get_credit(c.name).ratio_level)``.
    """
    if "name" not in knobs:
        raise ValueError("the credit config has no 'name'; choose one with credit=<name>")
    name = knobs["name"]
    method = get_credit(name)
    full = {**knob_defaults(name), **{k: v for k, v in knobs.items() if k != "name"}}
    pick = lambda keys: {k: full[k] for k in keys}  # noqa: E731
    return CreditConfig(name, pick(method.advantage_knobs), pick(LOSS_KNOBS), pick(method.run_knobs))


def loss_settings(config: CreditConfig) -> dict:
    """The keyword arguments of ``losses.policy_loss`` for this config: its loss knobs, with
    ``ratio_level`` the knob's value when set (``credit=grpo credit.ratio_level=sequence`` is GRPO
    with GSPO's ratio) and the method's registered default otherwise."""
    loss = dict(config.loss)
    if loss.get("ratio_level") is None:
        loss["ratio_level"] = get_credit(config.name).ratio_level
    return loss
