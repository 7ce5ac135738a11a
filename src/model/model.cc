#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"
#include "base/token_ids.h"
#include "gguf/gguf_reader.h"
#include "kernels/thread_pool.h"
#include "tensor/dequant.h"

namespace kvforge::model {

using base::StrFormat;

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Model> m(new Model());
  KVF_ASSIGN_OR_RETURN(m->file_, gguf::GgufFile::Open(path));
  KVF_RETURN_IF_ERROR(m->Init());
  uint64_t bytes = 0;
  for (const auto& t : m->file_->tensors()) bytes += t.nbytes;
  KVF_LOG_INFO(
      "model: %s of weights used in place from the mmap (0 bytes repacked), bound in %.1f ms",
      base::HumanBytes(bytes).c_str(),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return m;
}

Status Model::LockWeights() const { return file_->LockInMemory(); }

Result<std::unique_ptr<Model>> Model::LoadFromMemory(const uint8_t* data, size_t size,
                                                     std::string name) {
  std::unique_ptr<Model> m(new Model());
  KVF_ASSIGN_OR_RETURN(m->file_, gguf::GgufFile::FromMemory(data, size, std::move(name)));
  KVF_RETURN_IF_ERROR(m->Init());
  return m;
}

Status Model::Init() {
  KVF_ASSIGN_OR_RETURN(config_, ModelConfig::FromGguf(*file_));
  KVF_ASSIGN_OR_RETURN(weights_, ModelWeights::Bind(*file_, config_));
  return Status::Ok();
}

void Workspace::Ensure(const ModelConfig& c, int64_t n_tokens, int64_t max_kv_len, int n_threads) {
  if (n_tokens > tokens_capacity) {
    const auto n = static_cast<size_t>(n_tokens);
    x.resize(n * c.n_embd);
    xn.resize(n * c.n_embd);
    q.resize(n * c.q_dim());
    k.resize(n * c.kv_dim());
    v.resize(n * c.kv_dim());
    attn.resize(n * c.q_dim());
    y.resize(n * c.n_embd);
    fused.resize(n * std::max(c.q_dim() + 2 * c.kv_dim(), 2 * c.n_ff));
    gate.resize(n * c.n_ff);
    up.resize(n * c.n_ff);
    ffn.resize(n * c.n_ff);
    const int64_t widest = std::max({c.n_embd, c.n_ff, c.q_dim()});
    act.resize(n * kernels::PreparedRowBytes(kernels::WType::kF32, widest) + 64);
    tokens_capacity = n_tokens;
  }
  const int64_t group = c.n_head / c.n_head_kv;
  if (max_kv_len > kv_capacity || static_cast<int>(scratch.size()) < n_threads) {
    kv_capacity = std::max(kv_capacity, max_kv_len);
    scratch.resize(static_cast<size_t>(std::max<int>(n_threads, static_cast<int>(scratch.size()))));
    for (auto& s : scratch) s.resize(static_cast<size_t>(kv_capacity * group));
  }
}

namespace {

// Sparse decode: narrows a one-query attention of KV head `kvh` to the blocks the plan selects,
// by pointing both views at a gathered table of those blocks (logical order kept, the query's
// block last) so the kernels run unchanged over fewer slots. Views whose slots must stay where
// they are (a KIVI residual window, a dead range) and caches without summaries stay dense.
void GatherSparseBlocks(const kvpolicy::SparseDecode& plan, const kvpolicy::BlockKeySummaries& sums,
                        int32_t kvh, std::vector<int32_t>* blocks, std::vector<int32_t>* positions,
                        kernels::AttentionArgs* a) {
  if (sums.base == nullptr || a->k.recent != nullptr || a->v.recent != nullptr ||
      a->dead_begin < a->dead_end || a->k.block_tokens != a->v.block_tokens)
    return;
  const int32_t bt = a->k.block_tokens;
  const int64_t n_kv = a->slot0 + 1;
  const int64_t n_logical = (n_kv + bt - 1) / bt;
  const int64_t last_tokens = n_kv - (n_logical - 1) * bt;
  const int32_t group = a->n_head / a->n_kv_head;
  const float* q = a->q + static_cast<int64_t>(kvh) * group * a->head_dim;
  const std::vector<int32_t> pick =
      kvpolicy::SelectDecodeBlocks(plan, q, group, a->head_dim, a->scale, sums, kvh,
                                   a->k.block_table, n_logical, last_tokens, bt);
  // (A pick of every block still goes through the gathered table: it then computes exactly what
  // dense attention does, which the tests rely on.)
  blocks->clear();
  for (int32_t b : pick) blocks->push_back(a->k.block_table[b]);
  const int64_t n_read = static_cast<int64_t>(pick.size() - 1) * bt + last_tokens;
  if (a->k.rope != nullptr) {  // kvquant3 keys rotate to their slot's position when read
    positions->clear();
    for (int32_t b : pick)
      for (int64_t j = 0; j < (b + 1 == n_logical ? last_tokens : bt); ++j)
        positions->push_back(
            static_cast<int32_t>(a->k.PositionOf(static_cast<int64_t>(b) * bt + j)));
    a->k.positions = positions->data();
  }
  a->k.block_table = a->v.block_table = blocks->data();
  a->slot0 = n_read - 1;
}

// out[n] = RMSNorm(x) * w, or LayerNorm(x) * w + b (mean-centred; falcon).
void Normalize(const kernels::KernelTable& kt, bool layer_norm, const float* x,
               const std::vector<float>& w, const std::vector<float>& b, float* out, int64_t n,
               float eps) {
  if (!layer_norm) {
    kt.rms_norm(x, w.data(), out, n, eps);
    return;
  }
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(x[i] - mean) * inv * w[static_cast<size_t>(i)] +
             b[static_cast<size_t>(i)];
}

// In place: each of `heads` heads of `hd` floats RMS-normalised with weight w[hd] (qwen3 q/k).
void NormalizeHeads(const kernels::KernelTable& kt, float* x, int64_t heads, int64_t hd,
                    const std::vector<float>& w, float eps) {
  thread_local std::vector<float> tmp;
  tmp.resize(static_cast<size_t>(hd));
  for (int64_t h = 0; h < heads; ++h) {
    kt.rms_norm(x + h * hd, w.data(), tmp.data(), hd, eps);
    std::copy(tmp.begin(), tmp.end(), x + h * hd);
  }
}

// Splits rows of a fused projection: src [n][sum(widths)] -> dst[j] [n][widths[j]].
void SplitRows(const float* src, int64_t n, std::initializer_list<std::pair<float*, int64_t>> dst) {
  int64_t total = 0;
  for (const auto& d : dst) total += d.second;
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (const auto& d : dst) {
      std::copy(src + i * total + off, src + i * total + off + d.second, d.first + i * d.second);
      off += d.second;
    }
  }
}

}  // namespace

