"""Rollout loop: masks, turn ids, boundaries, sampled tokens, continuation from a boundary."""

import pytest
import torch

import agentcredit.agent.rollout as rollout_module
from agentcredit.agent.chat import ChatFormat
from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.agent.rollout import RolloutConfig, RolloutWorker
from agentcredit.agent.trajectory import ANSWER_TURN, NON_POLICY
from agentcredit.env.reward import make_reward_fn
from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import build_retriever
from agentcredit.env.types import ToolCall
from agentcredit.models.loading import load_policy
from agentcredit.models.tiny import build_tiny_model
from agentcredit.world.types import Document, Question

DOCS = [
    Document("d0", "Lena Marsh", "https://w/lena-marsh", ("Lena Marsh is a painter.", "She was born in Korvel in 1961.")),
    Document("d1", "Korvel", "https://w/korvel", ("Korvel is a port town.", "Its mayor is Ada Fenn.")),
    Document("d2", "Ada Fenn", "https://w/ada-fenn", ("Ada Fenn is a mayor.", "She founded Blue Harbor Trust in 2004.")),
    Document("d3", "Blue Harbor Trust", "https://w/bht", ("Blue Harbor Trust is a charity.",)),
]
QUESTION = Question("q0", "Which charity did the mayor of the painter's birth town found?", "Blue Harbor Trust", "BRIDGE_ENTITY")
TINY = {"kind": "tiny", "hidden_size": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 128,
        "vocab_size": 600, "seed": 0}


@pytest.fixture(scope="module")
def setup():
    corpus = Corpus(DOCS)
    retriever = build_retriever("bm25", corpus)
    texts = [d.text for d in DOCS] * 20 + [QUESTION.text, render_tool_call(ToolCall("browser.search", {"query": "x"}))] * 20
    policy, tokenizer = load_policy(TINY, tokenizer_texts=lambda: texts)
    chat = ChatFormat.from_tokenizer(tokenizer)
    env_factory = lambda: BrowserEnv(corpus, retriever)  # noqa: E731
    return policy, tokenizer, chat, env_factory


def make_worker(setup, **overrides):
    policy, tokenizer, chat, env_factory = setup
    cfg = RolloutConfig(**{"max_tool_turns": 4, "max_turn_tokens": 24, "max_context_tokens": 2048, **overrides})
    return RolloutWorker(policy, chat, env_factory, make_reward_fn({}), cfg, torch.Generator().manual_seed(0))


def check_layout(traj, chat):
    ids, mask, turns = traj.input_ids, traj.loss_mask, traj.turn_ids
    assert len(ids) == len(mask) == len(turns) == len(traj.old_logprobs)
    assert len(traj.boundaries) == len(traj.snapshots) == traj.num_tool_turns + 1
    # Only sampled tokens carry loss; every sampled token has a turn id, nothing else does.
    for m, t, lp in zip(mask, turns, traj.old_logprobs):
        assert (m == 1) == (t != NON_POLICY)
        if m == 0:
            assert lp == 0.0
    assert all(m == 0 for m in mask[: traj.boundaries[0]])
    # Each S_k (k >= 1) ends with the tool message's closing piece.
    close = list(chat.obs_close)
    for b in traj.boundaries[1:]:
        assert ids[b - len(close) : b] == close
    # Policy tokens of turn k decode to the turn's text; tool turns are 0..T-1 in order.
    for k in range(traj.num_tool_turns):
        tokens = [i for i, t in zip(ids, turns) if t == k]
        assert chat.tokenizer.decode(tokens, skip_special_tokens=False) == traj.turn_texts[k]
        assert max(p for p, t in enumerate(turns) if t == k) < traj.boundaries[k + 1]
        assert min(p for p, t in enumerate(turns) if t == k) > traj.boundaries[k]


