"""QuestionDataModule: deterministic endless stream, exact resume, DDP sharding, fixed val/test."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir

from agentcredit.common.configs import plain, register_config_nodes
from agentcredit.lit import datamodule as dm_mod
from agentcredit.lit.datamodule import QuestionDataModule
from agentcredit.world.cache import world_cache_path
from agentcredit.world.config import WorldConfig
from agentcredit.world.generator import World
from agentcredit.world.types import Question

CONF = Path(__file__).resolve().parents[1] / "conf"
SMALL = {"seed": 1, "num_documents": 80, "num_questions": 60}


@pytest.fixture(autouse=True)
def private_cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def make(seed=0, prompts=3, **kw) -> QuestionDataModule:
    return QuestionDataModule(world=SMALL, prompts_per_step=prompts, n_val=5, n_test=7, seed=seed, **kw)


def ids(batches) -> list[list[str]]:
    return [[q.id for q in b] for b in batches]


def take(dm, n) -> list[list[Question]]:
    return list(itertools.islice(iter(dm.train_dataloader()), n))


def test_batches_are_lists_of_questions():
    batch = take(make(prompts=4), 1)[0]
    assert isinstance(batch, list) and len(batch) == 4 and all(isinstance(q, Question) for q in batch)


def test_train_stream_is_deterministic_endless_and_seeded():
    dm = make()
    n_train = len(dm.split_questions("train"))
    first = ids(take(dm, 40))
    assert first == ids(take(make(), 40))
    assert first != ids(take(make(seed=1), 40))
    flat = [i for b in first for i in b]
    assert len(flat) > n_train  # runs past one pass over the split
    assert sorted(flat[:n_train]) == sorted(q.id for q in dm.split_questions("train"))  # each pass is a permutation


def test_the_split_follows_split_seed_not_the_run_seed():
    # Every run seed must test on the questions the base policy (built on split_seed's train split)
    # never saw; the run seed only reshuffles the train stream.
    base, other_run, other_split = make(seed=0), make(seed=1), make(seed=0, split_seed=1)
    assert other_run.splits == base.splits
    assert ids(take(other_run, 5)) != ids(take(base, 5))
    assert other_split.splits["test"] != base.splits["test"]
    assert {q.id for q in other_split.splits["test"]} & {q.id for q in base.splits["train"]}  # why the seed matters


def test_resume_continues_after_the_last_trained_batch():
    reference = ids(take(make(), 8))
    dm = make()
    it = iter(dm.train_dataloader())
    batches = [next(it) for _ in range(4)]  # Lightning reads one batch ahead of training
    for b in batches[:3]:
        dm.on_before_batch_transfer(b, 0)
    state = json.loads(json.dumps(dm.state_dict()))  # checkpoints store plain data
    resumed = make()
    resumed.load_state_dict(state)
    assert ids(take(resumed, 5)) == reference[3:8]


def test_resume_refuses_a_stream_of_other_data():
    state = make().state_dict()
    state["train_stream"]["size"] += 1
    with pytest.raises(ValueError, match="same data and seed"):
        make().load_state_dict(state)
    # Same seed and size, other questions: a train split of another split_seed.
    other = make(split_seed=1)
    state = make().state_dict()
    state["train_stream"]["questions"] = other.train_stream.questions_digest
    with pytest.raises(ValueError, match="same data and seed"):
        make().load_state_dict(state)


def test_ddp_ranks_split_one_stream(monkeypatch):
    single = [q.id for b in take(make(prompts=2), 6) for q in b]
    per_rank = []
    for rank in (0, 1):
        monkeypatch.setattr(dm_mod, "_rank_and_world_size", lambda r=rank: (r, 2))
        per_rank.append([q.id for b in take(make(prompts=2), 3) for q in b])
    assert per_rank[0] == single[0::2][:6] and per_rank[1] == single[1::2][:6]


def test_val_and_test_are_fixed_and_held_out():
    dm = make()
    val = [q for b in dm.val_dataloader() for _, batch in b for q in batch]
    assert [q.id for q in val] == [q.id for b in dm.val_dataloader() for _, batch in b for q in batch]
    assert len(val) == 5 and len([q for b in dm.test_dataloader() for _, batch in b for q in batch]) == 7
    train_anchors = {q.anchor for q in dm.split_questions("train")}
    assert not train_anchors & {q.anchor for q in dm.split_questions("val") + dm.split_questions("test")}
    assert dm.corpus_documents == dm.world.documents


def test_world_is_cached_on_disk():
    first = make().world
    path = world_cache_path(WorldConfig(**SMALL))
    assert path.is_file() and World.from_json(path.read_text()).to_json() == first.to_json()
    assert make().world.to_json() == first.to_json()


def test_from_config_composes_the_real_configs():
    register_config_nodes()  # as every entry point does before Hydra composes (credit/_sweepable, credit/_defaults)
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="config", overrides=["data.world.num_documents=80", "data.world.num_questions=60",
                                                       "data.prompts_per_step=2", "seed=3"])
        defaults = compose(config_name="config", overrides=["data=default"])
    dm = QuestionDataModule.from_config(plain(cfg.data), seed=cfg.seed)
    assert dm.prompts_per_step == 2 and dm.seed == 3 and dm.world_config.num_documents == 80
    assert len(take(dm, 1)[0]) == 2
    # WorldConfig's defaults are the realistic world's (data=default); the testbed preset changes some of them.
    assert WorldConfig.from_mapping(dict(defaults.data.world)) == WorldConfig()


def test_user_world_through_the_datamodule(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": f"d{i}", "title": f"T{i}", "text": "a\nb " + " ".join(map(str, range(30)))}) for i in range(3)))
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps({"question": f"Q{i}?", "answer": str(i)}) for i in range(30)))
    dm = QuestionDataModule(corpus_path=str(corpus), questions_path=str(questions), prompts_per_step=2, n_val=3)
    assert len(dm.world.documents) == 3 and sum(len(v) for v in dm.splits.values()) == 30
    assert len(take(dm, 1)[0]) == 2
    with pytest.raises(ValueError, match="both data.corpus_path and data.questions_path"):
        QuestionDataModule(corpus_path=str(corpus))


class _Recorder(L.LightningModule):
    """Trains a single scalar and records the questions of every step."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))
        self.seen: list[list[str]] = []

    def training_step(self, questions, batch_idx):
        self.seen.append([q.id for q in questions])
        return (self.w - 1.0) ** 2

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(tmp_path, max_steps, ckpt_path=None) -> tuple[_Recorder, L.Trainer]:
    module = _Recorder()
    trainer = L.Trainer(max_steps=max_steps, max_epochs=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        default_root_dir=str(tmp_path), accelerator="cpu", devices=1)
    trainer.fit(module, datamodule=make(), ckpt_path=ckpt_path)
    return module, trainer


