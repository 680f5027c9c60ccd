// Copyright 2026 The HuggingFace Team. All rights reserved.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// torchao's AdamW update on the CPU as two registered ops, one call per param group:
//   adam_8bit_: 8-bit moments (torchao's OptimState8bit: uint8 codes, an fp32 scale per block, the dynamic map),
//               quantized with a 65536-entry table instead of torchao's binary search (see torchao_cpu_adam.py);
//   adam_:      unquantized moments in the weight's dtype (torchao keeps tensors under 4096 values so).
// Both do the fp32 arithmetic of torchao's compiled `single_param_adam` in its order (build with
// -ffp-contract=off), so weights, codes and scales equal it bit for bit; `seed` rounds bf16 weights stochastically
// with a counter hash of the element's index in the call (see fp32_to_bf16_sr_hashed).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

// The op namespace: this package's own, so that a later torchao op of the same name cannot collide. Proposed to torchao,
// the file builds with -DTORCHAO_CPU_ADAM_NAMESPACE=torchao (or this default changes) and nothing else.
#ifndef TORCHAO_CPU_ADAM_NAMESPACE
#define TORCHAO_CPU_ADAM_NAMESPACE transformers_torchao
#endif

namespace {

inline float as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t as_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float load(const uint16_t* p, int64_t i) { return as_float(uint32_t(p[i]) << 16); }
inline float load(const float* p, int64_t i) { return p[i]; }

// The update's fp32 scalars, rounded as the compiled update rounds them.
struct Scalars {
  float lr, lr_wd, wd, bc1, sqrt_bc2, eps;
  // torch's lerp(start, end, w): start + (end - start) * w for |w| < 0.5, else end + (end - start) * -(1 - w)
  float c1, c2;
  bool from_end1, from_end2, is_adamw, stochastic_round;
  uint32_t seed_key;
};

inline void lerp_coefficient(double weight, float* coefficient, bool* from_end) {
  *from_end = weight >= 0.5 || weight <= -0.5;
  *coefficient = float(*from_end ? -(1.0 - weight) : weight);
}

// _random_16bit's hash of the seed, XORed with each element's index
inline uint32_t seed_key(int64_t seed) {
  uint32_t key = uint32_t(seed);
  key = (key ^ (key >> 16)) * 0x7FEB352Du;
  key = (key ^ (key >> 16)) * 0x46CA68B5u;
  return key ^ (key >> 16);
}

// The schema's scalars (fp32 values, given as doubles).
struct Hyperparams {
  double lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2_sqrt;
  bool is_adamw;
};

Scalars make_scalars(const Hyperparams& h, std::optional<int64_t> seed) {
  Scalars k{};
  k.lr = float(h.lr);
  k.lr_wd = h.is_adamw ? k.lr * float(h.weight_decay) : 0.0f;
  k.wd = h.is_adamw ? 0.0f : float(h.weight_decay);
  k.bc1 = float(h.bias_correction1);
  k.sqrt_bc2 = float(h.bias_correction2_sqrt);
  k.eps = float(h.eps);
  lerp_coefficient(1.0 - h.beta1, &k.c1, &k.from_end1);
  lerp_coefficient(1.0 - h.beta2, &k.c2, &k.from_end2);
  k.is_adamw = h.is_adamw;
  k.stochastic_round = seed.has_value();
  k.seed_key = seed ? seed_key(*seed) : 0;
  return k;
}

// One tensor's 8-bit state: its data pointers and where its blocks and values start in the call.
template <typename P>
struct Quantized {
  P* p;
  const P* g;
  uint8_t *c1, *c2;
  float *s1, *s2;
  int64_t first_block, first_value;
};

struct Maps {
  const float *q1, *q2;
  const int32_t *l1, *l2;
};

// torch's lerp(start, end, w) as the compiled update computes it: `coefficient` w with FromEnd false, else -(1 - w)
template <bool FromEnd>
inline float lerp(float start, float end, float coefficient) {
  return (FromEnd ? end : start) + (end - start) * coefficient;
}

// What dequantises a block's moments, and the update's scalars.
struct BlockArgs {
  const float *q1, *q2;
  float scale1, scale2;
  Scalars k;
};

// weight decay, dequantisation and both moments' lerp of one block into `buffer` (m, v, then the decayed weight);
// the block's largest |m| and |v| as bit patterns. The lerp formulas are template arguments: a select in the loop
// stops GCC from vectorising it.
template <typename P, bool FromEnd1, bool FromEnd2>
void moments(const P* __restrict p, const P* __restrict g, const uint8_t* __restrict c1, const uint8_t* __restrict c2,
             float* __restrict buffer, int64_t n, const BlockArgs& args, uint32_t* max_bits) {
  const BlockArgs a = args;  // a local copy: the stores below cannot alias it
  const Scalars& k = a.k;
  const float* __restrict q1 = a.q1;
  const float* __restrict q2 = a.q2;
  const float scale1 = a.scale1, scale2 = a.scale2;
  float* __restrict m = buffer;
  float* __restrict v = buffer + n;
  float* __restrict w = buffer + 2 * n;
  uint32_t max1 = 0, max2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    float pf = load(p, i), gf = load(g, i);
    pf = k.is_adamw ? pf - k.lr_wd * pf : pf;
    gf = k.is_adamw ? gf : gf + k.wd * pf;
    float mi = lerp<FromEnd1>(q1[c1[i]] * scale1, gf, k.c1), vi = lerp<FromEnd2>(q2[c2[i]] * scale2, gf * gf, k.c2);
    m[i] = mi; v[i] = vi; w[i] = pf;
    uint32_t a1 = as_bits(mi) & 0x7FFFFFFFu, a2 = as_bits(vi) & 0x7FFFFFFFu;
    max1 = a1 > max1 ? a1 : max1;
    max2 = a2 > max2 ? a2 : max2;
  }
  max_bits[0] = max1; max_bits[1] = max2;
}

