#include "kvstore/kv_calc.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "base/strings.h"
#include "kvmeta/block_table.h"

namespace kvforge::kvstore {
namespace {

using base::StrFormat;

constexpr int64_t kDefaultBlockTokens = 16;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

long long LL(int64_t v) { return static_cast<long long>(v); }

// Checked int64 arithmetic for the totals (batch and sequence length come from the user).
struct Checked {
  bool overflow = false;
  int64_t Mul(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) overflow = true;
    return r;
  }
  int64_t Add(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) overflow = true;
    return r;
  }
};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

// Trims "%.6g"-style output; 0.3125 stays "0.3125", 40.0 becomes "40".
std::string Num(double v) { return StrFormat("%.6g", v); }

KvModelSpec Preset(const char* name, int64_t layers, int64_t heads, int64_t kv_heads,
                   int64_t head_dim, int64_t context, int64_t mla_rank = 0, int64_t rope = 0) {
  KvModelSpec s;
  s.name = name;
  s.n_layers = layers;
  s.n_heads = heads;
  s.n_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.context_length = context;
  s.mla_kv_lora_rank = mla_rank;
  s.mla_rope_dim = rope;
  return s;
}

bool IsMla(const KvModelSpec& spec) { return spec.mla_kv_lora_rank > 0 || spec.mla_rope_dim > 0; }

std::string ShapeLine(const KvCalcReport& r) {
  const KvModelSpec& m = r.request.model;
  std::string line = StrFormat("%lld layers", LL(m.n_layers));
  if (IsMla(m)) {
    line += StrFormat(", MLA latent %lld + rope %lld", LL(m.mla_kv_lora_rank), LL(m.mla_rope_dim));
    if (m.head_dim > 0) {
      line += StrFormat(" (MHA equivalent: %lld heads x %lld)", LL(m.n_heads), LL(m.head_dim));
    }
  } else {
    line += StrFormat(", %lld query heads, %lld KV heads (%s), head_dim %lld", LL(m.n_heads),
                      LL(m.n_kv_heads), std::string(KvAttentionName(r.model().attention)).c_str(),
                      LL(m.head_dim));
  }
  if (m.context_length > 0) line += StrFormat(", trained context %lld", LL(m.context_length));
  return line;
}

std::string PerTokenDetail(const KvCalcReport& r, const KvCalcVariant& v) {
  const KvModelSpec& m = r.request.model;
  std::string parts;
  if (v.attention == KvAttention::kMla) {
    parts = StrFormat("latent %lld + %lld = %lld values", LL(m.mla_kv_lora_rank),
                      LL(m.mla_rope_dim), LL(v.values_per_token_per_layer));
  } else {
    parts = StrFormat("K %lld + V %lld", LL(v.bytes_per_token_per_layer / 2),
                      LL(v.bytes_per_token_per_layer / 2));
  }
  return StrFormat("%lld bytes (%s KiB) = %lld layers x %lld bytes (%s)", LL(v.bytes_per_token),
                   Num(static_cast<double>(v.bytes_per_token) / 1024.0).c_str(), LL(m.n_layers),
                   LL(v.bytes_per_token_per_layer), parts.c_str());
}

std::string FormulaLine(const KvCalcReport& r, const KvCalcVariant& v) {
  const KvModelSpec& m = r.request.model;
  const KvDtype dtype = r.request.dtype;
  if (IsKivi(dtype)) {
    return "quantized tokens x (codes + scales/zero points) + f16 residual window (see metadata)";
  }
  const double bits = 8.0 * static_cast<double>(v.bytes_per_token_per_layer) /
                      static_cast<double>(v.values_per_token_per_layer);
  std::string per_value = std::fmod(bits, 8.0) != 0.0 ? StrFormat("%s bits / 8", Num(bits).c_str())
                          : bits == 8.0               ? std::string("1 byte")
                                        : StrFormat("%s bytes", Num(bits / 8.0).c_str());
  std::string formula;
  if (v.attention == KvAttention::kMla) {
    formula = StrFormat("= %lld layers x %lld seqs x %lld tokens x (%lld + %lld) values x %s",
                        LL(m.n_layers), LL(r.request.batch), LL(r.request.seq_len),
                        LL(m.mla_kv_lora_rank), LL(m.mla_rope_dim), per_value.c_str());
  } else {
    formula = StrFormat(
        "= 2 (K,V) x %lld layers x %lld seqs x %lld tokens x %lld KV heads x %lld dims x %s",
        LL(m.n_layers), LL(r.request.batch), LL(r.request.seq_len), LL(v.kv_heads), LL(m.head_dim),
        per_value.c_str());
  }
  return formula;
}