def test_scripted_episode_has_exact_layout_and_reward(setup):
    worker = make_worker(setup)
    chat = setup[2]
    turns = [
        render_tool_call(ToolCall("browser.search", {"query": "Ada Fenn founded", "topn": 3})),
        render_tool_call(ToolCall("browser.open", {"id": 0})),
        "garbage without a call",
        render_answer("Blue Harbor Trust"),
    ]
    traj = worker.replay(QUESTION, turns)
    check_layout(traj, chat)
    assert traj.num_tool_turns == 3 and traj.finish_reason == "answer"
    assert traj.reward == pytest.approx(1.1)
    assert traj.diagnostics["invalid_tool_calls"] == 1
    assert traj.observations[2].startswith("Error: ")
    answer_tokens = [i for i, t in zip(traj.input_ids, traj.turn_ids) if t == ANSWER_TURN]
    assert chat.tokenizer.decode(answer_tokens) == render_answer("Blue Harbor Trust")
    # Observations are appended as the encoding of the environment's text, never re-tokenised.
    env = setup[3]()
    env.reset()
    first_obs = env.step(ToolCall("browser.search", {"query": "Ada Fenn founded", "topn": 3}))
    assert traj.observations[0] == first_obs
    b0 = traj.boundaries[1]
    obs_ids = chat.observation_ids(chat.encode(first_obs))
    assert traj.input_ids[b0 - len(obs_ids) : b0] == obs_ids


def test_sampled_rollouts_record_exactly_the_sampled_tokens(setup, monkeypatch):
    recorded = []

    class Recording(rollout_module.TurnSampler):
        def step(self):
            out = super().step()
            recorded.extend(turn for _, turn in out)
            return out

    monkeypatch.setattr(rollout_module, "TurnSampler", Recording)
    worker = make_worker(setup)
    groups = worker.rollout([QUESTION, QUESTION], group_size=3)
    trajectories = [t for g in groups for t in g]
    assert [len(g) for g in groups] == [3, 3]
    sampled_total = sum(len(s.token_ids) for s in recorded)
    assert sum(t.num_policy_tokens for t in trajectories) == sampled_total
    pool = sorted(tuple(s.token_ids) for s in recorded)
    found = []
    for traj in trajectories:
        check_layout(traj, setup[2])
        for turn in sorted(set(traj.turn_ids) - {NON_POLICY}):
            found.append(tuple(i for i, t in zip(traj.input_ids, traj.turn_ids) if t == turn))
        assert traj.finish_reason in {"answer", "tool_limit", "turn_tokens", "context", "obs_budget"}
        lp = [x for x, m in zip(traj.old_logprobs, traj.loss_mask) if m]
        assert all(x <= 0 for x in lp)
    assert sorted(found) == pool


def _one_prefill_forward(lengths, starts, **kw):
    return [list(range(len(lengths)))] if lengths else []


def _prefill_forward_per_row(lengths, starts, **kw):
    return [[i] for i in reversed(range(len(lengths)))]


@pytest.mark.parametrize("lean,grouping", [("kernel", None), ("sdpa", None), (False, None), (False, _one_prefill_forward),
                                           (False, _prefill_forward_per_row)],
                         ids=["lean_forward_kernel", "lean_forward_sdpa_runs", "model_cost_model", "model_one_forward",
                              "model_per_row"])
def test_recorded_logprobs_match_a_full_forward(setup, monkeypatch, grouping, lean):
    from agentcredit.agent import lean_forward, sampling
    from agentcredit.agent.decode_kernel import decode_kernel_available
    from agentcredit.agent.lean_forward import LeanForward
    from agentcredit.lit.logprobs import token_logprobs

    if lean == "kernel" and decode_kernel_available() is not None:
        pytest.skip(f"decode kernel unavailable here: {decode_kernel_available()}")
    if lean == "sdpa":  # the decode kernel off: decodes read runs of slots through a masked SDPA
        monkeypatch.setattr(lean_forward, "decode_kernel_available", lambda: "off for this test")
    split = []
    original = grouping or sampling.prefill_groups
    monkeypatch.setattr(sampling, "prefill_groups", lambda *a, **kw: split.append(out := original(*a, **kw)) or out)
    packed = []
    lean_packed = LeanForward.packed
    monkeypatch.setattr(LeanForward, "packed", lambda self, batch, cache: packed.append(batch) or lean_packed(self, batch, cache))
    chunks, decode_runs = sampling.decode_chunks, []  # free calls: decodes read their slots in runs wherever that saves keys
    monkeypatch.setattr(sampling, "decode_chunks", lambda keys: decode_runs.append(out := chunks(keys, call_keys=0)) or out)
    policy = setup[0]
    worker = make_worker(setup, lean_forward=bool(lean))
    # Several rows of different lengths and turn counts: each row's slot cache, compaction after
    # finished rows, and prefills of rows that rejoin mid-batch must all match one full forward:
    # with the lean forward, decode and prefill in one packed forward; with the model's forward,
    # prefills in one padded forward, one per row through a view of its slot, or as the cost
    # model groups them.
    short = Question("q1", "Where was Lena Marsh born?", "Korvel", "BRIDGE_ENTITY")
    groups = worker.rollout([QUESTION, short], group_size=3)  # prompts of two lengths
    if lean:  # some forward both decoded and prefilled
        assert any(b.decode_keys and b.prefill for b in packed)
    if lean == "sdpa":  # and some decode read its slots in several runs
        assert any(len(runs) > 1 for runs in decode_runs)
    if lean == "kernel":  # the kernel reads each slot to its own length: no runs planned
        assert not decode_runs and all(not b.decode_runs for b in packed)
    if not lean:
        assert not packed
    if grouping is _one_prefill_forward:
        assert any(len(rows) > 1 for forwards in split for rows in forwards)
    if grouping is _prefill_forward_per_row:
        assert any(len(forwards) > 1 for forwards in split)
    for traj in [t for g in groups for t in g]:
        ids = torch.tensor([traj.input_ids])
        full = token_logprobs(policy, ids, torch.ones_like(ids))[0]
        mask = torch.tensor(traj.loss_mask, dtype=torch.bool)
        assert torch.allclose(full[mask], torch.tensor(traj.old_logprobs)[mask], atol=1e-4)