// amax(|x|).clip(1e-12) from the largest bit pattern of |x| (NaN's patterns lie above inf's, so NaN propagates)
inline float block_scale(uint32_t max_bits) {
  float amax = as_float(max_bits);
  return amax != amax ? amax : (amax > 1e-12f ? amax : 1e-12f);
}

// quantize_8bit_with_lut(x / scale, lut): one lookup and one comparison
void quantize(const float* __restrict x, float scale, const int32_t* __restrict lut, uint8_t* __restrict codes,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float y = x[i] / scale;
    uint32_t key = as_bits(y) >> 16, entry = uint32_t(lut[key]);
    float step = as_float((key << 16) | (entry & 0xFFFFu));
    codes[i] = uint8_t(y >= step ? entry >> 24 : (entry >> 16) & 0xFFu);
  }
}

inline float adam(float w, float m, float v, const Scalars& k) {
  return w - k.lr * (m / k.bc1) / (std::sqrt(v) / k.sqrt_bc2 + k.eps);
}

// c10::BFloat16's rounding (nearest even, NaN to 0x7FC0), or fp32_to_bf16_sr_hashed's stochastic rounding
void store_rounded(uint16_t* __restrict p, const float* __restrict values, int64_t offset, int64_t n,
                   const Scalars& k) {
  if (k.stochastic_round) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t x = uint32_t(offset + i) ^ k.seed_key;
      x = (x ^ (x >> 16)) * 0x7FEB352Du;
      x = (x ^ (x >> 15)) * 0x46CA68B5u;
      uint32_t bits = as_bits(values[i]), truncated = bits & 0xFFFF0000u;
      uint32_t rounded = ((x ^ (x >> 16)) & 0xFFFFu) < (bits & 0xFFFFu) ? truncated + 0x10000u : truncated;
      p[i] = (rounded & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t(0x7FC0) : uint16_t(rounded >> 16);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float f = values[i];
      uint32_t u = as_bits(f);
      uint16_t rounded = uint16_t((u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16);
      p[i] = f != f ? uint16_t(0x7FC0) : rounded;
    }
  }
}