std::string MetadataLine(const KvCalcReport& r, const KvCalcVariant& v) {
  const KvDtype dtype = r.request.dtype;
  const int64_t batch = r.request.batch;
  const double total = static_cast<double>(std::max<int64_t>(v.kv_cache_bytes, 1));
  if (IsFp8(dtype)) {
    const int64_t streams = v.attention == KvAttention::kMla ? 1 : 2;
    return StrFormat(
        "FP8 per-tensor scales: %lld stream(s) x %lld layers x 4 bytes (one f32 scale each) = %lld "
        "bytes, negligible (%.2g of the KV cache); kept with the layer, not in the blocks; "
        "cache + scales = %lld bytes",
        LL(streams), LL(r.request.model.n_layers), LL(v.fixed_bytes),
        static_cast<double>(v.fixed_bytes) / total, LL(v.total_bytes));
  }
  if (IsKivi(dtype)) {
    const int64_t scales = batch * v.sequence_bytes.scale_bytes;
    const int64_t residual = batch * v.sequence_bytes.residual_bytes;
    return StrFormat(
        "f16 scale + zero point per group of 32: %lld bytes (%.3g%%); f16 residual window (last "
        "128 tokens): %lld bytes (%.3g%%); both included",
        LL(scales), 100.0 * static_cast<double>(scales) / total, LL(residual),
        100.0 * static_cast<double>(residual) / total);
  }
  if (kvquant::IsTurbo(dtype)) {
    const int64_t norms = batch * v.sequence_bytes.scale_bytes;
    return StrFormat(
        "one f16 norm per token per KV head (TurboQuant; the rotation and codebook are fixed, not "
        "stored): %lld bytes (%.3g%% of the total), included",
        LL(norms), 100.0 * static_cast<double>(norms) / total);
  }
  if (dtype == KvDtype::kInt8 || dtype == KvDtype::kQ8_0 || dtype == KvDtype::kQ4_0) {
    const int64_t scales = batch * v.sequence_bytes.scale_bytes;
    const char* what = dtype == KvDtype::kInt8 ? "one f16 scale per token per KV head"
                                               : "one f16 scale per block of 32 values";
    return StrFormat("%s: %lld bytes (%.3g%% of the total), included", what, LL(scales),
                     100.0 * static_cast<double>(scales) / total);
  }
  if (kvquant::IsNuq(dtype)) {
    const int64_t meta = batch * v.sequence_bytes.scale_bytes;
    return StrFormat(
        "sparse f16 outlier slots (2%% of a key row, 1%% of a value row, 4 bytes each) + f16 "
        "center/radius per value row: %lld bytes (%.3g%%), included; per-layer f32 key "
        "thresholds and lookup tables: %lld bytes, kept with the layer; cache + tables = %lld "
        "bytes",
        LL(meta), 100.0 * static_cast<double>(meta) / total, LL(v.fixed_bytes), LL(v.total_bytes));
  }
  return "none: values are stored as they are";
}

void AppendJsonVariant(const KvCalcVariant& v, std::string* out) {
  *out += StrFormat(
      "{\"name\":\"%s\",\"kv_heads\":%lld,\"is_model\":%s,\"values_per_token_per_layer\":%lld,"
      "\"bytes_per_token_per_layer\":%lld,\"bytes_per_token\":%lld,\"kv_cache_bytes\":%lld,"
      "\"kv_cache_gib\":%.10g,\"kv_fixed_bytes\":%lld,\"kv_total_bytes\":%lld,"
      "\"block_bytes\":%lld,\"paged_kv_cache_bytes\":%lld,\"ratio_vs_mha\":%.6g}",
      std::string(KvAttentionName(v.attention)).c_str(), LL(v.kv_heads),
      v.is_model ? "true" : "false", LL(v.values_per_token_per_layer),
      LL(v.bytes_per_token_per_layer), LL(v.bytes_per_token), LL(v.kv_cache_bytes),
      static_cast<double>(v.kv_cache_bytes) / kGiB, LL(v.fixed_bytes), LL(v.total_bytes),
      LL(v.block_bytes), LL(v.paged_kv_cache_bytes), v.ratio_vs_mha);
}

}  // namespace

