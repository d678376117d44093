"""Secrets (API keys, tokens, passwords) come from the environment or `.env`, never from the command
line or a config file.

Why refuse rather than scrub: Hydra writes the command line into `.hydra/overrides.yaml`, the
composed config into `.hydra/config.yaml` and `hydra.yaml`, a sweep names job folders after the
overrides and writes `multirun.yaml`, and W&B stores the process arguments and the folder name in its
run files (which `wandb sync` uploads). All of that happens before `train.run` sees the config, so the
only place that keeps a secret out of every file is the entry script itself, before `@hydra.main` runs
(`secret_check.refuse_secrets`, which also composes every config the command would run):

    $ python train.py judge.api_key=sk-...
    config error: judge.api_key must not be given on the command line (...); set AGENTCREDIT_JUDGE_API_KEY ...

A secret is recognised two ways:

- By name (`is_secret_key`): each dotted part is split into words (camelCase, kebab-, snake_ and
  dotted spellings alike: `openaiApiKey`, `api-key`, `aws.access_key`, `Authorization`), and a key is
  secret when a word is a token, secret, password/passwd/passphrase, credential, cookie or auth word,
  a whole `pwd`/`pw`/`pass`/`passcode`, a `session` (id), or a `key` that an `api`/`access`/`secret`/`private`/...
  word qualifies. Counts are not secrets:
  `max_turn_tokens` (plural), `pad_token_id` (a token *id*), `key_dim` (a bare `key`).
- By value (`secret_value_kind`), under any key: known prefixes (`sk-`, `Bearer `, `ghp_`, `hf_`,
  `AKIA`, `xoxb-`, JWTs, private-key blocks, passwords in URLs), a URL whose query string gives a
  secret-named parameter a value (`?api-key=`, `?key=`, `&sig=`), and long random-looking strings
  (`_looks_random`: Shannon entropy, letters and digits mixed). Hex strings and UUIDs are let
  through on purpose: they are commit hashes, content digests and run ids in ordinary configs; a hex
  key (a W&B key is 40 hex digits) is still caught under its name. Paths and model names are cut at
  `/`, `.` and `:` before measuring, so their words are measured one at a time.

Keys inside a dict or list value count too (`++judge={kind:openai,api_key:sk-...}`): the value is parsed
with Hydra's own override grammar, and scanned as text where that grammar fails. A config may name a
secret through an environment interpolation (`judge.api_key=${oc.env:MY_KEY}`): Hydra writes the
interpolation, and `config_for_records` keeps it unresolved in every file the project writes.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

REDACTED = "<redacted>"

# Where each known secret should come from instead.
ENV_VARS = {"judge.api_key": "AGENTCREDIT_JUDGE_API_KEY"}

# Words that make a key secret wherever they stand; also as the end of a glued word (`hftoken`, `clientsecret`).
_SECRET_WORD = re.compile(r"(token|secrets?|passwords?|passwd|passphrase|credentials?|creds|cookies?|"
                          r"apikeys?|accesskeys?|secretkeys?|privatekeys?)$")
# Words that make a key secret only as a whole word: glued, they end ordinary words (`bypass`, `compass`).
_SECRET_WHOLE_WORDS = {"pwd", "pw", "pass", "passcode", "sessionid", "sid"}
# auth, oauth, authorization, authentication, also glued (`basicauth`), but not author or authority.
_AUTH_WORD = re.compile(r"auth(z|n|orization|orisation|entication|header|key|keys|token)?s?$")
# A `key` is secret when one of these qualifies it (`api_key`, `aws.access_key`, `openaiApiKey`).
_KEY_QUALIFIERS = {"api", "access", "secret", "private", "auth", "signing", "encryption", "client", "master",
                   "session", "license", "subscription", "service", "account", "app", "ssh", "gpg", "pgp", "deploy",
                   "consumer", "openai", "anthropic", "wandb", "hf", "huggingface", "github", "aws", "azure", "gcp",
                   "google", "slack", "stripe", "mistral", "cohere", "groq", "together", "judge", "bearer"}
# A `token` followed by one of these is a vocabulary entry, not a credential (`pad_token_id`, `eos_token`).
_TOKEN_NOT_SECRET_AFTER = {"id", "ids", "index", "count", "len", "length", "limit", "budget", "type", "str", "text",
                           "embedding", "embeddings", "level", "dim", "size"}
_TOKEN_NOT_SECRET_BEFORE = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "start", "end", "stop",
                            "max", "min", "num", "per", "first", "last", "next", "answer", "tool", "think"}


def key_words(key: str) -> list[str]:
    """`openaiApiKey` -> [openai, api, key]; `aws.access-key` -> [aws, access, key]: the spellings of one
    name agree, so a rule written for snake_case holds for every other spelling."""
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", str(key))
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return [w for w in re.split(r"[^A-Za-z0-9]+", text.lower()) if w]


def is_secret_key(key: str) -> bool:
    """Whether a (dotted) key names a secret, whatever its spelling: see the module docstring."""
    words = key_words(key)
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < len(words) else ""
        if word == "token":
            if after not in _TOKEN_NOT_SECRET_AFTER and before not in _TOKEN_NOT_SECRET_BEFORE:
                return True
        elif word in ("key", "keys"):
            if before in _KEY_QUALIFIERS:
                return True
        elif word in _SECRET_WHOLE_WORDS or (word == "session" and after in ("", "id", "cookie", "secret")):
            return True
        elif _AUTH_WORD.search(word) or (_SECRET_WORD.search(word) and not word.endswith("tokens")):
            return True
    return False


# Known credential shapes, found anywhere in a value. Each names what it found (never the value itself).
_VALUE_PATTERNS = [
    ("an API key (sk-...)", re.compile(r"(?<![A-Za-z0-9])(?:sk-|(?:sk|rk)_(?:live|test)_)(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{16,}")),
    ("a bearer authorization", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{8,}")),
    ("a basic authorization", re.compile(r"(?i)\bbasic\s+(?=[A-Za-z0-9+/]*[0-9+/])[A-Za-z0-9+/]{12,}={0,2}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})")),
    ("a Hugging Face token (hf_...)", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{16,}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{20,}")),
    ("a GitLab, npm or PyPI token", re.compile(r"\b(?:glpat-[A-Za-z0-9_-]{16,}|npm_[A-Za-z0-9]{30,}|pypi-AgE[A-Za-z0-9_-]{30,})")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY")),
    ("a password in a URL", re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")),
]
# Pieces measured for randomness: `/`, `.`, `:` and the like cut paths, model names and hosts into words.
_PIECE = re.compile(r"[A-Za-z0-9+_-]{16,}")
_HEX_OR_UUID = re.compile(r"[0-9a-fA-F-]+")


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`'s own character frequencies."""
    counts = Counter(text)
    return -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())


