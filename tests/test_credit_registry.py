"""Registry, the registered methods end to end on a small group, and credit config validation."""

import inspect
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from agentcredit.credit import (
    CreditGroup,
    VerifiedSegment,
    available_credits,
    get_credit,
    register_credit,
    split_credit_config,
    validate_credit_config,
)
from agentcredit.common.configs import compose_config, plain
from agentcredit.credit.config import knob_defaults
from agentcredit.credit.knobs import integer, positive
from agentcredit.credit.registry import unregister_credit
from agentcredit.credit.tokens import ANSWER_TURN as A
from agentcredit.credit.tokens import NON_POLICY as P
from agentcredit.checks.validation import split_method_credit

CONF = Path(__file__).resolve().parents[1] / "conf" / "credit"


# --- registry ------------------------------------------------------------------------------------

def test_builtin_methods_and_their_requirements():
    assert {"grpo", "trace", "prover"} <= set(available_credits())
    # A loss mode and a group size are not credit methods: credit=gspo and credit=budget-grpo are GRPO presets.
    assert not {"gspo", "budget-grpo"} & set(available_credits())
    assert get_credit("trace").inputs == ("reference_scores",)
    assert get_credit("prover").inputs == ("verified_segment",)
    assert get_credit("gigpo").inputs == ("state_keys",) and get_credit("spo-chain").inputs == ("chain_values",)
    assert get_credit("gold-evidence").inputs == ("evidence",)
    assert get_credit("mc-value").inputs == ("state_values",)
    assert get_credit("igpo").inputs == ("policy_scores",) == get_credit("trace-policy").inputs
    assert get_credit("turn-critic").inputs == ("critic_values",)
    assert get_credit("grpo").inputs == () and not get_credit("grpo").reads("reference_scores")


def test_duplicate_and_unknown_names():
    with pytest.raises(ValueError, match="'grpo' is already registered"):
        register_credit("grpo")(lambda group, *, outcome_scale="std": None)
    # Every registered name, sorted (the built-in ones, and `signal` when a workflow test registered it first).
    with pytest.raises(ValueError, match="unknown credit method 'ppo'; registered: gigpo, gold-evidence, ") as err:
        get_credit("ppo")
    assert str(err.value).endswith("registered: " + ", ".join(available_credits()))
    assert {"grpo", "trace", "prover", "mc-value"} <= set(available_credits())


def test_registration_requires_keyword_only_knobs():
    try:
        with pytest.raises(TypeError, match="keyword-only"):
            register_credit("positional_knobs")(lambda group, K: None)
        assert "positional_knobs" not in available_credits()

        @register_credit("throwaway", checks={"scale": positive()})
        def throwaway(group, *, scale: float = 1.0):
            return group.loss_mask * scale

        assert get_credit("throwaway").advantage_knobs == ("scale",)
    finally:
        unregister_credit("throwaway")


def test_registration_requires_a_value_check_for_every_knob_and_no_other():
    with pytest.raises(TypeError, match=r"knob\(s\) \['scale', 'budget'\] have no value check"):
        register_credit("unchecked", run_knobs={"budget": 2})(lambda group, *, scale=1.0: None)
    with pytest.raises(TypeError, match=r"checks name \['K'\], which are not its knobs"):
        register_credit("stray-check", checks={"scale": positive(), "K": positive()})(lambda group, *, scale=1.0: None)
    assert not {"unchecked", "stray-check"} & set(available_credits())


def test_a_registered_check_is_what_validation_applies():
    register_credit("throwaway-checked", checks={"scale": positive()})(lambda group, *, scale=1.0: None)
    try:
        validate_credit_config("throwaway-checked", {"scale": 2.0})  # in range: no error
        with pytest.raises(ValueError, match=r"^credit.scale must be a number > 0, got 0$"):
            validate_credit_config("throwaway-checked", {"scale": 0})
    finally:
        unregister_credit("throwaway-checked")


def test_every_loss_and_group_size_knob_has_a_check():
    from agentcredit.credit.budget import GROUP_CHECKS, GROUP_KNOBS
    from agentcredit.credit.config import LOSS_KNOBS
    from agentcredit.credit.losses import LOSS_CHECKS

    assert set(LOSS_CHECKS) == set(LOSS_KNOBS) and set(GROUP_CHECKS) == set(GROUP_KNOBS)


# --- methods on a hand-made group ------------------------------------------------------------------

# rollout 0: one tool turn then an answer; rollout 1: answers at once (T = 0), padded
TURN_IDS = torch.tensor([[P, 0, 0, P, A, A], [P, A, A, P, P, P]])
MASK = torch.tensor([[0, 1, 1, 0, 1, 1], [0, 1, 1, 0, 0, 0]])