def test_eager_attention_samples_what_sdpa_samples(setup):
    # SDPA gets a boolean mask and eager an additive float one; both must hide the same keys.
    from agentcredit.agent.protocol import STOP_STRINGS
    from agentcredit.agent.next_token import StopChecker
    from agentcredit.agent.sampling import TurnSampler

    policy, tokenizer, chat, _ = setup
    eager = build_tiny_model(tokenizer, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=2,
                             intermediate_size=128, attn_implementation="eager")
    eager.load_state_dict(policy.state_dict())
    prompts = [chat.prompt_ids(QUESTION.text) + list(chat.assistant_header),
               chat.prompt_ids("Where was Lena Marsh born?") + list(chat.assistant_header)]
    kw = dict(temperature=0.0, top_p=1.0, pad_id=tokenizer.pad_token_id,
              stop=StopChecker(tokenizer, STOP_STRINGS, chat.eos_ids))
    for a, b in zip(sample_all(TurnSampler(policy, **kw), prompts, 8), sample_all(TurnSampler(eager, **kw), prompts, 8)):
        assert a.token_ids == b.token_ids
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_continuation_reproduces_prefix_and_environment(setup):
    worker = make_worker(setup)
    turns = [
        render_tool_call(ToolCall("browser.search", {"query": "Korvel mayor", "topn": 3})),
        render_tool_call(ToolCall("browser.open", {"id": 1})),
        render_tool_call(ToolCall("browser.find", {"pattern": "mayor"})),
        render_answer("Ada Fenn"),
    ]
    traj = worker.replay(QUESTION, turns)
    for k in range(traj.num_tool_turns + 1):
        for cont in worker.continue_from(traj, k, QUESTION, n=2):
            b = traj.boundaries[k]
            assert cont.input_ids[:b] == traj.input_ids[:b]
            assert cont.loss_mask[:b] == traj.loss_mask[:b]
            assert cont.boundaries[: k + 1] == traj.boundaries[: k + 1]
            assert cont.continued_from == k
            check_layout(cont, setup[2])
    # The restored environment behaves exactly as the original did from S_1 on.
    env = setup[3]()
    env.restore(traj.snapshots[1])
    assert env.step(ToolCall("browser.open", {"id": 1})) == traj.observations[1]


TWO_TOOL_TURNS = [  # a search, an open, then the answer
    render_tool_call(ToolCall("browser.search", {"query": "Korvel mayor", "topn": 3})),
    render_tool_call(ToolCall("browser.open", {"id": 1})),
    render_answer("Ada Fenn"),
]


def test_continuations_from_several_boundaries_share_one_batch_and_come_back_grouped(setup):
    worker = make_worker(setup)
    traj = worker.replay(QUESTION, TWO_TOOL_TURNS)
    runs = []
    real_run = worker._run
    worker._run = lambda live: runs.append(len(live)) or real_run(live)
    pre, post = worker.continue_from_many(traj, [0, 2], QUESTION, n=3)
    assert runs == [6]  # one batch for both boundaries
    for boundary, out in ((0, pre), (2, post)):
        assert len(out) == 3 and all(c.continued_from == boundary for c in out)
        b = traj.boundaries[boundary]
        assert all(c.input_ids[:b] == traj.input_ids[:b] for c in out)
        for c in out:
            check_layout(c, setup[2])
    with pytest.raises(ValueError, match="outside"):
        worker.continue_from_many(traj, [0, 3], QUESTION, n=1)