def _looks_random(piece: str) -> bool:
    """A long run of letters and digits whose characters barely repeat: what generated keys look like.

    Measured on the piece's longest stretch without `-`, `_` or `+` (the whole piece when these are
    rarer than one in 12 characters), 20 characters or more, 24 in one letter case: names built of words
    (`SmolLM2-135M-Instruct`) have short stretches. Its entropy must
    reach 85% of log2 of the distinct characters a random stretch of its length and alphabet (the
    character classes it uses) holds on average, which English words, repeating letters, miss; and it
    must not read as camelCase words (`HuggingFaceSmolLM2Instruct`: chunks of 3+ characters on average,
    where random mixed case switches every ~2). Hex and UUIDs are let through (module docstring)."""
    parts = re.split(r"[-_+]", piece)
    # A rare separator is part of a random key (url-safe base64 has two in 64 characters); frequent ones join words.
    stretch = "".join(parts) if 12 * (len(parts) - 1) <= len(piece) else max(parts, key=len)
    mixed_case = bool(re.search(r"[a-z]", stretch) and re.search(r"[A-Z]", stretch))
    if len(stretch) < (20 if mixed_case else 24) or _HEX_OR_UUID.fullmatch(stretch):
        return False
    if not re.search(r"\d", stretch) or sum(c.isalpha() for c in stretch) < 6:
        return False
    alphabet = sum(size for pattern, size in _CLASSES if re.search(pattern, stretch))
    distinct = alphabet * (1 - (1 - 1 / alphabet) ** len(stretch))  # expected distinct characters if random
    chunk = len(stretch) / len(_CHUNK.findall(stretch))
    return shannon_entropy(stretch) >= 0.85 * math.log2(distinct) and chunk < (3.0 if mixed_case else 4.0)


