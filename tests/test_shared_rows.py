"""Rollout rows with identical histories share a cache slot: same samples as rows sampled apart, fewer
tokens through the model."""

import pytest
import torch

from agentcredit.agent.protocol import STOP_STRINGS
from agentcredit.agent.next_token import StopChecker
from agentcredit.agent.sampling import TurnSampler
from agentcredit.agent.slot_cache import SlotCache
from agentcredit.world.types import Question
from tests.test_rollout import QUESTION, make_worker, sample_all, setup  # noqa: F401  (setup is a fixture)


def _fed_tokens(monkeypatch) -> list[int]:
    """Records how many tokens each sampler step feeds the model (lean or Hugging Face forward)."""
    fed: list[int] = []
    packed, forward = TurnSampler._packed, TurnSampler._forward

    def counting_packed(self, decoding, queued):
        fed.append(len(decoding) + sum(len(r.queued) for r in queued))
        return packed(self, decoding, queued)

    def counting_forward(self, ids, starts, slots, keep=None):
        fed.append(int(ids.shape[0]) * int(ids.shape[1]))
        return forward(self, ids, starts, slots, keep)

    monkeypatch.setattr(TurnSampler, "_packed", counting_packed)
    monkeypatch.setattr(TurnSampler, "_forward", counting_forward)
    return fed


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_shared_rows_sample_what_separate_rows_sample(setup, monkeypatch, lean, temperature):
    # At T = 1 the rows of a group part at their first different draw; at T = 0 they never do, so
    # everything after the prompt is shared to the end (tools included: the same calls, the same pages).
    fed = _fed_tokens(monkeypatch)
    questions = [QUESTION, Question("q1", "Where was Lena Marsh born?", "Korvel", "BRIDGE_ENTITY")]
    group_size = 4
    runs = {}
    for share in (False, True):
        fed.clear()
        worker = make_worker(setup, lean_forward=lean, share_identical=share, temperature=temperature)
        worker.generator = torch.Generator().manual_seed(7)
        groups = worker.rollout(questions, group_size=group_size)
        runs[share] = ([t for g in groups for t in g], sum(fed))
    (apart, fed_apart), (shared, fed_shared) = runs[False], runs[True]
    for a, b in zip(apart, shared):
        assert a.input_ids == b.input_ids and a.loss_mask == b.loss_mask and a.boundaries == b.boundaries
        assert torch.allclose(torch.tensor(a.old_logprobs), torch.tensor(b.old_logprobs), atol=1e-5)
    if not lean:  # the model's forward also feeds stand-ins and pads: only fewer
        assert fed_shared < fed_apart
    elif temperature == 0.0:  # one history per question: each token is fed once per question, not per row
        assert len({tuple(t.input_ids) for t in apart}) == len(questions)
        assert fed_apart == group_size * fed_shared
    else:  # each question's prompt is fed once, not once per row
        prompts = sum(g[0].boundaries[0] for g in groups)
        assert fed_shared <= fed_apart - (group_size - 1) * prompts


def _greedy(setup):
    """The policy, chat format, greedy TurnSampler arguments and QUESTION's prompt."""
    policy, tokenizer, chat, _ = setup
    kw = dict(temperature=0.0, top_p=1.0, pad_id=tokenizer.pad_token_id,
              stop=StopChecker(tokenizer, STOP_STRINGS, chat.eos_ids))
    return policy, chat, kw, chat.prompt_ids(QUESTION.text) + list(chat.assistant_header)


def test_rows_whose_tools_return_different_pages_part_and_keep_their_history(setup):
    policy, chat, kw, prompt = _greedy(setup)
    shared = TurnSampler(policy, **kw)
    first = sample_all(shared, [prompt, prompt, prompt], 6)
    assert sum(m is not None for m in shared.slots) == 1  # one history so far
    assert first[0].token_ids == first[1].token_ids == first[2].token_ids
    observations = ["Search results: none", "L0: Korvel is a port town. L1: more", "Search results: none"]
    grown = [prompt + t.token_ids + chat.observation_ids(chat.encode(o)) + list(chat.assistant_header)
             for t, o in zip(first, observations)]
    second = sample_all(shared, grown, 6)
    assert sorted(len(m) for m in shared.slots if m is not None) == [1, 2]  # rows 0 and 2 still share
    fresh = sample_all(TurnSampler(policy, **kw, share_identical=False), grown, 6)
    for a, b in zip(second, fresh):
        assert a.token_ids == b.token_ids
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)