def _group(**extra):
    return CreditGroup(rewards=torch.tensor([1.1, 0.1]), turn_ids=TURN_IDS, loss_mask=MASK,
                       num_turns=torch.tensor([1, 0]), **extra)


def test_grpo_method():
    # mean 0.6, σ = 0.5 → A = [1, −1]
    got = get_credit("grpo").advantages(_group())
    assert got.tolist()[0] == pytest.approx([0, 1, 1, 0, 1, 1], abs=1e-6)
    assert got.tolist()[1] == pytest.approx([0, -1, -1, 0, 0, 0], abs=1e-6)


def test_trace_method_end_to_end():
    scores = [torch.tensor([-2.0, -0.5]), torch.tensor([-3.0])]
    # A = [1, −1]; rollout 0: δ = log((2+0.1)/(0.5+0.1)) = log 3.5 = 1.2527630
    # K=3, T=1: c = δ; fill 2·0.8^1·1 = 1.6 → r_0 = 2.8527630
    # tails: r̄ = [2.852763, 0], group mean 1.4263815 → 0.05·[±1.4263815] = ±0.0713191
    # row 0: tool 1 + 0.2·2.852763 = 1.5705526; answer 1 + 0.0713191 = 1.0713191
    # row 1: answer −1 − 0.0713191 = −1.0713191
    got = get_credit("trace").advantages(_group(mean_logprobs=scores))
    assert got[0].tolist() == pytest.approx([0, 1.5705526, 1.5705526, 0, 1.0713191, 1.0713191], abs=1e-5)
    assert got[1].tolist() == pytest.approx([0, -1.0713191, -1.0713191, 0, 0, 0], abs=1e-5)
    diag = get_credit("trace").diagnostics(_group(mean_logprobs=scores))
    assert diag["deltas"][0] == pytest.approx([1.2527630], abs=1e-5) and diag["deltas"][1] == []
    assert diag["turn_rewards"][0] == pytest.approx([2.8527630], abs=1e-5)
    assert diag["turn_reward_pos_frac"] == 1.0


# Mixed turn counts in one group (rows of turn rewards padded to the longest): rollout 0 (R = 1.1) has two tool
# turns, rollout 1 (R = 0.1) one; tokens: row 0 [P, 0, 0, P, 1, P, A, A], row 1 [P, 0, P, A, A, P, P, P].
MIXED_TURN_IDS = torch.tensor([[P, 0, 0, P, 1, P, A, A], [P, 0, P, A, A, P, P, P]])
MIXED_MASK = (MIXED_TURN_IDS != P).long()
MIXED_SCORES = [torch.tensor([-2.0, -1.0, -0.2]), torch.tensor([-3.0, -2.5])]


# δ (ε = 0.1): rollout 0 [log(2.1/1.1), log(1.1/0.3)] = [0.6466272, 1.2992830]; rollout 1 [log(3.1/2.6)] = [0.1758907]
# K = 3, γ = 0.8: rollout 0 h = [1, 1]: c_0 = (0.6466272 + 0.8·1.2992830)/1.8 = 0.9366964, c_1 = 1.2992830,
#   fills λγ^(T−k)A = 2·0.64·A, 2·0.8·A; rollout 1: c_0 = 0.1758907, fill 2·0.8·(−A)
# K = 1: rollout 0's first window ends at turn 0, short of T−1 = 1: c_0 = δ_0 = 0.6466272 and no fill
# std: A = ±1 → r = [2.2166964, 2.8992830 | −1.4241093] (K = 3); none: A = ±0.5 → [1.5766964, 2.0992830 | −0.6241093]
# tails 0.05·(r̄_g − mean r̄): rows' tool tokens A + 0.2·r_k, answers A ± tail
@pytest.mark.parametrize("outcome_scale, K, tool0, answer0, tool1, answer1", [
    ("std", 3, [1.4433393, 1.5798566], 1.0995525, -1.2848219, -1.0995525),
    ("std", 1, [1.1293254, 1.5798566], 1.0799266, -1.2848219, -1.0799266),
    ("none", 3, [0.8153393, 0.9198566], 0.5615525, -0.6248219, -0.5615525),
    ("none", 1, [0.6293254, 0.9198566], 0.5499266, -0.6248219, -0.5499266),
])
def test_trace_method_on_rollouts_of_different_lengths(outcome_scale, K, tool0, answer0, tool1, answer1):
    group = CreditGroup(rewards=torch.tensor([1.1, 0.1]), turn_ids=MIXED_TURN_IDS, loss_mask=MIXED_MASK,
                        num_turns=torch.tensor([2, 1]), mean_logprobs=MIXED_SCORES)
    got = get_credit("trace").advantages(group, K=K, outcome_scale=outcome_scale)
    t0, t1 = tool0
    assert got[0].tolist() == pytest.approx([0, t0, t0, 0, t1, 0, answer0, answer0], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, tool1, 0, answer1, answer1, 0, 0, 0], abs=1e-6)


