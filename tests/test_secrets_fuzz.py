"""Fuzz tests of secret detection (issue 44, item 4): a secret-looking value under any key spelling, in any
place an override can hold it, is refused; a secret-named key under any spelling is refused; ordinary
overrides of the project's own keys never are. Small budgets, so they run in the default suite."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcredit.common.secret_keys import is_secret_key, redact_secrets, secret_override_problem, secret_value_kind
from agentcredit.run.sweep import job_dirname

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ALNUM = string.ascii_letters + string.digits
body = st.text(ALNUM, min_size=24, max_size=48).filter(lambda s: any(c.isdigit() for c in s))
# Generated keys: known prefixes with random bodies, and random strings of distinct characters whose
# letter case and digits alternate (what an unprefixed generated key looks like).
PREFIXES = ["sk-", "sk-proj-", "sk-ant-api03-", "ghp_", "gho_", "github_pat_", "hf_", "xoxb-", "glpat-", "sk_live_", "AIza"]
prefixed = st.builds(lambda p, b: p + b, st.sampled_from(PREFIXES), body)
aws = st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16).map(lambda b: "AKIA" + b)
jwt = st.tuples(body, body, body).map(lambda t: f"eyJ{t[0]}.{t[1]}.{t[2]}")
random_key = st.permutations(list(zip(string.ascii_uppercase, string.ascii_lowercase, string.digits))).map(
    lambda triples: "".join(a + b + c for a, b, c in triples[:8]))
bearer = body.map(lambda b: f"Bearer {b}")
url_password = st.tuples(st.from_regex(r"[a-z]{3,8}", fullmatch=True), body).map(lambda t: f"https://{t[0]}:{t[1]}@example.com/v1")
SECRET_VALUES = st.one_of(prefixed, aws, jwt, random_key, bearer, url_password)

# Key spellings: ordinary words, written in every style a user might use.
WORD = st.sampled_from(["run", "note", "extra", "model", "my", "service", "value", "field", "item", "cfg"])
SECRET_WORDS = st.sampled_from([["access", "token"], ["api", "key"], ["secret", "key"], ["client", "secret"],
                                ["password"], ["auth"], ["authorization"], ["private", "key"], ["hf", "token"],
                                ["openai", "api", "key"], ["credentials"], ["refresh", "token"], ["passwd"]])


def spell(words: list[str], style: str) -> str:
    if style == "camel":
        return words[0] + "".join(w.title() for w in words[1:])
    if style == "pascal":
        return "".join(w.title() for w in words)
    if style == "upper":
        return "_".join(words).upper()
    return {"snake": "_", "kebab": "-", "glued": ""}[style].join(words)


STYLE = st.sampled_from(["camel", "pascal", "upper", "snake", "kebab", "glued"])
plain_key = st.builds(spell, st.lists(WORD, min_size=1, max_size=3), STYLE)
dotted_path = st.lists(plain_key, min_size=1, max_size=3).map(".".join)


def place(path: str, key: str, value: str, where: str) -> list[str]:
    """Override(s) that put `value` under `key` somewhere a command line can: a plain key, a dict, a list,
    a sweep choice, a sweep of dicts."""
    quoted = f"'{value}'"
    return {
        "plain": [f"+{path}.{key}={quoted}"],
        "dict": [f"+{path}={{{key}:{quoted}}}"],
        "nested dict": [f"+{path}={{a:{{{key}:{quoted}}}}}"],
        "list": [f"+{path}.{key}=[1,{quoted}]"],
        "sweep": ["-m", f"+{path}.{key}=a,{quoted}"],
        "sweep of dicts": ["-m", f"+{path}={{a:1}},{{{key}:{quoted}}}"],
    }[where]


PLACES = st.sampled_from(["plain", "dict", "nested dict", "list", "sweep", "sweep of dicts"])


@FUZZ
@given(value=SECRET_VALUES, path=dotted_path, key=plain_key, where=PLACES)
def test_a_secret_looking_value_is_refused_under_any_key_anywhere(value, path, key, where):
    assert secret_value_kind(value), value
    problem = secret_override_problem(place(path, key, value, where))
    assert problem is not None and value not in problem


@FUZZ
@given(words=SECRET_WORDS, style=STYLE, before=st.lists(WORD, max_size=2), path=dotted_path, where=PLACES)
def test_a_secret_named_key_is_refused_in_any_spelling_anywhere(words, style, before, path, where):
    key = spell([*before, *words], style)
    assert is_secret_key(key), key
    assert secret_override_problem(place(path, key, "plainvalue", where)) is not None


@FUZZ
@given(value=SECRET_VALUES, key=plain_key)
def test_a_secret_never_reaches_a_record_or_a_folder_name(value, key):
    assert value not in str(redact_secrets({"a": {key: value, "b": [value]}}))
    assert value not in job_dirname(f"credit:trace+{key}:{value}+seed:0")


def project_leaves() -> dict[str, object]:
    """Every leaf of the project's composed configs (every experiment file), with the value it has."""
    import glob
    import os

    from omegaconf import OmegaConf

    from agentcredit.common.configs import compose_config

    leaves: dict[str, object] = {}

    def walk(node, prefix):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        elif not isinstance(node, list):
            leaves[prefix[:-1]] = node

    experiments = sorted(os.path.basename(f)[:-5] for f in glob.glob("src/agentcredit/conf/experiment/*.yaml"))
    for overrides in [[], *[[f"experiment={e}"] for e in experiments], ["judge=openai", "logger=wandb", "model=hf"]]:
        walk(OmegaConf.to_container(compose_config(overrides), resolve=False), "")
    return leaves