// the Adam step from the moments into `p` (fp32), or into `w` and then rounded to bf16
void store(float* __restrict p, const float* __restrict buffer, int64_t, int64_t n, const Scalars& k) {
  const float *m = buffer, *v = m + n, *w = v + n;
  for (int64_t i = 0; i < n; ++i) p[i] = adam(w[i], m[i], v[i], k);
}
void store(uint16_t* __restrict p, float* __restrict buffer, int64_t offset, int64_t n, const Scalars& k) {
  const float *m = buffer, *v = m + n;
  float* w = buffer + 2 * n;
  for (int64_t i = 0; i < n; ++i) w[i] = adam(w[i], m[i], v[i], k);
  store_rounded(p, w, offset, n, k);
}


template <typename P>
void update_block(const Quantized<P>& t, int64_t b, int64_t block, const Maps& maps, float* buffer,
                  const Scalars& k) {
  const int64_t o = b * block;
  using Moments = void (*)(const P*, const P*, const uint8_t*, const uint8_t*, float*, int64_t, const BlockArgs&,
                           uint32_t*);
  static constexpr Moments pick[2][2] = {{&moments<P, false, false>, &moments<P, false, true>},
                                         {&moments<P, true, false>, &moments<P, true, true>}};
  uint32_t max_bits[2];
  pick[k.from_end1][k.from_end2](t.p + o, t.g + o, t.c1 + o, t.c2 + o, buffer, block,
                                 {maps.q1, maps.q2, t.s1[b], t.s2[b], k}, max_bits);
  t.s1[b] = block_scale(max_bits[0]);
  t.s2[b] = block_scale(max_bits[1]);
  quantize(buffer, t.s1[b], maps.l1, t.c1 + o, block);
  quantize(buffer + block, t.s2[b], maps.l2, t.c2 + o, block);
  store(t.p + o, buffer, t.first_value + o, block, k);
}

// every block of every tensor, split over torch's intra-op threads (a block's result does not depend on the split)
template <typename P>
void update_all(const std::vector<Quantized<P>>& tensors, int64_t num_blocks, int64_t block, const Maps& maps,
                const Scalars& k) {
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / block);
  at::parallel_for(0, num_blocks, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(3 * block);
    auto after = [](int64_t b, const Quantized<P>& t) { return b < t.first_block; };
    auto t = std::upper_bound(tensors.begin(), tensors.end(), begin, after) - 1;
    for (int64_t b = begin; b < end; ++b) {
      while (t + 1 != tensors.end() && b >= (t + 1)->first_block) ++t;
      update_block(*t, b - t->first_block, block, maps, buffer.data(), k);
    }
  });
}

void check_tensor(const at::Tensor& t, at::ScalarType dtype, int64_t numel, const char* name, size_t i) {
  TORCH_CHECK(t.device().is_cpu(), name, "[", i, "] must be a CPU tensor, got ", t.device());
  TORCH_CHECK(t.scalar_type() == dtype, name, "[", i, "] must be ", dtype, ", got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), name, "[", i, "] must be contiguous");
  TORCH_CHECK(t.numel() == numel, name, "[", i, "] must have ", numel, " elements, got ", t.numel());
}

void check_map(const at::Tensor& t, at::ScalarType dtype, int64_t numel, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == dtype && t.is_contiguous() && t.numel() == numel, name,
              " must be a contiguous CPU ", dtype, " tensor of ", numel, " elements, got ", t.scalar_type(), " ",
              t.sizes(), " on ", t.device());
}

void check_lists(at::TensorList params, at::TensorList grads, size_t count, const char* name) {
  TORCH_CHECK(count == params.size(), name, " must have one tensor per param (", params.size(), "), got ", count);
  TORCH_CHECK(grads.size() == params.size(), "grads must have one tensor per param (", params.size(), "), got ",
              grads.size());
  TORCH_CHECK(params.empty() || params[0].scalar_type() == at::kFloat || params[0].scalar_type() == at::kBFloat16,
              "params must be float32 or bfloat16, got ", params.empty() ? at::kFloat : params[0].scalar_type());
}

void check_seed(const std::optional<int64_t>& seed, at::TensorList params) {
  TORCH_CHECK(!seed || params.empty() || params[0].scalar_type() == at::kBFloat16,
              "seed (stochastic rounding) needs bfloat16 params, got ", params[0].scalar_type());
  TORCH_CHECK(!seed || (*seed >= 0 && *seed < (int64_t(1) << 32)), "seed must be in [0, 2^32), got ", *seed);
}