def test_grpo_method_mean_centred():
    # outcome_scale=none (ProVer eq. 1): A = R − mean = [0.5, −0.5], not divided by σ
    got = get_credit("grpo").advantages(_group(), outcome_scale="none")
    assert got[0].tolist() == pytest.approx([0, 0.5, 0.5, 0, 0.5, 0.5], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, -0.5, -0.5, 0, 0, 0], abs=1e-6)


def test_trace_method_needs_reference_scores():
    with pytest.raises(ValueError, match="needs reference scores"):
        get_credit("trace").advantages(_group())


# "none": A = R − mean = [0.5, −0.5]; Δ = 0.5 > 0 adds λΔ = 0.5 to rollout 0's turn-0 tokens → 1.0;
# Δ = −0.5 adds nothing → 0.5
@pytest.mark.parametrize("delta, expected_tool", [(0.5, 1.0), (-0.5, 0.5)])
def test_prover_method(delta, expected_tool):
    segment = VerifiedSegment(rollout=0, start=0, end=0, delta=delta)
    got = get_credit("prover").advantages(_group(segment=segment))
    assert got[0].tolist() == pytest.approx([0, expected_tool, expected_tool, 0, 0.5, 0.5], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, -0.5, -0.5, 0, 0, 0], abs=1e-6)


def test_prover_method_on_std_scaled_outcomes():
    # outcome_scale=std: A = [1, −1]; Δ = 0.5 still adds λΔ = 0.5 to rollout 0's turn-0 tokens → 1.5
    segment = VerifiedSegment(rollout=0, start=0, end=0, delta=0.5)
    got = get_credit("prover").advantages(_group(segment=segment), outcome_scale="std")
    assert got[0].tolist() == pytest.approx([0, 1.5, 1.5, 0, 1.0, 1.0], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, -1.0, -1.0, 0, 0, 0], abs=1e-6)


def test_group_validation():
    with pytest.raises(ValueError, match="mean_logprobs\\[1\\] must be"):
        _group(mean_logprobs=[torch.tensor([-2.0, -0.5]), torch.tensor([-3.0, -1.0])])
    with pytest.raises(ValueError, match="not within tool turns"):
        _group(segment=VerifiedSegment(rollout=0, start=0, end=1, delta=0.5))
    with pytest.raises(ValueError, match="tool turn id >= its num_turns"):
        CreditGroup(torch.tensor([1.1, 0.1]), TURN_IDS, MASK, torch.tensor([0, 0]))


# --- conf/credit/*.yaml and validation ---------------------------------------------------------

def _yaml(name):
    """The file conf/credit/<name>.yaml as written (its departures from the code's defaults)."""
    return OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"), resolve=True)


def _composed(name):
    """The method's credit node as `python train.py credit=<name>` composes it, less other methods' knobs."""
    return split_method_credit(plain(compose_config([f"credit={name}"]).credit))[0]


# Every method a module of the credit package registers (tests may register throwaway ones elsewhere).
PACKAGE_METHODS = [n for n in available_credits() if get_credit(n).advantages.__module__.startswith("agentcredit.credit.")]
PRESETS = {"gspo", "budget-grpo"}  # conf/credit/ files that are GRPO with a loss mode or a group size


def test_every_method_of_the_package_has_its_yaml_and_every_yaml_is_a_method_or_a_preset():
    assert {"grpo", "trace", "prover", "spo-chain", "gigpo", "mc-value", "igpo", "trace-policy", "turn-critic",
            "gold-evidence"} <= set(PACKAGE_METHODS)
    files = {p.stem for p in CONF.glob("*.yaml") if not p.stem.startswith("_")}
    assert set(PACKAGE_METHODS) == files - PRESETS


