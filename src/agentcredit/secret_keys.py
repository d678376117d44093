"""Secrets (API keys, tokens, passwords) come from the environment or `.env`, never from the command
line or a config file.

Why refuse rather than scrub: Hydra writes the command line into `.hydra/overrides.yaml`, the
composed config into `.hydra/config.yaml` and `hydra.yaml`, a sweep names job folders after the
overrides, and W&B stores the process arguments and the folder name in its run files (which
`wandb sync` uploads). All of that happens before `train.run` sees the config, so the only place
that keeps a secret out of every file is `train.py` itself, before `@hydra.main` runs:

    $ python train.py judge.api_key=sk-...
    config error: judge.api_key must not be given on the command line (...); set AGENTCREDIT_JUDGE_API_KEY ...

A key is secret when one of its dotted parts has `api_key`/`apikey`, `token`, `secret` or `password`
as a word (`hf_token`, `client_secret`); counts such as `max_turn_tokens` are not secrets. Keys inside
a dict or list value count too (`++judge={kind:openai,api_key:sk-...}`, `+extra={api_key:...}`): the value
is parsed with Hydra's own override grammar, and scanned as text where that grammar fails.
A config file may still name a secret through an environment interpolation (`${oc.env:MY_KEY}`):
Hydra writes the interpolation, not the value.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

_SECRET_PART = re.compile(r"(^|_)(api_?key|apikey|token|secret|password|passwd)(_|$)", re.IGNORECASE)

# Where each known secret should come from instead.
ENV_VARS = {"judge.api_key": "AGENTCREDIT_JUDGE_API_KEY"}


def is_secret_key(key: str) -> bool:
    return any(_SECRET_PART.search(part) for part in str(key).split("."))


def redact_secrets(value: Any) -> Any:
    """A copy of a plain config tree with the values of secret-looking keys (judge.api_key, ...) replaced."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if is_secret_key(str(k)) and v is not None else redact_secrets(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    return value


def override_key(override: str) -> str | None:
    """The config key an override sets (`+judge.api_key=x` -> judge.api_key), None for flags."""
    if override.startswith("-") or "=" not in override and not override.startswith("~"):
        return None
    return override.lstrip("+~").split("=", 1)[0].strip()


def where_instead(key: str) -> str:
    var = ENV_VARS.get(key)
    if var is None and key.startswith("hydra.job.env_set."):
        var = key.rsplit(".", 1)[1]
    return f"set {var} in the environment or in .env" if var else "read it from an environment variable or .env"


def _secret_paths_in_value(value: Any, prefix: str) -> list[str]:
    """Dotted paths of secret-looking keys inside a parsed override value (dicts, lists, sweeps of them)."""
    from hydra.core.override_parser.types import ChoiceSweep

    if isinstance(value, ChoiceSweep):  # `a={api_key:x},{b:1}` or choice(...): every option is written
        return [p for option in value.list for p in _secret_paths_in_value(option, prefix)]
    if isinstance(value, dict):
        return [p for k, v in value.items()
                for p in ([f"{prefix}.{k}"] if is_secret_key(str(k)) else _secret_paths_in_value(v, f"{prefix}.{k}"))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _secret_paths_in_value(v, f"{prefix}.{i}")]
    return []


# `key:` inside a `{...}` value that Hydra's grammar cannot parse: scanned rather than trusted.
_DICT_KEY_IN_TEXT = re.compile(r"[{,]\s*['\"]?([A-Za-z_][\w-]*)['\"]?\s*:")


def secret_keys_in_override(override: str) -> list[str]:
    """Every secret-looking key `override` sets: its own key, or one inside a dict or list value
    (`++judge={kind:openai,api_key:sk-...}` -> judge.api_key), which Hydra would write into
    `.hydra/*.yaml`, the job folder's name and `multirun.yaml` just as well."""
    key = override_key(override)
    if not key:
        return []
    if is_secret_key(key):
        return [key]
    if "=" not in override:
        return []
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides([override])[0]
    except Exception:  # Hydra will refuse it too; still never let a secret through unseen
        text = override.split("=", 1)[1]
        return [f"{key}.{k}" for k in _DICT_KEY_IN_TEXT.findall(text) if is_secret_key(k)]
    return _secret_paths_in_value(parsed._value, key)


def secret_override_problem(argv: Sequence[str]) -> str | None:
    """The one-line refusal for the first secret-bearing override in `argv`, or None."""
    for arg in argv:
        keys = secret_keys_in_override(arg)
        if keys:
            key = keys[0]
            return (f"{key} must not be given on the command line (Hydra records command lines in the run folder "
                    f"and W&B); {where_instead(key)} (see .env.example)")
    return None


def refuse_secret_overrides(argv: Sequence[str] | None = None) -> None:
    """Exit with status 2 and one line when the command line carries a secret; called by the entry scripts."""
    problem = secret_override_problem(sys.argv[1:] if argv is None else argv)
    if problem:
        print(f"config error: {problem}", file=sys.stderr, flush=True)
        raise SystemExit(2)


def secret_values_in_config(node, prefix: str = "") -> list[str]:
    """Keys of a composed config (DictConfig) that hold a secret as a literal value."""
    from omegaconf import OmegaConf

    found = []
    for key in node.keys() if OmegaConf.is_dict(node) else range(len(node)):
        name = f"{prefix}{key}"
        if OmegaConf.is_interpolation(node, key) or OmegaConf.is_missing(node, key):
            continue
        child = node._get_node(key)
        if OmegaConf.is_config(child):
            found += secret_values_in_config(child, f"{name}.")
        elif is_secret_key(str(key)) and child._value() not in (None, ""):
            found.append(name)
    return found
