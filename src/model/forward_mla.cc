// forward_mla.cc — DeepSeek-V2/V3 multi-head latent attention (docs/adr/0007, kv-methods.md
// Part C). Per token and layer the cache holds one latent row [norm(c) (R) ; RoPE(k_pe) (P)];
// H query heads of N nope + P RoPE dims attend to it in one of two equal forms:
//   absorbed: q~_h = [W_UK_h q_nope_h ; q_pe_h] (R + P), MQA over the latent rows with the first
//             R values as the value, then o_h = W_UV_h out_h: reads R + P values per slot;
//   naive:    per-head K_h = [W_UK_h^T c ; k_pe] and V_h = W_UV_h c decompressed for every slot,
//             then plain MHA: more work per slot, less per query (long prefill chunks).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "model/attention_tasks.h"
#include "model/model.h"
#include "tensor/dequant.h"

namespace kvforge::model {
namespace {

// A contiguous f32 view of `slots` rows of `heads` x `dim` floats (one block holding them all).
kernels::KvPageView F32Heads(const float* rows, int64_t slots, int64_t heads, int64_t dim,
                             const int32_t* zero_table) {
  kernels::KvPageView v;
  v.base = reinterpret_cast<const uint8_t*>(rows);
  v.block_table = zero_table;
  v.block_tokens = static_cast<int32_t>(std::max<int64_t>(slots, 1));
  v.token_stride = static_cast<size_t>(heads * dim) * 4;
  v.block_stride = v.token_stride * static_cast<size_t>(v.block_tokens);
  v.head_stride = static_cast<size_t>(dim) * 4;
  v.dtype = kvquant::KvDtype::kF32;
  v.head_dim = static_cast<int32_t>(dim);
  v.row_values = static_cast<int32_t>(heads * dim);
  return v;
}

}  // namespace

MlaAttention ChooseMlaPath(const MlaConfig& m, int64_t n_head, int64_t n_q, int64_t n_kv) {
  const double H = static_cast<double>(n_head), R = static_cast<double>(m.kv_lora_rank),
               P = static_cast<double>(m.rope_dim), N = static_cast<double>(m.nope_dim),
               V = static_cast<double>(m.v_head_dim), q = static_cast<double>(n_q),
               k = static_cast<double>(n_kv);
  const double absorbed = q * H * R * (N + V) + q * k * H * (2 * R + P);
  const double naive = k * H * R * (N + V) + q * k * H * (N + P + V);
  return naive < absorbed ? MlaAttention::kNaive : MlaAttention::kAbsorbed;
}

void Model::AttendMla(int64_t l, const LayerWeights& L, const Batch& batch,
                      const std::vector<int64_t>& pos, kvstore::KvAccess& kv, Workspace& ws,
                      kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const MlaConfig& a = c.mla;
  const MlaWeights& W = L.mla;
  const kernels::KernelTable& kt = kernels::Active();
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t H = c.n_head, R = a.kv_lora_rank, P = a.rope_dim, N = a.nope_dim,
                QK = a.qk_head_dim(), LW = a.latent_dim();
  const float* rope_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
  auto rope = [&](float* x, int64_t i) {
    kernels::Rope(x, 1, static_cast<int32_t>(P), static_cast<int32_t>(P),
                  pos[static_cast<size_t>(i)], c.rope_freq_base, c.rope_freq_scale, c.rope_neox,
                  rope_factors);
  };
  // Query mla_qf [n][H][N + P], through the low-rank q_a / q_b pair when the model has one.
  if (W.wq_a.rows > 0) {
    const int64_t QL = a.q_lora_rank;
    MatMul(W.wq_a, ws.xn.data(), n, ws.gather_in.data(), ws, pool);
    for (int64_t i = 0; i < n; ++i)
      kt.rms_norm(ws.gather_in.data() + i * QL, W.q_a_norm.data(), ws.gather_out.data() + i * QL,
                  QL, c.rms_eps);
    MatMul(W.wq_b, ws.gather_out.data(), n, ws.mla_qf.data(), ws, pool);
  } else {
    MatMul(W.wq, ws.xn.data(), n, ws.mla_qf.data(), ws, pool);
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < H; ++h) rope(ws.mla_qf.data() + (i * H + h) * QK + N, i);
  // Latent rows ws.k [n][R + P]: norm(c) and the shared RoPE key, written to the cache.
  MatMul(W.wkv_a, ws.xn.data(), n, ws.k.data(), ws, pool);
  std::vector<float> normed(static_cast<size_t>(R));
  for (int64_t i = 0; i < n; ++i) {
    float* row = ws.k.data() + i * LW;
    kt.rms_norm(row, W.kv_a_norm.data(), normed.data(), R, c.rms_eps);
    std::copy(normed.begin(), normed.end(), row);
    rope(row + R, i);
  }
  for (const auto& s : batch.seqs)
    kv.WriteAt(static_cast<int32_t>(l), s.kv_seq, s.first_slot(), s.pos0, s.n_tokens,
               ws.k.data() + s.token_begin * LW, nullptr, LW);
  // Each chunk takes its path; the absorbed one runs first over all tokens (its projections are
  // per token), and naive chunks then overwrite their own rows of ws.attn.
  std::vector<size_t> absorbed, naive;
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const auto& s = batch.seqs[si];
    MlaAttention path = batch.mla != MlaAttention::kAuto ? batch.mla : mla_default_;
    if (path == MlaAttention::kAuto)
      path = ChooseMlaPath(a, H, s.n_tokens, s.first_slot() + s.n_tokens);
    // Sparse decode selects blocks of latent rows: the absorbed form reads them.
    if (s.sparse != nullptr && s.n_tokens == 1) path = MlaAttention::kAbsorbed;
    (path == MlaAttention::kNaive ? naive : absorbed).push_back(si);
  }
  if (!absorbed.empty()) MlaAbsorbed(l, L, batch, absorbed, kv, ws, pool);
  for (size_t si : naive) MlaNaive(l, L, batch, si, kv, ws, pool);
  MatMul(L.wo, ws.attn.data(), n, ws.y.data(), ws, pool);
}