const std::vector<KvModelSpec>& KvPresets() {
  // From each model's published config.json (num_hidden_layers, num_attention_heads,
  // num_key_value_heads, head_dim or hidden_size / heads, max_position_embeddings).
  static const std::vector<KvModelSpec> kPresets = {
      Preset("llama-2-7b", 32, 32, 32, 128, 4096),
      Preset("llama-2-13b", 40, 40, 40, 128, 4096),
      Preset("llama-2-70b", 80, 64, 8, 128, 4096),
      Preset("llama-3-8b", 32, 32, 8, 128, 8192),
      Preset("llama-3-70b", 80, 64, 8, 128, 8192),
      Preset("llama-3.1-8b", 32, 32, 8, 128, 131072),
      Preset("llama-3.1-70b", 80, 64, 8, 128, 131072),
      Preset("llama-3.1-405b", 126, 128, 8, 128, 131072),
      Preset("mistral-7b", 32, 32, 8, 128, 32768),
      Preset("gemma-2b", 18, 8, 1, 256, 8192),
      Preset("falcon-7b", 32, 71, 1, 64, 2048),
      Preset("qwen2.5-7b", 28, 28, 4, 128, 32768),
      // MLA: the cache holds kv_lora_rank + qk_rope_head_dim values per token per layer. The
      // MHA equivalent (for the comparison) is 128 heads x 128.
      Preset("deepseek-v3", 61, 128, 128, 128, 163840, 512, 64),
  };
  return kPresets;
}

const KvModelSpec* FindKvPreset(std::string_view name) {
  const std::string key = Lower(name);
  for (const KvModelSpec& spec : KvPresets()) {
    if (spec.name == key) return &spec;
  }
  return nullptr;
}

std::string KvPresetNames() {
  std::string out;
  for (const KvModelSpec& spec : KvPresets()) {
    if (!out.empty()) out += ", ";
    out += spec.name;
  }
  return out;
}

std::string_view KvAttentionName(KvAttention attention) {
  switch (attention) {
    case KvAttention::kMha:
      return "MHA";
    case KvAttention::kGqa:
      return "GQA";
    case KvAttention::kMqa:
      return "MQA";
    case KvAttention::kMla:
      return "MLA";
  }
  return "?";
}

Status ValidateKvModelSpec(const KvModelSpec& m) {
  const std::string who = m.name.empty() ? "model" : m.name;
  auto bad = [&who](const std::string& msg) { return Status::InvalidArgument(who + ": " + msg); };
  const struct {
    const char* name;
    int64_t value;
  } fields[] = {{"layers", m.n_layers},
                {"heads", m.n_heads},
                {"kv heads", m.n_kv_heads},
                {"head dim", m.head_dim},
                {"MLA rank", m.mla_kv_lora_rank},
                {"rope dim", m.mla_rope_dim},
                {"context length", m.context_length}};
  for (const auto& f : fields) {
    if (f.value < 0)
      return bad(StrFormat("%s must not be negative (got %lld)", f.name, LL(f.value)));
  }
  if (m.n_layers < 1) return bad("the layer count must be >= 1");
  if (IsMla(m)) {
    if (m.mla_kv_lora_rank < 1 || m.mla_rope_dim < 1) {
      return bad(StrFormat("MLA needs both a latent rank and a rope dim > 0 (got %lld and %lld)",
                           LL(m.mla_kv_lora_rank), LL(m.mla_rope_dim)));
    }
    return Status::Ok();  // head fields only feed the optional MHA comparison
  }
  if (m.n_kv_heads < 1) return bad("the KV head count must be >= 1");
  if (m.head_dim < 1) return bad("the head dim must be >= 1");
  if (m.n_heads > 0) {
    if (m.n_heads < m.n_kv_heads) {
      return bad(StrFormat("%lld query heads cannot share %lld KV heads", LL(m.n_heads),
                           LL(m.n_kv_heads)));
    }
    if (m.n_heads % m.n_kv_heads != 0) {
      return bad(StrFormat("query heads (%lld) must be a multiple of KV heads (%lld)",
                           LL(m.n_heads), LL(m.n_kv_heads)));
    }
  }
  return Status::Ok();
}