template <typename P>
std::vector<Quantized<P>> quantized_tensors(at::TensorList params, at::TensorList grads, at::TensorList codes1,
                                            at::TensorList scales1, at::TensorList codes2, at::TensorList scales2,
                                            int64_t block, int64_t* num_blocks) {
  const auto dtype = params[0].scalar_type();
  std::vector<Quantized<P>> tensors;
  int64_t blocks = 0, values = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].numel();
    TORCH_CHECK(n % block == 0, "params[", i, "] has ", n, " elements, not a multiple of block_size ", block);
    check_tensor(params[i], dtype, n, "params", i);
    check_tensor(grads[i], dtype, n, "grads", i);
    check_tensor(codes1[i], at::kByte, n, "exp_avg_codes", i);
    check_tensor(codes2[i], at::kByte, n, "exp_avg_sq_codes", i);
    check_tensor(scales1[i], at::kFloat, n / block, "exp_avg_scales", i);
    check_tensor(scales2[i], at::kFloat, n / block, "exp_avg_sq_scales", i);
    tensors.push_back({static_cast<P*>(params[i].data_ptr()), static_cast<const P*>(grads[i].data_ptr()),
                       codes1[i].data_ptr<uint8_t>(), codes2[i].data_ptr<uint8_t>(), scales1[i].data_ptr<float>(),
                       scales2[i].data_ptr<float>(), blocks, values});
    blocks += n / block;
    values += n;
  }
  *num_blocks = blocks;
  return tensors;
}

// The schema's arguments (as torch's _fused_adamw_ takes its own), then one call for the whole list.
void adam_8bit_cpu(at::TensorList params, at::TensorList grads, at::TensorList exp_avg_codes,
                   at::TensorList exp_avg_scales, at::TensorList exp_avg_sq_codes, at::TensorList exp_avg_sq_scales,
                   at::TensorList qmaps, at::TensorList luts, int64_t block_size, double lr, double beta1,
                   double beta2, double weight_decay, double eps, bool is_adamw, double bias_correction1,
                   double bias_correction2_sqrt, std::optional<int64_t> seed) {
  check_lists(params, grads, exp_avg_codes.size(), "exp_avg_codes");
  check_lists(params, grads, exp_avg_scales.size(), "exp_avg_scales");
  check_lists(params, grads, exp_avg_sq_codes.size(), "exp_avg_sq_codes");
  check_lists(params, grads, exp_avg_sq_scales.size(), "exp_avg_sq_scales");
  check_seed(seed, params);
  TORCH_CHECK(block_size > 0, "block_size must be positive, got ", block_size);
  TORCH_CHECK(qmaps.size() == 2 && luts.size() == 2, "qmaps and luts must hold exp_avg's then exp_avg_sq's, got ",
              qmaps.size(), " and ", luts.size());
  check_map(qmaps[0], at::kFloat, 256, "qmaps[0]");
  check_map(qmaps[1], at::kFloat, 256, "qmaps[1]");
  check_map(luts[0], at::kInt, 65536, "luts[0]");
  check_map(luts[1], at::kInt, 65536, "luts[1]");
  if (params.empty()) return;
  const Maps maps{qmaps[0].data_ptr<float>(), qmaps[1].data_ptr<float>(), luts[0].data_ptr<int32_t>(),
                  luts[1].data_ptr<int32_t>()};
  const Scalars k = make_scalars(
      {lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2_sqrt, is_adamw}, seed);
  int64_t num_blocks = 0;
  if (params[0].scalar_type() == at::kBFloat16) {
    auto tensors = quantized_tensors<uint16_t>(params, grads, exp_avg_codes, exp_avg_scales, exp_avg_sq_codes,
                                               exp_avg_sq_scales, block_size, &num_blocks);
    update_all(tensors, num_blocks, block_size, maps, k);
  } else {
    auto tensors = quantized_tensors<float>(params, grads, exp_avg_codes, exp_avg_scales, exp_avg_sq_codes,
                                            exp_avg_sq_scales, block_size, &num_blocks);
    update_all(tensors, num_blocks, block_size, maps, k);
  }
}

