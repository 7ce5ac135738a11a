#include "engine/engine_resources.h"

#include <algorithm>

#include "assets/default_model.h"
#include "base/log.h"
#include "base/strings.h"
#include "engine/kv_budget.h"
#include "engine/kv_calibrate.h"
#include "engine/kv_eviction.h"
#include "engine/kv_options.h"
#include "gguf/gguf_reader.h"
#include "kvforge/config_names.h"

namespace kvforge {

Status ValidateEngineConfig(const EngineConfig& c) {
  if (c.threads < 0 || c.threads > 1024) return Status::InvalidArgument("threads must be 0..1024");
  if (c.block_size <= 0 || c.block_size > 4096)
    return Status::InvalidArgument("block_size must be 1..4096 tokens");
  if (c.max_num_batched_tokens <= 0 || c.max_num_seqs <= 0)
    return Status::InvalidArgument("max_num_batched_tokens and max_num_seqs must be positive");
  if (c.max_model_len < 0) return Status::InvalidArgument("max_model_len must be >= 0");
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 32)
    return Status::InvalidArgument("num_speculative_tokens must be 1..32");
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_max < c.prompt_lookup_min ||
      c.prompt_lookup_max > 32)
    return Status::InvalidArgument(
        "prompt lookup needs 1 <= prompt_lookup_min <= prompt_lookup_max <= 32");
  if (c.speculative_method == SpeculativeMethod::kDraftModel && c.speculative_model.empty())
    return Status::InvalidArgument("speculative_method draft_model needs speculative_model");
  if (c.speculative_method == SpeculativeMethod::kNgram && !c.speculative_model.empty())
    return Status::InvalidArgument(
        "speculative_model is a draft model: it needs speculative_method draft_model, not ngram");
  if (!c.kv_policy.enabled() && c.kv_policy.budget != 0)
    return Status::InvalidArgument("kv_budget needs a kv_policy (the policy is none)");
  return ValidateKvPolicy(c.kv_policy).WithContext("kv_policy");
}

SpeculativeMethod EffectiveSpeculativeMethod(const EngineConfig& c) {
  if (c.speculative_method == SpeculativeMethod::kOff && !c.speculative_model.empty())
    return SpeculativeMethod::kDraftModel;
  return c.speculative_method;
}

}  // namespace kvforge

namespace kvforge::engine {

using base::StrFormat;

namespace {

Result<std::unique_ptr<model::Model>> LoadModel(const EngineConfig& c) {
  if (c.model.empty())
    return model::Model::LoadFromMemory(assets::DefaultModelData(), assets::DefaultModelSize(),
                                        assets::kDefaultModelName);
  KVF_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::Load(c.model));
  if (c.mlock)
    if (Status s = m->LockWeights(); !s.ok()) KVF_LOG_WARN("%s", s.message().c_str());
  return m;
}

uint64_t WeightBytes(const model::Model& m) {
  uint64_t bytes = 0;
  for (const auto& t : m.file().tensors()) bytes += t.nbytes;
  return bytes;
}

// The default pool (no byte budget, no utilization): see CreateEngineResources.
int64_t DefaultBlocks(int64_t blocks_per_ctx, int64_t sequences, uint64_t per_block,
                      uint64_t weight_bytes) {
  int64_t blocks = blocks_per_ctx * sequences;
  if (const uint64_t avail = AvailableMemoryBytes(); avail > 0) {
    const double cap = 0.4 * static_cast<double>(avail) - static_cast<double>(weight_bytes);
    blocks = std::min<int64_t>(
        blocks, static_cast<int64_t>(std::max(0.0, cap) / static_cast<double>(per_block)));
  }
  return std::max(blocks, blocks_per_ctx);
}

}  // namespace

