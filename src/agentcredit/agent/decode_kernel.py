"""A CPU decode-attention kernel that reads each slot's cached keys and values once (issue 42).

    from agentcredit.agent.decode_kernel import decode_attention, decode_kernel_available
    if decode_kernel_available() is None:
        out = decode_attention(q, keys, values, lengths, scale)  # (S, H, D)

A decode step attends one query per slot over that slot's cached keys: the call is bound by reading
the cache. F.scaled_dot_product_attention over a run of slots reads the whole padded run, makes
several passes (scores, softmax, weighted sum) and reads each key once per query head; this kernel
streams each (slot, kv head)'s keys and values once, up to that slot's own length, with an online
softmax (running max and sum, rescaled per block of 64 keys) and all the query heads that share the
kv head processed together. Head dims 32/64/96/128 use GCC/Clang 8-float vector extensions (AVX2 and FMA
on x86-64 CPUs that have them, NEON on ARM), others plain loops; its exp is a Cephes-style polynomial (about
1 ulp) so the exp loop vectorises without -ffast-math.

The kernel is compiled at first use with torch.utils.cpp_extension.load_inline (torch's extension
cache, so later processes only load it) and checked against scaled_dot_product_attention on a tiny
case; `decode_kernel_available()` says why not when either fails. AGENTCREDIT_DECODE_KERNEL=0 turns it
off. float32 CPU tensors only: any other dtype or device is the caller's fallback.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import sys
import threading
import time

import torch
import torch.nn.functional as F

from agentcredit.common.cpuinfo import cpu_flags, cpuinfo_value

log = logging.getLogger(__name__)

OFF_VARIABLE = "AGENTCREDIT_DECODE_KERNEL"
SELF_CHECK_TOLERANCE = 1e-4

CPP_SOURCE = r"""
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

constexpr int64_t kBlock = 64;  // keys per online-softmax step: their scores stay in L1
constexpr int kLanes = 8;       // partial sums kept apart so the loops vectorise without reassociation
// 8 floats: GCC/Clang vector extensions, one AVX register on x86-64, two NEON registers on ARM.
typedef float f8 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));

inline f8 load8(const float* p) { f8 v; std::memcpy(&v, p, sizeof v); return v; }  // any alignment
inline void store8(float* p, f8 v) { std::memcpy(p, &v, sizeof v); }
inline float sum8(f8 v) {
  const f4 half = f4{v[0], v[1], v[2], v[3]} + f4{v[4], v[5], v[6], v[7]};
  return (half[0] + half[2]) + (half[1] + half[3]);
}

// exp(x) for x <= 0 (Cephes expf: Cody-Waite reduction, degree-6 polynomial, about 1 ulp). Branch-free,
// so a loop of it vectorises; below -87 it returns about 1e-38 instead of 0, far under float32 error.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n; n in [-126, 0]
  float two_n;
  std::memcpy(&two_n, &bits, sizeof(float));
  return p * two_n;
}

inline float lane_max(const float* x, int64_t n) {
  float part[kLanes];
  for (int l = 0; l < kLanes; ++l) part[l] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] = x[j + l] > part[l] ? x[j + l] : part[l];
  float best = -std::numeric_limits<float>::infinity();
  for (; j < n; ++j) best = std::max(best, x[j]);
  for (int l = 0; l < kLanes; ++l) best = std::max(best, part[l]);
  return best;
}

inline float lane_sum(const float* x, int64_t n) {
  float part[kLanes] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] += x[j + l];
  float sum = 0.f;
  for (; j < n; ++j) sum += x[j];
  for (int l = 0; l < kLanes; ++l) sum += part[l];
  return sum;
}

// Head dim kD (a multiple of 8, in 8-float vectors) or, with kD = 0, any dim in plain loops.
template <int64_t kD>
inline float dot(const float* __restrict a, const float* __restrict b, int64_t dim) {
  if constexpr (kD > 0) {
    f8 s = load8(a) * load8(b);
    for (int64_t c = 8; c < kD; c += 8) s += load8(a + c) * load8(b + c);
    return sum8(s);
  } else {
    float sum = 0.f;
    for (int64_t d = 0; d < dim; ++d) sum += a[d] * b[d];
    return sum;
  }
}

