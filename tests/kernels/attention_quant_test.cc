// Paged attention over every KV dtype, for every kernel table: the reference kernel must equal
// attention over the same values decoded independently by the codecs (so the view addressing,
// head slices, inline scales, KIVI group rows and the residual window are right), and every SIMD
// table must match the reference. Shuffled block tables, partial blocks, GQA, head_dim 8..128,
// blocks spanning heads, unaligned buffers. TurboQuant rows (with and without the QJL key format)
// also with zero heads and outlier-heavy heads, since their SIMD kernel works in the rotated
// domain.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kvquant/kivi.h"
#include "kvquant/nuq.h"
#include "kvquant/nuq_calibration.h"
#include "kvquant/row_codec.h"
#include "kvquant/turbo.h"

namespace kvforge::kernels {
namespace {

using kvquant::KvDtype;

constexpr KvDtype kRowDtypes[] = {KvDtype::kF32,     KvDtype::kF16,     KvDtype::kBf16,
                                  KvDtype::kFp8E4M3, KvDtype::kFp8E5M2, KvDtype::kInt8,
                                  KvDtype::kQ8_0,    KvDtype::kQ4_0,    KvDtype::kKivi2,
                                  KvDtype::kKivi4,   KvDtype::kTurbo3,  KvDtype::kTurbo4};

struct Shape {
  int32_t n_head, n_kv, hd;
};

// One layer's K or V of one sequence in paged form, plus the values it decodes to.
struct Paged {
  std::vector<uint8_t> bytes;                    // blocks (+1 byte so the base is unaligned)
  std::vector<uint16_t> window;                  // f16 rows of the residual window
  std::vector<float> scales;                     // fp8 per head
  std::vector<float> decoded;                    // [T][values], what attention must see
  std::shared_ptr<kvquant::NuqCalibration> nuq;  // kvquant3
  std::shared_ptr<kvquant::RopeTable> rope;      // kvquant3 keys
  KvPageView view;
};

// Encodes x ([T][values]) with `dtype` per token (or KIVI key groups when key_groups), into
// blocks of `bt` tokens placed in reverse order; positions >= window_begin go to an f16 window.
// kvquant3 rows are calibrated on x itself; keys (is_key) are taken as post-RoPE, stored
// pre-RoPE and decoded rotated to their position, as PagedKvCache does.
Paged Build(KvDtype dtype, bool key_groups, const Shape& s, const std::vector<float>& x, int64_t T,
            int32_t bt, int64_t window_begin, const std::vector<int32_t>& table,
            bool is_key = false, bool turbo_qjl = false) {
  Paged p;
  const int64_t values = static_cast<int64_t>(s.n_kv) * s.hd;
  const int32_t row_tokens = key_groups ? static_cast<int32_t>(kvquant::kKiviGroup) : 1;
  const int bits = kvquant::KiviBits(dtype);
  int64_t row_bytes;
  std::optional<kvquant::RowCodec> codec;
  if (key_groups) {
    row_bytes = kvquant::KiviKeyGroupBytes(values, bits);
  } else {
    codec = *kvquant::RowCodec::Create(dtype, s.n_kv, s.hd, is_key, turbo_qjl);
    row_bytes = codec->row_bytes();
  }
  const size_t stride = static_cast<size_t>(row_bytes + 5);  // odd padding: nothing assumes 64
  const size_t block_stride = stride * static_cast<size_t>(bt / row_tokens);
  const size_t n_blocks = table.size();
  p.bytes.assign(block_stride * n_blocks + 1, 0xCD);
  uint8_t* base = p.bytes.data() + 1;
  for (int h = 0; h < s.n_kv; ++h) p.scales.push_back(0.01f * static_cast<float>(h + 1));
  p.decoded.assign(static_cast<size_t>(T * values), 0.0f);
  auto row_at = [&](int64_t pos) {
    return base + static_cast<size_t>(table[static_cast<size_t>(pos / bt)]) * block_stride +
           static_cast<size_t>((pos % bt) / row_tokens) * stride;
  };
  const int64_t quantized = std::min(T, window_begin);
  if (key_groups) {
    for (int64_t g = 0; g < quantized; g += row_tokens) {
      const int64_t n = std::min<int64_t>(row_tokens, quantized - g);
      kvquant::KiviEncodeKeyGroup(x.data() + g * values, n, values, values, bits, row_at(g));
      for (int64_t t = 0; t < n; ++t)
        kvquant::KiviDecodeKeyToken(row_at(g), t, values, bits, 0, values,
                                    p.decoded.data() + (g + t) * values);
    }
  } else if (kvquant::IsNuq(dtype)) {
    p.nuq = std::make_shared<kvquant::NuqCalibration>(1, values);
    std::vector<float> pre = x;
    if (is_key) {
      p.rope = std::make_shared<kvquant::RopeTable>(s.hd, s.hd, 10000.0f, 1.0f, false);
      p.rope->Reserve(T);
      for (int64_t t = 0; t < T; ++t)
        for (int h = 0; h < s.n_kv; ++h) p.rope->Apply(pre.data() + t * values + h * s.hd, t, true);
      p.nuq->Calibrate(0, pre.data(), nullptr, T, values);
    } else {
      p.nuq->Calibrate(0, nullptr, pre.data(), T, values);
    }
    const kvquant::NuqLayer& L = is_key ? p.nuq->key(0) : p.nuq->value(0);
    for (int64_t t = 0; t < quantized; ++t) {
      if (is_key) {
        kvquant::NuqEncodeKeyRow(pre.data() + t * values, values, L, row_at(t));
      } else {
        kvquant::NuqEncodeValueRow(pre.data() + t * values, values, L, row_at(t));
      }
      kvquant::NuqDecode(row_at(t), values, is_key, L, 0, values, p.decoded.data() + t * values,
                         p.rope.get(), t);
    }
    p.view.nuq = &L;
    p.view.rope = p.rope.get();
    p.view.nuq_key = is_key;
  } else {
    for (int64_t t = 0; t < quantized; ++t) {
      codec->Encode(x.data() + t * values, row_at(t), p.scales.data());
      codec->Decode(row_at(t), 0, values, p.decoded.data() + t * values, p.scales.data());
    }
  }
  for (int64_t t = quantized; t < T; ++t)
    for (int64_t i = 0; i < values; ++i) {
      const uint16_t h = Fp32ToFp16(x[static_cast<size_t>(t * values + i)]);
      p.window.push_back(h);
      p.decoded[static_cast<size_t>(t * values + i)] = Fp16ToFp32(h);
    }
  KvPageView& v = p.view;
  v.base = base;
  v.block_table = table.data();
  v.block_tokens = bt;
  v.block_stride = block_stride;
  v.token_stride = stride;
  v.dtype = dtype;
  v.head_dim = s.hd;
  v.row_values = static_cast<int32_t>(values);
  v.row_tokens = row_tokens;
  v.scales = p.scales.data();
  const size_t elt = dtype == KvDtype::kF32 ? 4 : (kvquant::IsFloat(dtype) ? 2 : 1);
  v.head_stride = static_cast<size_t>(s.hd) * elt;
  if (kvquant::IsTurbo(dtype))
    v.turbo = *kvquant::TurboFor(kvquant::TurboBits(dtype), s.hd, turbo_qjl);
  if (window_begin < T) {
    v.recent = reinterpret_cast<const uint8_t*>(p.window.data());
    v.recent_stride = static_cast<size_t>(values) * 2;
    v.recent_begin = window_begin;
  }
  return p;
}

// A contiguous f32 view of decoded values (one block holding everything).
KvPageView F32View(const Paged& p, const Shape& s, int64_t T, const int32_t* zero_table) {
  KvPageView v;
  v.base = reinterpret_cast<const uint8_t*>(p.decoded.data());
  v.block_table = zero_table;
  v.block_tokens = static_cast<int32_t>(T);
  v.block_stride = p.decoded.size() * 4;
  v.token_stride = static_cast<size_t>(s.n_kv) * s.hd * 4;
  v.head_stride = static_cast<size_t>(s.hd) * 4;
  v.dtype = KvDtype::kF32;
  v.head_dim = s.hd;
  v.row_values = s.n_kv * s.hd;
  return v;
}

void Check(KvDtype kd, bool k_groups, KvDtype vd, const Shape& s, int32_t bt, int64_t k_window,
           int64_t v_window, uint32_t seed, bool k_turbo_qjl = false,
           const std::function<void(std::vector<float>&, int64_t)>& mutate = nullptr,
           int64_t n_q = 5) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  const int64_t pos0 = 2 * bt + 7, T = pos0 + n_q;
  const int64_t values = static_cast<int64_t>(s.n_kv) * s.hd;
  std::vector<float> k(static_cast<size_t>(T * values)), v(k.size());
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  if (mutate) {
    mutate(k, values);
    mutate(v, values);
  }
  const int64_t n_blocks = (T + bt - 1) / bt;
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t i = 0; i < n_blocks; ++i)
    table[static_cast<size_t>(i)] = static_cast<int32_t>(n_blocks - 1 - i);
  const Paged pk = Build(kd, k_groups, s, k, T, bt, k_window, table, /*is_key=*/true, k_turbo_qjl);
  const Paged pv = Build(vd, false, s, v, T, bt, v_window, table);
  std::vector<float> q(static_cast<size_t>(n_q * s.n_head * s.hd));
  for (auto& x : q) x = nd(rng);
  AttentionArgs a;
  a.q = q.data();
  a.q_stride = s.n_head * s.hd;
  a.out_stride = s.n_head * s.hd;
  a.n_q = n_q;
  a.slot0 = pos0;
  a.n_head = s.n_head;
  a.n_kv_head = s.n_kv;
  a.head_dim = s.hd;
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
  std::vector<float> want(q.size()), ref(q.size()), got(q.size()),
      scratch(static_cast<size_t>(T * s.n_head));
  const int32_t zero = 0;
  a.k = F32View(pk, s, T, &zero);
  a.v = F32View(pv, s, T, &zero);
  a.out = want.data();
  ReferenceTable().attention(a, 0, s.n_kv, scratch.data());
  a.k = pk.view;
  a.v = pv.view;
  a.out = ref.data();
  ReferenceTable().attention(a, 0, s.n_kv, scratch.data());
  const std::string what = std::string(kvquant::KvDtypeName(kd)) + (k_groups ? "(groups)" : "") +
                           "/" + std::string(kvquant::KvDtypeName(vd)) + " heads " +
                           std::to_string(s.n_head) + "/" + std::to_string(s.n_kv) + " x " +
                           std::to_string(s.hd) + (k_turbo_qjl ? " qjl" : "");
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(ref[i], want[i]) << what << " i " << i;
  for (const KernelTable* t : AvailableTables()) {
    std::fill(got.begin(), got.end(), -1.0f);
    a.out = got.data();
    // Split the KV heads over two calls, as the thread pool does.
    t->attention(a, 0, s.n_kv / 2, scratch.data());
    t->attention(a, s.n_kv / 2, s.n_kv, scratch.data());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 2e-5f * (1.0f + std::fabs(ref[i])))
          << t->name << " " << what << " i " << i;
  }
}

