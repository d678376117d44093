"""`QuestionDataModule`: the world (synthetic or user-supplied), its splits, and question streams.

- splits: keyed by `data.split_seed`, not by the run seed, so runs of every seed share one test split
  and it stays disjoint from the split a base policy trained on.
- train: an endless stream, reshuffled every pass with a seed derived from (seed, pass), so the
  stream is a pure function of the run seed. Its position is part of `state_dict()`; a resumed run
  continues the same stream at the first batch the interrupted run had not trained on.
- val / test: the first `n_val` / `n_test` questions of their splits, in a fixed order, cut into batches of
  `prompts_per_step` (val) or `test_batch_size` (test) questions. A loader batch is `val_batches_per_call` /
  `test_batches_per_call` pairs (index, questions), rolled out in one call: each index names the sampling stream
  its questions draw from, so how many are rolled out together changes speed, not outcomes.
Training batches are `list[Question]` of `prompts_per_step` questions. Under DDP each rank takes every
world_size-th question of the same stream, so ranks never see the same question in one step.

The synthetic world is cached as JSON under `cache_dir()/worlds/` (see `world/cache.py`).
"""

from __future__ import annotations

import inspect
import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from agentcredit.common.paths import stable_hash
from agentcredit.world.cache import load_or_generate_world
from agentcredit.world.config import WorldConfig
from agentcredit.world.generator import World
from agentcredit.world.splits import split_questions
from agentcredit.world.types import Question
from agentcredit.world.user import load_user_world

log = logging.getLogger(__name__)


def _rank_and_world_size() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1



def first_questions(questions: Sequence, n: int | None, split: str, asked_by: str, what: str) -> Sequence:
    """The first n questions of a split (n None: all); a larger n than the split holds reads all of it, and says so
    under the setting that asked (`asked_by`), since the count a report labels its accuracy with is the count
    that ran. `what`: what happens to them ("used", "evaluated")."""
    if n is not None and n > len(questions):
        log.warning(f"{asked_by}={n} asks for more questions than the {split} split's {len(questions)}: "
                    f"all {len(questions)} are {what}")
    return questions[:n]

class QuestionBatch(list):
    """A list of questions that remembers where in the train stream it ends (for resuming)."""

    stream_end: int | None = None


class QuestionStream(IterableDataset):
    """Endless seeded shuffle over `questions`; `position` counts stream items already handed out."""

    def __init__(self, questions: Sequence[Question], seed: int):
        if not questions:
            raise ValueError("the train split is empty; lower data.val_fraction / data.test_fraction or add questions")
        self.questions = tuple(questions)
        self.seed = seed
        self.position = 0

    def order(self, epoch: int) -> list[int]:
        order = list(range(len(self.questions)))
        random.Random(int(stable_hash([self.seed, "train-stream", epoch]), 16)).shuffle(order)
        return order

    def item(self, position: int) -> Question:
        epoch, index = divmod(position, len(self.questions))
        return self.questions[self.order(epoch)[index]]

    def __iter__(self) -> Iterator[Question]:
        rank, world_size = _rank_and_world_size()
        position = self.position
        epoch, order = -1, []
        while True:
            if position % world_size == rank:
                e, index = divmod(position, len(self.questions))
                if e != epoch:
                    epoch, order = e, self.order(e)
                # Round up to whole rounds of ranks so every rank records the same position.
                self.position = (position // world_size + 1) * world_size
                yield self.questions[order[index]]
            position += 1

    @cached_property
    def questions_digest(self) -> str:
        return stable_hash([q.id for q in self.questions])

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position, "seed": self.seed, "size": len(self.questions),
                "questions": self.questions_digest}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # Checkpoints written before the digest existed carry only seed and size.
        same = state.get("seed") == self.seed and state.get("size") == len(self.questions)
        if not same or state.get("questions", self.questions_digest) != self.questions_digest:
            raise ValueError("the checkpoint's question stream was made from other data; resume with the same data and seed")
        self.position = int(state["position"])


class IndexedBatches(IterableDataset):
    """This rank's share of a fixed list (every world_size-th question) cut into batches of `size`, each
    yielded as (its index among this rank's batches, its questions)."""

    def __init__(self, questions: Sequence[Question], size: int):
        self.questions, self.size = tuple(questions), size

    def __iter__(self) -> Iterator[tuple[int, list[Question]]]:
        rank, world_size = _rank_and_world_size()
        mine = self.questions[rank::world_size]
        for index, start in enumerate(range(0, len(mine), self.size)):
            yield index, list(mine[start : start + self.size])