Result<KvCalcReport> ComputeKvCalc(const KvCalcRequest& request) {
  KVF_RETURN_IF_ERROR(ValidateKvModelSpec(request.model));
  if (request.seq_len < 1) {
    return Status::InvalidArgument(
        StrFormat("sequence length must be >= 1 (got %lld)", LL(request.seq_len)));
  }
  if (request.batch < 1) {
    return Status::InvalidArgument(StrFormat("batch must be >= 1 (got %lld)", LL(request.batch)));
  }
  if (request.block_tokens < 0) {
    return Status::InvalidArgument(
        StrFormat("block tokens must be >= 1 (got %lld)", LL(request.block_tokens)));
  }

  KvCalcReport report;
  report.request = request;
  KvCalcRequest& req = report.request;
  KvModelSpec& m = req.model;
  if (m.name.empty()) m.name = "custom";
  if (req.block_tokens == 0) {
    req.block_tokens = IsKivi(req.dtype) ? KvLayoutConfig{}.kivi_group : kDefaultBlockTokens;
  }
  const bool mla = IsMla(m);
  if (m.n_heads == 0 && m.n_kv_heads > 0) {
    m.n_heads = m.n_kv_heads;
    if (!mla) report.notes.push_back("query head count not given: assuming MHA (heads = KV heads)");
  }
  if (m.context_length > 0 && req.seq_len > m.context_length) {
    report.notes.push_back(StrFormat("%lld tokens exceed the model's trained context of %lld",
                                     LL(req.seq_len), LL(m.context_length)));
  }

  // Which layouts to compare, and which one is the model's own.
  struct Candidate {
    KvAttention attention;
    int64_t kv_heads;
  };
  std::vector<Candidate> candidates;
  const bool has_heads = m.head_dim > 0 && m.n_heads > 0;
  if (has_heads) {
    candidates.push_back({KvAttention::kMha, m.n_heads});
    if (!mla && m.n_kv_heads > 1 && m.n_kv_heads < m.n_heads) {
      candidates.push_back({KvAttention::kGqa, m.n_kv_heads});
    }
    if (m.n_heads > 1) candidates.push_back({KvAttention::kMqa, 1});
  } else if (mla) {
    report.notes.push_back("no MHA-equivalent heads x head_dim given: MHA/GQA/MQA not compared");
  }
  if (mla) candidates.push_back({KvAttention::kMla, 0});
  KvAttention own = KvAttention::kMla;
  if (!mla) {
    own = m.n_kv_heads == m.n_heads ? KvAttention::kMha
          : m.n_kv_heads == 1       ? KvAttention::kMqa
                                    : KvAttention::kGqa;
  }

  bool found_model = false;
  for (const Candidate& cand : candidates) {
    KvLayoutConfig cfg;
    cfg.num_layers = m.n_layers;
    cfg.dtype = req.dtype;
    cfg.block_tokens = req.block_tokens;
    if (cand.attention == KvAttention::kMla) {
      cfg.mla_kv_lora_rank = m.mla_kv_lora_rank;
      cfg.mla_rope_dim = m.mla_rope_dim;
    } else {
      cfg.num_kv_heads = cand.kv_heads;
      cfg.head_dim = m.head_dim;
    }
    const bool is_model = cand.attention == own;
    Result<KvLayout> layout = KvLayout::Create(cfg);
    if (!layout.ok()) {
      if (is_model) return layout.status();
      report.notes.push_back(std::string(KvAttentionName(cand.attention)) +
                             " not compared: " + layout.status().message());
      continue;
    }
    KvCalcVariant v;
    v.attention = cand.attention;
    v.kv_heads = cand.kv_heads;
    v.is_model = is_model;
    v.values_per_token_per_layer = layout->ValuesPerTokenPerLayer();
    v.bytes_per_token_per_layer = layout->BytesPerTokenPerLayer();
    v.bytes_per_token = layout->BytesPerToken();
    KVF_ASSIGN_OR_RETURN(v.sequence_bytes, layout->BytesForTokensSplit(req.seq_len));
    v.fixed_bytes = layout->FixedBytes();
    v.block_bytes = layout->BlockBytes();
    v.block_padding_bytes = layout->BlockPaddingBytes();
    // Blocks hold every token except the KIVI residual window, which lives beside them.
    const int64_t blocked_tokens =
        req.seq_len - (IsKivi(req.dtype) ? req.seq_len % cfg.kivi_residual_tokens : 0);
    v.blocks_per_sequence = kvmeta::BlocksForTokens(blocked_tokens, req.block_tokens);
    Checked c;
    v.kv_cache_bytes = c.Mul(req.batch, v.sequence_bytes.total());
    v.total_bytes = c.Add(v.kv_cache_bytes, v.fixed_bytes);
    const int64_t paged_seq =
        c.Add(c.Mul(v.blocks_per_sequence, v.block_bytes), v.sequence_bytes.residual_bytes);
    v.paged_kv_cache_bytes = c.Mul(req.batch, paged_seq);
    if (c.overflow) {
      return Status::InvalidArgument(
          StrFormat("the KV cache for batch %lld x %lld tokens overflows a 64-bit byte count",
                    LL(req.batch), LL(req.seq_len)));
    }
    if (is_model) {
      report.model_index = report.variants.size();
      found_model = true;
    }
    report.variants.push_back(std::move(v));
  }
  if (!found_model) return Status::Internal("kv calc: the model's own layout was not computed");
  for (const KvCalcVariant& base_row : report.variants) {
    if (base_row.attention != KvAttention::kMha) continue;
    for (KvCalcVariant& v : report.variants) {
      v.ratio_vs_mha =
          static_cast<double>(base_row.bytes_per_token) / static_cast<double>(v.bytes_per_token);
    }
  }
  return report;
}