template <int64_t kD>
inline void add_scaled(float* __restrict acc, float p, const float* __restrict value, int64_t dim) {
  if constexpr (kD > 0) {
    for (int64_t c = 0; c < kD; c += 8) store8(acc + c, load8(acc + c) + p * load8(value + c));
  } else {
    for (int64_t d = 0; d < dim; ++d) acc[d] += p * value[d];
  }
}

// One (slot, kv head): `group` query heads (q already scaled) over n keys/values `row_k`/`row_v` floats
// apart. work holds group*dim accumulators, group*kBlock scores and group running maxima and sums.
template <int64_t kD>
void attend(const float* __restrict q, const float* __restrict k, const float* __restrict v, int64_t row_k,
            int64_t row_v, int64_t n, int64_t group, int64_t d_runtime, float* __restrict out, float* __restrict work) {
  const int64_t dim = kD > 0 ? kD : d_runtime;
  float* __restrict acc = work;                         // (group, dim)
  float* __restrict score = acc + group * dim;          // (group, kBlock)
  float* __restrict run_max = score + group * kBlock;   // (group,)
  float* __restrict run_sum = run_max + group;          // (group,)
  std::fill(acc, acc + group * dim, 0.f);
  std::fill(run_max, run_max + group, -std::numeric_limits<float>::infinity());
  std::fill(run_sum, run_sum + group, 0.f);
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t b = std::min(kBlock, n - j0);
    for (int64_t h = 0; h < group; ++h)
      for (int64_t j = 0; j < b; ++j) score[h * kBlock + j] = dot<kD>(q + h * dim, k + (j0 + j) * row_k, dim);
    for (int64_t h = 0; h < group; ++h) {
      float* s = score + h * kBlock;
      const float new_max = std::max(run_max[h], lane_max(s, b));
      const float shrink = std::exp(run_max[h] - new_max);  // exp(-inf) = 0 on the first block
      for (int64_t j = 0; j < b; ++j) s[j] = exp_nonpositive(s[j] - new_max);
      run_sum[h] = run_sum[h] * shrink + lane_sum(s, b);
      run_max[h] = new_max;
      if (shrink != 1.f)
        for (int64_t d = 0; d < dim; ++d) acc[h * dim + d] *= shrink;
    }
    for (int64_t h = 0; h < group; ++h)
      for (int64_t j = 0; j < b; ++j) add_scaled<kD>(acc + h * dim, score[h * kBlock + j], v + (j0 + j) * row_v, dim);
  }
  for (int64_t h = 0; h < group; ++h) {
    const float inv = n > 0 ? 1.f / run_sum[h] : 0.f;  // no keys: zeros, not NaN
    for (int64_t d = 0; d < dim; ++d) out[h * dim + d] = acc[h * dim + d] * inv;
  }
}

}  // namespace

