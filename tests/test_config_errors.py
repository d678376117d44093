"""Every bad config value stops in one line naming the key and what it accepts, before any model or
base policy loads, with exit status 2 on the command line (issue 20, item 2)."""

from __future__ import annotations

import contextlib
import io

import pytest

from agentcredit.common.configs import ConfigError
from tiny_runs import ROOT, hydra_cli, tiny_config

# override(s) -> the start of the one-line message (a regex). The first nine are the issue's; the
# next three were already caught; the rest were tried for the same faults elsewhere.
BAD = {
    "data.world.hops_min=9": r"data\.world\.hops_min must be an integer in 2\.\.8, got 9",
    "env.retriever=foo": r"env\.retriever must be one of \['dense', 'bm25'\], got 'foo'",
    "data.prompts_per_step=0": r"data\.prompts_per_step must be an integer >= 1, got 0",
    "env.max_topn=0": r"env\.max_topn must be an integer >= 1, got 0",
    "seed=abc": r"seed must be an integer from 0 to 4294967295, got 'abc'",
    "seed=-1": r"seed must be an integer from 0 to 4294967295, got -1",  # numpy's range, which seed_everything sets
    "seed=4294967296": r"seed must be an integer from 0 to 4294967295, got 4294967296",
    "threads=0": r"threads must be auto or an integer >= 1, got 0",
    "threads=many": r"threads must be auto or an integer >= 1, got 'many'",
    "data.test_batches_per_call=0": r"data\.test_batches_per_call must be an integer >= 1, got 0",
    "trainer.max_steps=-5": r"trainer\.max_steps must be an integer >= 1 \(or -1\), got -5",
    "trainer.precision=banana": r"trainer\.precision must be one of \[.*'bf16-mixed'.*\], got 'banana'",
    "credit=prover judge=openai": r"judge\.model must be set for judge=openai: set AGENTCREDIT_JUDGE_MODEL",
    "data.val_fraction=1.5": r"data\.val_fraction must be a number in \[0, 1\), got 1\.5",
    "credit.K=-1": r"credit\.K must be an integer >= 0, got -1",
    "credit.transform=foo": r"credit\.transform must be one of",
    "rollout.group_size=1": r"rollout\.group_size must be an integer >= 2",
    "credit=prover judge=openai judge.model=m": r"judge\.base_url must be set for judge=openai",
    "credit=prover judge=random judge.mode=sometimes": r"judge\.mode must be one of \['paper', 'valid'\], got 'sometimes'",
    "credit=prover judge=openai judge.model=m judge.base_url=http://x judge.timeout_s=0": r"judge\.timeout_s must be a number > 0",
    "credit=prover judge=openai judge.model=m judge.base_url=http://x judge.step_budget_s=0":
        r"judge\.step_budget_s must be a number > 0, got 0",
    "data.world.hops_min=4 data.world.hops_max=3": r"data\.world\.hops_min must be <= data\.world\.hops_max \(3\), got 4",
    "data.world.num_documents=5": r"data\.world\.num_documents must be an integer >= 40, got 5",
    "data.world.templates=[FOO]": r"data\.world\.templates must be a non-empty list of",
    "data.world.near_duplicate_rate=2": r"data\.world\.near_duplicate_rate must be a number in \[0, 1\], got 2",
    "data.split_seed=-1": r"data\.split_seed must be an integer >= 0, got -1",
    "data.test_fraction=-0.1": r"data\.test_fraction must be a number in \[0, 1\), got -0\.1",
    "data.val_fraction=0.6 data.test_fraction=0.5": r"data\.val_fraction must be < 1 - data\.test_fraction \(0\.5\)",
    "data.n_val=-1": r"data\.n_val must be an integer >= 0, got -1",
    "data.prompts_per_step=two": r"data\.prompts_per_step must be an integer >= 1, got 'two'",
    "data=user data.corpus_path=/nonexistent/c.jsonl data.questions_path=/nonexistent/q.jsonl":
        r"data\.corpus_path='/nonexistent/c\.jsonl' does not exist",
    "data.corpus_path=/tmp/c.jsonl": r"data\.questions_path must be set too",
    f"data=user data.corpus_path={ROOT / 'tests'} data.questions_path={ROOT / 'tests'}":
        r"data\.corpus_path='.*tests' is a folder, not a file; give a \.jsonl or \.parquet corpus file",
    f"data=user data.corpus_path={ROOT / 'pyproject.toml'} data.questions_path={ROOT / 'pyproject.toml'}":
        r"data\.corpus_path='.*pyproject\.toml' has the extension '\.toml'; give a \.jsonl or \.parquet",
    "env.default_topn=0": r"env\.default_topn must be an integer >= 1, got 0",
    "env.default_topn=30": r"env\.default_topn must be <= env\.max_topn \(20\), got 30",
    "env.reward.format_score=-1": r"env\.reward\.format_score must be a number >= 0, got -1",
    "env.reward.correct_score=0.05": r"env\.reward\.correct_score must be > env\.reward\.format_score \(0\.1\), or a "
                                     r"well-formed wrong answer counts as correct, got 0\.05",
    "credit=prover credit.success_threshold=5": r"credit\.success_threshold must be a number <= 1\.1 \(a correct "
                                               r"answer's reward: env\.reward\.correct_score \+ format_score\), or no "
                                               r"rollout succeeds, got 5",
    "credit=spo-chain credit.success_threshold=nan": r"credit\.success_threshold must be a number <= 1\.1",
    "data.world.hops_min=null": r"data\.world\.hops_min must be an integer in 2\.\.8, got None",
    "trainer.accelerator=banana": r"trainer\.accelerator must be one of",
    "trainer.accelerator=tpu": r"trainer\.accelerator=tpu needs torch_xla, which TPUs need, and this machine has none; "
                               r"use trainer\.accelerator=cpu \(or trainer=cpu\)$",
    "trainer.devices=0": r"trainer\.devices must be an integer >= 1, -1, auto, or a list of device ids, got 0",
    "trainer.val_check_interval=0": r"trainer\.val_check_interval must be an integer >= 1",
    "trainer.limit_val_batches=-1": r"trainer\.limit_val_batches must be an integer >= 0 or a fraction in \[0, 1\]",
    # a limit that cuts data.n_val short validated fewer questions than asked, silently
    "trainer.limit_val_batches=2 data.n_val=10": r"data\.n_val=10 asks for 10 validation questions, but "
                                                 r"trainer\.limit_val_batches=2 stops after 4 \(2 batches of "
                                                 r"data\.prompts_per_step=2\); set trainer\.limit_val_batches=1\.0",
    "trainer.limit_val_batches=0.5": r"trainer\.limit_val_batches=0\.5 validates part of the data\.n_val questions",
    "trainer.max_steps=1.5": r"trainer\.max_steps must be an integer >= 1 \(or -1\), got 1\.5",
    "trainer.strategy.name=deepspeed trainer=fsdp": r"trainer\.strategy\.name must be fsdp",
    "trainer=fsdp +trainer.strategy.wrap=everything": r"trainer\.strategy\.wrap is not a setting of FSDP; known: name, param_dtype, ",
    "trainer=fsdp trainer.strategy.param_dtype=float8": r"trainer\.strategy\.param_dtype must be one of \[None, 'float32', 'bfloat16', 'float16'\], got 'float8'",
    "trainer=fsdp trainer.strategy.cpu_offload=yes": r"trainer\.strategy\.cpu_offload must be true or false, got 'yes'",
    "trainer=fsdp trainer.strategy.cpu_offload=true": r"trainer\.strategy\.cpu_offload must be false with trainer\.accelerator=cpu",
    "checkpoint.every_n_steps=0": r"checkpoint\.every_n_steps must be an integer >= 1, got 0",
    "checkpoint.last_every_n_steps=-1": r"checkpoint\.last_every_n_steps must be an integer >= 1, got -1",
    "train.micro_batch_size=0": r"train\.micro_batch_size must be an integer >= 1, got 0",
    "train.padding_free=maybe": r"train\.padding_free must be true, false or auto",
    "train.share_prefixes=sometimes": r"train\.share_prefixes must be true or false",
    "rollout.share_identical=3": r"rollout\.share_identical must be true or false",
    "rollout.threads=0": r"rollout\.threads must be null or an integer >= 1",
    "train.lr=-1": r"train\.lr must be null or a number > 0, got -1",
    "train.grad_clip=0": r"train\.grad_clip must be a number > 0, got 0",
    "train.betas=[0.9]": r"train\.betas must be two numbers in \[0, 1\)",
    "model.kind=foo": r"model\.kind must be one of",
    "model.dtype=float8": r"model\.dtype must be one of \['float32', 'bfloat16', 'float16', 'float64'\], got 'float8'",
    "trainer.precision=64-true": r"trainer\.precision=64-true is not supported \(its plugin converts every batch, and a batch "
                                 r"here holds question records\); use model\.dtype=float64 with trainer\.precision=32-true$",
    "trainer.precision=bf16-true": r"trainer\.precision=bf16-true is not supported .*; use model\.dtype=bfloat16 with "
                                   r"trainer\.precision=32-true$",
    "trainer.precision=16-true": r"trainer\.precision=16-true is not supported .*; use model\.dtype=float16 with",
    "trainer.precision=transformer-engine": r"trainer\.precision=transformer-engine is not supported .*; use "
                                           r"trainer\.precision=bf16-mixed$",
    "model.dtype=float64 trainer.precision=bf16-mixed": r"model\.dtype=float64 computes in float64 only with "
                                                        r"trainer\.precision=32-true .*got trainer\.precision=bf16-mixed",
    "model.num_heads=3": r"model\.hidden_size must be a multiple of model\.num_heads \(3\), got 64",
    "model.vocab_size=10": r"model\.vocab_size must be an integer >= 300, got 10",
    "model.attn_implementation=flash9": r"model\.attn_implementation must be one of",
    "model.lora.enabled=true model.lora.r=0": r"model\.lora\.r must be an integer >= 1, got 0",
    "model.init_path=/nonexistent/dir": r"model\.init_path='/nonexistent/dir' does not exist",
    "model=hf": r"model\.name_or_path must be a Hugging Face id or local directory, got None",
    "rollout.temperature=-1": r"rollout\.temperature must be a finite number >= 0",
    "rollout.max_tool_turns=0": r"rollout\.max_tool_turns must be an integer >= 1, got 0$",
    "warmstart.steps=-1 model.warm_start=true": r"warmstart\.steps must be",
    "warmstart.lr=nan": r"warmstart\.lr must be a finite number > 0, got nan",
    "warmstart.lr=-1": r"warmstart\.lr must be a finite number > 0, got -1",
    "warmstart.obs_loss_weight=-5": r"warmstart\.obs_loss_weight must be a finite number >= 0, got -5",
    "warmstart.search_topn=0": r"warmstart\.search_topn must be an integer >= 1, got 0",
    "warmstart.rebuild=maybe": r"warmstart\.rebuild must be true or false, got 'maybe'",
    "logger=wandb logger.mode=sometimes": r"logger\.mode \(or WANDB_MODE\) must be one of",
    "ckpt_path=/nonexistent/last.ckpt": r"ckpt_path='/nonexistent/last\.ckpt' is not a file",
    "credit=trace credit.reference_path=/nonexistent/ref": r"credit\.reference_path='/nonexistent/ref' does not exist; "
                                                          r"give a save_pretrained directory \(with its config\.json\)",
    f"credit=trace credit.reference_path={ROOT / 'tests'}": r"credit\.reference_path='.*tests' is a folder without "
                                                            r"config\.json",
    f"credit=trace credit.reference_path={ROOT / 'pyproject.toml'}": r"credit\.reference_path='.*pyproject\.toml' has "
                                                                    r"the extension '\.toml'",
    f"credit=trace credit.kl_coef=0.1 model.reference.path={ROOT / 'tests'}": r"model\.reference\.path='.*tests' is a "
                                                                              r"folder without config\.json",
    # issue 44, item 8: work no machine can hold, refused before it starts
    "rollout.group_size=100000000": r"rollout\.group_size=100000000 x data\.prompts_per_step=2 needs up to [\d.]+ [TP]iB "
                                    r"for its rollouts \(200000000 decoded together x 176 tokens",
    "credit=prover credit.num_continuations=100000000": r"credit\.num_continuations=100000000 \(x 2 states\) needs up to",
    "credit=prover judge=openai judge.model=m judge.base_url=http://x judge.max_reply_bytes=0":
        r"judge\.max_reply_bytes must be an integer >= 1, got 0",
    "train.skip_zero_advantage=maybe": r"train\.skip_zero_advantage must be true or false, got 'maybe'",
    # inf passes a lower bound and NaN fails no comparison: both were accepted, and failed after the model loaded
    "credit=turn-critic credit.critic_lr=inf": r"credit\.critic_lr must be a number > 0, got inf$",
    "credit=gigpo credit.omega=inf": r"credit\.omega must be a number >= 0, got inf$",
    "credit=prover credit.success_threshold=nan": r"credit\.success_threshold must be a number .*got nan$",
    "train.lr=inf": r"train\.lr must be null or a number > 0, got inf$",
    "credit=turn-critic credit.critic_epochs=1000000000": r"credit\.critic_epochs must be an integer in \[1, 1000\], got",
    "rollout.temperature=nan": r"rollout\.temperature must be a finite number >= 0 \(0: greedy\), got nan$",
    "rollout.temperature=inf": r"rollout\.temperature must be a finite number >= 0 \(0: greedy\), got inf$",
    "rollout.temperature=hot": r"rollout\.temperature must be a finite number >= 0 \(0: greedy\), got 'hot'$",
    "rollout.max_context_tokens=true": r"rollout\.max_context_tokens must be an integer >= 1, got True$",
    "rollout.max_context_tokens=2.7": r"rollout\.max_context_tokens must be an integer >= 1, got 2\.7$",
    # rows the memory check did not count: extra rollouts a group, k test samples a question
    "credit.extra_rollouts=1000000": r"rollout\.group_size=\d+ \(\+ 1000000 extra a group\) x data\.prompts_per_step=\d+ "
                                     r"needs up to .* for its rollouts",
    "data.test_samples_per_question=100000": r"data\.\w+=\d+ .*x data\.test_samples_per_question=100000 \(a test call\) "
                                             r"needs up to .* for its rollouts",
    "credit=budget-grpo credit.match_metrics=/nonexistent/metrics.csv":
        r"credit\.match_metrics '/nonexistent/metrics\.csv' is not a file; give the metrics\.csv of a ProVer run$",
    "credit=gspo credit.ratio_level=token": r"credit=gspo is GRPO with the sequence-level ratio; credit\.ratio_level=token ",
}


