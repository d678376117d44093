"""World check: is the synthetic world solvable, and only by reading several pages?

    python -m agentcredit.world.check --n 200 --split val [--retriever bm25] [--preset testbed]

prints one JSON line:
  n                   questions checked (the first n of the split)
  oracle_success      share the oracle answers exactly (normalised match), browsing freely
  per_template        the same per template
  single_doc_success  share it answers when it may open only one page
  mean_tool_calls     tool calls per episode of the free oracle (the answer is not a tool call)
  max_tool_calls
The world is conf/data/<preset>.yaml (default: the realistic world), with the given knobs on top,
browsed through conf/env/<preset>.yaml's view (the testbed's shows a fact's value only in find results).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import RETRIEVER_KINDS, build_retriever
from agentcredit.env.reward import normalize_answer
from agentcredit.world.cache import load_or_generate_world
from agentcredit.world.config import WorldConfig
from agentcredit.world.oracle import solve
from agentcredit.world.splits import SPLITS, split_questions


def check_world(world, questions, retriever: str = "dense", cache_dir=None, browser: dict | None = None) -> dict:
    """`browser`: BrowserEnv keyword arguments (the view: search leads, lines an open shows, ...)."""
    corpus = Corpus(world.documents)
    env = BrowserEnv(corpus, build_retriever(retriever, corpus, cache_dir=cache_dir), **(browser or {}))
    solved: dict[str, list[bool]] = defaultdict(list)
    single, calls = [], []
    for q in questions:
        gold = normalize_answer(q.answer)
        env.reset()
        episode = solve(q, env)
        solved[q.template].append(normalize_answer(episode.answer) == gold)
        calls.append(len(episode.actions))
        env.reset()
        single.append(normalize_answer(solve(q, env, max_docs_opened=1).answer) == gold)
    n = len(calls)
    every = [ok for oks in solved.values() for ok in oks]
    return {
        "n": n,
        "oracle_success": round(sum(every) / max(n, 1), 4),
        "per_template": {t: round(sum(oks) / len(oks), 4) for t, oks in sorted(solved.items())},
        "single_doc_success": round(sum(single) / max(n, 1), 4),
        "mean_tool_calls": round(sum(calls) / max(n, 1), 3),
        "max_tool_calls": max(calls, default=0),
    }


def preset_world(preset: str, **given) -> tuple[WorldConfig, dict]:
    """The world config of a data preset, with the knobs in `given` that are not None on top, and the
    BrowserEnv keyword arguments of the env preset of the same name."""
    from agentcredit.common.configs import compose_config, plain  # the CLI only: the world package reads no config files
    from agentcredit.env.factory import browser_kwargs

    try:
        cfg = compose_config([f"data={preset}", f"env={preset}"])
    except Exception as error:
        raise SystemExit(f"check: no world preset {preset!r} ({type(error).__name__}); use default or testbed") from None
    world = plain(cfg.data.get("world") or {})
    browser = browser_kwargs(plain(cfg.env))
    return WorldConfig.from_mapping({**world, **{k: v for k, v in given.items() if v is not None}}), browser


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200, help="questions to check (first n of the split)")
    parser.add_argument("--split", choices=SPLITS, default="val")
    parser.add_argument("--retriever", choices=RETRIEVER_KINDS, default="dense")
    parser.add_argument("--preset", default="default",
                        help="the world of conf/data/<preset>.yaml: default (realistic) or testbed (the tiny model's)")
    parser.add_argument("--seed", type=int, default=None, help="world seed (data.world.seed)")
    parser.add_argument("--num-documents", type=int, default=None)
    parser.add_argument("--num-questions", type=int, default=None)
    parser.add_argument("--hops-max", type=int, default=None)
    parser.add_argument("--no-cache", action="store_true", help="regenerate the world instead of loading the cache")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")

    start = time.time()
    cfg, browser = preset_world(args.preset, seed=args.seed, num_documents=args.num_documents,
                       num_questions=args.num_questions, hops_max=args.hops_max)
    world = load_or_generate_world(cfg, use_cache=not args.no_cache)
    questions = split_questions(world)[args.split][: args.n]
    if len(questions) < args.n:
        print(f"[check] the {args.split} split holds only {len(questions)} questions", file=sys.stderr)
    result = check_world(world, questions, args.retriever, browser=browser)
    print(json.dumps(result))
    print(f"[check] {time.time() - start:.1f}s, preset={args.preset}, retriever={args.retriever}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