TEST(AttentionQuantTest, EveryRowDtypeEveryTableMatchesTheReference) {
  const Shape shapes[] = {{4, 4, 8}, {8, 2, 16}, {2, 1, 64}, {4, 2, 32}, {2, 2, 128}, {6, 3, 32}};
  uint32_t seed = 1;
  for (KvDtype d : kRowDtypes)
    for (const Shape& s : shapes) Check(d, false, d, s, 5, INT64_MAX, INT64_MAX, seed++);
}

TEST(AttentionQuantTest, HeadWidthsThatAreNotBlockMultiples) {
  // 12-wide heads (rows of 12): only dtypes without 32-value blocks apply; SIMD tails run.
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4M3,
                    KvDtype::kFp8E5M2, KvDtype::kInt8, KvDtype::kTurbo3, KvDtype::kTurbo4})
    Check(d, false, d, {4, 1, 12}, 3, INT64_MAX, INT64_MAX, 77);
}

TEST(AttentionQuantTest, MixedKAndVDtypes) {
  Check(KvDtype::kQ8_0, false, KvDtype::kF16, {8, 2, 64}, 16, INT64_MAX, INT64_MAX, 5);
  Check(KvDtype::kF16, false, KvDtype::kQ4_0, {8, 2, 64}, 16, INT64_MAX, INT64_MAX, 6);
  Check(KvDtype::kFp8E4M3, false, KvDtype::kInt8, {4, 4, 32}, 7, INT64_MAX, INT64_MAX, 7);
}

