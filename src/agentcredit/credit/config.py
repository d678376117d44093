"""Validation and splitting of a ``credit`` config group (``conf/credit/<name>.yaml``).

A credit config is flat: ``name`` plus knobs, so ``credit.K=3`` works on the command line. Its knobs
fall into three sets, and ``split_credit_config`` hands each consumer its own:
- advantage knobs: the keyword arguments of the method's registered ``advantages`` function;
- loss knobs (``LOSS_KNOBS``, shared by all methods): the keyword arguments of ``losses.policy_loss``;
- run knobs: read by the orchestrator itself (reference checkpoint, continuation budget, …): the method's
  registered ``run_knobs`` and the group-size knobs every method takes (``budget.GROUP_KNOBS``).
Each knob's default lives once, in those signatures (run knobs: in the registration), and
``knob_defaults`` collects them; an unknown key is an error, so a misspelt knob cannot be silently
ignored. Values are checked once, by ``validate_credit_config`` when a job starts, with the checks declared
beside them (the method's registration, ``losses.LOSS_CHECKS``, ``budget.GROUP_CHECKS``); the pure functions
trust the knobs they are given (they check only their tensors).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass

from agentcredit.credit.budget import GROUP_CHECKS, GROUP_KNOBS
from agentcredit.credit.losses import LOSS_CHECKS, policy_loss
from agentcredit.credit.registry import get_credit

# The loss's settings are policy_loss's keyword arguments, less the tensors the module hands it.
_LOSS_PARAMS = inspect.signature(policy_loss).parameters
LOSS_KNOBS = tuple(k for k, p in _LOSS_PARAMS.items() if p.kind == p.KEYWORD_ONLY
                   and k not in ("ref_logprobs", "behaviour_logprobs", "turn_ids"))  # tensors, not knobs


@dataclass(frozen=True)
class CreditConfig:
    name: str
    advantage: dict
    loss: dict
    run: dict


def allowed_knobs(name: str) -> tuple[str, ...]:
    """The knobs method ``name`` reads: advantage, loss and run knobs (its own, then the group-size ones)."""
    method = get_credit(name)
    return method.advantage_knobs + LOSS_KNOBS + tuple(method.run_knobs) + tuple(GROUP_KNOBS)


def knob_defaults(name: str) -> dict:
    """Every knob of method ``name`` at its default."""
    loss = {k: _LOSS_PARAMS[k].default for k in LOSS_KNOBS}
    return {**get_credit(name).defaults, **loss, **GROUP_KNOBS}


def validate_credit_config(name: str, knobs: Mapping) -> None:
    """Raise ValueError with a one-line message on the first unknown key or out-of-range value.

    ``knobs`` may include ``name`` (as in the yaml); it must then agree with ``name``.
    """
    allowed = allowed_knobs(name)
    checks = {**LOSS_CHECKS, **GROUP_CHECKS, **get_credit(name).checks}
    for key, value in knobs.items():
        if key == "name":
            if value != name:
                raise ValueError(f"credit.name is {value!r} but the method is {name!r}")
            continue
        if key not in allowed:
            raise ValueError(f"unknown knob credit.{key} for credit={name}; allowed: {', '.join(allowed)}")
        check, expected = checks[key]  # the registry holds a check for every knob of the method
        if not check(value):
            raise ValueError(f"credit.{key} must be {expected}, got {value!r}")
    if (knobs.get("match_phases") or 1) > 1 and knobs.get("match_metrics") is None:
        raise ValueError(f"credit.match_phases={knobs['match_phases']} needs credit.match_metrics (a ProVer run's "
                         "metrics.csv) to match its phases against; or give credit.extra_rollouts alone")
    if "eligible_low" in knobs or "eligible_high" in knobs:
        band = {**knob_defaults(name), **knobs}
        low, high = band["eligible_low"], band["eligible_high"]
        if not low < high:
            raise ValueError(f"credit.eligible_low ({low}) must be < credit.eligible_high ({high})")


def split_credit_config(knobs: Mapping) -> CreditConfig:
    """Split a flat credit config (with ``name``), checked at start by ``validate_credit_config``, into
    advantage, loss and run knobs; knobs it does not set take their defaults (``knob_defaults``).

    Pass a plain dict (``OmegaConf.to_container(cfg.credit, resolve=True)``). The orchestrator calls
    ``get_credit(c.name).advantages(group, **c.advantage)`` and ``policy_loss(..., **loss_settings(c))``.
    """
    if "name" not in knobs:
        raise ValueError("the credit config has no 'name'; choose one with credit=<name>")
    name = knobs["name"]
    method = get_credit(name)
    full = {**knob_defaults(name), **{k: v for k, v in knobs.items() if k != "name"}}
    pick = lambda keys: {k: full[k] for k in keys}  # noqa: E731
    return CreditConfig(name, pick(method.advantage_knobs), pick(LOSS_KNOBS), pick((*method.run_knobs, *GROUP_KNOBS)))


def loss_settings(config: CreditConfig) -> dict:
    """The keyword arguments of ``losses.policy_loss`` for this config: its loss knobs, whatever the method
    (``credit=grpo credit.ratio_level=sequence`` is GRPO with GSPO's ratio). A recorded ``ratio_level: null``
    (configs written before the ratio was a loss mode of its own) is the token ratio."""
    loss = dict(config.loss)
    if loss.get("ratio_level") is None:
        loss["ratio_level"] = "token"
    return loss
