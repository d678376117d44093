"""A command line that would run one setting under another's name: refused before anything is written.

    problem = arm_override_problem(["arm=trace_tuned", "credit.K=5"])   # cli/hydra_start.checked_overrides

Comparisons group runs by their recorded `arm`, so the name must stand for what ran. `arm=<name>` chooses a credit
config and, for a file conf/arm/<name>.yaml, a named setting (its knobs). Hydra lets the command line override
both, and the run would still be recorded under the arm's name: `arm=igpo_tuned credit=grpo` trains GRPO as
igpo_tuned, `arm=trace_k0 credit.K=3` trains K = 3 as trace_k0. Overrides that repeat the arm's own values pass.
A typed `credit.name=` of a method that has its file (conf/credit/<name>.yaml) is refused too: `credit=<name>` sets it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from agentcredit.common.paths import config_dir


def flat_items(node: Mapping, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf of `node`, each key after `prefix` (`credit.` gives `credit.K`)."""
    for key, value in node.items():
        if isinstance(value, Mapping):
            yield from flat_items(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def arm_setting(arm: str, conf: Path | None = None) -> tuple[str | None, dict[str, Any]]:
    """(the credit option `arm=<arm>` runs, {dotted key: value} of the knobs its file sets); (None, {}) for a
    name that is not an arm (Hydra's own error names it)."""
    from agentcredit.common.configs import credit_arms

    path = (conf or config_dir()) / "arm" / f"{arm}.yaml"
    if not path.is_file():
        option = credit_arms().get(arm)
        return (option[0] if option else None), {}
    body = yaml.safe_load(path.read_text()) or {}
    option = next((entry["override /credit"] for entry in body.get("defaults") or []
                   if isinstance(entry, Mapping) and "override /credit" in entry), None)
    knobs = dict(flat_items({k: v for k, v in body.items() if k not in ("defaults", "arm")}))
    return option, knobs


def _given(overrides: Sequence[str]) -> dict[str, list[Any]]:
    """Each overridden key's values (a sweep's several), as Hydra parses them; deletions (~key) left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given: dict[str, list[Any]] = {}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.is_delete():
            continue
        key = override.key_or_group
        values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
        given.setdefault(key, []).extend(values)
    return given


def _same(a: Any, b: Any) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b


def arm_override_problem(overrides: Sequence[str], conf: Path | None = None) -> str | None:
    """One line when the command line changes what an `arm=` it names stands for; None otherwise."""
    from agentcredit.checks.secret_check import hydra_args

    args = hydra_args(overrides)  # Hydra's flags (--cfg job, -m) apart from the overrides
    if args is None:
        return None
    try:
        given = _given(args.overrides)
    except Exception:  # noqa: BLE001 -- a line Hydra cannot parse gets Hydra's own error after this check
        return None
    for name in map(str, given.get("credit.name", [])):
        # A method with its file (conf/credit/<name>.yaml) is chosen by credit=<name>, which sets its name; a typed
        # name would run it under the option chosen beside it (credit=trace credit.name=grpo trains GRPO, trace's
        # knobs dropped). A method registered in code without a file has only its name to be chosen by.
        if ((conf or config_dir()) / "credit" / f"{name}.yaml").is_file():
            return (f"credit.name={name} would run {name} under whichever credit= option is chosen beside it; "
                    f"choose the method with credit={name} instead")
    for arm in map(str, given.get("arm", [])):
        option, knobs = arm_setting(arm, conf)
        if option is None:
            continue
        for credit in map(str, given.get("credit", [])):
            if credit != option:
                return (f"arm={arm} runs credit={option}, and credit={credit} would train another method under the "
                        f"name {arm}: leave credit= out (the arm chooses it), or run credit={credit} without arm=")
        for key, value in knobs.items():
            for other in given.get(key, []):
                if not _same(other, value):
                    return (f"arm={arm} is the setting {key}={value}, and {key}={other} would run another setting "
                            f"under its name: leave {key}= out, or run credit={option} with the knobs you want "
                            "(a named setting of your own: a file in conf/arm/)")
    return None