@pytest.fixture
def no_judge_env(monkeypatch):
    for name in ("AGENTCREDIT_JUDGE_BASE_URL", "AGENTCREDIT_JUDGE_MODEL", "AGENTCREDIT_JUDGE_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("overrides", BAD)
def test_bad_value_is_one_line_naming_the_key_before_anything_loads(tmp_path, monkeypatch, no_judge_env, overrides):
    from agentcredit.run.train import run

    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(ConfigError) as err:
        run(tiny_config(tmp_path, *overrides.split()))
    message = str(err.value)
    assert "\n" not in message
    assert __import__("re").match(BAD[overrides], message), message


@pytest.mark.parametrize("overrides", list(BAD)[:9])
def test_the_issues_bad_values_exit_2_with_one_line_on_the_command_line(tmp_path, monkeypatch, capsys, no_judge_env,
                                                                          overrides):
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
        hydra_cli(*overrides.split(), "trainer.max_steps=2" if "max_steps" not in overrides else "seed=0",
                  f"hydra.run.dir={tmp_path}/run")
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error: "), lines
    assert __import__("re").match(BAD[overrides], lines[0][len("config error: "):]), lines[0]
    assert not (tmp_path / "run").exists()  # the refused command's folder goes, its Hydra record with it


# rollout.engine=vllm: vLLM checks these only when the engine is built, at the first rollout (issue 30, item 4).
VLLM_BAD = {
    "rollout.vllm.max_num_seqs=0": r"rollout\.vllm\.max_num_seqs must be an integer >= 1, got 0",
    "rollout.vllm.max_num_seqs=abc": r"rollout\.vllm\.max_num_seqs must be an integer >= 1, got 'abc'",
    "rollout.vllm.tensor_parallel_size=4096": r"rollout\.vllm\.tensor_parallel_size must be at most the \d+ (CPU core|CUDA device)",
    "rollout.vllm.tensor_parallel_size=0": r"rollout\.vllm\.tensor_parallel_size must be an integer >= 1, got 0",
    "rollout.vllm.dtype=float99": r"rollout\.vllm\.dtype must be null \(the policy's\) or one of \['auto', .*\], got 'float99'",
    "+rollout.vllm.extra.foo=1": r"rollout\.vllm\.extra\.foo is not an argument of vllm\.LLM",
    "+rollout.vllm.extra.seed=3": r"rollout\.vllm\.extra\.seed is set by the engine itself",
    "+rollout.vllm.extra.max_num_seqs=3": r"rollout\.vllm\.extra\.max_num_seqs is set by the engine itself; set rollout\.vllm\.max_num_seqs",
    "+rollout.vllm.bogus=1": r"rollout\.vllm\.bogus is not a setting; known: multiprocess, ",
    "rollout.vllm.kv_cache_gib=abc": r"rollout\.vllm\.kv_cache_gib must be null or a finite number > 0, got 'abc'",
    "rollout.vllm.kv_cache_gib=inf": r"rollout\.vllm\.kv_cache_gib must be null or a finite number > 0, got inf",
    "rollout.vllm.kv_cache_gib=-1e308": r"rollout\.vllm\.kv_cache_gib must be null or a finite number > 0, got -1e\+308",
    "rollout.vllm.kv_cache_gib=1e30": r"rollout\.vllm\.kv_cache_gib=1e\+30 \([\d.]+ PiB\) is more than the [\d.]+ [GMT]iB of "
                                      r"(available RAM|free RAM|memory on CUDA device 0 .*); set rollout\.vllm\.kv_cache_gib "
                                      r"to at most [\d.]+$",
    "rollout.vllm.enforce_eager=maybe": r"rollout\.vllm\.enforce_eager must be true or false, got 'maybe'",
    "model.dtype=float64": r"rollout\.engine=vllm has no float64 engine: with model\.dtype=float64 set rollout\.vllm\.dtype=float32, "
                           r"or use rollout\.engine=hf$",
}


@pytest.mark.skipif(__import__("importlib").util.find_spec("vllm") is None, reason="rollout.engine=vllm needs vLLM")
@pytest.mark.parametrize("override", VLLM_BAD)
def test_bad_vllm_setting_is_one_line_before_anything_loads(tmp_path, monkeypatch, override):
    from agentcredit.run.train import run

    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(ConfigError) as err:
        run(tiny_config(tmp_path, "rollout.engine=vllm", override))
    assert "\n" not in str(err.value) and __import__("re").match(VLLM_BAD[override], str(err.value)), str(err.value)


def test_tensor_parallel_size_is_bounded_by_the_machine(monkeypatch):
    from agentcredit.agent.engines import vllm_settings

    monkeypatch.setattr(vllm_settings, "available_devices", lambda: (2, "CPU core(s)"))
    with pytest.raises(ValueError, match=r"^rollout\.vllm\.tensor_parallel_size must be at most the 2 CPU core\(s\) "
                                         r"of this machine, got 4$"):
        vllm_settings.vllm_settings({"tensor_parallel_size": 4})
    assert vllm_settings.vllm_settings({"tensor_parallel_size": 2}).tensor_parallel_size == 2


def test_at_least_28_bad_values_are_tried():
    assert len(BAD) >= 28


@pytest.mark.parametrize("model_type, refused", [("gpt2", True), ("llama", False)])
def test_fsdp_with_a_model_without_decoder_layers_is_one_line_before_weights_load(tmp_path, monkeypatch, model_type,
                                                                                    refused):
    import json

    from agentcredit.checks.config_checks import ValueProblem, check_fsdp_model
    from agentcredit.run.train import run

    model_dir = tmp_path / model_type
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"model_type": model_type}))  # a config, no weights
    fsdp = {"strategy": {"name": "fsdp"}}
    model = {"kind": "hf", "name_or_path": str(model_dir)}
    if not refused:
        check_fsdp_model(fsdp, model)  # Llama: one FSDP unit per LlamaDecoderLayer
        return
    with pytest.raises(ValueProblem, match=r"model_type gpt2\) has no \*DecoderLayer modules; use trainer=ddp"):
        check_fsdp_model(fsdp, model)
    check_fsdp_model({"strategy": "ddp"}, model)  # ddp needs no decoder layers
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(ConfigError, match=r"^trainer=fsdp shards one unit per decoder layer, and model\.name_or_path="):
        run(tiny_config(tmp_path, "trainer=fsdp", "model=hf", f"model.name_or_path={model_dir}"))


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a CUDA device")
@pytest.mark.parametrize("override", ["trainer=gpu", "trainer.accelerator=cuda"])
def test_a_gpu_run_on_a_machine_without_one_is_one_line_before_anything_loads(tmp_path, monkeypatch, override):
    from agentcredit.run.train import run

    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(ConfigError, match=r"^trainer\.accelerator=(gpu|cuda) needs a CUDA (or Apple MPS )?device, and this "
                                          r"machine has none; use trainer\.accelerator=cpu \(or trainer=cpu\)$"):
        run(tiny_config(tmp_path, override))


