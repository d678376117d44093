"""agent/decode_kernel.py: the C++ decode attention equals masked SDPA; a failed build leaves a reason."""

import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F

from agentcredit.agent import decode_kernel
from agentcredit.agent.decode_kernel import decode_attention, decode_kernel_available, reference_attention


@pytest.fixture(scope="module")
def built():
    reason = decode_kernel_available()
    if reason is not None and reason.startswith("no C++ compiler"):
        pytest.skip(reason)
    # A compiler is here, so the kernel is expected: a build or self-check failure fails the test.
    assert reason is None, f"decode kernel unavailable although a compiler exists: {reason}"


def _case(slots, heads, kv_heads, capacity, dim, lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(slots, kv_heads, capacity, dim, generator=generator)
    values = torch.randn(slots, kv_heads, capacity, dim, generator=generator)
    q = torch.randn(slots, heads, dim, generator=generator)
    return q, keys, values, torch.tensor(lengths)


def _per_slot_sdpa(q, keys, values, lengths, scale):
    """(S, H, D): one unmasked SDPA call per slot over exactly its keys."""
    group = q.shape[1] // keys.shape[1]
    return torch.stack([F.scaled_dot_product_attention(
        q[i, :, None], keys[i, :, :n].repeat_interleave(group, 0), values[i, :, :n].repeat_interleave(group, 0),
        scale=scale)[:, 0] for i, n in enumerate(lengths.tolist())])


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (3, 1)], ids=["mha", "gqa4", "gqa3"])
@pytest.mark.parametrize("dim", [32, 64, 12])
@pytest.mark.parametrize("threads", [1, 2])
def test_equals_masked_sdpa(built, heads, kv_heads, dim, threads):
    # Lengths of 1, of exactly one 64-key block, past a block, and a full slot; capacity beyond them.
    lengths = [1, 64, 150, 200, 7]
    q, keys, values, lengths = _case(5, heads, kv_heads, 200, dim, lengths)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = decode_attention(q, keys, values, lengths, dim ** -0.5)
    finally:
        torch.set_num_threads(before)
    assert out.shape == (5, heads, dim) and out.dtype == torch.float32
    assert (out - reference_attention(q, keys, values, lengths, dim ** -0.5)).abs().max() < 1e-5
    assert (out - _per_slot_sdpa(q, keys, values, lengths, dim ** -0.5)).abs().max() < 1e-5


def test_reads_nothing_past_each_length(built):
    q, keys, values, lengths = _case(3, 2, 2, 50, 32, [5, 1, 49])
    poisoned_keys, poisoned_values = keys.clone(), values.clone()
    for i, n in enumerate(lengths.tolist()):
        poisoned_keys[i, :, n:], poisoned_values[i, :, n:] = float("nan"), float("inf")
    out = decode_attention(q, poisoned_keys, poisoned_values, lengths, 0.2)
    assert torch.isfinite(out).all()
    assert torch.allclose(out, decode_attention(q, keys, values, lengths, 0.2))


def test_one_key_returns_its_value_and_hand_computed_two_keys(built):
    keys = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]])  # (1, 1, 2, 2)
    values = torch.tensor([[[[2.0, 4.0], [6.0, 8.0]]]])
    q = torch.tensor([[[math.log(3.0), 0.0]]])  # scores log 3 and 0: weights 3/4 and 1/4
    assert torch.allclose(decode_attention(q, keys, values, torch.tensor([1]), 1.0), torch.tensor([[[2.0, 4.0]]]))
    two = decode_attention(q, keys, values, torch.tensor([2]), 1.0)
    assert torch.allclose(two, torch.tensor([[[0.75 * 2 + 0.25 * 6, 0.75 * 4 + 0.25 * 8]]]), atol=1e-6)


def test_cache_views_and_a_long_row(built):
    # The sampler passes its buffers whole; a view of a run of slots has the same inner strides.
    q, keys, values, lengths = _case(6, 4, 2, 700, 64, [700, 3, 650, 1, 129, 64], seed=3)
    out = decode_attention(q[2:5], keys[2:5], values[2:5], lengths[2:5], 0.125)
    assert (out - reference_attention(q[2:5], keys[2:5], values[2:5], lengths[2:5], 0.125)).abs().max() < 1e-5


