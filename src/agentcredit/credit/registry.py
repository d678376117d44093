"""Credit methods registered by name, chosen on the command line with ``credit=<name>``.

A method is one module of this package (the package imports every module in it, so registering is all it
takes): its pure functions, its ``@register_credit`` entry and the value checks of its knobs (``checks``, one
per knob, from ``credit.knobs``). Each entry names the credit inputs it reads beyond the rollouts (``inputs``,
from ``CREDIT_INPUTS``: reference scores, policy scores, a verified segment, chain values, state keys, Monte
Carlo state values, evidence events, critic values). The orchestrator computes each declared input by its one
builder (``lit.credit_inputs.INPUT_BUILDERS``) and no other, then calls ``method.advantages(group,
**advantage_knobs)`` and never branches on the method's name. How the loss weighs the advantages (its ratio,
clip range, aggregation) and how many rollouts a group has are not a method's: they are the loss knobs
(``losses``) and the group-size knobs (``budget``) every method takes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from torch import Tensor

from agentcredit.credit.group import CREDIT_INPUTS
from agentcredit.credit.knobs import KnobCheck

AdvantageFn = Callable[..., Tensor]
DiagnosticsFn = Callable[..., dict]
StepMetricsFn = Callable[[dict[str, list[float]]], dict[str, float]]
StepAdvantagesFn = Callable[..., list[Tensor]]


@dataclass(frozen=True)
class CreditMethod:
    """name; advantages(group, **knobs) -> (G, L); knobs the orchestrator reads itself (``run_knobs``:
    name -> default); ``checks``: knob -> (test, what it must be) for every advantage and run knob;
    optional diagnostics(group, **knobs) -> dict of per-turn values and scalars for logging; optional
    step_metrics(logs) -> step-level figures from every group's scalar logs of one step (key -> values);
    optional step_advantages(groups, advantages, **knobs) -> the step's final advantages, one (G, L) per group,
    from every group's `advantages` of one step (for what depends on the whole step: PPO's whitening over the
    batch). Without it a group's advantages are final."""

    name: str
    advantages: AdvantageFn
    inputs: tuple[str, ...] = ()
    run_knobs: Mapping[str, object] = field(default_factory=dict)
    checks: Mapping[str, KnobCheck] = field(default_factory=dict)
    diagnostics: DiagnosticsFn | None = None
    step_metrics: StepMetricsFn | None = None
    step_advantages: StepAdvantagesFn | None = None
    advantage_knobs: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        unknown = [name for name in self.inputs if name not in CREDIT_INPUTS]
        if unknown:
            raise ValueError(f"credit method {self.name!r}: unknown credit input(s) {unknown}; "
                             f"known: {', '.join(CREDIT_INPUTS)}")
        params = list(inspect.signature(self.advantages).parameters.values())
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            raise TypeError(f"credit method {self.name!r}: advantages must take the CreditGroup as first argument")
        knobs = tuple(p.name for p in params[1:] if p.kind == p.KEYWORD_ONLY)
        if len(knobs) != len(params) - 1:
            raise TypeError(f"credit method {self.name!r}: every knob of advantages must be keyword-only (after *)")
        if any(p.default is p.empty for p in params[1:]):
            raise TypeError(f"credit method {self.name!r}: every knob of advantages needs a default (its one home)")
        object.__setattr__(self, "advantage_knobs", knobs)
        unchecked = [k for k in (*knobs, *self.run_knobs) if k not in self.checks]
        if unchecked:
            raise TypeError(f"credit method {self.name!r}: knob(s) {unchecked} have no value check; give one each in "
                            f"checks= (credit/knobs.py has the kinds)")
        strays = [k for k in self.checks if k not in knobs and k not in self.run_knobs]
        if strays:
            raise TypeError(f"credit method {self.name!r}: checks name {strays}, which are not its knobs")

    def reads(self, input_name: str) -> bool:
        """Whether the method declared `input_name` (one of ``CREDIT_INPUTS``)."""
        if input_name not in CREDIT_INPUTS:
            raise ValueError(f"unknown credit input {input_name!r}; known: {', '.join(CREDIT_INPUTS)}")
        return input_name in self.inputs

    @property
    def defaults(self) -> dict:
        """Every knob of the method at its default: the advantage function's keyword defaults and the
        run knobs' registered ones. This is the one place a method's default lives (conf/credit/<name>.yaml
        holds only departures from it)."""
        params = inspect.signature(self.advantages).parameters
        return {**{k: params[k].default for k in self.advantage_knobs}, **self.run_knobs}


_REGISTRY: dict[str, CreditMethod] = {}


def register_credit(
    name: str,
    *,
    inputs: tuple[str, ...] = (),
    run_knobs: Mapping[str, object] | None = None,
    checks: Mapping[str, KnobCheck] | None = None,
    diagnostics: DiagnosticsFn | None = None,
    step_metrics: StepMetricsFn | None = None,
    step_advantages: StepAdvantagesFn | None = None,
) -> Callable[[AdvantageFn], AdvantageFn]:
    """Decorator registering ``fn(group: CreditGroup, *, knob=default, ...) -> Tensor (G, L)``."""

    def decorator(fn: AdvantageFn) -> AdvantageFn:
        if name in _REGISTRY:
            raise ValueError(f"credit method {name!r} is already registered; pick another name")
        _REGISTRY[name] = CreditMethod(name, fn, inputs=tuple(inputs), run_knobs=dict(run_knobs or {}),
                                       checks=dict(checks or {}), diagnostics=diagnostics, step_metrics=step_metrics,
                                       step_advantages=step_advantages)
        return fn

    return decorator


def get_credit(name: str) -> CreditMethod:
    if name not in _REGISTRY:
        raise ValueError(f"unknown credit method {name!r}; registered: {', '.join(available_credits())}")
    return _REGISTRY[name]


def available_credits() -> list[str]:
    return sorted(_REGISTRY)


def unregister_credit(name: str) -> None:
    """Remove an entry (for tests and notebooks that register throwaway methods)."""
    _REGISTRY.pop(name, None)