// ws.attn [n][H][Vh] for the tokens of `seqs`.
void Model::MlaAbsorbed(int64_t l, const LayerWeights& L, const Batch& batch,
                        const std::vector<size_t>& seqs, kvstore::KvAccess& kv, Workspace& ws,
                        kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const MlaConfig& a = c.mla;
  const MlaWeights& W = L.mla;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t H = c.n_head, R = a.kv_lora_rank, N = a.nope_dim, Vh = a.v_head_dim,
                QK = a.qk_head_dim(), LW = a.latent_dim();
  // mla_q [n][H][R + P]: W_UK_h q_nope_h, then q_pe_h.
  for (int64_t h = 0; h < H; ++h)
    MatMul(W.wk_b.Rows(h * R, R), ws.mla_qf.data() + h * QK, n, ws.mla_q.data() + h * LW, ws, pool,
           H * QK, H * LW);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < H; ++h)
      std::copy(ws.mla_qf.data() + (i * H + h) * QK + N, ws.mla_qf.data() + (i * H + h + 1) * QK,
                ws.mla_q.data() + (i * H + h) * LW + R);
  AttentionJob job;
  job.layer = static_cast<int32_t>(l);
  job.q = ws.mla_q.data();
  job.q_stride = H * LW;
  job.out = ws.mla_out.data();
  job.out_stride = H * R;
  job.n_head = static_cast<int32_t>(H);
  job.n_kv_head = 1;
  job.head_dim = static_cast<int32_t>(LW);
  job.v_dim = static_cast<int32_t>(R);
  job.scale = a.attn_scale;
  job.seqs = seqs;
  RunAttentionTasks(batch, job, kv, ws, pool);
  // ws.attn [n][H][Vh] = W_UV_h out_h.
  for (int64_t h = 0; h < H; ++h)
    MatMul(W.wv_b.Rows(h * Vh, Vh), ws.mla_out.data() + h * R, n, ws.attn.data() + h * Vh, ws, pool,
           H * R, H * Vh);
}