def test_refuses_lengths_past_the_capacity(built):
    q, keys, values, _ = _case(2, 2, 2, 10, 32, [1, 1])
    with pytest.raises(RuntimeError, match="outside 0..10"):
        decode_attention(q, keys, values, torch.tensor([3, 11]), 0.2)


def test_a_failed_build_gives_a_reason_and_leaves_the_module_usable(monkeypatch):
    def broken_build():
        raise RuntimeError("Error building extension 'agentcredit_decode_kernel'\nmore lines")

    monkeypatch.setenv(decode_kernel.OFF_VARIABLE, "1")
    monkeypatch.setattr(decode_kernel, "_compiler_missing", lambda: None)
    monkeypatch.setattr(decode_kernel, "_compile", broken_build)
    monkeypatch.setattr(decode_kernel, "_result", None)  # as in a fresh process; restored afterwards
    reason = decode_kernel_available()
    assert reason == "build failed: RuntimeError: Error building extension 'agentcredit_decode_kernel'"
    assert decode_kernel_available() == reason  # tried once per process
    with pytest.raises(RuntimeError, match="unavailable: build failed"):
        decode_attention(*_case(1, 1, 1, 4, 8, [2]), 1.0)


def test_no_compiler_and_the_off_switch_are_reasons(monkeypatch):
    monkeypatch.delenv(decode_kernel.OFF_VARIABLE, raising=False)
    monkeypatch.setattr(decode_kernel, "_result", None)
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    assert decode_kernel_available().startswith("no C++ compiler found ('no-such-compiler-here'")
    monkeypatch.setattr(decode_kernel, "_result", None)
    monkeypatch.setenv(decode_kernel.OFF_VARIABLE, "0")
    assert decode_kernel_available() == "turned off by AGENTCREDIT_DECODE_KERNEL=0"


def test_a_wrong_self_check_is_a_reason(monkeypatch):
    class Wrong:
        @staticmethod
        def decode_attention(q, keys, values, lengths, scale):
            return torch.zeros(q.shape)

    monkeypatch.delenv(decode_kernel.OFF_VARIABLE, raising=False)
    monkeypatch.setattr(decode_kernel, "_compiler_missing", lambda: None)
    monkeypatch.setattr(decode_kernel, "_compile", lambda: Wrong)
    monkeypatch.setattr(decode_kernel, "_result", None)
    assert decode_kernel_available().startswith("self-check failed: differs from SDPA by")


def test_ninja_beside_the_interpreter_is_put_on_path(monkeypatch, tmp_path):
    # `.venv/bin/python -m pytest` without activating the environment: the ninja package's binary sits
    # beside the interpreter, not on PATH, and torch calls `ninja` through PATH.
    bin_dir, empty = tmp_path / "venv_bin", tmp_path / "empty"
    bin_dir.mkdir()
    empty.mkdir()
    ninja = bin_dir / "ninja"
    ninja.write_text("#!/bin/sh\n")
    ninja.chmod(0o755)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(decode_kernel.sys, "executable", str(bin_dir / "python"))
    monkeypatch.setitem(sys.modules, "ninja", None)  # the package's BIN_DIR unknown: the interpreter's folder
    assert decode_kernel._put_ninja_on_path() is True
    assert os.environ["PATH"].split(os.pathsep)[0] == str(bin_dir)
    ninja.unlink()
    monkeypatch.setenv("PATH", str(empty))
    assert decode_kernel._put_ninja_on_path() is False


def test_each_python_environment_builds_its_own_kernel(monkeypatch):
    # torch's build file names the environment's include paths: two environments sharing one build folder would
    # each find the other's build out of date and rebuild it at every process start
    tag = decode_kernel._cpu_tag()
    assert decode_kernel._cpu_tag() == tag  # one environment: one name, built once
    monkeypatch.setattr(decode_kernel.sys, "prefix", "/elsewhere/.venv")
    assert decode_kernel._cpu_tag() != tag
