"""The arm a run records, which comparisons group runs by (analysis/comparison_runs.py): named when the run starts,
written into resolved_config.yaml and the W&B config (`recorded_arm`) and into test_summary.json after the test.

    arm = recorded_arm(cfg)   # in the Hydra job, with cfg as prepare_config left it

The name is the run's `arm=` (else its credit method), followed by what the command line changed in the setting it
trained, measured on the resolved config rather than read off the command as typed: the config is composed again
without the command's setting overrides, and every leaf that differs is named, in job-folder form. A setting is a
knob the credit method reads (`prepare_config` keeps only those), the judge where the method asks one, and the
learning rate. So a sweep over a knob gives one arm per value (`python train.py -m credit=trace credit.K=1,5`:
`trace+credit.K:1`, `trace+credit.K:5`), and one setting gets one name however it was written: `credit.K=3` where 3
is the default, `credit.transform='raw'` and `=raw`, `judge=random` and `judge.kind=random`, `arm=grpo_tuned
train.lr=1e-4` where the arm sets 1e-4 all record what a run without them records. Seeds, lengths, threads and
output folders are not settings and never appear.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from agentcredit.checks.arm_overrides import flat_items
from agentcredit.checks.validation import split_method_credit
from agentcredit.common.configs import compose_config, plain
from agentcredit.common.secret_keys import config_for_records
from agentcredit.run.sweep import job_dirname, task_overrides


def setting_keys(overrides: list[str]) -> dict[str, str]:
    """{override: the key it sets} for the overrides that may change the setting (the ones `recorded_arm` checks on
    the resolved config): a credit knob, the judge or its knobs, the learning rate. Keys as Hydra parses them, so
    `+`, `++`, `~` and `@package` never hide one."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    keys = {}
    for override in overrides:
        try:
            key = parser.parse_override(override).key_or_group
        except Exception:  # noqa: BLE001 -- a job's overrides were parsed when it started; a stray line sets nothing
            continue
        if key in ("judge", "train.lr") or key.startswith(("credit.", "judge.")):
            keys[override] = key
    return keys


def _is_judge_key(key: str) -> bool:
    return key == "judge" or key.startswith("judge.")


def asks_judge(cfg: DictConfig) -> bool:
    from agentcredit.credit.registry import get_credit

    return get_credit(cfg.credit.name).reads("verified_segment")


def setting_leaves(cfg: DictConfig, judge: bool) -> dict[str, Any]:
    """{dotted key: value} of what the run's setting is: the method's knobs (its name aside), its judge's knobs when
    `judge` (the method asks one), its learning rate. Read as the run's records write the config down
    (`config_for_records`): `${oc.env:...}` as written and secrets redacted, as the name goes to W&B too."""
    record = config_for_records(cfg)
    credit, _ = split_method_credit(record["credit"])
    leaves = dict(flat_items({k: v for k, v in credit.items() if k != "name"}, "credit."))
    if judge:
        leaves.update(flat_items({k: v for k, v in (record.get("judge") or {}).items() if k != "kind"}, "judge."))
    leaves["train.lr"] = (record.get("train") or {}).get("lr")
    return leaves


def _changed(before: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in now.items() if before.get(key, _ABSENT) != value}


def arm_name(base: str, changed: Mapping[str, Any]) -> str:
    """`base` and the changed leaves in job-folder form, sorted (`trace+credit.K:1`); `base` alone when none."""
    if not changed:
        return base
    return job_dirname("+".join([base, *(f"{key}:{changed[key]}" for key in sorted(changed))]))


def _by_the_command(keys: Mapping[str, str]) -> dict[str, str]:
    """The setting overrides ({override: key}) as typed: the name when the config cannot be composed again. Never
    an error: a run whose config composed once should not fail over its name (the name may then differ from what
    the same setting typed otherwise gets, `trace+credit.K:3` beside `trace`). Deletions name nothing."""
    found = {}
    for override, key in keys.items():
        _, sep, value = override.partition("=")
        if sep and not override.lstrip().startswith("~"):  # `~credit.x=0.2` deletes the key that has 0.2
            found[key] = value
    return found


def recorded_arm(cfg: DictConfig) -> str:
    base = cfg.get("arm") or cfg.credit.name
    overrides = task_overrides()
    keys = setting_keys(overrides)
    setting = list(keys)
    if not setting:
        return base
    judge = asks_judge(cfg)
    try:
        # Composed without the setting overrides: what the same command trains when it changes nothing.
        default = compose_config([o for o in overrides if o not in setting])
        now = setting_leaves(cfg, judge)
        changed = _changed(setting_leaves(default, False), {k: v for k, v in now.items() if not _is_judge_key(k)})
        if judge:
            # The judge by its kind, then its knobs against that kind's own defaults (`judge=random` and
            # `judge.kind=random` are one judge; a random judge's `mode` is not a change of the heuristic's).
            kind = plain(cfg.get("judge") or {}).get("kind")
            if kind != plain(default.get("judge") or {}).get("kind"):
                changed["judge"] = kind
            own = compose_config([o for o in overrides if o not in setting] + [f"judge={kind}"])
            changed |= _changed(setting_leaves(own, True), now)
    except Exception as error:  # noqa: BLE001 -- see _by_the_command
        name = arm_name(base, _by_the_command({o: k for o, k in keys.items() if judge or not _is_judge_key(k)}))
        print(f"[agentcredit] warning: the arm is named by the command as typed ({name}): its config could not be "
              f"composed again without the setting's overrides ({type(error).__name__})", file=sys.stderr, flush=True)
        return name
    return arm_name(base, changed)


_ABSENT = object()
