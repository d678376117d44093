"""Every config a command would run, checked for secrets before Hydra writes anything.

`@hydra.main` composes the config and writes it (`.hydra/config.yaml`, `hydra.yaml`, `multirun.yaml`, job
folder names) before the task function sees it, so a secret in an experiment file of `--config-dir`, in a
config group's defaults or in any sweep combination would be on disk before `validation.validate_config`
could refuse it. The entry scripts therefore call `refuse_secrets` first: it refuses the command line
(`secret_keys.secret_override_problem`), then composes what Hydra will compose, with Hydra's own argument
parser, search path (`--config-dir` prepended, `--config-path`, `--config-name`) and config loader, and
under `-m` every combination of the sweep (its `hydra.sweeper.params` too), and refuses in one line with
status 2 when any of them holds a secret by name or by value.

A command Hydra cannot parse or compose is left to Hydra, which refuses it with its own message before it
writes anything. A sweep of more than `MAX_COMBINATIONS` jobs is checked on that many combinations that
together hold every value of every swept key (a secret sits in one value, whatever it is combined with).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import sys
from collections.abc import Iterator, Sequence

from agentcredit.common.secret_keys import ENV_VARS, refuse_secret_overrides, secret_values_in_config

MAX_COMBINATIONS = 64


def hydra_args(argv: Sequence[str]):
    """Hydra's own command-line parser; None for what Hydra answers without composing (--help, --version, errors)."""
    from hydra._internal.utils import get_args_parser

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            args = get_args_parser().parse_args(list(argv))
    except SystemExit:
        return None
    return None if args.help or args.hydra_help or args.shell_completion or args.experimental_rerun else args


def _config_loader(args, calling_file: str, config_path: str):
    """Hydra's config loader with the search path `@hydra.main(config_path=...)` builds for this command."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_automatic_config_search_path
    from hydra.core.config_search_path import SearchPathQuery

    search_path = create_automatic_config_search_path(calling_file, None, args.config_path or config_path)
    if args.config_dir is not None:
        search_path.prepend(provider="command-line", path=f"file://{os.path.abspath(args.config_dir)}",
                            anchor=SearchPathQuery(provider="schema"))
    return ConfigLoaderImpl(config_search_path=search_path)


def sweep_combinations(overrides: list[str], loader, limit: int | None = None) -> Iterator[list[str]]:
    """The override lists of a sweep's jobs, as Hydra's basic sweeper forms them; beyond `limit` jobs
    (MAX_COMBINATIONS), as many combinations as the longest list of values, which together hold every value
    of every swept key at least once."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    limit = MAX_COMBINATIONS if limit is None else limit
    choices = {}
    for override in OverridesParser.create(config_loader=loader).parse_overrides(overrides):
        key = override.get_key_element()
        if override.is_discrete_sweep():
            choices[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:  # ranges and intervals are numbers: nothing to hide a secret in beyond what the key says
            choices[key] = [f"{key}={override.get_value_element_as_str()}"]
    lists = list(choices.values())
    total = 1
    for options in lists:
        total *= max(len(options), 1)
    if total <= limit:
        yield from (list(c) for c in itertools.product(*lists))
        return
    for i in range(max(len(options) for options in lists)):  # every value of every key, each at least once
        yield [options[min(i, len(options) - 1)] for options in lists]


_MEMO: dict | None = None  # the configs of each command line composed so far, inside `one_composition()`


@contextlib.contextmanager
def one_composition():
    """Inside it, each command line's configs are composed once for every check that asks for them (the secret
    check, the composition check, the run folder's checks before Hydra starts): each composition is a whole
    Hydra config load, and a sweep's is one per job. Outside it nothing is kept, so config files edited between
    two calls (a test that adds a method) are read again."""
    global _MEMO
    outer = _MEMO
    _MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _MEMO = outer


def _compose_all(args, calling_file: str, config_path: str, config_name: str) -> list[tuple[str, object]]:
    """(description, config, or the exception composing it raised) for every config Hydra will compose; an
    exception of the sweep's own config or of its combinations ends the list, as it ends Hydra's launch."""
    from hydra.types import RunMode

    name = args.config_name or config_name
    try:
        loader = _config_loader(args, calling_file, config_path)
        master = loader.load_configuration(name, list(args.overrides), run_mode=RunMode.MULTIRUN,
                                           validate_sweep_overrides=False)
    except Exception as err:  # noqa: BLE001 -- Hydra reports the same problem itself, before writing anything
        return [("the config", err)]
    if not (args.multirun or master.hydra.get("mode") == RunMode.MULTIRUN):
        return [("the config", master)]  # what a single run composes, up to hydra.mode
    entries: list[tuple[str, object]] = [("the sweep's config", master)]
    params = master.hydra.get("sweeper", {}).get("params") or {}
    try:
        combos = list(sweep_combinations([f"{k}={v}" for k, v in params.items()] + list(args.overrides), loader))
    except Exception as err:  # noqa: BLE001
        return [*entries, ("the sweep's combinations", err)]
    for combo in combos:
        try:
            entries.append((f"the sweep job {' '.join(combo)}", loader.load_configuration(name, combo, run_mode=RunMode.RUN)))
        except Exception as err:  # noqa: BLE001 -- Hydra refuses a job it cannot compose before launching any
            entries.append((f"the sweep job {' '.join(combo)}", err))
    return entries


def composed_configs(argv: Sequence[str], calling_file: str, config_path: str, config_name: str, strict: bool = False):
    """(description, config) for every config Hydra will compose for `argv`; nothing when Hydra would refuse
    the command itself (its own message then). `strict`: a config Hydra cannot compose raises Hydra's error
    instead of being passed over (cli/hydra_start.composition_problem turns it into one line)."""
    args = hydra_args(argv)
    if args is None:
        return
    # An absolute config_path decides the search path whatever file asks (cli/train.py or cli/hydra_start.py)
    key = (tuple(argv), None if os.path.isabs(config_path) else calling_file, config_path, config_name)
    entries = _MEMO.get(key) if _MEMO is not None else None
    if entries is None:
        entries = _compose_all(args, calling_file, config_path, config_name)
        if _MEMO is not None:
            _MEMO[key] = entries
    for where, composed in entries:
        if isinstance(composed, Exception):
            if strict:
                raise composed
            continue
        yield where, composed


def composed_secret_problem(argv: Sequence[str], calling_file: str, config_path: str, config_name: str) -> str | None:
    """The one-line refusal for the first composed config of this command that holds a secret, or None."""
    for where, cfg in composed_configs(argv, calling_file, config_path, config_name):
        keys = secret_values_in_config(cfg)
        if keys:
            var = ENV_VARS.get(keys[0], "an environment variable")
            return (f"{keys[0]} holds a secret in {where} (from a config file or the command line), which Hydra "
                    f"would copy into the run folder; leave it null and set {var} (environment or .env), "
                    f"or write ${{oc.env:NAME}}")
    return None


def refuse_secrets(calling_file: str, config_path: str, config_name: str, argv: Sequence[str] | None = None) -> None:
    """Exit with status 2 and one line, before Hydra writes anything, when the command line or any config it
    composes holds a secret. Entry scripts call it with their `@hydra.main` arguments, after
    `register_config_nodes()`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    refuse_secret_overrides(argv)
    problem = composed_secret_problem(argv, calling_file, config_path, config_name)
    if problem:
        print(f"config error: {problem}", file=sys.stderr, flush=True)
        raise SystemExit(2)
