"""Retrievers over a Corpus: `search(query, topn) -> list[int]` of corpus indices, best first.

Departures from the TRACE setup (Qwen3-Embedding-8B over the OpenResearcher corpus): the dense
retriever uses the small packaged all-MiniLM-L6-v2 so it runs offline on a laptop CPU, and it
embeds each document as passages of a few lines (title prepended) and scores a document by its
best passage, because the model truncates at 256 tokens and facts sit anywhere on a page.
A BM25 retriever is the lexical alternative (`env.retriever=bm25`).

Both break score ties by corpus order, so results are a pure function of (corpus, query, topn).
"""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import numpy as np

from agentcredit.env.corpus import Corpus
from agentcredit.env.types import Document
from agentcredit.common.paths import cache_dir as default_cache_root
from agentcredit.common.paths import stable_hash
from agentcredit.records import atomic_write_bytes, publish_folder

RETRIEVER_KINDS = ("dense", "bm25")
# Page titles are the queries a searcher sends most (the oracle always does, a trained policy mostly),
# so their vectors are kept with the index. Above this many documents the one-off cost (one query
# embedding per title) would rival the index itself, so large corpora embed titles on demand.
TITLE_TABLE_MAX_DOCS = 20_000
log = logging.getLogger(__name__)


def document_passages(doc: Document, lines_per_passage: int) -> list[str]:
    """Title-prefixed windows of consecutive lines; a page with no lines is one title-only passage."""
    if not doc.lines:
        return [doc.title]
    return [
        f"{doc.title}: " + " ".join(doc.lines[start : start + lines_per_passage])
        for start in range(0, len(doc.lines), lines_per_passage)
    ]