TEST(AttentionQuantTest, KiviKeyGroupsAndResidualWindows) {
  for (KvDtype d : {KvDtype::kKivi2, KvDtype::kKivi4}) {
    for (const Shape& s : {Shape{4, 4, 8}, Shape{8, 2, 32}, Shape{2, 1, 128}, Shape{8, 8, 12}}) {
      // Blocks of 32 and 64 tokens; keys quantized up to 64 (a group boundary), values up to 70;
      // the rest sits in f16 windows. T = 2 * bt + 12.
      Check(d, true, d, s, 32, 64, 70, 11);
      Check(d, true, d, s, 64, 128, 100, 12);
      Check(d, true, d, s, 32, INT64_MAX, INT64_MAX, 13);      // no window at all
      Check(d, true, KvDtype::kF16, s, 32, 0, INT64_MAX, 14);  // everything in the key window
    }
  }
}

TEST(AttentionQuantTest, KvQuant3PreRopeKeysOutliersAndMixes) {
  // Keys stored before RoPE and rotated after decoding, values with per-token ranges; sparse
  // outliers included (Gaussian rows always have a few). Head widths 8..128, GQA, partial blocks.
  uint32_t seed = 500;
  for (const Shape& s : {Shape{4, 4, 8}, Shape{8, 2, 16}, Shape{2, 1, 64}, Shape{6, 3, 32},
                         Shape{2, 2, 128}, Shape{4, 1, 24}})
    Check(KvDtype::kKvQuant3, false, KvDtype::kKvQuant3, s, 5, INT64_MAX, INT64_MAX, seed++);
  Check(KvDtype::kKvQuant3, false, KvDtype::kF16, {8, 2, 64}, 16, INT64_MAX, INT64_MAX, 600);
  Check(KvDtype::kQ8_0, false, KvDtype::kKvQuant3, {8, 2, 64}, 16, INT64_MAX, INT64_MAX, 601);
  Check(KvDtype::kKivi4, true, KvDtype::kKvQuant3, {8, 2, 32}, 32, 64, INT64_MAX, 602);
  // A prefill chunk of 40 queries: the tiled path decodes each tile once per block of 16 queries
  // (three blocks, the last one partial), for tiled K, tiled V and either next to another reader.
  Check(KvDtype::kKvQuant3, false, KvDtype::kKvQuant3, {8, 2, 64}, 16, INT64_MAX, INT64_MAX, 603,
        false, nullptr, 40);
  Check(KvDtype::kKvQuant3, false, KvDtype::kQ4_0, {4, 4, 32}, 16, INT64_MAX, INT64_MAX, 604, false,
        nullptr, 40);
  Check(KvDtype::kTurbo3, false, KvDtype::kKvQuant3, {4, 2, 32}, 16, INT64_MAX, INT64_MAX, 605,
        false, nullptr, 40);
  Check(KvDtype::kKivi2, true, KvDtype::kKvQuant3, {4, 4, 32}, 32, 64, 90, 606, false, nullptr, 40);
  Check(KvDtype::kF16, false, KvDtype::kInt8, {4, 1, 12}, 8, INT64_MAX, INT64_MAX, 607, false,
        nullptr, 40);  // 12-wide heads: everything tiled
}

