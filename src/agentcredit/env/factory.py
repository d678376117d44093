"""Build BrowserEnvs from the `env` config group (conf/env/default.yaml).

The retriever (and its index) is built once; the returned factory makes fresh, independent
environments that share it, one per rollout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import build_retriever

# Config keys that are BrowserEnv keyword arguments; `retriever` and `reward` are read elsewhere.
BROWSER_KEYS = (
    "default_topn",
    "default_num_lines",
    "summary_chars",
    "max_query_chars",
    "max_pattern_chars",
    "max_topn",
    "max_num_lines",
    "max_line_chars",
    "max_find_matches",
)
OTHER_KEYS = ("retriever", "reward")


def browser_kwargs(env_cfg: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(env_cfg) - set(BROWSER_KEYS) - set(OTHER_KEYS))
    if unknown:
        raise ValueError(
            f"Unknown env config key(s) {unknown}; known keys: {', '.join(BROWSER_KEYS + OTHER_KEYS)}."
        )
    return {key: env_cfg[key] for key in BROWSER_KEYS if key in env_cfg}


def make_env_factory(
    corpus: Corpus, env_cfg: Mapping[str, Any], cache_dir: str | Path | None = None
) -> Callable[[], BrowserEnv]:
    """Zero-argument factory of fresh BrowserEnvs over one shared retriever."""
    kwargs = browser_kwargs(env_cfg)
    retriever = build_retriever(str(env_cfg.get("retriever", "dense")), corpus, cache_dir=cache_dir)
    BrowserEnv(corpus, retriever, **kwargs)  # fail on a bad setting now, not inside the first rollout

    def new_env() -> BrowserEnv:
        return BrowserEnv(corpus, retriever, **kwargs)

    return new_env
