#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"
#include "base/token_ids.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "model/token_parallel.h"
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
      "model: %s of weights used in place from the mmap (0 bytes repacked), bound in %.1f ms; "
      "%s kernels",
      base::HumanBytes(bytes).c_str(),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
      kernels::Active().name);
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
    attn.resize(n * std::max(c.q_dim(), c.n_head * c.mla.v_head_dim));
    y.resize(n * c.n_embd);
    fused.resize(n * std::max(c.q_dim() + 2 * c.kv_dim(), 2 * c.n_ff));
    gate.resize(n * c.n_ff);
    up.resize(n * c.n_ff);
    ffn.resize(n * c.n_ff);
    const MlaConfig& m = c.mla;
    if (m.kv_lora_rank > 0) {
      mla_qf.resize(n * c.n_head * m.qk_head_dim());
      mla_q.resize(n * c.n_head * m.latent_dim());
      mla_out.resize(n * c.n_head * m.kv_lora_rank);
      const int64_t g = std::max({m.nope_dim, m.kv_lora_rank, m.v_head_dim, m.q_lora_rank});
      gather_in.resize(n * g);
      gather_out.resize(n * g);
    }
    const MoeConfig& e = c.moe;
    const int64_t moe_width = std::max(e.n_ff_expert, e.n_shared * e.n_ff_expert);
    if (e.n_expert > 0) {
      moe_logits.resize(n * e.n_expert);
      moe_x.resize(n * c.n_embd);
      moe_gate.resize(n * moe_width);
      moe_up.resize(n * moe_width);
      moe_act.resize(n * moe_width);
      moe_y.resize(n * c.n_embd);
    }
    const int64_t widest = std::max({c.n_embd, c.n_ff, c.q_dim(), c.n_head * m.v_head_dim,
                                     m.q_lora_rank, m.kv_lora_rank, m.nope_dim, moe_width});
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

// x += y for n rows of e floats (the residual connection).
void AddResidual(Workspace& ws, int64_t n, int64_t e, kernels::ThreadPool& pool) {
  float* x = ws.x.data();
  const float* y = ws.y.data();
  ForEachToken(pool, n, [&](int64_t i) {
    for (int64_t j = i * e; j < (i + 1) * e; ++j) x[j] += y[j];
  });
}

}  // namespace

void Model::MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y, Workspace& ws,
                   kernels::ThreadPool& pool, int64_t x_stride, int64_t y_stride,
                   bool exact) const {
  const kernels::KernelTable& kt = kernels::Active();
  if (x_stride == 0) x_stride = w.cols;
  if (y_stride == 0) y_stride = w.rows;
  const size_t xrow = kernels::PreparedRowBytes(w.type, w.cols, n_tok);
  const uint8_t* xp;
  if (kernels::ActFormatFor(w.type, n_tok) == kernels::ActFormat::kF32 && x_stride == w.cols) {
    xp = reinterpret_cast<const uint8_t*>(x);  // already in the right format
  } else if (kernels::ActFormatFor(w.type, n_tok) == kernels::ActFormat::kF32) {
    for (int64_t t = 0; t < n_tok; ++t)
      std::memcpy(ws.act.data() + t * xrow, x + t * x_stride, static_cast<size_t>(w.cols) * 4);
    xp = ws.act.data();
  } else {
    for (int64_t t = 0; t < n_tok; ++t)
      kt.prepare_act(w.type, x + t * x_stride, ws.act.data() + t * xrow, w.cols);
    xp = ws.act.data();
  }
  ws.matmul_flops += 2 * w.rows * w.cols * n_tok;
  const auto matmul = exact ? kt.matmul_rows_exact : kt.matmul_rows;
  const auto rows = [&](int64_t r0, int64_t r1, int) {
    matmul(w.type, w.data, w.row_bytes, w.cols, xp, n_tok, y, y_stride, r0, r1);
  };
  if (n_tok >= kernels::kDequantGemmMinTokens) {
    pool.ParallelForGrain(w.rows, 16, rows);
    return;
  }
  // Decode and small batches stream the weights from memory: the threads take chunks of about
  // an eighth of their share in turn, so one slowed by the machine does fewer (a static split
  // waits for the slowest half). Chunks are multiples of 48 rows (the register tiles' 3 and 6,
  // the AVX2 row block) and fixed by the shape alone, so the result does not depend on timing.
  constexpr int64_t kChunkAlign = 48;
  const int64_t share = w.rows / (8 * static_cast<int64_t>(pool.num_threads()));
  const int64_t chunk =
      std::max<int64_t>(kChunkAlign, (share + kChunkAlign - 1) / kChunkAlign * kChunkAlign);
  pool.ParallelForDynamic(w.rows, chunk, rows);
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
  const int64_t E = c.n_embd;

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
  const bool layer_norm = c.traits->norm == NormKind::kLayer;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    // Attention block: xn = norm(x); q, k, v from xn.
    ForEachToken(pool, n, [&](int64_t i) {
      Normalize(kt, layer_norm, ws.x.data() + i * E, L.attn_norm, L.attn_norm_b,
                ws.xn.data() + i * E, E, c.rms_eps);
    });
    if (c.traits->mla) {
      AttendMla(l, L, batch, pos, kv, ws, pool);
    } else {
      AttendLlama(l, L, batch, pos, kv, ws, pool);
    }
    AddResidual(ws, n, E, pool);
    // Feed-forward block. A parallel block (falcon) feeds it the attention's normed input, which
    // xn still holds; otherwise xn = ffn_norm(x + attention).
    if (!c.traits->parallel_block)
      ForEachToken(pool, n, [&](int64_t i) {
        kt.rms_norm(ws.x.data() + i * E, L.ffn_norm.data(), ws.xn.data() + i * E, E, c.rms_eps);
      });
    if (c.moe.IsMoeLayer(l)) {
      MoeFeedForward(L, n, ws, pool);
    } else {
      FeedForward(L, n, ws, pool);
    }
    AddResidual(ws, n, E, pool);
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
  MatMul(weights_.output, ws.xn.data(), nr, logits->data(), ws, pool, 0, 0, /*exact=*/true);
  return Status::Ok();
}

}  // namespace kvforge::model