at::Tensor decode_attention(at::Tensor q, at::Tensor keys, at::Tensor values, at::Tensor lengths, double scale) {
  TORCH_CHECK(q.dim() == 3 && keys.dim() == 4, "q must be (S, H, D) and keys (S, H_kv, capacity, D)");
  TORCH_CHECK(values.sizes() == keys.sizes(), "values must have the keys' shape");
  for (const at::Tensor& t : {q, keys, values})
    TORCH_CHECK(t.scalar_type() == at::kFloat && t.device().is_cpu(), "float32 CPU tensors only");
  TORCH_CHECK(lengths.scalar_type() == at::kLong && lengths.device().is_cpu(), "lengths must be int64 on the CPU");
  const int64_t slots = q.size(0), heads = q.size(1), dim = q.size(2);
  const int64_t kv_heads = keys.size(1), capacity = keys.size(2);
  TORCH_CHECK(keys.size(0) == slots && keys.size(3) == dim, "keys must be (S, H_kv, capacity, D) for q (S, H, D)");
  TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0, "query heads must be a multiple of kv heads");
  TORCH_CHECK(lengths.numel() == slots, "lengths must hold one length per slot");
  q = q.contiguous();
  if (keys.stride(3) != 1) keys = keys.contiguous();
  if (values.stride(3) != 1) values = values.contiguous();
  lengths = lengths.contiguous();
  const int64_t* length = lengths.data_ptr<int64_t>();
  for (int64_t s = 0; s < slots; ++s)
    TORCH_CHECK(length[s] >= 0 && length[s] <= capacity, "length ", length[s], " of slot ", s,
                " is outside 0..", capacity);
  const int64_t group = heads / kv_heads;
  const float factor = static_cast<float>(scale);
  at::Tensor out = at::empty({slots, heads, dim}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = keys.data_ptr<float>();
  const float* vp = values.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t ks0 = keys.stride(0), ks1 = keys.stride(1), ks2 = keys.stride(2);
  const int64_t vs0 = values.stride(0), vs1 = values.stride(1), vs2 = values.stride(2);
  at::parallel_for(0, slots * kv_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> work(group * (dim + kBlock + 2)), scaled(group * dim);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t s = item / kv_heads, g = item % kv_heads;
      // Query heads g*group .. g*group+group-1 share kv head g (as SDPA's enable_gqa).
      const float* qg = qp + (s * heads + g * group) * dim;
      for (int64_t i = 0; i < group * dim; ++i) scaled[i] = qg[i] * factor;
      const float* k = kp + s * ks0 + g * ks1;
      const float* v = vp + s * vs0 + g * vs1;
      float* o = op + (s * heads + g * group) * dim;
      const float* qs = scaled.data();
      float* w = work.data();
      switch (dim) {  // the usual head dims unrolled in 8-float vectors; any other in plain loops
        case 32: attend<32>(qs, k, v, ks2, vs2, length[s], group, dim, o, w); break;
        case 64: attend<64>(qs, k, v, ks2, vs2, length[s], group, dim, o, w); break;
        case 96: attend<96>(qs, k, v, ks2, vs2, length[s], group, dim, o, w); break;
        case 128: attend<128>(qs, k, v, ks2, vs2, length[s], group, dim, o, w); break;
        default: attend<0>(qs, k, v, ks2, vs2, length[s], group, dim, o, w);
      }
    }
  });
  return out;
}
"""

_lock = threading.Lock()
_result: tuple[object | None, str | None] | None = None  # (compiled module, why not), once per process


def _compiler_missing() -> str | None:
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"no C++ compiler found ({compiler!r} is not on PATH; install g++ or set CXX)"
    if shutil.which("ninja") is None and not _put_ninja_on_path():
        return "ninja not found (pip install ninja): torch builds C++ extensions with it"
    return None


def _put_ninja_on_path() -> bool:
    """torch calls `ninja` through PATH. The ninja package (a dependency) installs it beside the
    interpreter, which is not on PATH when the environment's python runs without activating it
    (`.venv/bin/python -m pytest`): put that folder on this process's PATH. False when absent."""
    try:
        import ninja

        folders = [ninja.BIN_DIR, os.path.dirname(sys.executable)]
    except (ImportError, AttributeError):
        folders = [os.path.dirname(sys.executable)]
    for folder in folders:
        if shutil.which("ninja", path=folder):
            os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")
            return True
    return False


def _flags() -> list[str]:
    # -fno-trapping-math lets the exp loop's clamp become a vector max (the results are the same; only
    # floating-point exception flags may differ). On x86-64, AVX2 and FMA where the CPU has both, named
    # rather than -march=native: every such host (AVX-512 ones included) then builds the same code and
    # gets the same floats, which keeps the tiny testbed's closing line the same across hosts. ARM's
    # baseline already has NEON.
    flags = ["-O3", "-fno-trapping-math"]
    if platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= cpu_flags():
        flags += ["-mavx2", "-mfma"]
    return flags