def test_continuations_start_with_the_observation_tokens_their_state_used_each_encoded_once(setup, monkeypatch):
    worker = make_worker(setup)
    traj = worker.replay(QUESTION, TWO_TOOL_TURNS)
    lengths = [len(worker.chat.encode(o)) for o in traj.observations]
    assert len(lengths) == 2 and min(lengths) > 0
    encoded, real_encode = [], ChatFormat.encode
    monkeypatch.setattr(ChatFormat, "encode", lambda chat, text: encoded.append(text) or real_encode(chat, text))
    states = [(traj, 0), (traj, 1), (traj, 2), (traj, 2)]
    assert worker._observation_tokens_before(states) == [0, lengths[0], sum(lengths), sum(lengths)]
    assert encoded == traj.observations  # once per observation, not per state or per continuation
    # a continuation's budget check starts from those counts
    started = []
    monkeypatch.setattr(worker, "_run", lambda live: started.extend(item.obs_tokens_used for item in live) or [])
    worker.continue_from_states(states, QUESTION, n=2)
    assert started == [0, 0, lengths[0], lengths[0], sum(lengths), sum(lengths), sum(lengths), sum(lengths)]


def test_tool_turn_limit_stops_the_rollout(setup):
    worker = make_worker(setup, max_tool_turns=2)
    call = render_tool_call(ToolCall("browser.search", {"query": "Korvel"}))
    traj = worker.replay(QUESTION, [call] * 5)
    assert traj.num_tool_turns == 2 and traj.finish_reason == "tool_limit"
    assert traj.reward == 0.0 and traj.diagnostics["answer_format_valid"] is False


def test_observation_budget_truncates_and_stops(setup):
    worker = make_worker(setup, max_obs_tokens=20)
    traj = worker.replay(QUESTION, [render_tool_call(ToolCall("browser.search", {"query": "Korvel"}))] * 3)
    assert traj.finish_reason == "obs_budget" and traj.num_tool_turns == 1


def test_an_observation_that_fills_the_budget_exactly_is_shown_whole(setup):
    chat = setup[2]
    call = render_tool_call(ToolCall("browser.search", {"query": "Korvel"}))
    first = make_worker(setup).replay(QUESTION, [call]).observations[0]
    fits = len(chat.encode(first))
    whole = make_worker(setup, max_obs_tokens=fits).replay(QUESTION, [call] * 3)
    # shown as it was, no truncation note; the next observation finds no room and ends the rollout
    assert whole.observations[0] == first and whole.num_tool_turns == 2 and whole.finish_reason == "obs_budget"
    assert rollout_module.TRUNCATION_NOTE not in chat.tokenizer.decode(whole.input_ids[whole.boundaries[0]:whole.boundaries[1]])
    cut = make_worker(setup, max_obs_tokens=fits - 1).replay(QUESTION, [call] * 3)
    assert cut.num_tool_turns == 1 and cut.finish_reason == "obs_budget"
    assert rollout_module.TRUNCATION_NOTE in chat.tokenizer.decode(cut.input_ids[cut.boundaries[0]:cut.boundaries[1]])


def test_context_limit_stops_the_rollout(setup):
    chat = setup[2]
    limit = len(chat.prompt_ids(QUESTION.text)) + 40
    worker = make_worker(setup, max_context_tokens=limit, max_turn_tokens=96)
    call = render_tool_call(ToolCall("browser.search", {"query": "Korvel"}))
    traj = worker.replay(QUESTION, [call] * 3)
    assert traj.finish_reason == "context"
    for traj in worker.rollout([QUESTION], group_size=2)[0]:
        assert traj.finish_reason == "context"
        # Sampling never goes past the limit; only the fixed chat pieces around a turn may.
        sampled_end = max(i for i, m in enumerate(traj.loss_mask) if m) + 1 if traj.num_policy_tokens else 0
        assert sampled_end <= limit