def test_released_rows_leave_their_slot_to_the_rows_that_share_it(setup):
    policy, chat, kw, prompt = _greedy(setup)
    sampler = TurnSampler(policy, **kw)
    first = sample_all(sampler, [prompt, prompt], 4)
    sampler.release(0)
    assert [len(m) for m in sampler.slots if m is not None] == [1]
    grown = prompt + first[1].token_ids + chat.observation_ids(chat.encode("Search results: none"))
    sampler.next_turn(1, grown, 4)
    turns = {}
    while 1 not in turns:
        turns.update(sampler.step())
    alone = TurnSampler(policy, **kw)
    sample_all(alone, [prompt], 4)
    again = sample_all(alone, [grown], 4)[0]
    assert turns[1].token_ids == again.token_ids
    sampler.release(1)
    assert not sampler.live and all(m is None for m in sampler.slots)


def test_copy_slot_copies_the_used_columns_only():
    cache = SlotCache(3)
    keys = torch.arange(3 * 2 * 4 * 2, dtype=torch.float32).view(3, 2, 4, 2)
    cache.reserve(4)
    cache.put(keys.transpose(1, 2).reshape(12, 2, 2), -keys.transpose(1, 2).reshape(12, 2, 2), 0,
              torch.arange(3).repeat_interleave(4), torch.arange(4).repeat(3))
    cache.copy_slot(0, 2, 3)
    assert torch.equal(cache.keys[0][2, :, :3], keys[0, :, :3])
    assert torch.equal(cache.keys[0][2, :, 3], keys[2, :, 3])  # past `used`: untouched
    assert torch.equal(cache.values[0][2, :, :3], -keys[0, :, :3])
    assert torch.equal(cache.keys[0][:2, :, :4], keys[:2])  # the other slots: as they were


def test_keep_leaves_room_for_rows_that_part_later():
    cache = SlotCache(4)
    cache.reserve(2)
    cache.put(torch.ones(4, 1, 1), torch.ones(4, 1, 1), 0, torch.tensor([0, 1, 2, 3]), torch.zeros(4, dtype=torch.long))
    cache.keep(torch.tensor([3, 1]), used=1, num_slots=3)
    assert cache.num_slots == 3 and cache.keys[0].shape[0] == 3
    assert torch.equal(cache.keys[0][2], torch.zeros(1, cache.capacity, 1))


def test_keep_in_slot_order_moves_slots_down_in_place():
    # The sampler's compaction keeps slots in ascending order: each moves down to its new number in the
    # same buffers (no allocation); only the columns in use are copied.
    cache = SlotCache(4)
    cache.reserve(3)
    keys = torch.arange(4 * 3, dtype=torch.float32).reshape(4, 3)  # slot s, column c: 3s + c
    cache.put(keys.reshape(12, 1, 1), -keys.reshape(12, 1, 1), 0, torch.arange(4).repeat_interleave(3),
              torch.arange(3).repeat(4))
    before = cache.keys[0].data_ptr()
    cache.keep(torch.tensor([1, 3]), used=2, num_slots=3)
    assert cache.num_slots == 3 and cache.keys[0].shape[0] == 3 and cache.keys[0].data_ptr() == before
    assert cache.keys[0][0, 0, :2, 0].tolist() == [3.0, 4.0] and cache.keys[0][1, 0, :2, 0].tolist() == [9.0, 10.0]
    assert cache.values[0][1, 0, :2, 0].tolist() == [-9.0, -10.0]
    # column 2 was not in use: slot 1 keeps what it held there (slot 1's own 5), not slot 3's 11
    assert cache.keys[0][1, 0, 2, 0].item() == 5.0