def test_batches_reach_the_step_as_question_records():
    batch = take(make(), 1)[0]
    assert make().transfer_batch_to_device(batch, torch.device("cpu"), 0) is batch


def test_lightning_resume_replays_the_uninterrupted_stream(tmp_path):
    full, _ = _fit(tmp_path, 5)
    first, trainer = _fit(tmp_path, 2)
    trainer.save_checkpoint(tmp_path / "mid.ckpt")
    resumed, _ = _fit(tmp_path, 5, ckpt_path=str(tmp_path / "mid.ckpt"))
    assert first.seen + resumed.seen == full.seen


def test_test_batches_keep_their_index_however_many_come_together(monkeypatch):
    one = [b for b in make(test_batch_size=2, test_batches_per_call=1).test_dataloader()]
    three = [b for b in make(test_batch_size=2, test_batches_per_call=3).test_dataloader()]
    # 7 questions: batches of 2, 2, 2, 1, indexed 0..3, handed out one at a time or three at a time
    assert [[(i, [q.id for q in qs]) for i, qs in b] for b in three] == \
        [[(i, [q.id for q in qs]) for b in one for i, qs in b][:3], [(i, [q.id for q in qs]) for b in one for i, qs in b][3:]]
    assert [i for b in one for i, _ in b] == [0, 1, 2, 3] and [len(qs) for b in one for _, qs in b] == [2, 2, 2, 1]
    monkeypatch.setattr(dm_mod, "_rank_and_world_size", lambda: (1, 2))  # rank 1 of 2: questions 1, 3, 5 -> 2 + 1
    assert [(i, len(qs)) for b in make(test_batch_size=2).test_dataloader() for i, qs in b] == [(0, 2), (1, 1)]


def test_val_batches_are_the_same_whatever_the_number_per_call():
    """Each validation batch keeps its index (its sampling stream) and its questions when several are rolled out
    in one call: the loader only groups them."""
    one, several = make(prompts=2), make(prompts=2, val_batches_per_call=2)
    by_one = [pair for b in one.val_dataloader() for pair in b]
    by_two = list(several.val_dataloader())
    assert [len(b) for b in by_two] == [2, 1]  # 5 val questions: batches of 2, 2 and 1
    assert [(i, [q.id for q in qs]) for b in by_two for i, qs in b] == [(i, [q.id for q in qs]) for i, qs in by_one]
    assert [i for i, _ in by_one] == [0, 1, 2]


def test_more_val_or_test_questions_than_the_split_holds_reads_all_and_says_so(caplog):
    dm = QuestionDataModule(world=SMALL, prompts_per_step=3, n_val=10_000, n_test=10_000)
    with caplog.at_level("WARNING", logger="agentcredit.lit.datamodule"):
        val = [q for call in dm.val_dataloader() for _, batch in call for q in batch]
        test = [q for call in dm.test_dataloader() for _, batch in call for q in batch]
    assert len(val) == len(dm.splits["val"]) and len(test) == len(dm.splits["test"])
    said = [r.getMessage() for r in caplog.records]
    assert f"data.n_val=10000 asks for more questions than the val split's {len(val)}: all {len(val)} are used" in said
    assert f"data.n_test=10000 asks for more questions than the test split's {len(test)}: all {len(test)} are used" in said
    caplog.clear()
    with caplog.at_level("WARNING", logger="agentcredit.lit.datamodule"):
        make().val_dataloader()
    assert not caplog.records  # within the split: no word