Result<EngineResources> CreateEngineResources(const EngineConfig& c, int64_t concurrent_sequences) {
  KVF_RETURN_IF_ERROR(ValidateEngineConfig(c));
  EngineResources r;
  KVF_ASSIGN_OR_RETURN(r.model, LoadModel(c));
  r.model->SetMlaAttention(static_cast<model::MlaAttention>(c.mla_attention));
  KVF_ASSIGN_OR_RETURN(r.tok, tokenizer::Tokenizer::FromGguf(r.model->file()));
  const model::ModelConfig& mc = r.model->config();
  if (r.tok->n_vocab() > mc.n_vocab)
    return Status::InvalidArgument((c.model.empty() ? std::string("the model") : c.model) +
                                   ": the tokenizer has more tokens than the embedding");
  r.max_model_len = c.max_model_len > 0 ? c.max_model_len : std::min<int64_t>(mc.n_ctx_train, 8192);
  if (!c.chunked_prefill && c.max_num_batched_tokens < r.max_model_len)
    return Status::InvalidArgument(
        StrFormat("without chunked prefill max_num_batched_tokens (%lld) must be at "
                  "least max_model_len (%lld)",
                  (long long)c.max_num_batched_tokens, (long long)r.max_model_len));
  KVF_ASSIGN_OR_RETURN(kvstore::PagedKvCacheConfig kc, MakeKvCacheConfig(mc, c));
  KVF_ASSIGN_OR_RETURN(r.block_bytes, KvBlockBytes(kc));
  const uint64_t weight_bytes = WeightBytes(*r.model);
  const int64_t bt = kc.store.block_tokens;
  const int64_t blocks_per_ctx = (r.max_model_len + bt - 1) / bt;
  KVF_ASSIGN_OR_RETURN(
      kc.store.num_blocks,
      KvBlocksForBudget(c.kv_cache_memory_bytes, c.memory_utilization, r.block_bytes, weight_bytes,
                        DefaultBlocks(blocks_per_ctx, std::max<int64_t>(1, concurrent_sequences),
                                      r.block_bytes, weight_bytes)));
  kc.prefix_caching = c.enable_prefix_caching && !c.contiguous_kv;
  kc.prefix_mode = c.prefix_cache_mode == PrefixCacheMode::kRadix ? kvmeta::PrefixCacheMode::kRadix
                                                                  : kvmeta::PrefixCacheMode::kHash;
  r.cache_config = kc;
  KVF_ASSIGN_OR_RETURN(r.cache, kvstore::PagedKvCache::Create(kc));
  KVF_RETURN_IF_ERROR(CheckPolicyFitsCache(c.kv_policy, *r.cache));
  r.pool = std::make_unique<kernels::ThreadPool>(c.threads);
  KVF_RETURN_IF_ERROR(
      CalibrateKvAtStartup(*r.model, *r.tok, *r.cache, *r.pool, r.max_model_len, c.kv_scales));
  KVF_LOG_INFO("%s%s, prefix caching %s", DescribeKvCache(*r.cache).c_str(),
               c.contiguous_kv ? ", contiguous reservation per sequence" : "",
               r.cache->prefix_cache() ? ConfigName(c.prefix_cache_mode) : "off");
  return r;
}

ModelInfo DescribeModel(const EngineResources& r) {
  const model::ModelConfig& c = r.model->config();
  ModelInfo i;
  i.architecture = c.arch_name;
  i.name = c.name;
  i.n_vocab = c.n_vocab;
  i.n_embd = c.n_embd;
  i.n_layer = c.n_layer;
  i.n_head = c.n_head;
  i.n_head_kv = c.n_head_kv;
  i.head_dim = c.head_dim;
  i.n_ff = c.n_ff;
  i.n_ctx_train = c.n_ctx_train;
  i.rope_dim = c.rope_dim;
  i.rope_freq_base = c.rope_freq_base;
  i.rope_freq_scale = c.rope_freq_scale;
  i.rope_neox = c.rope_neox;
  i.rope_freq_factors = static_cast<int64_t>(c.rope_freq_factors.size());
  i.block = model::DescribeBlock(*c.traits);
  i.kv_lora_rank = c.mla.kv_lora_rank;
  i.q_lora_rank = c.mla.q_lora_rank;
  i.qk_nope_dim = c.mla.nope_dim;
  i.qk_rope_dim = c.mla.rope_dim;
  i.v_head_dim = c.mla.v_head_dim;
  i.n_expert = c.moe.n_expert;
  i.n_expert_used = c.moe.n_expert_used;
  i.n_expert_shared = c.moe.n_shared;
  i.n_ff_expert = c.moe.n_ff_expert;
  i.leading_dense = c.moe.leading_dense;
  i.rms_eps = c.rms_eps;
  i.tied_output = r.model->weights().tied_output;
  i.n_params = 0;
  i.weight_bytes = 0;
  for (const auto& t : r.model->file().tensors()) {
    i.n_params += static_cast<uint64_t>(t.NumElements());
    i.weight_bytes += t.nbytes;
  }
  i.tokenizer_model = r.tok->vocab().model;
  i.bos = r.tok->bos();
  i.eos = r.tok->eos();
  i.kv_bytes_per_token = static_cast<uint64_t>(KvBytesPerToken(r.cache_config));
  i.kv_cache_dtype = KvDtypeLabel(r.cache_config.store);
  if (const auto* t = r.model->file().Find("tokenizer.chat_template");
      t && t->type == gguf::ValueType::kString)
    i.chat_template = std::string(t->str);
  const auto& vocab = r.tok->vocab();
  if (vocab.bos >= 0) i.bos_text = vocab.texts[static_cast<size_t>(vocab.bos)];
  if (vocab.eos >= 0) i.eos_text = vocab.texts[static_cast<size_t>(vocab.eos)];
  return i;
}

}  // namespace kvforge::engine