std::string FormatGiB(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  return StrFormat("%s GiB = %s MiB (%lld bytes)", Num(b / kGiB).c_str(), Num(b / kMiB).c_str(),
                   LL(bytes));
}

std::string FormatKvCalcText(const KvCalcReport& r) {
  const KvCalcRequest& req = r.request;
  const KvCalcVariant& own = r.model();
  std::string out;
  out += StrFormat("kvforge calc: %s\n", req.model.name.c_str());
  out += StrFormat("  shape      %s\n", ShapeLine(r).c_str());
  out += StrFormat("  kv dtype   %s (%s bits per stored value, scales included)\n",
                   std::string(KvDtypeName(req.dtype)).c_str(),
                   Num(8.0 * static_cast<double>(own.bytes_per_token_per_layer) /
                       static_cast<double>(own.values_per_token_per_layer))
                       .c_str());
  out += StrFormat("  workload   batch %lld x %lld tokens\n", LL(req.batch), LL(req.seq_len));
  out += StrFormat("  per token  %s\n", PerTokenDetail(r, own).c_str());
  if (own.attention == KvAttention::kMla && own.ratio_vs_mha > 0.0) {
    const KvCalcVariant& mha = r.variants.front();
    out += StrFormat(
        "             vs MHA equivalent: %lld bytes per token per layer (%lld heads x %lld x 2 "
        "(K,V) "
        "x %s bytes): %.1fx less\n",
        LL(mha.bytes_per_token_per_layer), LL(mha.kv_heads), LL(req.model.head_dim),
        Num(static_cast<double>(mha.bytes_per_token_per_layer) /
            static_cast<double>(mha.values_per_token_per_layer))
            .c_str(),
        own.ratio_vs_mha);
  }
  out += StrFormat("  KV cache   %s\n", FormatGiB(own.kv_cache_bytes).c_str());
  out += StrFormat("             %s\n", FormulaLine(r, own).c_str());
  out += StrFormat("  metadata   %s\n", MetadataLine(r, own).c_str());
  out += StrFormat(
      "  paged      %lld blocks/seq of %lld tokens x %lld bytes (%lld bytes row padding) = %s\n",
      LL(own.blocks_per_sequence), LL(req.block_tokens), LL(own.block_bytes),
      LL(own.block_padding_bytes), FormatGiB(own.paged_kv_cache_bytes).c_str());
  out += StrFormat("\n  same model, other attention layouts (%s, batch %lld, %lld tokens):\n",
                   std::string(KvDtypeName(req.dtype)).c_str(), LL(req.batch), LL(req.seq_len));
  out += StrFormat("    %-8s %8s %12s %11s %12s  %-48s %s\n", "variant", "kv_heads", "values/tok/L",
                   "bytes/tok/L", "bytes/token", "KV cache", "vs MHA");
  for (const KvCalcVariant& v : r.variants) {
    std::string name = std::string(KvAttentionName(v.attention)) + (v.is_model ? " *" : "");
    std::string heads = v.attention == KvAttention::kMla ? "-" : StrFormat("%lld", LL(v.kv_heads));
    std::string ratio = "-";
    if (v.ratio_vs_mha > 0.0) {
      ratio = v.attention == KvAttention::kMha ? "1x (baseline)"
                                               : StrFormat("%.1fx less", v.ratio_vs_mha);
    }
    out += StrFormat("    %-8s %8s %12lld %11lld %12lld  %-48s %s\n", name.c_str(), heads.c_str(),
                     LL(v.values_per_token_per_layer), LL(v.bytes_per_token_per_layer),
                     LL(v.bytes_per_token), FormatGiB(v.kv_cache_bytes).c_str(), ratio.c_str());
  }
  out += "    (* = this model's own layout)\n";
  for (const std::string& note : r.notes) out += "  note: " + note + "\n";
  return out;
}