@pytest.mark.parametrize("group", [1, 3])
def test_continuations_from_nested_states_prefill_the_longest_once(setup, monkeypatch, group):
    """Every state S_0..S_3 of a rollout (each a prefix of the next), continued n = group times: the histories
    are fed once, in the longest one's run; the shorter ones take its keys and its logits at their own last
    token. The continuations are those sampled with every history prefilled on its own."""
    from agentcredit.agent.lean_forward import LeanForward
    from agentcredit.agent.protocol import ToolCall, render_answer, render_tool_call

    fed: list[int] = []  # tokens each lean forward ran on
    packed = LeanForward.packed
    monkeypatch.setattr(LeanForward, "packed", lambda self, batch, cache: fed.append(batch.ids.numel()) or packed(self, batch, cache))
    turns = [render_tool_call(ToolCall("browser.search", {"query": "Korvel mayor", "topn": 3})),
             render_tool_call(ToolCall("browser.open", {"id": 1})),
             render_tool_call(ToolCall("browser.find", {"pattern": "mayor"})),
             render_answer("Ada Fenn")]
    runs = {}
    for share in (False, True):
        worker = make_worker(setup, share_identical=share, temperature=1.0)
        traj = worker.replay(QUESTION, turns)
        worker.generator = torch.Generator().manual_seed(3)
        fed.clear()
        out = worker.continue_from_states([(traj, b) for b in range(traj.num_tool_turns + 1)], QUESTION, n=group)
        runs[share] = ([c for cs in out for c in cs], fed[0], traj)
    (apart, first_apart, traj), (shared, first_shared, _) = runs[False], runs[True]
    for a, b in zip(apart, shared):
        assert a.input_ids == b.input_ids and a.loss_mask == b.loss_mask and a.boundaries == b.boundaries
        assert torch.allclose(torch.tensor(a.old_logprobs), torch.tensor(b.old_logprobs), atol=1e-5)
    # Apart, the first step feeds every state's history and the turn's header (once per row); nested, only the
    # longest one.
    header = len(setup[2].assistant_header)
    assert first_apart == group * sum(b + header for b in traj.boundaries)
    assert first_shared == traj.boundaries[-1] + header


def test_nested_prefills_pick_a_host_that_extends_nothing():
    from agentcredit.agent.sampling import _Row

    rows = [_Row(k, slot=k, queued=q) for k, q in enumerate([[1, 2], [1, 2, 3, 4], [1], [1, 2, 3], [1, 5], [7]])]
    rows.append(_Row(6, slot=6, length=3, queued=[1]))  # cached already: not a fresh history
    hosts = TurnSampler._nested_prefills(rows)
    # [1] is a prefix of [1,2], [1,2,3], [1,2,3,4] and [1,5]: sorted, its block ends at [1,5], which extends nothing
    assert hosts == {2: 4, 0: 1, 3: 1}


# ---------------------------------------------------------------------------------------- unzeroed caches
def test_an_unzeroed_cache_takes_its_capacity_once_and_grows_only_past_it():
    cache = SlotCache(2, zero_unwritten=False, capacity=300)
    cache.reserve(5)
    assert cache.capacity == 300
    cache.put(torch.ones(2, 1, 2), torch.ones(2, 1, 2), 0, torch.tensor([0, 1]), torch.tensor([0, 299]))
    before = cache.keys[0].data_ptr()
    cache.reserve(300)
    assert cache.keys[0].data_ptr() == before  # no grow within the capacity
    cache.reserve(301)  # a history past the limit still fits: the buffers double
    assert cache.capacity == 600 and cache.keys[0][1, 0, 299].tolist() == [1.0, 1.0]


def test_a_zeroed_cache_grows_from_small_as_before_whatever_the_capacity():
    cache = SlotCache(2, capacity=300)
    cache.reserve(5)
    assert cache.capacity == 64


def test_keep_out_of_order_without_zeroing_copies_only_the_columns_in_use(monkeypatch):
    from agentcredit.agent import slot_cache

    poison(monkeypatch)
    cache = SlotCache(3, zero_unwritten=False, capacity=4)
    cache.reserve(4)
    keys = torch.arange(3 * 2, dtype=torch.float32).reshape(3, 2)  # slot s, column c: 2s + c
    cache.put(keys.reshape(6, 1, 1), -keys.reshape(6, 1, 1), 0, torch.arange(3).repeat_interleave(2),
              torch.arange(2).repeat(3))
    cache.keep(torch.tensor([2, 0]), used=2, num_slots=3)
    assert cache.keys[0][:2, 0, :2, 0].tolist() == [[4.0, 5.0], [0.0, 1.0]]
    assert cache.values[0][1, 0, :2, 0].tolist() == [-0.0, -1.0]
    assert cache.keys[0][:, :, 2:].isnan().all() and cache.keys[0][2].isnan().all()  # left as allocated
    assert slot_cache._copied(cache.keys[0], None, 2, 4, zero=True)[:, :, 2:].eq(0).all()