// q [n][q_dim], k and v [n][kv_dim] from xn, biases added (qwen2).
void Model::ProjectQkv(const LayerWeights& L, int64_t n, Workspace& ws,
                       kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t QD = c.q_dim(), KD = c.kv_dim();
  if (c.traits->fused_qkv) {
    MatMul(L.wqkv, ws.xn.data(), n, ws.fused.data(), ws, pool);
    SplitRows(ws.fused.data(), n, {{ws.q.data(), QD}, {ws.k.data(), KD}, {ws.v.data(), KD}});
  } else {
    MatMul(L.wq, ws.xn.data(), n, ws.q.data(), ws, pool);
    MatMul(L.wk, ws.xn.data(), n, ws.k.data(), ws, pool);
    MatMul(L.wv, ws.xn.data(), n, ws.v.data(), ws, pool);
  }
  if (!c.traits->qkv_bias) return;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < QD; ++j) ws.q[i * QD + j] += L.bq[j];
    for (int64_t j = 0; j < KD; ++j) {
      ws.k[i * KD + j] += L.bk[j];
      ws.v[i * KD + j] += L.bv[j];
    }
  }
}

// y [n][n_embd] = the family's MLP of xn: SwiGLU, GeGLU (gemma) or GELU (falcon).
void Model::FeedForward(const LayerWeights& L, int64_t n, Workspace& ws,
                        kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t F = c.n_ff;
  const kernels::KernelTable& kt = kernels::Active();
  if (c.traits->fused_gate_up) {
    MatMul(L.w_gate_up, ws.xn.data(), n, ws.fused.data(), ws, pool);
    SplitRows(ws.fused.data(), n, {{ws.gate.data(), F}, {ws.up.data(), F}});
  } else {
    if (c.traits->ffn != FfnKind::kGelu)
      MatMul(L.w_gate, ws.xn.data(), n, ws.gate.data(), ws, pool);
    MatMul(L.w_up, ws.xn.data(), n, ws.up.data(), ws, pool);
  }
  switch (c.traits->ffn) {
    case FfnKind::kSwiGlu:
      kt.swiglu(ws.gate.data(), ws.up.data(), ws.ffn.data(), n * F);
      break;
    case FfnKind::kGeGlu:
      kt.gelu(ws.gate.data(), ws.up.data(), ws.ffn.data(), n * F);
      break;
    case FfnKind::kGelu:
      kt.gelu(ws.up.data(), nullptr, ws.ffn.data(), n * F);
      break;
  }
  MatMul(L.w_down, ws.ffn.data(), n, ws.y.data(), ws, pool);
}