def test_a_context_no_prompt_fits_is_refused_before_sampling(setup):
    from agentcredit.common.configs import ConfigError

    chat = setup[2]
    opened = len(chat.prompt_ids(QUESTION.text)) + len(chat.assistant_header)
    with pytest.raises(ConfigError, match=rf"^rollout.max_context_tokens={opened} leaves no room for a first turn: "
                                          rf"this batch's prompts take {opened} to {opened} tokens"):
        make_worker(setup, max_context_tokens=opened).rollout([QUESTION], group_size=2)
    # One token of room is a rollout, cut at once: a long prompt among others is not an error.
    (traj,) = make_worker(setup, max_context_tokens=opened + 1).rollout([QUESTION], group_size=1)[0]
    assert traj.finish_reason == "context" and traj.num_policy_tokens == 1


def test_rollouts_are_deterministic_for_a_seed(setup):
    runs = [make_worker(setup).rollout([QUESTION, QUESTION], group_size=3) for _ in range(2)]
    flat = [[(t.input_ids, t.old_logprobs, t.boundaries) for t in g] for g in runs[0]], \
        [[(t.input_ids, t.old_logprobs, t.boundaries) for t in g] for g in runs[1]]
    assert flat[0] == flat[1]


def sample_all(sampler, sequences, max_new):
    """One turn for every sequence (keys 0..n-1) through a TurnSampler; returns the turns by key."""
    for key, seq in enumerate(sequences):
        if key in sampler.rows:
            sampler.next_turn(key, seq, max_new)
        else:
            sampler.add(key, seq, max_new)
    turns = {}
    while len(turns) < len(sequences):
        turns.update(sampler.step())
    return [turns[k] for k in range(len(sequences))]


def test_kv_cache_carried_across_turns_matches_fresh_prefill(setup):
    from agentcredit.agent.protocol import STOP_STRINGS
    from agentcredit.agent.next_token import StopChecker
    from agentcredit.agent.sampling import TurnSampler

    policy, tokenizer, chat, _ = setup
    stop = StopChecker(tokenizer, STOP_STRINGS, chat.eos_ids)
    prompts = [chat.prompt_ids(QUESTION.text) + list(chat.assistant_header),
               chat.prompt_ids("Where was Lena Marsh born?") + list(chat.assistant_header)]
    kw = dict(temperature=0.0, top_p=1.0, pad_id=tokenizer.pad_token_id, stop=stop)
    carried = TurnSampler(policy, **kw)
    first = sample_all(carried, prompts, 6)
    # Append a different-length "observation" to each row, as the rollout loop does.
    grown = [p + t.token_ids + chat.observation_ids(chat.encode(obs)) + list(chat.assistant_header)
             for p, t, obs in zip(prompts, first, ["Search results: none", "L0: Korvel is a port town. L1: more"])]
    reused = sample_all(carried, grown, 6)
    fresh = sample_all(TurnSampler(policy, **kw), grown, 6)
    for a, b in zip(reused, fresh):
        assert a.token_ids == b.token_ids
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_sft_loss_on_policy_tokens_only_equals_the_masked_full_loss():
    # With obs_loss_weight 0 the loss projects only policy positions onto the vocabulary; it must
    # equal the plain masked mean of the full cross-entropy.
    from transformers import LlamaConfig, LlamaForCausalLM

    from agentcredit.testbed.warmstart import sft_loss

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=2, intermediate_size=32))
    ids = torch.randint(0, 50, (2, 7))
    attention = torch.ones_like(ids)
    attention[1, 6] = 0
    policy = torch.zeros_like(ids)
    policy[:, 3:5] = 1
    batch = {"input_ids": ids, "attention_mask": attention, "loss_mask": policy}
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (B, L-1)
    expected = (nll * policy[:, 1:]).sum() / policy[:, 1:].sum()
    assert torch.allclose(sft_loss(model, batch, 0.0), expected, atol=1e-6)
    # A positive weight adds the other attended tokens at that weight.
    other = attention[:, 1:] * (1 - policy[:, 1:])
    weights = policy[:, 1:] + 0.5 * other
    assert torch.allclose(sft_loss(model, batch, 0.5), (nll * weights).sum() / weights.sum(), atol=1e-6)