def _metrics_csv(path, rows: str):
    path.write_text("step,credit/extra_tokens,credit/group_tokens\n" + rows)
    return path


@pytest.mark.parametrize("rows, message", [
    ("0,-1000,200\n1,-1000,200\n", r"credit\.match_metrics='.*' gives -\d+ extra rollouts a group: its "
                                   r"credit/extra_tokens are below zero"),
    ("0,10,0\n1,10,0\n", r"credit\.match_metrics: the ProVer run's rollouts generated no policy tokens"),
    ("0,1e12,100\n", r"rollout\.group_size=\d+ \(\+ \d+ extra a group\) .* needs up to"),
])
def test_a_prover_runs_metrics_that_match_no_budget_are_one_line_before_anything_loads(tmp_path, monkeypatch, rows,
                                                                                        message):
    """budget-matched GRPO read its ProVer run's metrics.csv only when the module was built, after the model."""
    from agentcredit.run.train import run

    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    csv = _metrics_csv(tmp_path / "metrics.csv", rows)
    with pytest.raises(ConfigError) as err:
        run(tiny_config(tmp_path, "credit=budget-grpo", f"credit.match_metrics={csv}"))
    assert "\n" not in str(err.value) and __import__("re").match(message, str(err.value)), str(err.value)


def test_a_prover_run_that_matches_passes(tmp_path):
    from agentcredit.checks.validation import prepare_config

    csv = _metrics_csv(tmp_path / "metrics.csv", "0,80,400\n1,120,400\n")
    cfg = prepare_config(tiny_config(tmp_path, "credit=budget-grpo", f"credit.match_metrics={csv}"))
    assert cfg.credit.match_metrics == str(csv)


def test_a_context_no_prompt_fits_is_one_line_before_a_base_policy_is_built(tmp_path, monkeypatch):
    """The check at each rollout came after the base policy's build, minutes on a first run."""
    from agentcredit.run.compose import build_components

    monkeypatch.setattr("agentcredit.testbed.base_policy.ensure_base_policy",
                        lambda *a, **k: pytest.fail("the base policy was built"))
    cfg = tiny_config(tmp_path, "rollout.max_context_tokens=10")
    with pytest.raises(ConfigError, match=r"^rollout\.max_context_tokens=10 leaves no room for a first turn: the first "
                                          r"\d+ training questions' prompts take \d+ to \d+ tokens with the assistant "
                                          r"header; raise it above that plus rollout\.max_turn_tokens$"):
        build_components(cfg)