// ws.attn rows of sequence chunk `si` through per-head K/V decompressed from every cached slot.
void Model::MlaNaive(int64_t l, const LayerWeights& L, const Batch& batch, size_t si,
                     kvstore::KvAccess& kv, Workspace& ws, kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const MlaConfig& a = c.mla;
  const MlaWeights& W = L.mla;
  const kernels::KernelTable& kt = kernels::Active();
  const auto& s = batch.seqs[si];
  const int64_t H = c.n_head, R = a.kv_lora_rank, N = a.nope_dim, Vh = a.v_head_dim,
                QK = a.qk_head_dim(), LW = a.latent_dim();
  const int64_t n_kv = s.first_slot() + s.n_tokens;
  // Latent rows [n_kv][R + P] as the cache decodes them (this step's included), and c [n_kv][R].
  const kernels::KvPageView view = kv.KeyView(static_cast<int32_t>(l), s.kv_seq);
  ws.naive_lat.resize(static_cast<size_t>(n_kv * LW));
  ws.naive_c.resize(static_cast<size_t>(n_kv * R));
  pool.ParallelForGrain(n_kv, 64, [&](int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) {
      kernels::DecodeKvRow(view, p, ws.naive_lat.data() + p * LW);
      std::copy(ws.naive_lat.data() + p * LW, ws.naive_lat.data() + p * LW + R,
                ws.naive_c.data() + p * R);
    }
  });
  // K [n_kv][H][N + P]: W_UK_h^T c per head (the head's [R x N] block transposed once into f32
  // so the matmul kernel runs over it), then the shared k_pe.
  ws.naive_k.resize(static_cast<size_t>(n_kv * H * QK));
  ws.matmul_flops += 2 * H * N * R * n_kv;
  pool.ParallelFor(H, [&](int64_t h0, int64_t h1, int) {
    std::vector<float> block(static_cast<size_t>(R * N)), wt(static_cast<size_t>(N * R));
    for (int64_t h = h0; h < h1; ++h) {
      const Matrix wk = W.wk_b.Rows(h * R, R);
      for (int64_t r = 0; r < R; ++r)
        (void)tensor::DequantizeRow(static_cast<tensor::DType>(wk.type),
                                    wk.data + static_cast<size_t>(r) * wk.row_bytes,
                                    block.data() + r * N, N);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t d = 0; d < N; ++d) wt[static_cast<size_t>(d * R + r)] = block[r * N + d];
      kt.matmul_rows(kernels::WType::kF32, reinterpret_cast<const uint8_t*>(wt.data()),
                     static_cast<size_t>(R) * 4, R,
                     reinterpret_cast<const uint8_t*>(ws.naive_c.data()), n_kv,
                     ws.naive_k.data() + h * QK, H * QK, 0, N);
    }
  });
  for (int64_t p = 0; p < n_kv; ++p)
    for (int64_t h = 0; h < H; ++h)
      std::copy(ws.naive_lat.data() + p * LW + R, ws.naive_lat.data() + (p + 1) * LW,
                ws.naive_k.data() + (p * H + h) * QK + N);
  // V [n_kv][H][Vh] = W_UV_h c.
  ws.naive_v.resize(static_cast<size_t>(n_kv * H * Vh));
  const size_t act =
      static_cast<size_t>(n_kv) * kernels::PreparedRowBytes(W.wv_b.type, W.wv_b.cols, n_kv) + 64;
  if (ws.act.size() < act) ws.act.resize(act);
  for (int64_t h = 0; h < H; ++h)
    MatMul(W.wv_b.Rows(h * Vh, Vh), ws.naive_c.data(), n_kv, ws.naive_v.data() + h * Vh, ws, pool,
           R, H * Vh);
  // MHA over the decompressed heads: one view per batch sequence, only this one's set.
  static const int32_t kZero = 0;
  AttentionJob job;
  job.layer = static_cast<int32_t>(l);
  job.q = ws.mla_qf.data();
  job.q_stride = H * QK;
  job.out = ws.attn.data();
  job.out_stride = H * Vh;
  job.n_head = static_cast<int32_t>(H);
  job.n_kv_head = static_cast<int32_t>(H);
  job.head_dim = static_cast<int32_t>(QK);
  job.v_dim = static_cast<int32_t>(Vh);
  job.scale = a.attn_scale;
  job.seqs = {si};
  job.k_views.resize(batch.seqs.size());
  job.v_views.resize(batch.seqs.size());
  job.k_views[si] = F32Heads(ws.naive_k.data(), n_kv, H, QK, &kZero);
  job.v_views[si] = F32Heads(ws.naive_v.data(), n_kv, H, Vh, &kZero);
  RunAttentionTasks(batch, job, kv, ws, pool);
}

}  // namespace kvforge::model