_CLASSES = [(r"[a-z]", 26), (r"[A-Z]", 26), (r"\d", 10)]
_CHUNK = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def secret_value_kind(value: Any) -> str | None:
    """What secret `value` looks like (`an API key (sk-...)`), or None: checked under every key."""
    if not isinstance(value, str) or len(value) < 8:
        return None
    for kind, pattern in _VALUE_PATTERNS:
        if pattern.search(value):
            return kind
    if _secret_in_url_query(value):
        return "a secret in a URL's query string"
    if any(_looks_random(p) for p in _PIECE.findall(value)):
        return "a long random-looking string (a key or token)"
    return None


_URL_QUERY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s?#]*\?([^\s#]+)")
# Query parameters that carry a credential even under a bare name (`?key=` of Google's APIs, signed URLs' `sig=`).
_QUERY_SECRET_NAMES = {"key", "sig", "signature", "code"}


def _secret_in_url_query(value: str) -> bool:
    """A URL whose query string gives a value to a secret-named parameter (`?api-key=...`, `&token=...`), whatever
    the value looks like: a short or hex key is as secret there as a long random one."""
    for query in _URL_QUERY.findall(value):
        for part in query.split("&"):
            name, _, given = part.partition("=")
            if given and (is_secret_key(name) or name.lower() in _QUERY_SECRET_NAMES):
                return True
    return False


def url_for_logs(url: str) -> str:
    """`url` without the parts that may hold a credential (user:password@, the query string and fragment), for a
    log line: an endpoint given by an environment variable is not checked as the config is."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port  # .port raises on a port out of range
    except ValueError:
        return REDACTED
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) if parts.scheme else REDACTED


def redact_secrets(value: Any) -> Any:
    """A copy of a plain config tree with secrets replaced by "<redacted>": values of secret-looking keys
    (judge.api_key, ...) and values that look like a secret under any key. `${oc.env:NAME}` is kept: it
    says where the secret comes from, not what it is."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_key(str(k)) and v not in (None, "") and not _only_env(v) else redact_secrets(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    return REDACTED if secret_value_kind(value) else value


_ENV_INTERPOLATION = re.compile(r"(?<!\\)\$\{oc\.env:")