@pytest.mark.parametrize("name", PACKAGE_METHODS)
def test_each_default_lives_once_in_the_code(name):
    first_line = (CONF / f"{name}.yaml").read_text().splitlines()[0]
    assert first_line.startswith(f"# python train.py credit={name}")
    written = {k: v for k, v in _yaml(name).items() if k not in ("name", "defaults")}
    restated = {k: v for k, v in written.items() if knob_defaults(name).get(k) == v}
    assert not restated, f"conf/credit/{name}.yaml repeats defaults of the code: {restated}"
    composed = _composed(name)
    assert composed == {"name": name, **knob_defaults(name), **written}
    split = split_credit_config(composed)
    signature = {k: p.default for k, p in inspect.signature(get_credit(name).advantages).parameters.items()
                 if p.kind == p.KEYWORD_ONLY}
    assert split.advantage == signature


@pytest.mark.parametrize("preset, arm, departures", [
    ("gspo", "gspo", {"clip_low": 3e-4, "clip_high": 4e-4, "loss_agg": "seq-mean-token-mean", "ratio_level": "sequence"}),
    ("budget-grpo", "budget_grpo", {"extra_rollouts": 2}),
])
def test_loss_mode_and_group_size_presets_are_grpo(preset, arm, departures):
    first_line = (CONF / f"{preset}.yaml").read_text().splitlines()[0:2]
    assert any(line.startswith(f"# python train.py credit={preset}") for line in first_line)
    cfg = compose_config([f"credit={preset}"])
    assert cfg.arm == arm  # the name its runs are compared under
    assert _composed(preset) == {"name": "grpo", **knob_defaults("grpo"), **departures}


def test_paper_defaults():
    trace = _composed("trace")
    assert (trace["eps"], trace["K"], trace["gamma"], trace["lambda_term"]) == (0.1, 3, 0.8, 2.0)
    assert (trace["alpha_out"], trace["alpha_turn"], trace["answer_tail_scale"]) == (1.0, 0.2, 0.05)
    assert (trace["clip_low"], trace["clip_high"], trace["reference_path"]) == (0.2, 0.28, None)
    prover = _composed("prover")
    assert (prover["num_continuations"], prover["lam"], prover["max_segment_turns"]) == (8, 1.0, 4)
    assert (prover["eligible_low"], prover["eligible_high"], prover["max_judge_corrections"]) == (0.0, 0.5, 3)
    assert (_composed("gspo")["clip_low"], _composed("gspo")["clip_high"]) == (3e-4, 4e-4)
    igpo = _composed("igpo")  # the paper's: probability gains, one joint normalisation, γ = 1 (the authors' runs)
    assert (igpo["gamma"], igpo["gain"], igpo["norm_mode"], igpo["reward_scale"]) == (1.0, "prob", "joint", "std")
    critic = _composed("turn-critic")  # Turn-PPO's best turn-level GAE: γ = 0.99, λ = 0.9
    assert (critic["gamma"], critic["gae_lambda"], critic["whiten"]) == (0.99, 0.9, "batch")