std::string FormatKvCalcJson(const KvCalcReport& r) {
  const KvCalcRequest& req = r.request;
  const KvModelSpec& m = req.model;
  const KvCalcVariant& own = r.model();
  const int64_t batch = req.batch;
  std::string out = "{";
  out += "\"model\":" + base::JsonQuote(m.name);
  out += StrFormat(
      ",\"n_layers\":%lld,\"n_heads\":%lld,\"n_kv_heads\":%lld,\"head_dim\":%lld,"
      "\"mla_kv_lora_rank\":%lld,\"mla_rope_dim\":%lld,\"context_length\":%lld",
      LL(m.n_layers), LL(m.n_heads), LL(m.n_kv_heads), LL(m.head_dim), LL(m.mla_kv_lora_rank),
      LL(m.mla_rope_dim), LL(m.context_length));
  out += StrFormat(",\"attention\":\"%s\",\"kv_dtype\":\"%s\",\"bits_per_value\":%.6g",
                   std::string(KvAttentionName(own.attention)).c_str(),
                   std::string(KvDtypeName(req.dtype)).c_str(),
                   8.0 * static_cast<double>(own.bytes_per_token_per_layer) /
                       static_cast<double>(own.values_per_token_per_layer));
  out += StrFormat(",\"seq_len\":%lld,\"batch\":%lld,\"block_tokens\":%lld", LL(req.seq_len),
                   LL(batch), LL(req.block_tokens));
  out += StrFormat(
      ",\"bytes_per_token\":%lld,\"bytes_per_token_per_layer\":%lld,\"kv_cache_bytes\":%lld,"
      "\"kv_cache_gib\":%.10g,\"kv_code_bytes\":%lld,\"kv_scale_bytes\":%lld,"
      "\"kv_residual_bytes\":%lld,\"kv_fixed_bytes\":%lld,\"kv_total_bytes\":%lld",
      LL(own.bytes_per_token), LL(own.bytes_per_token_per_layer), LL(own.kv_cache_bytes),
      static_cast<double>(own.kv_cache_bytes) / kGiB, LL(batch * own.sequence_bytes.code_bytes),
      LL(batch * own.sequence_bytes.scale_bytes), LL(batch * own.sequence_bytes.residual_bytes),
      LL(own.fixed_bytes), LL(own.total_bytes));
  out += StrFormat(
      ",\"block_bytes\":%lld,\"block_padding_bytes\":%lld,\"blocks_per_sequence\":%lld,"
      "\"paged_kv_cache_bytes\":%lld",
      LL(own.block_bytes), LL(own.block_padding_bytes), LL(own.blocks_per_sequence),
      LL(own.paged_kv_cache_bytes));
  out += ",\"variants\":[";
  for (size_t i = 0; i < r.variants.size(); ++i) {
    if (i > 0) out += ",";
    AppendJsonVariant(r.variants[i], &out);
  }
  out += "],\"notes\":[";
  for (size_t i = 0; i < r.notes.size(); ++i) {
    if (i > 0) out += ",";
    out += base::JsonQuote(r.notes[i]);
  }
  out += "]}\n";
  return out;
}

}  // namespace kvforge::kvstore