def _keep_env_unresolved(value: Any) -> Any:
    """`${oc.env:X}` escaped (`\\${oc.env:X}`), which OmegaConf resolves to the literal `${oc.env:X}`."""
    if isinstance(value, dict):
        return {k: _keep_env_unresolved(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keep_env_unresolved(v) for v in value]
    return _ENV_INTERPOLATION.sub(r"\\${oc.env:", value) if isinstance(value, str) else value


def config_for_records(cfg) -> dict:
    """The run config as the project writes it down (resolved_config.yaml, W&B): every interpolation
    resolved except `${oc.env:...}`, which stays as written because the environment is where secrets live
    (the run itself still resolves it), and every secret redacted."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(cfg, resolve=False)
    return redact_secrets(OmegaConf.to_container(OmegaConf.create(_keep_env_unresolved(raw)), resolve=True))


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


# A secret-named key may still be given an environment interpolation: Hydra writes `${oc.env:NAME}`, not the value.
_ONLY_ENV = re.compile(r"\$\{oc\.env:[A-Za-z_][A-Za-z0-9_]*(?:,\s*null)?\}")


def _secret_paths_in_value(value: Any, prefix: str) -> list[str]:
    """Dotted paths of secret-looking keys inside a parsed override value (dicts, lists, sweeps of them)."""
    from hydra.core.override_parser.types import ChoiceSweep

    if isinstance(value, ChoiceSweep):  # `a={api_key:x},{b:1}` or choice(...): every option is written
        return [p for option in value.list for p in _secret_paths_in_value(option, prefix)]
    if isinstance(value, dict):
        return [p for k, v in value.items()
                for p in ([f"{prefix}.{k}"] if is_secret_key(str(k)) and not _only_env(v)
                          else _secret_paths_in_value(v, f"{prefix}.{k}"))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _secret_paths_in_value(v, f"{prefix}.{i}")]
    return []


def _only_env(value: Any) -> bool:
    return isinstance(value, str) and bool(_ONLY_ENV.fullmatch(value.strip()))


# `key:` inside a `{...}` value that Hydra's grammar cannot parse: scanned rather than trusted.
_DICT_KEY_IN_TEXT = re.compile(r"[{,]\s*['\"]?([A-Za-z_][\w.-]*)['\"]?\s*:")


def secret_keys_in_override(override: str) -> list[str]:
    """Every secret-looking key `override` sets: its own key, or one inside a dict or list value
    (`++judge={kind:openai,api_key:sk-...}` -> judge.api_key), which Hydra would write into
    `.hydra/*.yaml`, the job folder's name and `multirun.yaml` just as well."""
    key = override_key(override)
    if not key:
        return []
    text = override.split("=", 1)[1] if "=" in override else ""
    if is_secret_key(key):
        return [] if _only_env(text) or (override.startswith("~") and not text) else [key]
    if "=" not in override:
        return []
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides([override])[0]
    except Exception:  # Hydra will refuse it too; still never let a secret through unseen
        return [f"{key}.{k}" for k in _DICT_KEY_IN_TEXT.findall(text) if is_secret_key(k)]
    return _secret_paths_in_value(parsed._value, key)


def secret_override_problem(argv: Sequence[str]) -> str | None:
    """The one-line refusal for the first secret-bearing argument in `argv` (by key or by value), or None."""
    for arg in argv:
        keys = secret_keys_in_override(arg)
        if keys:
            key = keys[0]
            return (f"{key} must not be given on the command line (Hydra records command lines in the run folder "
                    f"and W&B); {where_instead(key)} (see .env.example)")
        where = override_key(arg)
        kind = secret_value_kind(arg.split("=", 1)[1] if where and "=" in arg else arg)
        if kind:
            where = where or "an argument"
            return (f"{where} must not be given on the command line: its value looks like {kind}, and Hydra records "
                    f"command lines in the run folder, its folder names and W&B; "
                    f"{where_instead(where)} (see .env.example)")
    return None


def refuse_secret_overrides(argv: Sequence[str] | None = None) -> None:
    """Exit with status 2 and one line when the command line carries a secret (entry scripts call
    `secret_check.refuse_secrets`, which runs this first and then checks the composed configs)."""
    problem = secret_override_problem(sys.argv[1:] if argv is None else argv)
    if problem:
        print(f"config error: {problem}", file=sys.stderr, flush=True)
        raise SystemExit(2)


def secret_values_in_config(node, prefix: str = "") -> list[str]:
    """Keys of a composed config (DictConfig) that hold a secret: a literal value under a secret-looking
    key, or a secret-looking value (or `${oc.env:X,<default>}` default) under any key."""
    from omegaconf import OmegaConf

    found = []
    for key in node.keys() if OmegaConf.is_dict(node) else range(len(node)):
        name = f"{prefix}{key}"
        if OmegaConf.is_missing(node, key):
            continue
        child = node._get_node(key)
        if secret_value_kind(str(key)):
            found.append(name)
        elif OmegaConf.is_interpolation(node, key):
            if secret_value_kind(child._value()):
                found.append(name)
        elif OmegaConf.is_config(child):
            found += secret_values_in_config(child, f"{name}.")
        elif (is_secret_key(str(key)) and child._value() not in (None, "")) or secret_value_kind(child._value()):
            found.append(name)
    return found