TEST(AttentionQuantTest, TurboQjlKeysZeroAndOutlierHeads) {
  // Zero heads (norm 0 must give score 0, no NaN) and one huge channel per token (the rotation
  // spreads it over the whole head), for both bit widths, QJL keys or not, GQA and MHA.
  const auto zeros_and_outliers = [](std::vector<float>& x, int64_t values) {
    for (size_t t = 0; t * static_cast<size_t>(values) < x.size(); ++t) {
      float* row = x.data() + t * static_cast<size_t>(values);
      if (t % 3 == 0) std::fill(row, row + values / 2, 0.0f);  // first half of the heads
      if (t % 3 == 1) row[(t * 7) % static_cast<size_t>(values)] = 80.0f;
    }
  };
  uint32_t seed = 100;
  for (KvDtype d : {KvDtype::kTurbo3, KvDtype::kTurbo4})
    for (bool qjl : {false, true})
      for (const Shape& s : {Shape{4, 4, 8}, Shape{8, 2, 64}, Shape{4, 1, 128}, Shape{6, 2, 24}}) {
        Check(d, false, d, s, 5, INT64_MAX, INT64_MAX, seed++, qjl);
        Check(d, false, d, s, 16, INT64_MAX, INT64_MAX, seed++, qjl, zeros_and_outliers);
      }
  // Turbo keys or values next to another dtype.
  Check(KvDtype::kTurbo4, false, KvDtype::kF16, {8, 2, 64}, 16, INT64_MAX, INT64_MAX, 8, true);
  Check(KvDtype::kQ8_0, false, KvDtype::kTurbo3, {8, 2, 64}, 16, INT64_MAX, INT64_MAX, 9);
}

}  // namespace
}  // namespace kvforge::kernels