def test_right_padded_batches_run_maskless_with_the_same_logprobs_and_gradients(setup):
    from agentcredit.lit.logprobs import right_padding_only, token_logprobs

    assert right_padding_only(torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]]))
    assert not right_padding_only(torch.tensor([[1, 1, 1], [0, 1, 1]]))  # left padding
    assert not right_padding_only(torch.tensor([[1, 0, 1]]))  # a hole
    policy = setup[0]
    torch.manual_seed(2)
    ids = torch.randint(0, policy.get_input_embeddings().weight.shape[0], (3, 12))
    attention = torch.ones_like(ids)
    attention[1, 9:] = 0
    attention[2, 4:] = 0
    positions = attention.clone()
    positions[:, :2] = 0  # log-probabilities on real tokens only, never on a pad
    grads = []
    for mask in (attention, None):
        policy.zero_grad(set_to_none=True)
        lp = token_logprobs(policy, ids, mask, temperature=0.7, positions=positions)
        (lp * positions).sum().backward()
        grads.append((lp.detach(), [p.grad.clone() for p in policy.parameters()]))
    policy.zero_grad(set_to_none=True)
    (masked, masked_grads), (maskless, maskless_grads) = grads
    assert torch.allclose(masked, maskless, atol=1e-5) and bool((masked != 0).any())
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(masked_grads, maskless_grads))


def test_token_logprobs_at_chosen_positions_equal_the_full_computation(setup):
    from agentcredit.lit.logprobs import token_logprobs

    policy = setup[0]
    torch.manual_seed(1)
    ids = torch.randint(0, policy.get_input_embeddings().weight.shape[0], (2, 9))
    attention = torch.ones_like(ids)
    attention[1, 7:] = 0
    positions = torch.zeros_like(ids)
    positions[0, 2:5] = 1
    positions[1, 6] = 1
    with torch.no_grad():
        full = token_logprobs(policy, ids, attention, temperature=0.7)
        some = token_logprobs(policy, ids, attention, temperature=0.7, positions=positions)
    assert torch.allclose(some[positions.bool()], full[positions.bool()], atol=1e-5)
    assert torch.all(some[~positions.bool()] == 0)


def test_sampling_threads_change_no_sample_and_are_restored(setup, monkeypatch):
    """rollout.threads sets torch's intra-op threads while the policy samples, and only then."""
    seen = []
    step = rollout_module.RolloutWorker._step
    monkeypatch.setattr(rollout_module.RolloutWorker, "_step",
                        lambda self, *args: seen.append(torch.get_num_threads()) or step(self, *args))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runs = {n: make_worker(setup, threads=n).rollout([QUESTION, QUESTION], group_size=3) for n in (1, None)}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen and set(seen) == {1, 2}  # threads=1 sampled on one thread, threads=None on the process's two
    for one, process in zip(runs[1], runs[None]):
        for a, b in zip(one, process):
            assert a.input_ids == b.input_ids
            assert torch.allclose(torch.tensor(a.old_logprobs), torch.tensor(b.old_logprobs), atol=1e-5)


@pytest.mark.parametrize("threads", [0, 1.5])
def test_sampling_threads_must_be_a_positive_integer(threads):
    with pytest.raises(ValueError, match="rollout.threads"):
        RolloutConfig(threads=threads)


def test_an_unpadded_sequence_gets_the_logprobs_it_gets_in_a_padded_batch(setup):
    """train.padding_free runs each length on its own, without padding or mask: the same log-probabilities."""
    from agentcredit.lit.logprobs import token_logprobs

    policy = setup[0]
    torch.manual_seed(2)
    ids = torch.randint(0, policy.get_input_embeddings().weight.shape[0], (2, 12))
    attention = torch.ones_like(ids)
    attention[1, 8:] = 0
    positions = attention.clone()
    with torch.no_grad():
        padded = token_logprobs(policy, ids, attention, temperature=1.0, positions=positions)
        alone = token_logprobs(policy, ids[1:, :8], attention[1:, :8], temperature=1.0, positions=positions[1:, :8])
    assert torch.allclose(alone[0], padded[1, :8], atol=1e-5)


def test_equal_length_batches_group_one_length_up_to_the_size_longest_first():
    from agentcredit.agent.trajectory import equal_length_batches, length_sorted_batches

    assert length_sorted_batches([5, 3, 9, 4], 2) == [[2, 0], [3, 1]]
    assert length_sorted_batches([5, 3, 9], 8) == [[2, 0, 1]]

    assert equal_length_batches([5, 3, 5, 5], 2) == [[0, 2], [3], [1]]
    assert equal_length_batches([4, 4, 4], 8) == [[0, 1, 2]]
    assert equal_length_batches([2, 7, 3], 8) == [[1], [2], [0]]
    assert equal_length_batches([], 3) == []
    with pytest.raises(ValueError):
        equal_length_batches([1], 0)