def import_faiss():
    """faiss without its loader's INFO lines (which CPU instruction set it loaded): nothing a run can act on."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    import faiss

    return faiss


class DenseRetriever:
    """FAISS inner-product search over unit-norm passage embeddings (i.e. cosine similarity)."""

    def __init__(self, corpus: Corpus, cache_dir: str | Path | None = None, lines_per_passage: int = 6):
        faiss = import_faiss()

        from agentcredit.env.embedding import get_embedder

        if lines_per_passage < 1:
            raise ValueError(f"lines_per_passage must be >= 1, got {lines_per_passage}.")
        self.corpus = corpus
        self.embedder = get_embedder()
        root = Path(cache_dir) if cache_dir is not None else default_cache_root() / "index"
        self.cache_key = stable_hash([corpus.hash, self.embedder.identity, "passages", lines_per_passage])
        self.index_dir = root / self.cache_key
        self.loaded_from_cache = (self.index_dir / "index.faiss").is_file()
        if self.loaded_from_cache:
            self.index = faiss.read_index(str(self.index_dir / "index.faiss"))
            self.passage_doc = np.load(self.index_dir / "passage_doc.npy")  # (P,) corpus index per passage
        else:
            texts: list[str] = []
            owners: list[int] = []
            for i, doc in enumerate(corpus.documents):
                passages = document_passages(doc, lines_per_passage)
                texts.extend(passages)
                owners.extend([i] * len(passages))
            # One-time cost per corpus (CPU-bound: ~20 MFLOP per token), so say where it goes.
            log.info("Embedding %d passages of %d documents into %s", len(texts), len(corpus), self.index_dir)
            vectors = self.embedder.embed_passages(texts)  # (P, D)
            self.index = faiss.IndexFlatIP(vectors.shape[1])
            self.index.add(vectors)
            self.passage_doc = np.asarray(owners, dtype=np.int64)
            self._save({"corpus_hash": corpus.hash, "embedder": self.embedder.identity,
                        "lines_per_passage": lines_per_passage, "passages": len(texts), "documents": len(corpus)})

        self.title_vectors = self._title_table() if len(corpus) <= TITLE_TABLE_MAX_DOCS else {}

    def _title_table(self) -> dict[str, np.ndarray]:
        """title -> read-only query vector, bit-identical to embedding the title as a query, stored
        next to the index (added to an index cached before this table existed)."""
        titles = [doc.title for doc in self.corpus.documents]
        path = self.index_dir / "title_queries.npy"
        vectors = np.load(path) if path.is_file() else None
        if vectors is None or vectors.shape != (len(titles), self.embedder.dim):
            vectors = self.embedder.encode_queries(titles)
            if self.index_dir.is_dir():  # written by whoever gets here first; readers never see half a file
                buffer = io.BytesIO()
                np.save(buffer, vectors)
                atomic_write_bytes(path, buffer.getvalue())
        vectors.setflags(write=False)
        return dict(zip(titles, vectors))

    def _query_vector(self, query: str) -> np.ndarray:
        vec = self.title_vectors.get(query)
        return vec if vec is not None else self.embedder.embed_query(query)

    def _save(self, meta: dict) -> None:
        faiss = import_faiss()

        def write(folder: Path) -> None:
            faiss.write_index(self.index, str(folder / "index.faiss"))
            np.save(folder / "passage_doc.npy", self.passage_doc)
            (folder / "meta.json").write_text(json.dumps(meta, indent=1))

        # Built in a private folder, then renamed: a concurrent builder (another rank, another test) never sees
        # a half-written index, and whichever rename lands first wins.
        try:
            publish_folder(self.index_dir, write)
        except OSError:
            if not (self.index_dir / "index.faiss").is_file():
                raise

    def prefetch(self, queries: list[str]) -> None:
        """Embed queries that are about to be searched together in one batch (results unchanged)."""
        self.embedder.embed_queries([q for q in queries if q not in self.title_vectors])

    def search(self, query: str, topn: int) -> list[int]:
        if topn < 1:
            return []
        query_vec = self._query_vector(query)[None, :]  # (1, D)
        total = self.index.ntotal
        k = min(total, 4 * topn)
        while True:
            scores, ids = self.index.search(query_vec, k)  # (1, k) each, best first
            best: dict[int, float] = {}
            for score, pid in zip(scores[0].tolist(), ids[0].tolist()):
                doc = int(self.passage_doc[pid])
                best.setdefault(doc, score)  # first hit of a document is its best passage
            if len(best) >= topn or k >= total:
                break
            k = min(total, 2 * k)
        ranked = sorted(best, key=lambda d: (-best[d], d))
        return ranked[:topn]


_TOKEN = re.compile(r"\w+")


def lexical_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25Retriever:
    """Okapi BM25 over title + lines. Documents sharing no term with the query are not returned."""

    def __init__(self, corpus: Corpus):
        from rank_bm25 import BM25Okapi

        self.corpus = corpus
        tokenized = [lexical_tokens(doc.title + "\n" + doc.text) for doc in corpus.documents]
        # rank_bm25 divides by the mean document length; an all-empty corpus would divide by zero.
        self._bm25 = BM25Okapi([toks or ["\x00"] for toks in tokenized])
        self._doc_terms = [frozenset(toks) for toks in tokenized]

    def search(self, query: str, topn: int) -> list[int]:
        terms = set(lexical_tokens(query))
        if topn < 1 or not terms:
            return []
        scores = np.asarray(self._bm25.get_scores(sorted(terms)))  # (N,)
        order = np.argsort(-scores, kind="stable")  # stable: ties keep corpus order
        hits: list[int] = []
        for i in order.tolist():
            if not terms.isdisjoint(self._doc_terms[i]):
                hits.append(i)
                if len(hits) == topn:
                    break
        return hits


def build_retriever(kind: str, corpus: Corpus, cache_dir: str | Path | None = None):
    """`dense` (cached FAISS index under cache_dir or <agentcredit cache>/index) or `bm25`."""
    if kind == "dense":
        return DenseRetriever(corpus, cache_dir=cache_dir)
    if kind == "bm25":
        return BM25Retriever(corpus)
    raise ValueError(f"Unknown retriever {kind!r}; set env.retriever to one of {', '.join(RETRIEVER_KINDS)}.")