namespace kvforge::kernels {
namespace {

// MLA (ADR 0007): K and V views are the same latent rows, the value being each row's first
// v_dim values; every table matches the reference over the decoded rows, whose outputs are
// [n_q][n_head][v_dim]. v_dim 20 takes the SIMD tables' reference fallback.
TEST(AttentionQuantTest, LatentRowsWithANarrowerValue) {
  uint32_t seed = 900;
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4M3, KvDtype::kInt8,
                    KvDtype::kQ8_0, KvDtype::kQ4_0})
    for (int32_t vdim : {64, 32, 20}) {
      const Shape s{8, 1, 96};  // 64 latent + 32 RoPE dims
      std::mt19937 rng(seed++);
      std::normal_distribution<float> nd;
      const int32_t bt = 16;
      const int64_t n_q = 3, pos0 = 40, T = pos0 + n_q;
      std::vector<float> x(static_cast<size_t>(T * s.hd));
      for (auto& v : x) v = nd(rng);
      const int64_t n_blocks = (T + bt - 1) / bt;
      std::vector<int32_t> table(static_cast<size_t>(n_blocks));
      for (int64_t i = 0; i < n_blocks; ++i)
        table[static_cast<size_t>(i)] = static_cast<int32_t>(n_blocks - 1 - i);
      const Paged p = Build(d, false, s, x, T, bt, INT64_MAX, table);
      std::vector<float> q(static_cast<size_t>(n_q * s.n_head * s.hd));
      for (auto& v : q) v = nd(rng);
      AttentionArgs a;
      a.q = q.data();
      a.q_stride = s.n_head * s.hd;
      a.out_stride = s.n_head * vdim;
      a.n_q = n_q;
      a.slot0 = pos0;
      a.n_head = s.n_head;
      a.n_kv_head = 1;
      a.head_dim = s.hd;
      a.v_dim = vdim;
      a.scale = 0.1f;
      const size_t out_n = static_cast<size_t>(n_q * s.n_head * vdim);
      std::vector<float> want(out_n), got(out_n), scratch(static_cast<size_t>(T * s.n_head));
      // Plain math over the decoded rows.
      for (int64_t i = 0; i < n_q; ++i)
        for (int32_t h = 0; h < s.n_head; ++h) {
          const float* qh = q.data() + (i * s.n_head + h) * s.hd;
          const int64_t n_kv = pos0 + i + 1;
          std::vector<double> w(static_cast<size_t>(n_kv));
          double mx = -1e300, sum = 0;
          for (int64_t t = 0; t < n_kv; ++t) {
            double dot = 0;
            for (int32_t c = 0; c < s.hd; ++c) dot += qh[c] * p.decoded[t * s.hd + c];
            w[t] = dot * a.scale;
            mx = std::max(mx, w[t]);
          }
          for (auto& v : w) sum += (v = std::exp(v - mx));
          for (int32_t c = 0; c < vdim; ++c) {
            double o = 0;
            for (int64_t t = 0; t < n_kv; ++t) o += w[t] / sum * p.decoded[t * s.hd + c];
            want[static_cast<size_t>((i * s.n_head + h) * vdim + c)] = static_cast<float>(o);
          }
        }
      a.k = p.view;
      a.v = p.view;
      for (const KernelTable* t : AvailableTables()) {
        std::fill(got.begin(), got.end(), -7.0f);
        a.out = got.data();
        t->attention(a, 0, 1, scratch.data());
        for (size_t i = 0; i < out_n; ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i])))
              << t->name << " " << kvquant::KvDtypeName(d) << " v_dim " << vdim << " i " << i;
      }
    }
}

}  // namespace
}  // namespace kvforge::kernels