def _cpu_tag() -> str:
    """A short hash of this CPU's features, the flags and the Python environment: a build for one CPU is never
    loaded on another through a shared cache folder, and two environments (a clone's own .venv beside another's)
    do not rebuild over each other's build (torch's build file names the environment's include paths, so each
    would find the other's out of date: about 25 s at every process start)."""
    identity = (platform.machine() + platform.processor() + (cpuinfo_value(("flags", "Features")) or "")
                + sys.prefix)
    return hashlib.sha1((identity + " ".join(_flags())).encode()).hexdigest()[:10]


def _compile():
    from torch.utils.cpp_extension import load_inline

    return load_inline(name=f"agentcredit_decode_kernel_{_cpu_tag()}", cpp_sources=CPP_SOURCE,
                       functions=["decode_attention"], extra_cflags=_flags(), verbose=False)


def reference_attention(q, keys, values, lengths: torch.Tensor, scale: float) -> torch.Tensor:
    """(S, H, D): SDPA over the whole capacity with each slot masked to its own length."""
    width = keys.shape[2]
    mask = (torch.arange(width)[None, :] < lengths[:, None])[:, None, None]  # (S, 1, 1, W)
    out = F.scaled_dot_product_attention(q[:, :, None], keys, values, attn_mask=mask, scale=scale,
                                         enable_gqa=q.shape[1] != keys.shape[1])
    return out[:, :, 0]


def _self_check(module) -> str | None:
    generator = torch.Generator().manual_seed(0)
    keys, values = torch.randn(3, 2, 70, 8, generator=generator), torch.randn(3, 2, 70, 8, generator=generator)
    q = torch.randn(3, 4, 8, generator=generator)  # 2 query heads per kv head
    lengths = torch.tensor([70, 1, 66])  # a full slot, one key, more than one block
    diff = float((module.decode_attention(q, keys, values, lengths, 0.35)
                  - reference_attention(q, keys, values, lengths, 0.35)).abs().max())
    return None if diff <= SELF_CHECK_TOLERANCE else f"self-check failed: differs from SDPA by {diff:.3g}"


def _load() -> tuple[object | None, str | None]:
    if os.environ.get(OFF_VARIABLE, "1").strip() == "0":
        return None, f"turned off by {OFF_VARIABLE}=0"
    reason = _compiler_missing()
    if reason is not None:
        return None, reason
    start = time.perf_counter()
    try:
        module = _compile()
    except Exception as error:  # a build error must leave the caller on its fallback, not crash it
        lines = [line for line in str(error).splitlines() if line.strip()]
        return None, f"build failed: {type(error).__name__}: {lines[0] if lines else ''}"
    log.info("decode-attention kernel built or loaded in %.1f s", time.perf_counter() - start)
    try:
        reason = _self_check(module)
    except Exception as error:
        reason = f"self-check failed: {type(error).__name__}: {error}"
    return (None, reason) if reason else (module, None)


def _loaded() -> tuple[object | None, str | None]:
    global _result
    with _lock:
        if _result is None:
            _result = _load()
        return _result


def decode_kernel_available() -> str | None:
    """None when the kernel is built and agrees with SDPA; else one line saying why not. Never raises."""
    try:
        return _loaded()[1]
    except Exception as error:
        return f"unavailable: {type(error).__name__}: {error}"


def decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """(S, H, D) float32: q (S, H, D) attends, per slot s, to keys/values (S, H_kv, capacity, D) columns
    0..lengths[s]-1 only (lengths (S,) int64); query head h reads kv head h // (H // H_kv), as SDPA's
    enable_gqa.
    Raises RuntimeError when the kernel is unavailable (check decode_kernel_available() first)."""
    module, reason = _loaded()
    if module is None:
        raise RuntimeError(f"decode-attention kernel unavailable: {reason}")
    return module.decode_attention(q, keys, values, lengths, float(scale))