// c10::BFloat16's rounding to nearest even (NaN to 0x7FC0)
inline uint16_t round_bf16(float f) {
  uint32_t u = as_bits(f);
  return f != f ? uint16_t(0x7FC0) : uint16_t((u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16);
}
inline void put(float* p, int64_t i, float f) { p[i] = f; }
inline void put(uint16_t* p, int64_t i, float f) { p[i] = round_bf16(f); }

// torchao's single_param_adam with unquantized moments (in the weight's dtype), in the compiled update's order
template <typename P>
void plain(P* __restrict p, const P* __restrict g, P* __restrict m, P* __restrict v, float* __restrict w, int64_t n,
           const Scalars& k) {
  for (int64_t i = 0; i < n; ++i) {
    float pf = load(p, i), gf = load(g, i), mi = load(m, i), vi = load(v, i), g2;
    pf = k.is_adamw ? pf - k.lr_wd * pf : pf;
    gf = k.is_adamw ? gf : gf + k.wd * pf;
    g2 = gf * gf;
    mi = k.from_end1 ? lerp<true>(mi, gf, k.c1) : lerp<false>(mi, gf, k.c1);
    vi = k.from_end2 ? lerp<true>(vi, g2, k.c2) : lerp<false>(vi, g2, k.c2);
    put(m, i, mi); put(v, i, vi);
    w[i] = adam(pf, mi, vi, k);
  }
}

template <typename P>
void plain_tensor(const at::Tensor& p, const at::Tensor& g, const at::Tensor& m, const at::Tensor& v, int64_t offset,
                  const Scalars& k) {
  const int64_t n = p.numel();
  std::vector<float> w(n);
  auto* pt = static_cast<P*>(p.data_ptr());
  plain(pt, static_cast<const P*>(g.data_ptr()), static_cast<P*>(m.data_ptr()), static_cast<P*>(v.data_ptr()),
        w.data(), n, k);
  if constexpr (std::is_same_v<P, float>) {
    std::memcpy(pt, w.data(), n * sizeof(float));
  } else {
    store_rounded(pt, w.data(), offset, n, k);
  }
}

// Small tensors: one thread, the element index of stochastic rounding running on across the list.
void adam_cpu(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
              double lr, double beta1, double beta2, double weight_decay, double eps, bool is_adamw,
              double bias_correction1, double bias_correction2_sqrt, std::optional<int64_t> seed) {
  check_lists(params, grads, exp_avgs.size(), "exp_avgs");
  check_lists(params, grads, exp_avg_sqs.size(), "exp_avg_sqs");
  check_seed(seed, params);
  if (params.empty()) return;
  const auto dtype = params[0].scalar_type();
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].numel();
    check_tensor(params[i], dtype, n, "params", i);
    check_tensor(grads[i], dtype, n, "grads", i);
    check_tensor(exp_avgs[i], dtype, n, "exp_avgs", i);
    check_tensor(exp_avg_sqs[i], dtype, n, "exp_avg_sqs", i);
  }
  const Scalars k = make_scalars(
      {lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2_sqrt, is_adamw}, seed);
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (dtype == at::kBFloat16)
      plain_tensor<uint16_t>(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], offset, k);
    else
      plain_tensor<float>(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], offset, k);
    offset += params[i].numel();
  }
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(TORCHAO_CPU_ADAM_NAMESPACE, m) {
  m.def(
      "adam_8bit_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avg_codes, Tensor(c!)[] exp_avg_scales, "
      "Tensor(d!)[] exp_avg_sq_codes, Tensor(e!)[] exp_avg_sq_scales, Tensor[] qmaps, Tensor[] luts, "
      "int block_size, *, float lr, float beta1, float beta2, float weight_decay, float eps, bool is_adamw, "
      "float bias_correction1, float bias_correction2_sqrt, int? seed=None) -> ()");
  m.def(
      "adam_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, *, float lr, "
      "float beta1, float beta2, float weight_decay, float eps, bool is_adamw, float bias_correction1, "
      "float bias_correction2_sqrt, int? seed=None) -> ()");
}

TORCH_LIBRARY_IMPL(TORCHAO_CPU_ADAM_NAMESPACE, CPU, m) {
  m.impl("adam_8bit_", &adam_8bit_cpu);
  m.impl("adam_", &adam_cpu);
}
