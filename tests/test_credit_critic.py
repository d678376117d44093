"""turn-critic (Turn-PPO): GAE over turns, λ-returns, value loss and explained variance against numbers computed
by hand; the value head reads the policy's hidden state at each boundary; a tiny run trains it and a resumed
run restores it (weights and Adam state)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agentcredit.agent.trajectory import Trajectory
from agentcredit.credit import CreditGroup, get_credit
from agentcredit.credit.config import validate_credit_config
from agentcredit.credit.critic import explained_variance, lambda_returns, turn_gae, value_loss, whiten_turns
from agentcredit.lit.critic import TurnCritic
from tiny_runs import TINY, cli, read_metrics, train_tiny

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# --- pure functions ----------------------------------------------------------------------------------

def test_turn_gae_by_hand():
    # V = [0.5, 0.2, 0.4], R = 1, γ = 0.5, λ = 0.5 (γλ = 0.25); V = 0 after the last action:
    # δ0 = 0 + 0.5·0.2 − 0.5 = −0.4, δ1 = 0 + 0.5·0.4 − 0.2 = 0.0, δ2 = 1 + 0 − 0.4 = 0.6
    # A2 = 0.6, A1 = 0.0 + 0.25·0.6 = 0.15, A0 = −0.4 + 0.25·0.15 = −0.3625
    values = torch.tensor([0.5, 0.2, 0.4], dtype=torch.float64)
    assert turn_gae(values, 1.0, 0.5, 0.5).tolist() == pytest.approx([-0.3625, 0.15, 0.6])
    # G^λ = A + V = [0.1375, 0.35, 1.0]
    assert lambda_returns(values, 1.0, 0.5, 0.5).tolist() == pytest.approx([0.1375, 0.35, 1.0])
    # λ = 1: A0 = −0.4 + 0.5·(0 + 0.5·0.6) = −0.25, A1 = 0.3; G = γ^(n−1−k) R = [0.25, 0.5, 1] (Monte Carlo)
    assert turn_gae(values, 1.0, 0.5, 1.0).tolist() == pytest.approx([-0.25, 0.3, 0.6])
    assert lambda_returns(values, 1.0, 0.5, 1.0).tolist() == pytest.approx([0.25, 0.5, 1.0])
    # λ = 0: A = δ
    assert turn_gae(values, 1.0, 0.5, 0.0).tolist() == pytest.approx([-0.4, 0.0, 0.6])
    assert turn_gae(torch.zeros(0), 1.0, 0.5, 0.5).numel() == 0


def test_an_untrained_head_gives_the_discounted_outcome():
    # V = 0: only δ_{n−1} = R is non-zero, so A_k = (γλ)^(n−1−k) R; γλ = 0.99·0.9 = 0.891
    adv = turn_gae(torch.zeros(3, dtype=torch.float64), 1.1, 0.99, 0.9)
    assert adv.tolist() == pytest.approx([0.891 ** 2 * 1.1, 0.891 * 1.1, 1.1])


def test_value_loss_and_explained_variance_by_hand():
    # ((0.5 − 1)² + (0 − 1)²) / 2 = (0.25 + 1) / 2 = 0.625
    assert float(value_loss(torch.tensor([0.5, 0.0]), torch.tensor([1.0, 1.0]))) == pytest.approx(0.625)
    # G = [0, 1, 2, 3]: Var = 1.25; G − V = [0, 0, 0, 1]: Var = 0.25 − 0.0625 = 0.1875; 1 − 0.1875/1.25 = 0.85
    assert explained_variance(torch.tensor([0.0, 1.0, 2.0, 2.0]), torch.tensor([0.0, 1.0, 2.0, 3.0])) == pytest.approx(0.85)
    assert math.isnan(explained_variance(torch.zeros(3), torch.ones(3)))  # nothing to explain
    assert float(value_loss(torch.zeros(0), torch.zeros(0))) == 0.0


def _group(whiten_values=None) -> CreditGroup:
    # rollout 0: one tool turn, then an answer (R = 1); rollout 1: one tool turn, cut by the tool limit (R = 0)
    return CreditGroup(
        rewards=torch.tensor([1.0, 0.0]),
        turn_ids=torch.tensor([[-1, 0, 0, -1, -2, -2], [-1, 0, 0, -1, -1, -1]]),
        loss_mask=torch.tensor([[0, 1, 1, 0, 1, 1], [0, 1, 1, 0, 0, 0]]),
        num_turns=torch.tensor([1, 1]),
        critic_values=whiten_values or [torch.tensor([0.5, 0.4]), torch.tensor([0.2, 0.9])],
    )


def test_token_advantages_by_hand():
    method = get_credit("turn-critic")
    assert method.inputs == ("critic_values",)
    # γ = 0.5, λ = 0.5. Rollout 0 acts from S_0, S_1: δ0 = 0.5·0.4 − 0.5 = −0.3, δ1 = 1 − 0.4 = 0.6;
    # A1 = 0.6, A0 = −0.3 + 0.25·0.6 = −0.15. Rollout 1 acts from S_0 only (S_1 is terminal, its 0.9 unused):
    # δ0 = 0 + 0 − 0.2 = −0.2 = A0.
    adv = method.advantages(_group(), gamma=0.5, gae_lambda=0.5, whiten=False)
    assert adv[0].tolist() == pytest.approx([0, -0.15, -0.15, 0, 0.6, 0.6])
    assert adv[1].tolist() == pytest.approx([0, -0.2, -0.2, 0, 0, 0])
    # whitened over the group's 3 actions [−0.15, 0.6, −0.2]: mean 0.25/3; deviations −0.23333, 0.51667,
    # −0.28333; σ² = (0.054444 + 0.266944 + 0.080278)/3 = 0.133889, σ = 0.365908
    adv = method.advantages(_group(), gamma=0.5, gae_lambda=0.5, whiten=True)
    assert adv[0].tolist() == pytest.approx([0, -0.63768, -0.63768, 0, 1.41201, 1.41201], abs=1e-4)
    assert adv[1].tolist() == pytest.approx([0, -0.77433, -0.77433, 0, 0, 0], abs=1e-4)
    logs = method.diagnostics(_group(), gamma=0.5, gae_lambda=0.5, whiten=False)
    assert logs["gae_advantages"] == [pytest.approx([-0.15, 0.6]), pytest.approx([-0.2])]
    assert whiten_turns([torch.ones(2), torch.ones(1)])[0].tolist() == [0.0, 0.0]  # no spread: no credit


def _failed_group() -> CreditGroup:
    # every rollout answered after one tool turn and failed (R = 0); the critic's values differ a little
    return CreditGroup(
        rewards=torch.tensor([0.0, 0.0]),
        turn_ids=torch.tensor([[-1, 0, 0, -1, -2, -2], [-1, 0, 0, -1, -2, -2]]),
        loss_mask=torch.tensor([[0, 1, 1, 0, 1, 1], [0, 1, 1, 0, 1, 1]]),
        num_turns=torch.tensor([1, 1]),
        critic_values=[torch.tensor([0.5, 0.4]), torch.tensor([0.5, 0.3])],
    )


def test_whitening_over_the_step_keeps_an_all_failed_groups_credit_below_the_others():
    method = get_credit("turn-critic")
    assert method.defaults["whiten"] == "batch"
    knobs = {"gamma": 0.5, "gae_lambda": 0.5}
    # The failed group, γλ = 0.25: rollout 0: δ0 = 0.5·0.4 − 0.5 = −0.3, δ1 = 0 − 0.4 = −0.4; A = [−0.4, −0.4].
    # Rollout 1: δ0 = 0.5·0.3 − 0.5 = −0.35, δ1 = −0.3; A = [−0.35 + 0.25·(−0.3), −0.3] = [−0.425, −0.3].
    groups = [_group(), _failed_group()]
    raw = [method.advantages(g, **knobs, whiten="batch") for g in groups]  # per group: GAE as it came
    assert raw[1][1].tolist() == pytest.approx([0, -0.425, -0.425, 0, -0.3, -0.3])
    # The step's 7 actions [−0.15, 0.6, −0.2, −0.4, −0.4, −0.425, −0.3]: mean −1.275/7 = −0.182143; squared
    # deviations 0.001033 + 0.611747 + 0.000319 + 2·0.047462 + 0.058980 + 0.013890 = 0.780893, /7 = 0.111556,
    # σ = 0.334000. (A − mean)/σ:
    final = method.step_advantages(groups, raw, **knobs, whiten="batch")
    assert final[0][0].tolist() == pytest.approx([0, 0.09624, 0.09624, 0, 2.34174, 2.34174], abs=1e-4)
    assert final[0][1].tolist() == pytest.approx([0, -0.05346, -0.05346, 0, 0, 0], abs=1e-4)
    assert final[1][0].tolist() == pytest.approx([0, -0.65227, -0.65227, 0, -0.65227, -0.65227], abs=1e-4)
    assert final[1][1].tolist() == pytest.approx([0, -0.72712, -0.72712, 0, -0.35287, -0.35287], abs=1e-4)
    # Over the failed group alone its 4 actions have mean −0.38125 and σ 0.048007: the critic's 0.1 of noise on
    # rollout 1's last value becomes +1.69, as large as a success's credit, on an answer that failed.
    alone = method.advantages(_failed_group(), **knobs, whiten="group")
    assert alone[1].tolist() == pytest.approx([0, -0.91132, -0.91132, 0, 1.69246, 1.69246], abs=1e-4)
    # group and none leave the step's advantages as each group's function gave them
    for scope in ("group", "none", True, False):
        per_group = [method.advantages(g, **knobs, whiten=scope) for g in groups]
        assert method.step_advantages(groups, per_group, **knobs, whiten=scope) is per_group
    # An older config's boolean reads as what it meant: true = over the group
    assert torch.equal(method.advantages(_failed_group(), **knobs, whiten=True), alone)
    # A step without spread gets no credit: two rollouts that answered at once and failed, V(S_0) = 0.3 in both,
    # so both actions have A = 0 − 0.3 = −0.3 (σ = 0)
    answered_at_once = CreditGroup(rewards=torch.tensor([0.0, 0.0]), turn_ids=torch.tensor([[-1, -2, -2]] * 2),
                                   loss_mask=torch.tensor([[0, 1, 1]] * 2), num_turns=torch.tensor([0, 0]),
                                   critic_values=[torch.tensor([0.3]), torch.tensor([0.3])])
    raw = [method.advantages(answered_at_once, **knobs)]
    assert raw[0].flatten().tolist() == pytest.approx([0, -0.3, -0.3] * 2)
    assert method.step_advantages([answered_at_once], raw, **knobs)[0].tolist() == [[0.0] * 3] * 2


def test_knob_ranges_are_checked():
    validate_credit_config("turn-critic", {"gamma": 0.9, "gae_lambda": 0.0, "critic_lr": 1e-4, "critic_epochs": 1})
    for scope in ("batch", "group", "none", True, False):
        validate_credit_config("turn-critic", {"whiten": scope})
    for key, bad in [("gae_lambda", 1.5), ("critic_lr", 0), ("critic_epochs", 0), ("whiten", "yes"), ("gamma", 0)]:
        with pytest.raises(ValueError, match=f"credit.{key} must be"):
            validate_credit_config("turn-critic", {key: bad})


# --- the value head ----------------------------------------------------------------------------------

def _policy() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def _rollout(ids, boundaries, answered: bool, reward: float) -> Trajectory:
    turn_ids = [-1] * len(ids)
    loss_mask = [0] * len(ids)
    if answered:
        turn_ids[-1], loss_mask[-1] = -2, 1
    return Trajectory("q", list(ids), loss_mask, turn_ids, list(boundaries), [None] * len(boundaries),
                      [0.0] * len(ids), reward=reward)


def test_the_head_reads_each_boundary_and_learns_the_lambda_returns():
    policy = _policy()
    critic = TurnCritic(16, lr=0.05, epochs=1, gamma=0.5, gae_lambda=0.5)
    rollouts = [_rollout(range(1, 11), [3, 7], True, 1.0), _rollout(range(20, 26), [2, 5], False, 0.0)]
    features = critic.boundary_features(policy, rollouts)
    # causal model: the state S_k's representation is the hidden state of its own last token, as if run alone
    alone = policy.get_decoder()(input_ids=torch.tensor([[1, 2, 3, 4, 5, 6, 7]])).last_hidden_state[0, -1]
    assert torch.allclose(features[0][1], alone, atol=1e-5)
    threads = torch.get_num_threads()
    torch.set_num_threads(2 if threads == 1 else threads)  # several threads: one right-padded batch, else unpadded ones
    try:
        padded = critic.boundary_features(policy, rollouts)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(padded, features))
    values, logs = critic.values(policy, rollouts)
    assert [v.tolist() for v in values] == [[0.0, 0.0], [0.0, 0.0]]  # the last layer starts at 0
    assert logs["extra_tokens"] == 0.0 and logs["critic_forward_tokens"] == 7 + 5  # each up to its S_T
    first = critic.fit()
    # targets with V = 0: rollout 0 acts from S_0, S_1 (answered): G = [(γλ)·1, 1] = [0.25, 1];
    # rollout 1 acts from S_0 only, R = 0: G = [0]. Loss = (0.0625 + 1 + 0)/3 = 0.354167
    assert first["credit/critic_loss"] == pytest.approx(0.354167, abs=1e-5)
    # G = [0.25, 1, 0]: mean 0.41667, Var = (0.027778 + 0.340278 + 0.173611)/3 = 0.180556; V = 0: EV = 1 − Var(G)/Var(G) = 0
    assert first["credit/critic_explained_var"] == pytest.approx(0.0, abs=1e-6)
    assert first["credit/critic_states"] == 3.0
    for _ in range(60):
        critic.values(policy, rollouts)
        last = critic.fit()
    assert last["credit/critic_loss"] < 0.1 * first["credit/critic_loss"]
    assert all(not p.requires_grad for p in critic.parameters())  # DDP and FSDP never see the head


# --- training and resume -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ParityReward:
    """The real reward's interface with a reward an untrained policy earns: 1 without a final turn (the tool
    limit), else the parity of the final text's length (deterministic given the sampled tokens, so a resumed run
    earns what the uninterrupted one did)."""

    correct_score: float = 1.0

    def __call__(self, final_text, question):
        return (1.0 if final_text is None else float(len(final_text) % 2)), None, False

    def is_success(self, reward: float) -> bool:
        return reward >= self.correct_score


RUN = ["credit=turn-critic", "credit.critic_lr=0.05", "logger=csv", "trainer.max_steps=4", "trainer.val_check_interval=2",
       "checkpoint.every_n_steps=2", "rollout.group_size=3"]


def head(ckpt) -> dict[str, torch.Tensor]:
    return {k: v for k, v in torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"].items()
            if k.startswith("critic.")}


def test_training_moves_the_head_and_a_resumed_run_restores_it(tmp_path, monkeypatch):
    monkeypatch.setattr("agentcredit.run.compose.make_reward_fn", lambda env_cfg: ParityReward())
    train_tiny(tmp_path / "whole", *RUN)
    at2 = head(tmp_path / "whole" / "checkpoints" / "step2.ckpt")
    assert set(at2) == {"critic.head.0.weight", "critic.head.0.bias", "critic.head.2.weight", "critic.head.2.bias"}
    assert at2["critic.head.2.weight"].abs().sum() > 0  # it starts at 0: two steps moved it
    ckpt = torch.load(tmp_path / "whole" / "checkpoints" / "step2.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["critic_optimizer"]["state"], "no Adam moments of the head in the checkpoint"
    rows = read_metrics(tmp_path / "whole")
    keys = {k for r in rows for k, v in r.items() if v != ""}
    assert {"credit/critic_loss", "credit/critic_fit_s", "credit/critic_forward_s", "credit/extra_token_ratio"} <= keys

    # Steps 3-4 again from step 2's checkpoint: the same head at the end only if its weights and Adam state came back.
    train_tiny(tmp_path / "resumed", *RUN, f"ckpt_path={tmp_path / 'whole' / 'checkpoints' / 'step2.ckpt'}")
    whole, resumed = head(tmp_path / "whole" / "checkpoints" / "last.ckpt"), head(tmp_path / "resumed" / "checkpoints" / "last.ckpt")
    assert any(not torch.equal(whole[k], at2[k]) for k in whole)  # steps 3-4 moved it again
    assert all(torch.allclose(whole[k], resumed[k], atol=1e-6) for k in whole)


@pytest.mark.parametrize("trainer", ["ddp", "fsdp"])
def test_two_processes_train_one_head(tmp_path, trainer):
    # Each process fits the head on its own questions' states; averaged gradients keep the two heads equal.
    result = cli("tests/critic_ddp_job.py", str(tmp_path), f"trainer={trainer}", "logger=csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"critic{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["sharded"] == ranks[1]["sharded"] == (trainer == "fsdp")
    assert any(w != 0 for w in ranks[0]["head"]["head.2.weight"])  # it starts at 0: training moved it
    for key, weights in ranks[0]["head"].items():
        assert weights == pytest.approx(ranks[1]["head"][key], abs=1e-6), key
    assert head(tmp_path / "checkpoints" / "last.ckpt")


def test_the_fidelity_instrument_measures_it_with_no_special_case(tmp_path, capsys):
    from test_credit_fidelity_script import fidelity_cli, last_json_line

    out = tmp_path / "fid"
    fidelity_cli(*TINY, "n=2", "group_size=2", "mc=2", "bootstrap=20", "samples=2", "methods=[grpo,turn_critic]",
                 f"hydra.run.dir={out}")
    assert set(last_json_line(capsys.readouterr().out)["methods"]) == {"grpo", "turn_critic"}
    for record in (json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()):
        for rollout in record["rollouts"]:
            assert len(rollout["credit"]["turn_critic"]) == len(rollout["truth"])
        assert record["cost"]["methods"]["turn_critic"]["extra_tokens"] == 0.0


def test_a_training_step_trains_on_the_advantages_whitened_over_the_step(tmp_path, monkeypatch):
    """The wiring of AgentRLModule.training_step: what the method's step_advantages returns (turn-critic's whitening
    over every action of the step) is what the update trains on, rollout by rollout, and it differs from the
    per-group advantages it was given."""
    import dataclasses

    from agentcredit.lit.module import AgentRLModule
    from tiny_runs import train_tiny

    whitened, trained = [], []
    training_step, optimise = AgentRLModule.training_step, AgentRLModule._optimise

    def spying_step(self, questions, batch_idx):
        real = self.method.step_advantages

        def spy(groups, advantages, **knobs):
            given = [a.clone() for a in advantages]
            out = real(groups, advantages, **knobs)
            whitened.append((given, [o.clone() for o in out]))
            return out

        self.method = dataclasses.replace(self.method, step_advantages=spy)
        try:
            return training_step(self, questions, batch_idx)
        finally:
            self.method = dataclasses.replace(self.method, step_advantages=real)

    def spying_optimise(self, trajectories, advantages):
        trained.append([a.clone() for a in advantages])
        return optimise(self, trajectories, advantages)

    from agentcredit.lit.critic import TurnCritic

    critic_init = TurnCritic.__init__

    def varied_critic(self, *args, **kwargs):  # an untrained critic predicts 0: every advantage of a failed step is 0
        critic_init(self, *args, **kwargs)
        torch.nn.init.normal_(self.head[2].weight, std=1.0, generator=torch.Generator().manual_seed(0))

    monkeypatch.setattr(AgentRLModule, "training_step", spying_step)
    monkeypatch.setattr(AgentRLModule, "_optimise", spying_optimise)
    monkeypatch.setattr(TurnCritic, "__init__", varied_critic)
    train_tiny(tmp_path, "credit=turn-critic", "trainer.max_steps=1")
    assert len(whitened) == len(trained) == 1
    per_group, over_step = whitened[0]
    expected = [row for group in over_step for row in group.unbind(0)]
    assert len(trained[0]) == len(expected) == 4  # 2 questions x 2 rollouts
    assert all(torch.equal(got, want) for got, want in zip(trained[0], expected))
    assert any(not torch.allclose(a, b) for a, b in zip(per_group, over_step))