class QuestionDataModule(L.LightningDataModule):
    def __init__(self, world: Mapping[str, Any] | WorldConfig | None = None, prompts_per_step: int = 4,
                 n_val: int = 64, n_test: int = 200, val_fraction: float = 0.2, test_fraction: float = 0.2,
                 seed: int = 0, split_seed: int = 0, corpus_path: str | None = None,
                 questions_path: str | None = None, use_cache: bool = True, test_batch_size: int | None = None,
                 test_batches_per_call: int = 1, test_samples_per_question: int = 1, val_batches_per_call: int = 1):
        super().__init__()
        if prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {prompts_per_step}")
        if (corpus_path is None) != (questions_path is None):
            raise ValueError("a user world needs both data.corpus_path and data.questions_path (or neither)")
        self.world_config = WorldConfig.from_mapping(world)
        self.prompts_per_step = prompts_per_step
        self.n_val, self.n_test = n_val, n_test
        # The held-out evaluation rolls out one answer per question: wider batches than training's P.
        self.test_batch_size = test_batch_size or prompts_per_step
        self.test_batches_per_call = test_batches_per_call
        self.val_batches_per_call = val_batches_per_call
        self.test_samples_per_question = test_samples_per_question  # rolled out by the module's test_step
        self.val_fraction, self.test_fraction = val_fraction, test_fraction
        # The run seed shuffles the train stream; the split has its own seed so that every run seed
        # holds out the same questions, the ones the base policy never trained on.
        self.seed, self.split_seed = seed, int(split_seed)
        self.corpus_path, self.questions_path = corpus_path, questions_path
        self.use_cache = use_cache
        self._consumed: int | None = None  # stream position after the last batch handed to training

    @classmethod
    def from_config(cls, data: Mapping[str, Any], seed: int = 0) -> "QuestionDataModule":
        """Build from the run config's `data` group (a plain dict) and its top-level `seed`."""
        known = set(inspect.signature(cls).parameters) - {"seed"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown data config keys {unknown}; known keys: {sorted(known)}")
        return cls(**data, seed=int(seed))

    # ----- data ------------------------------------------------------------------------------

    @cached_property
    def world(self) -> World:
        if self.corpus_path is not None:
            return load_user_world(self.corpus_path, self.questions_path)
        return load_or_generate_world(self.world_config, self.use_cache)

    @property
    def corpus_documents(self):
        return self.world.documents

    @cached_property
    def splits(self) -> dict[str, tuple[Question, ...]]:
        return split_questions(self.world, self.val_fraction, self.test_fraction, self.split_seed)

    def split_questions(self, split: str) -> tuple[Question, ...]:
        """All questions of a split ("train" | "val" | "test"), independent of n_val / n_test."""
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; use one of {sorted(self.splits)}")
        return self.splits[split]

    @cached_property
    def train_stream(self) -> QuestionStream:
        return QuestionStream(self.splits["train"], self.seed)

    # ----- loaders ---------------------------------------------------------------------------

    def _collate_train(self, questions: list[Question]) -> QuestionBatch:
        batch = QuestionBatch(questions)
        batch.stream_end = self.train_stream.position
        return batch

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_stream, batch_size=self.prompts_per_step, collate_fn=self._collate_train)

    def val_dataloader(self) -> DataLoader:
        # Batches of prompts_per_step questions, each its own sampling stream, `val_batches_per_call` of them a call.
        batches = IndexedBatches(self._first("val", self.n_val), self.prompts_per_step)
        return DataLoader(batches, batch_size=self.val_batches_per_call, collate_fn=list)

    def test_dataloader(self) -> DataLoader:
        batches = IndexedBatches(self._first("test", self.n_test), self.test_batch_size)
        return DataLoader(batches, batch_size=self.test_batches_per_call, collate_fn=list)

    def _first(self, split: str, n: int) -> tuple:
        return first_questions(self.splits[split], n, split, f"data.n_{split}", "used")

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        # Lightning fetches one batch ahead; the batch reaching this hook is the one being trained
        # on, so its end (not the loader's read-ahead position) is where a resumed run must continue.
        if isinstance(batch, QuestionBatch) and batch.stream_end is not None:
            self._consumed = batch.stream_end
        return batch

    def transfer_batch_to_device(self, batch: Any, device: Any, dataloader_idx: int) -> Any:
        # Batches are Question records; the rollout moves the tensors it builds itself.
        return batch

    # ----- resume ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state = self.train_stream.state_dict()
        if self._consumed is not None:
            state["position"] = self._consumed
        return {"train_stream": state}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.train_stream.load_state_dict(state_dict["train_stream"])
        self._consumed = None
