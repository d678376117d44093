"""Every config file composes, validates and (at tiny sizes) instantiates; bad values fail before any model loads."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from agentcredit.run.compose import build_components
from agentcredit.common.configs import arm_options, register_config_nodes
from agentcredit.common.paths import config_dir
from agentcredit.checks.validation import ConfigError, knob_owners, prepare_config
from tiny_runs import cli, tiny_config

CONF_DIR = config_dir()

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml") if not p.stem.startswith("_"))


def instantiate(cfg):
    """Everything `train.run` builds before `fit`."""
    from agentcredit.run.compose import build_module, build_trainer

    cfg = prepare_config(cfg)
    components = build_components(cfg)
    return build_module(cfg, components), build_trainer(cfg, components.policy)


def sweep_params(*overrides: str) -> dict[str, list[str]]:
    register_config_nodes()  # compose_config does this; composing directly (for the hydra node) must too
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
    params = cfg.hydra.sweeper.params or {}
    return {key: str(params[key]).split(",") for key in params}


# ---------------------------------------------------------------- every file composes and instantiates

@pytest.mark.parametrize("credit", options("credit"))
def test_credit_configs_instantiate(tmp_path, credit):
    module, trainer = instantiate(tiny_config(tmp_path, f"credit={credit}"))
    # credit=gspo (a loss mode) and credit=budget-grpo (a group size) are presets of GRPO, not methods of their own
    assert module.method.name == {"gspo": "grpo", "budget-grpo": "grpo"}.get(credit, credit)
    assert trainer.max_steps == 2


@pytest.mark.parametrize("judge", ["random", "heuristic", "openai"])
def test_judge_configs_instantiate(tmp_path, judge):
    extra = ["judge.base_url=http://127.0.0.1:9/v1", "judge.model=any"] if judge == "openai" else []
    module, _ = instantiate(tiny_config(tmp_path, "credit=prover", f"judge={judge}", *extra))
    assert module.credit_inputs.segment_verifier is not None


def test_every_group_option_composes_and_validates(tmp_path, monkeypatch):
    from agentcredit.checks import config_checks

    # the values only: trainer=gpu must validate here too, on a machine without the GPU it names
    monkeypatch.setattr(config_checks, "check_accelerator_present", lambda trainer: None)
    (tmp_path / "c.jsonl").write_text('{"id": "d", "title": "T", "text": "x"}\n')
    (tmp_path / "q.jsonl").write_text('{"question": "Q?", "answer": "x"}\n')
    groups = {g: options(g) for g in ("credit", "model", "data", "env", "judge", "rollout", "trainer", "logger", "experiment")}
    groups["arm"] = arm_options()  # conf/arm/'s files and every credit config's own arm, in both spellings
    assert set(groups["trainer"]) == {"cpu", "gpu", "ddp", "fsdp"}
    assert set(groups["logger"]) == {"csv", "wandb", "none"}
    needs = {("model", "hf"): ["model.name_or_path=some/model"],
             ("data", "user"): [f"data.corpus_path={tmp_path / 'c.jsonl'}", f"data.questions_path={tmp_path / 'q.jsonl'}"],
             ("experiment", "trace_reference"): [f"reference_checkpoint={tmp_path}"]}
    for group, names in groups.items():
        for name in names:
            cfg = tiny_config(tmp_path, f"{group}={name}", *needs.get((group, name), []))
            prepare_config(cfg)
            if group == "experiment":
                assert cfg.logger.group == name and cfg.logger.tags, f"experiment={name} sets no W&B group/tags"
            if group == "arm":  # compare.py groups runs by this name
                assert cfg.arm == name.replace("-", "_"), f"arm={name} names itself {cfg.arm!r}"


def test_every_file_starts_with_a_comment():
    for path in CONF_DIR.rglob("*.yaml"):
        first = path.read_text().splitlines()[0]
        assert first.startswith("#"), f"{path.relative_to(CONF_DIR)} does not start with a comment"
        if path.parent.name == "experiment" and not path.stem.startswith("_"):  # _compare_base: a base, not run alone
            text = path.read_text()
            assert text.startswith("# @package _global_") and f"experiment={path.stem}" in text


def test_model_configs_other_than_tiny_validate_without_loading(tmp_path, monkeypatch):
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    for overrides in (["model=smollm2_135m"], ["model=hf", "model.name_or_path=Qwen/Qwen3-0.6B"]):
        assert prepare_config(tiny_config(tmp_path, *overrides)).model.kind == overrides[0].split("=")[1]


def test_cpu_and_ddp_trainers_instantiate(tmp_path):
    from lightning.pytorch.strategies import DDPStrategy

    _, trainer = instantiate(tiny_config(tmp_path, "trainer=ddp"))
    assert isinstance(trainer.strategy, DDPStrategy) and trainer.num_devices == 2
    assert trainer.strategy._get_process_group_backend() == "gloo"


def test_fsdp_strategy_is_fsdp2_with_its_settings(tmp_path):
    import torch

    from agentcredit.run.compose import build_strategy
    from agentcredit.lit.fsdp2 import FSDP2Strategy

    cfg = prepare_config(tiny_config(tmp_path, "trainer=fsdp", "trainer.strategy.param_dtype=bfloat16",
                                     "trainer.strategy.activation_checkpointing=true"))
    assert (cfg.trainer.accelerator, cfg.trainer.devices, cfg.trainer.precision) == ("cpu", 2, "32-true")
    strategy = build_strategy(dict(cfg.trainer.strategy))
    assert isinstance(strategy, FSDP2Strategy)
    assert (strategy.param_dtype, strategy.reduce_dtype) == (torch.bfloat16, None)
    assert strategy.activation_checkpointing and not strategy.cpu_offload and strategy.reshard_after_forward
    assert not strategy._save_distributed_checkpoint  # one whole checkpoint file, read by scripts/evaluate.py
    with pytest.raises(ConfigError, match="needs name: fsdp and only param_dtype, .* got name: 'fsdp' and wrap"):
        build_strategy({"name": "fsdp", "wrap": "decoder_layers"})
    with pytest.raises(ConfigError, match=r"^trainer=fsdp shards one unit per decoder layer, and Linear has no"):
        build_strategy({"name": "fsdp"}, torch.nn.Linear(2, 2))  # e.g. custom code the config check cannot read


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_trainer_instantiates(tmp_path):
    _, trainer = instantiate(tiny_config(tmp_path, "trainer=gpu"))
    assert trainer.num_devices == 1


def test_smollm2_and_local_judge_instantiate(tmp_path):
    module, _ = instantiate(tiny_config(tmp_path, "model=smollm2_135m", "credit=prover", "judge=local"))
    assert module.credit_inputs.segment_verifier is not None


# ---------------------------------------------------------------- experiments

SINGLE_JOB_EXPERIMENTS = {"tune_long"}  # scripts/tune.py runs it once per grid point and seed of conf/tuning/long.yaml


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_sweep_job_of_an_experiment_validates(tmp_path, experiment):
    reference = tmp_path / "reference.ckpt"
    torch.save({}, reference)  # a whole-looking checkpoint file; not read before training
    extra = [f"reference_checkpoint={reference}"] if experiment == "trace_reference" else []
    params = sweep_params(f"experiment={experiment}", *extra)
    if experiment in SINGLE_JOB_EXPERIMENTS:  # one job's settings; its jobs come from a tuning spec (test_tuning.py)
        assert not params, f"experiment={experiment} is one job's settings, yet it sweeps {params}"
        prepare_config(tiny_config(tmp_path, f"experiment={experiment}"))
        return
    assert params, f"experiment={experiment} sweeps nothing"
    jobs = [dict(zip(params, values)) for values in itertools.product(*params.values())]
    if len(jobs) > 8:  # e.g. arms x seeds: every value of every parameter once is enough (each compose ~1 s)
        width = max(len(v) for v in params.values())
        jobs = [{k: v[i % len(v)] for k, v in params.items()} for i in range(width)]
    for job in jobs:
        cfg = prepare_config(tiny_config(tmp_path, f"experiment={experiment}", *extra, *(f"{k}={v}" for k, v in job.items())))
        for key, value in job.items():
            if key.startswith("credit."):
                expected = {"null": None, "${reference_checkpoint}": str(reference)}.get(value, value)
                assert str(cfg.credit[key.split(".", 1)[1]]) == str(expected)
    first = {k: v for k, v in jobs[0].items()}
    if first.get("judge") != "local":  # the local judge: test_smollm2_and_local_judge_instantiate
        instantiate(tiny_config(tmp_path, f"experiment={experiment}", *extra, *(f"{k}={v}" for k, v in first.items())))


def test_trace_reference_without_a_checkpoint_is_a_one_line_error(tmp_path):
    cfg = tiny_config(tmp_path, "experiment=trace_reference", "credit.reference_path=${reference_checkpoint}")
    with pytest.raises(ConfigError, match=r"^reference_checkpoint must be set .* add reference_checkpoint=<value>"):
        prepare_config(cfg)


# ---------------------------------------------------------------- sweepable credit knobs

def test_sweepable_file_lists_exactly_the_registered_knobs():
    from agentcredit.credit.config import LOSS_KNOBS

    listed = set(tiny_config(Path("."), "credit=grpo").credit) - {"name"}
    method_knobs = set(knob_owners())
    assert listed == method_knobs, f"conf/credit/_sweepable.yaml is out of date: {sorted(listed ^ method_knobs)}"
    assert set(LOSS_KNOBS) <= listed


def test_headline_sweep_grpo_ignores_K_with_one_warning_trace_uses_it(tmp_path, caplog):
    for credit, K in itertools.product(["grpo", "trace"], [0, 1, 3, 5]):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="agentcredit.checks.validation"):
            cfg = prepare_config(tiny_config(tmp_path, f"credit={credit}", f"credit.K={K}"))
        warnings = [r.getMessage() for r in caplog.records]
        if credit == "grpo":
            assert "K" not in cfg.credit and "eps" not in cfg.credit
            assert warnings == [f"credit=grpo does not use credit.K={K}; ignored"]
        else:
            assert cfg.credit.K == K and warnings == []


@pytest.mark.parametrize("overrides, message", [
    (["credit=grpo", "credit.K=3"], "config error: credit=grpo does not read credit.K (a knob of trace, trace-policy); "
                                    "leave it out, or choose a method that reads it (credit=<name>)"),
    (["credit=spo-chain", "credit.boundary_value=success"], "config error: credit=spo-chain does not read "
                                                            "credit.boundary_value (a knob of prover)"),
])
def test_a_knob_the_method_does_not_read_typed_for_one_run_is_one_line(tmp_path, capsys, overrides, message):
    from tiny_runs import TINY, hydra_cli

    with pytest.raises(SystemExit) as stop:
        hydra_cli(*overrides, *TINY, f"hydra.run.dir={tmp_path}/run")
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1 and lines[0].startswith(message), lines
    assert not (tmp_path / "run").exists()


def test_a_sweeps_job_continued_on_its_own_keeps_its_recorded_knobs(tmp_path):
    """One job of `-m credit=grpo,trace credit.K=1,3` recorded `credit=grpo credit.K=1`; continued alone with its
    recorded overrides and resume=true (README, "Resuming"), it is not refused for them."""
    from agentcredit.cli.train import refuse_other_methods_knobs_typed_for_one_run
    from tiny_runs import TINY

    refuse_other_methods_knobs_typed_for_one_run(["credit=grpo", "credit.K=1", "resume=true", *TINY,
                                                  f"hydra.run.dir={tmp_path}/job"])
    with pytest.raises(SystemExit):
        refuse_other_methods_knobs_typed_for_one_run(["credit=grpo", "credit.K=1", *TINY, f"hydra.run.dir={tmp_path}/job"])


def test_misspelt_and_unknown_credit_keys_stay_errors(tmp_path):
    with pytest.raises(ConfigCompositionException, match="credit.Kk"):
        tiny_config(tmp_path, "credit.Kk=1")
    with pytest.raises(ConfigError, match="unknown knob credit.foo for credit=grpo"):
        prepare_config(tiny_config(tmp_path, "+credit.foo=1"))
    with pytest.raises(ConfigError, match=r"credit.transform must be one of \['log_ratio', 'raw', 'linear'\], got 'foo'"):
        prepare_config(tiny_config(tmp_path, "credit=grpo", "credit.transform=foo"))  # ignored by grpo, still checked


# ---------------------------------------------------------------- bad values: one line, before any model loads

BAD_VALUES = {
    "credit.K=-1": r"^credit.K must be an integer >= 0, got -1$",
    "credit.transform=foo": r"^credit.transform must be one of \['log_ratio', 'raw', 'linear'\], got 'foo'$",
    "rollout.group_size=1": r"^rollout.group_size must be an integer >= 2 .*got 1$",
}


@pytest.mark.parametrize("override", BAD_VALUES)
def test_bad_value_fails_in_run_before_any_model_loads(tmp_path, monkeypatch, override):
    from agentcredit.run.train import run

    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(ConfigError, match=BAD_VALUES[override]):
        run(tiny_config(tmp_path, "credit=trace", override))


def test_bad_value_on_the_command_line_prints_one_line_and_exits_2(tmp_path):
    result = cli("train.py", "credit=trace", "credit.K=-1", f"hydra.run.dir={tmp_path}/run", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["config error: credit.K must be an integer >= 0, got -1"]
    assert not (tmp_path / "run" / "checkpoints").exists()
