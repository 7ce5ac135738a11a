#include "model_shape.h"

#include "model_file.h"

namespace kvforge::cli {

Result<KvModelShape> ReadKvModelShape(const std::string& gguf_path) {
  KVF_ASSIGN_OR_RETURN(auto f, OpenModelFile(gguf_path));
  KvModelShape s;
  KVF_ASSIGN_OR_RETURN(std::string arch, f->GetString("general.architecture"));
  if (const auto* n = f->Find("general.name"); n && n->type == gguf::ValueType::kString)
    s.name = std::string(n->str);
  if (s.name.empty()) s.name = arch;
  const std::string a = arch + ".";
  KVF_ASSIGN_OR_RETURN(s.n_layers, f->GetInt(a + "block_count"));
  KVF_ASSIGN_OR_RETURN(s.n_heads, f->GetInt(a + "attention.head_count"));
  if (const auto* v = f->Find(a + "attention.head_count_kv");
      v && v->type == gguf::ValueType::kArray)
    return Status::Unimplemented(gguf_path +
                                 ": per-layer head_count_kv arrays are not supported by calc");
  KVF_ASSIGN_OR_RETURN(s.n_kv_heads, f->GetIntOr(a + "attention.head_count_kv", s.n_heads));
  KVF_ASSIGN_OR_RETURN(int64_t embd, f->GetInt(a + "embedding_length"));
  if (s.n_heads <= 0 || s.n_layers <= 0 || s.n_kv_heads <= 0 || embd <= 0)
    return Status::InvalidArgument(gguf_path + ": layer/head counts must be positive");
  KVF_ASSIGN_OR_RETURN(s.head_dim, f->GetIntOr(a + "attention.key_length", embd / s.n_heads));
  KVF_ASSIGN_OR_RETURN(s.context_length, f->GetIntOr(a + "context_length", 0));
  KVF_ASSIGN_OR_RETURN(s.mla_kv_lora_rank, f->GetIntOr(a + "attention.kv_lora_rank", 0));
  if (s.mla_kv_lora_rank > 0) {
    // DeepSeek MLA: the cache holds the latent plus the shared RoPE key; the MHA-equivalent
    // head width is the full (no-RoPE + RoPE) query/key width.
    KVF_ASSIGN_OR_RETURN(s.mla_rope_dim, f->GetIntOr(a + "rope.dimension_count", 64));
    KVF_ASSIGN_OR_RETURN(s.head_dim, f->GetIntOr(a + "attention.key_length_mla", s.head_dim));
    s.n_kv_heads = s.n_heads;
  }
  return s;
}

}  // namespace kvforge::cli