int64_t Model::NumLogitRows(const Batch& batch) {
  int64_t n = 0;
  for (const auto& s : batch.seqs) n += s.logits_all ? s.n_tokens : (s.logits_last ? 1 : 0);
  return n;
}

void Model::MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y, Workspace& ws,
                   kernels::ThreadPool& pool) const {
  const kernels::KernelTable& kt = kernels::Active();
  const size_t xrow = kernels::PreparedRowBytes(w.type, w.cols, n_tok);
  const uint8_t* xp;
  if (kernels::ActFormatFor(w.type, n_tok) == kernels::ActFormat::kF32) {
    xp = reinterpret_cast<const uint8_t*>(x);  // already in the right format
  } else {
    for (int64_t t = 0; t < n_tok; ++t)
      kt.prepare_act(w.type, x + t * w.cols, ws.act.data() + t * xrow, w.cols);
    xp = ws.act.data();
  }
  pool.ParallelForGrain(w.rows, 16, [&](int64_t r0, int64_t r1, int) {
    kt.matmul_rows(w.type, w.data, w.row_bytes, w.cols, xp, n_tok, y, w.rows, r0, r1);
  });
}

Status Model::Forward(const Batch& batch, kvstore::KvAccess& kv, Workspace& ws,
                      kernels::ThreadPool& pool, std::vector<float>* logits) const {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n == 0) return Status::InvalidArgument("empty batch");
  int64_t max_kv = 0;
  int64_t covered = 0;
  for (const auto& s : batch.seqs) {
    if (s.n_tokens <= 0 || s.token_begin != covered || s.pos0 < 0)
      return Status::InvalidArgument("batch chunks must be contiguous, in order and non-empty");
    if (s.observed != nullptr && s.observed_stride < s.first_slot() + s.n_tokens)
      return Status::InvalidArgument("observer rows are shorter than the sequence's slots");
    covered += s.n_tokens;
    max_kv = std::max(max_kv, s.first_slot() + s.n_tokens);
  }
  if (covered != n) return Status::InvalidArgument("batch chunks do not cover every token");
  KVF_RETURN_IF_ERROR(base::CheckTokenIds(batch.tokens, c.n_vocab));
  ws.Ensure(c, n, max_kv, pool.num_threads());
  const kernels::KernelTable& kt = kernels::Active();
  const int64_t E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim(), HD = c.head_dim;

  // Token embeddings.
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = weights_.token_embd.data +
                         static_cast<size_t>(batch.tokens[i]) * weights_.token_embd.row_bytes;
    KVF_RETURN_IF_ERROR(tensor::DequantizeRow(static_cast<tensor::DType>(weights_.token_embd.type),
                                              row, ws.x.data() + i * E, E));
  }
  // Token index -> position, for RoPE.
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (const auto& s : batch.seqs)
    for (int64_t i = 0; i < s.n_tokens; ++i)
      pos[static_cast<size_t>(s.token_begin + i)] = s.pos0 + i;

  if (c.traits->scale_embeddings) {
    const float g = std::sqrt(static_cast<float>(E));
    for (int64_t i = 0; i < n * E; ++i) ws.x[i] *= g;
  }
  const float* rope_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
  const bool layer_norm = c.traits->norm == NormKind::kLayer;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    // Attention block: xn = norm(x); q, k, v from xn.
    for (int64_t i = 0; i < n; ++i)
      Normalize(kt, layer_norm, ws.x.data() + i * E, L.attn_norm, L.attn_norm_b,
                ws.xn.data() + i * E, E, c.rms_eps);
    ProjectQkv(L, n, ws, pool);
    if (c.traits->qk_norm)
      for (int64_t i = 0; i < n; ++i) {
        NormalizeHeads(kt, ws.q.data() + i * QD, c.n_head, HD, L.q_norm, c.rms_eps);
        NormalizeHeads(kt, ws.k.data() + i * KD, c.n_head_kv, HD, L.k_norm, c.rms_eps);
      }
    for (int64_t i = 0; i < n; ++i) {
      kernels::Rope(ws.q.data() + i * QD, static_cast<int32_t>(c.n_head), static_cast<int32_t>(HD),
                    static_cast<int32_t>(c.rope_dim), pos[i], c.rope_freq_base, c.rope_freq_scale,
                    c.rope_neox, rope_factors);
      kernels::Rope(ws.k.data() + i * KD, static_cast<int32_t>(c.n_head_kv),
                    static_cast<int32_t>(HD), static_cast<int32_t>(c.rope_dim), pos[i],
                    c.rope_freq_base, c.rope_freq_scale, c.rope_neox, rope_factors);
    }
    // Hand this step's K/V rows to the cache, which encodes them with its dtype's codec.
    for (const auto& s : batch.seqs)
      kv.WriteAt(static_cast<int32_t>(l), s.kv_seq, s.first_slot(), s.pos0, s.n_tokens,
                 ws.k.data() + s.token_begin * KD, ws.v.data() + s.token_begin * KD, KD);
    // Attention: tasks are (sequence, kv head, query chunk) so prefill and MQA still split.
    // A task that observes for a policy gets its own row of ws.observed (no sharing between
    // threads), summed into the sequence's row after the parallel loop.
    struct Task {
      size_t seq;
      int32_t kvh;
      int64_t q0, nq;
      int64_t observed_row;  // -1: no observer
    };
    std::vector<Task> tasks;
    constexpr int64_t kQChunk = 16;
    int64_t n_observing = 0;
    for (size_t si = 0; si < batch.seqs.size(); ++si) {
      const auto& s = batch.seqs[si];
      for (int32_t h = 0; h < c.n_head_kv; ++h)
        for (int64_t q0 = 0; q0 < s.n_tokens; q0 += kQChunk) {
          const int64_t nq = std::min(kQChunk, s.n_tokens - q0);
          const bool observes = s.observed != nullptr && q0 + nq > s.observe_from;
          tasks.push_back({si, h, q0, nq, observes ? n_observing++ : -1});
        }
    }
    if (n_observing > 0) ws.observed.assign(static_cast<size_t>(n_observing * max_kv), 0.0f);
    pool.ParallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t b, int64_t e, int th) {
      for (int64_t ti = b; ti < e; ++ti) {
        const Task& task = tasks[static_cast<size_t>(ti)];
        const auto& s = batch.seqs[task.seq];
        kernels::AttentionArgs a;
        a.q = ws.q.data() + (s.token_begin + task.q0) * QD;
        a.q_stride = QD;
        a.out = ws.attn.data() + (s.token_begin + task.q0) * QD;
        a.out_stride = QD;
        a.n_q = task.nq;
        a.slot0 = s.first_slot() + task.q0;
        const kvstore::SlotRange dead = kv.DeadSlots(static_cast<int32_t>(l), s.kv_seq, task.kvh);
        a.dead_begin = dead.begin;
        a.dead_end = dead.end;
        if (task.observed_row >= 0) {
          a.slot_scores = ws.observed.data() + task.observed_row * max_kv;
          a.observe_from = s.observe_from - task.q0;
        }
        a.n_head = static_cast<int32_t>(c.n_head);
        a.n_kv_head = static_cast<int32_t>(c.n_head_kv);
        a.head_dim = static_cast<int32_t>(HD);
        a.scale = scale;
        a.k = kv.KeyView(static_cast<int32_t>(l), s.kv_seq);
        a.v = kv.ValueView(static_cast<int32_t>(l), s.kv_seq);
        // One task, one thread: its gathered block table / positions live until the call ends.
        thread_local std::vector<int32_t> gathered_blocks, gathered_positions;
        if (s.sparse != nullptr && s.n_tokens == 1 && l >= s.sparse->dense_layers)
          GatherSparseBlocks(*s.sparse, kv.KeySummaries(static_cast<int32_t>(l)), task.kvh,
                             &gathered_blocks, &gathered_positions, &a);
        kt.attention(a, task.kvh, task.kvh + 1, ws.scratch[static_cast<size_t>(th)].data());
      }
    });
    for (const Task& task : tasks) {
      if (task.observed_row < 0) continue;
      const auto& s = batch.seqs[task.seq];
      const float* src = ws.observed.data() + task.observed_row * max_kv;
      const int64_t lane = l * s.observed_lanes + (s.observed_lanes > 1 ? task.kvh : 0);
      float* dst = s.observed + lane * s.observed_stride;
      for (int64_t p = 0; p < s.first_slot() + s.n_tokens; ++p) dst[p] += src[p];
    }
    MatMul(L.wo, ws.attn.data(), n, ws.y.data(), ws, pool);
    for (int64_t i = 0; i < n * E; ++i) ws.x[i] += ws.y[i];
    // Feed-forward block. A parallel block (falcon) feeds it the attention's normed input, which
    // xn still holds; otherwise xn = ffn_norm(x + attention).
    if (!c.traits->parallel_block)
      for (int64_t i = 0; i < n; ++i)
        kt.rms_norm(ws.x.data() + i * E, L.ffn_norm.data(), ws.xn.data() + i * E, E, c.rms_eps);
    FeedForward(L, n, ws, pool);
    for (int64_t i = 0; i < n * E; ++i) ws.x[i] += ws.y[i];
  }

  // Final norm and output projection, only for the rows that need logits.
  std::vector<int64_t> rows;
  for (const auto& s : batch.seqs) {
    if (s.logits_all) {
      for (int64_t i = 0; i < s.n_tokens; ++i) rows.push_back(s.token_begin + i);
    } else if (s.logits_last) {
      rows.push_back(s.token_begin + s.n_tokens - 1);
    }
  }
  const int64_t nr = static_cast<int64_t>(rows.size());
  logits->resize(static_cast<size_t>(nr * c.n_vocab));
  if (nr == 0) return Status::Ok();
  for (int64_t r = 0; r < nr; ++r)
    Normalize(kt, layer_norm, ws.x.data() + rows[r] * E, weights_.output_norm,
              weights_.output_norm_b, ws.xn.data() + r * E, E, c.rms_eps);
  MatMul(weights_.output, ws.xn.data(), nr, logits->data(), ws, pool);
  return Status::Ok();
}

}  // namespace kvforge::model
