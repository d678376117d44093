"""Work no machine can hold is refused in one line before any model loads (issue 44, item 8):
credit_fidelity `group_size=100000000` ran for minutes towards 11 GB, and `rollout.vllm.kv_cache_gib=1e30`
passed the checks and failed after the model loaded with a 105-line traceback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcredit.agent import machine_memory
from agentcredit.models import memory_bounds
from agentcredit.common.configs import ConfigError, compose_config, plain
from tiny_runs import TINY, tiny_config

GIB = 2**30
TINY_MODEL = {"kind": "tiny", "num_layers": 3, "num_heads": 4, "num_kv_heads": 4, "hidden_size": 128, "dtype": "float32"}
# (2 tool turns + the final one) x 16 tokens + 128 observation tokens = 176 tokens a row at its limits
SHORT = {"max_tool_turns": 2, "max_turn_tokens": 16, "max_obs_tokens": 128, "max_context_tokens": 4096, "engine": "hf"}


@pytest.fixture
def machine(monkeypatch):
    """An idle 8 GiB machine without CUDA, whatever runs the tests."""
    monkeypatch.setattr(machine_memory, "total_memory", lambda: (8 * GIB, "RAM on this machine"))
    monkeypatch.setattr(machine_memory, "available_memory", lambda: (6 * GIB, "available RAM"))
    monkeypatch.setattr(machine_memory, "device_memory", lambda: None)


@pytest.fixture
def no_model(monkeypatch):
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))


def test_the_estimate_by_hand():
    assert memory_bounds.row_tokens(SHORT) == 176
    assert memory_bounds.row_tokens({**SHORT, "max_context_tokens": 100}) == 100  # the context limit cuts it
    # 2 (key, value) x 3 layers x 4 KV heads x 32 dims x 4 bytes = 3072 bytes of cache a token, + 80 of records
    assert memory_bounds.bytes_per_token(TINY_MODEL, SHORT)[0] == 3152
    assert memory_bounds.bytes_per_token({**TINY_MODEL, "dtype": "bfloat16"}, SHORT)[0] == 1616
    assert memory_bounds.bytes_per_token(TINY_MODEL, {**SHORT, "engine": "vllm"})[0] == 80  # vLLM: its own pool
    limit = (176 * 3152 * 1000, "RAM")
    assert memory_bounds.rows_problem("g", 1000, TINY_MODEL, SHORT, limit) is None
    assert memory_bounds.rows_problem("g", 1001, TINY_MODEL, SHORT, limit) == (
        "g needs up to 529.6 MiB for its rollouts (1001 decoded together x 176 tokens of turns and observations at "
        "their limits x 3152 bytes: 3072 bytes of KV cache + 80 of token records), more than the 529.1 MiB of RAM; "
        "lower it")


def test_a_training_group_no_machine_holds_is_one_line_before_anything_loads(tmp_path, machine, no_model):
    from agentcredit.run.train import run

    with pytest.raises(ConfigError) as err:
        run(tiny_config(tmp_path, "rollout.group_size=100000000"))
    assert str(err.value).startswith("rollout.group_size=100000000 x data.prompts_per_step=2 needs up to ")
    assert str(err.value).endswith("more than the 8.0 GiB of RAM on this machine; lower it") and "\n" not in str(err.value)


def test_on_a_gpu_the_device_memory_is_the_limit(machine, monkeypatch):
    monkeypatch.setattr(machine_memory, "device_memory", lambda: (80 * GIB, "memory on CUDA device 0 (H100)"))
    rollout = {**SHORT, "group_size": 1000}
    data = {"prompts_per_step": 64}  # 64,000 rows x 176 tokens x 3152 bytes = 33 GiB: more than 8 GiB of RAM
    assert memory_bounds.training_memory_problem(data, rollout, TINY_MODEL, {"accelerator": "gpu"}, {}) is None
    assert "8.0 GiB of RAM" in memory_bounds.training_memory_problem(data, rollout, TINY_MODEL, {"accelerator": "cpu"}, {})


def fidelity_cfg(*overrides: str):
    shrink = [o for o in TINY if o.startswith(("model.", "rollout.", "env.", "data."))]
    return compose_config([*shrink, "methods=[grpo]", *overrides], config_name="fidelity")


@pytest.mark.parametrize("override, start", [
    ("group_size=100000000", "group_size=100000000 needs up to "),
    ("mc=100000000", "mc=100000000 (with max_batch=512) needs up to "),
])
def test_a_fidelity_measurement_no_machine_holds_is_one_line_before_anything_loads(machine, no_model, override, start):
    from agentcredit.fidelity.run import fidelity_config

    with pytest.raises(ConfigError) as err:
        fidelity_config(fidelity_cfg(override), [override])
    assert str(err.value).startswith(start) and "\n" not in str(err.value), str(err.value)


def test_the_default_settings_fit_an_idle_8_gib_machine(machine):
    from agentcredit.fidelity.run import check_fidelity_settings

    for overrides in ([], ["model=smollm2_135m"], ["credit=prover"]):
        cfg = compose_config(list(overrides))
        assert memory_bounds.training_memory_problem(plain(cfg.data), plain(cfg.rollout), plain(cfg.model),
                                                     plain(cfg.trainer), plain(cfg.credit)) is None, overrides
    check_fidelity_settings(compose_config([], config_name="fidelity"))  # the defaults: 512 continuations together


@settings(max_examples=40, deadline=None)
@given(group=st.integers(1, 10**12), prompts=st.integers(1, 10**6), limit=st.integers(1, 2**60),
       turns=st.integers(1, 100), turn_tokens=st.integers(1, 4096), obs=st.integers(1, 10**6))
def test_refused_exactly_when_the_rows_exceed_the_limit(group, prompts, limit, turns, turn_tokens, obs):
    rollout = {**SHORT, "max_tool_turns": turns, "max_turn_tokens": turn_tokens, "max_obs_tokens": obs}
    problem = memory_bounds.rows_problem("g", group * prompts, TINY_MODEL, rollout, (limit, "RAM"))
    need = group * prompts * memory_bounds.row_tokens(rollout) * 3152
    assert (problem is None) == (need <= limit)
    assert problem is None or ("\n" not in problem and problem.startswith("g needs up to "))


def test_kv_cache_gib_against_the_machine(machine, monkeypatch):
    from agentcredit.agent.engines.vllm_settings import VLLMSettings, kv_cache_machine_problem

    assert kv_cache_machine_problem(VLLMSettings(kv_cache_gib=5.0)) is None
    assert kv_cache_machine_problem(VLLMSettings(kv_cache_gib=None)) is None  # sized by gpu_memory_utilization
    assert kv_cache_machine_problem(VLLMSettings(kv_cache_gib=7.0)) == (
        "rollout.vllm.kv_cache_gib=7 (7.0 GiB) is more than the 6.0 GiB of available RAM; set "
        "rollout.vllm.kv_cache_gib to at most 6")
    monkeypatch.setattr(machine_memory, "device_memory", lambda: (141 * GIB, "memory on CUDA device 0 (H200)"))
    assert kv_cache_machine_problem(VLLMSettings(kv_cache_gib=100.0)) is None  # on the device, not in RAM
    assert "of memory on CUDA device 0 (H200)" in kv_cache_machine_problem(VLLMSettings(kv_cache_gib=1e30))
    for bad in (float("inf"), float("nan"), -1e308):
        with pytest.raises(ValueError, match=r"^rollout\.vllm\.kv_cache_gib must be null or a finite number > 0"):
            VLLMSettings(kv_cache_gib=bad)