@pytest.fixture(scope="module")
def leaves(request):
    import os

    os.chdir(request.config.rootpath)
    return project_leaves()


# Text a user writes: names, versions, dates and paths made of words (a random 20-character string is what a
# generated key looks like, and is refused on purpose).
VOCAB = ["trace", "grpo", "run", "Instruct", "SmolLM2", "135M", "Qwen2.5", "7B", "outputs", "multirun", "seed", "final",
         "v2", "2024", "05", "ckpt", "last", "step10", "HuggingFaceTB", "meta-llama", "Llama", "home", "data", "bf16"]
ORDINARY_TEXT = st.builds(lambda words, seps: "".join(w + s for w, s in zip(words, seps))[:-1] or "x",
                          st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6),
                          st.lists(st.sampled_from(["_", "-", ".", "/", "-"]), min_size=6, max_size=6))


def ordinary_value(draw, current):
    """A value of the kind the key holds: numbers for numbers, flags for flags, short names for text."""
    if isinstance(current, bool):
        return draw(st.sampled_from(["true", "false"]))
    if isinstance(current, int):
        return str(draw(st.integers(-10**6, 10**6)))
    if isinstance(current, float):
        return repr(draw(st.floats(-1e6, 1e6, allow_nan=False)))
    return draw(st.one_of(ORDINARY_TEXT, st.just("null")))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_ordinary_overrides_of_the_project_keys_are_never_refused(leaves, data):
    ordinary = sorted(k for k in leaves if not is_secret_key(k))  # judge.api_key: set from the environment only
    keys = data.draw(st.lists(st.sampled_from(ordinary), min_size=1, max_size=6, unique=True))
    overrides = [f"{k}={ordinary_value(data.draw, leaves[k])}" for k in keys]
    if data.draw(st.booleans()):  # a sweep of two ordinary values
        overrides = ["-m", *overrides[:-1], f"{keys[-1]}={ordinary_value(data.draw, leaves[keys[-1]])},"
                     f"{ordinary_value(data.draw, leaves[keys[-1]])}"]
    assert secret_override_problem(overrides) is None, overrides


def test_the_project_keys_and_values_are_not_secret(leaves):
    """No key of the project's own configs holds a value under a secret name (judge.api_key is null: it is
    read from the environment), and no value it ships looks like a secret."""
    assert [k for k, v in leaves.items() if is_secret_key(k) and v is not None] == []
    assert [k for k in leaves if is_secret_key(k)] == ["judge.api_key"]
    assert [k for k, v in leaves.items() if secret_value_kind(v)] == []