@pytest.mark.parametrize("name, knobs, message", [
    ("trace", {"K": -1}, "credit.K must be an integer >= 0, got -1"),
    ("trace", {"K": 1.5}, "credit.K must be an integer >= 0, got 1.5"),
    ("trace", {"K": True}, "credit.K must be an integer >= 0, got True"),
    ("trace", {"eps": -0.1}, "credit.eps must be a number > 0, got -0.1"),
    ("trace", {"gamma": 1.5}, "credit.gamma must be a number in (0, 1], got 1.5"),
    ("trace", {"eps": 0}, "credit.eps must be a number > 0, got 0"),
    ("trace", {"gamma": 0.0}, "credit.gamma must be a number in (0, 1], got 0.0"),
    ("trace", {"transform": "log"}, "credit.transform must be one of ['log_ratio', 'raw', 'linear'], got 'log'"),
    ("trace", {"normalize": "yes"}, "credit.normalize must be true or false"),
    ("grpo", {"loss_agg": "sum"}, "credit.loss_agg must be one of ['token-mean', 'seq-mean-token-mean']"),
    ("grpo", {"K": 3}, "unknown knob credit.K for credit=grpo; allowed: outcome_scale, clip_low"),
    ("prover", {"eligible_low": 0.5, "eligible_high": 0.5}, "credit.eligible_low (0.5) must be < credit.eligible_high (0.5)"),
    ("prover", {"num_continuations": 0}, "credit.num_continuations must be an integer >= 1"),
    ("prover", {"boundary_value": "rate"}, "credit.boundary_value must be one of ['reward', 'success'], got 'rate'"),
    ("mc-value", {"num_continuations": 0}, "credit.num_continuations must be an integer >= 1, got 0"),
    ("mc-value", {"num_continuations": 2.5}, "credit.num_continuations must be an integer >= 1, got 2.5"),
    ("mc-value", {"only_mixed_groups": "yes"}, "credit.only_mixed_groups must be true or false, got 'yes'"),
    ("mc-value", {"outcome_scale": "std"}, "unknown knob credit.outcome_scale for credit=mc-value"),
    ("igpo", {"gain": "ratio"}, "credit.gain must be one of ['prob', 'log_prob'], got 'ratio'"),
    ("igpo", {"norm_mode": "turn"}, "credit.norm_mode must be one of ['joint', 'separate'], got 'turn'"),
    ("igpo", {"reward_scale": 1}, "credit.reward_scale must be one of ['std', 'none'], got 1"),
    ("igpo", {"gamma": 0}, "credit.gamma must be a number in (0, 1], got 0"),
    ("igpo", {"K": 3}, "unknown knob credit.K for credit=igpo"),
    ("trace-policy", {"reference_path": "ref.ckpt"}, "unknown knob credit.reference_path for credit=trace-policy"),
    ("turn-critic", {"gae_lambda": 1.5}, "credit.gae_lambda must be a number in [0, 1], got 1.5"),
    ("turn-critic", {"critic_epochs": 0}, "credit.critic_epochs must be an integer in [1, 1000], got 0"),
    ("turn-critic", {"critic_lr": -1}, "credit.critic_lr must be a number > 0, got -1"),
    ("turn-critic", {"lam": 0.9}, "unknown knob credit.lam for credit=turn-critic"),
    ("gold-evidence", {"redundancy_coef": -1}, "credit.redundancy_coef must be a number >= 0, got -1"),
    ("gold-evidence", {"gamma": 1.5}, "credit.gamma must be a number in (0, 1], got 1.5"),
    ("gold-evidence", {"K": 3}, "unknown knob credit.K for credit=gold-evidence"),
    ("prover", {"name": "trace"}, "credit.name is 'trace' but the method is 'prover'"),
    ("prover", {"tis_cap": -1}, "credit.tis_cap must be null (off) or a number > 0"),
])
def test_validation_messages(name, knobs, message):
    with pytest.raises(ValueError) as err:
        validate_credit_config(name, knobs)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_split_requires_a_name_and_known_method():
    with pytest.raises(ValueError, match="no 'name'"):
        split_credit_config({"K": 3})
    with pytest.raises(ValueError, match="unknown credit method 'tracer'"):
        split_credit_config({"name": "tracer"})


def test_split_routes_knobs():
    cfg = _composed("trace") | {"K": 0, "tis_cap": 2.0}
    split = split_credit_config(cfg)
    assert split.advantage["K"] == 0 and split.loss["tis_cap"] == 2.0
    assert split.run == {"reference_path": None, "extra_rollouts": 0, "match_metrics": None, "match_phases": 1}
    assert "name" not in split.advantage


def test_a_method_declares_named_inputs_and_an_unknown_one_is_refused():
    with pytest.raises(ValueError, match="unknown credit input"):
        register_credit("throwaway-bad-input", inputs=("reference_score",))(lambda group, *, x=1: None)
    assert "throwaway-bad-input" not in available_credits()
    with pytest.raises(ValueError, match="unknown credit input"):
        get_credit("grpo").reads("nonsense")


def test_the_orchestrator_builds_exactly_the_declared_inputs():
    """build_group calls the builder of each declared input and no other."""
    from unittest import mock

    from agentcredit.agent.trajectory import Trajectory
    from agentcredit.lit import credit_inputs

    traj = Trajectory(question_id="q", input_ids=[1, 2, 3], loss_mask=[0, 1, 1], turn_ids=[P, 0, A],
                      boundaries=[1, 2], snapshots=[None, None], old_logprobs=[0.0, 0.0, 0.0], reward=1.0)
    called = []
    builders = {name: (lambda req, name=name: called.append(name) or (None, {})) for name in credit_inputs.INPUT_BUILDERS}
    builders["state_keys"] = lambda req: called.append("state_keys") or ([torch.tensor([5, 6])], {"k": 1})
    register_credit("throwaway-keys", inputs=("state_keys",), checks={"x": integer(0)})(lambda group, *, x=1: None)
    try:
        with mock.patch.dict(credit_inputs.INPUT_BUILDERS, builders):
            group, logs = credit_inputs.build_group(get_credit("throwaway-keys"), {}, [traj], None, None, None)
    finally:
        unregister_credit("throwaway-keys")
    assert called == ["state_keys"] and logs == {"k": 1}
    assert group.state_keys[0].tolist() == [5, 6] and group.mean_logprobs is None