def poison(monkeypatch):
    """Unzeroed buffers come filled with NaN: whatever reads a column no row wrote turns NaN."""
    from agentcredit.agent import slot_cache

    allocate = slot_cache._allocate
    monkeypatch.setattr(slot_cache, "_allocate",
                        lambda like, shape, zero: allocate(like, shape, zero=zero) if zero else like.new_full(shape, float("nan")))


@pytest.mark.parametrize("share", [True, False])
def test_unzeroed_caches_sample_what_zeroed_growing_ones_sample(setup, monkeypatch, share):
    # With the decode kernel, nothing reads a column no row wrote: rollouts and continuations from nested states
    # (copied slots, nested prefills, compaction) with NaN in every unwritten column sample what zeroed caches that
    # grow from 64 columns sample, token for token and log-probability for log-probability.
    from agentcredit.agent.decode_kernel import decode_kernel_available
    from agentcredit.agent.protocol import ToolCall, render_answer, render_tool_call

    reason = decode_kernel_available()
    if reason is not None:
        pytest.skip(f"only the decode kernel reads unzeroed caches: {reason}")
    turns = [render_tool_call(ToolCall("browser.search", {"query": "Korvel mayor", "topn": 3})),
             render_tool_call(ToolCall("browser.open", {"id": 1})), render_answer("Ada Fenn")]
    questions = [QUESTION, Question("q1", "Where was Lena Marsh born?", "Korvel", "BRIDGE_ENTITY")]
    runs = {}
    for unzeroed in (False, True):
        with monkeypatch.context() as patch:
            if unzeroed:
                poison(patch)
            else:
                patch.setattr(TurnSampler, "_new_cache", lambda self, slots: SlotCache(slots))
            worker = make_worker(setup, share_identical=share, temperature=1.0)
            assert worker._sampler().reads_own_lengths
            worker.generator = torch.Generator().manual_seed(11)
            groups = worker.rollout(questions, group_size=4)
            traj = worker.replay(QUESTION, turns)
            states = worker.continue_from_states([(traj, b) for b in range(traj.num_tool_turns + 1)], QUESTION, n=2)
            runs[unzeroed] = [t for g in groups for t in g] + [c for cs in states for c in cs]
    zeroed, unzeroed = runs[False], runs[True]
    assert len(zeroed) == len(unzeroed) == 8 + 2 * 3
    for a, b in zip(zeroed, unzeroed):
        assert a.input_ids == b.input_ids and a.loss_mask == b.loss_mask
        assert a.old_logprobs == b.old_logprobs and a.reward == b.reward


def test_the_cache_takes_the_longest_history_at_once_only_within_the_memory_limit(setup, monkeypatch):
    from agentcredit.agent import sampling
    from agentcredit.agent.decode_kernel import decode_kernel_available

    if decode_kernel_available() is not None:
        pytest.skip(f"only the decode kernel reads unzeroed caches: {decode_kernel_available()}")
    sampler = make_worker(setup, max_context_tokens=1000)._sampler()
    assert sampler.max_length == 1000
    column = sampler.lean.column_bytes()  # keys and values of every layer, one slot's column
    monkeypatch.setattr(sampling, "total_memory", lambda: (4 * 8 * 1000 * column, "RAM"))
    cache = sampler._new_cache(8)  # 8 slots × 1000 columns: exactly a quarter of that memory
    assert not cache.zero_unwritten and cache.initial_capacity == 1000
    cache = sampler._new_cache(9)  # past it: unzeroed, grown as needed
    assert not cache.zero_unwritten and cache.initial_capacity == 0
    monkeypatch.setattr(sampling, "total_memory", lambda: None)  # memory unknown: the fixed 4 GiB alone
    assert sampling.upfront_cache_bytes() == sampling.UPFRONT_CACHE_BYTES
    assert make_worker(setup, lean_forward=False)._sampler()._new_cache(8).zero_unwritten  # the model's own forward
