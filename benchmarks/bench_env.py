"""Measure the browser environment: index build and load, search latency, step and snapshot cost.

    python benchmarks/bench_env.py --docs 500 --lines 12

Uses a throw-away random corpus (independent of the world generator) and a temporary index cache,
and prints one JSON object of figures.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time

from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.embedding import get_embedder
from agentcredit.env.retrieval import BM25Retriever, DenseRetriever
from agentcredit.env.types import ToolCall
from agentcredit.world.types import Document

VOCAB = ("river castle museum founded album director harbour rail bridge festival novel painter "
         "senator league island company opened born released studied married won award century").split()


def random_corpus(n_docs: int, n_lines: int, seed: int = 0) -> Corpus:
    rng = random.Random(seed)
    docs = [
        Document(f"d{i}", f"{rng.choice(VOCAB).title()} {rng.choice(VOCAB)} {i}", f"https://w/{i}",
                 tuple(" ".join(rng.choices(VOCAB, k=10)) + "." for _ in range(n_lines)))
        for i in range(n_docs)
    ]
    return Corpus(docs)


def per_call_ms(fn, calls) -> float:
    start = time.perf_counter()
    for call in calls:
        fn(call)
    return 1000 * (time.perf_counter() - start) / len(calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--lines", type=int, default=12)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    corpus = random_corpus(args.docs, args.lines)
    rng = random.Random(1)
    queries = [" ".join(rng.choices(VOCAB, k=4)) for _ in range(args.queries)]
    figures: dict[str, float | int] = {"docs": args.docs, "lines_per_doc": args.lines}

    start = time.perf_counter()
    embedder = get_embedder()
    figures["embedder_load_s"] = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        dense = DenseRetriever(corpus, cache_dir=cache)
        figures["dense_index_build_s"] = time.perf_counter() - start
        figures["passages_embedded"] = embedder.passages_embedded
        start = time.perf_counter()
        DenseRetriever(corpus, cache_dir=cache)
        figures["dense_index_load_s"] = time.perf_counter() - start
    figures["dense_search_ms_new_query"] = per_call_ms(lambda q: dense.search(q, 10), queries)
    figures["dense_search_ms_cached_query"] = per_call_ms(lambda q: dense.search(q, 10), queries)

    start = time.perf_counter()
    bm25 = BM25Retriever(corpus)
    figures["bm25_build_s"] = time.perf_counter() - start
    figures["bm25_search_ms"] = per_call_ms(lambda q: bm25.search(q, 10), queries)

    env = BrowserEnv(corpus, bm25)
    calls = []
    for q in queries:
        calls += [ToolCall("browser.search", {"query": q}), ToolCall("browser.open", {"id": 0}),
                  ToolCall("browser.find", {"pattern": q.split()[0]}), ToolCall("browser.open", {"loc": 6})]
    figures["env_step_ms_bm25"] = per_call_ms(env.step, calls)
    snaps = [env.snapshot() for _ in range(1000)]
    figures["snapshot_us"] = 1000 * per_call_ms(lambda _: env.snapshot(), range(1000))
    figures["restore_us"] = 1000 * per_call_ms(env.restore, snaps)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
