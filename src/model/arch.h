// arch.h — what each supported GGUF architecture computes differently inside the shared decoder
// block (docs/adr/0006-model-families.md). A family is a row of traits, not a forked forward:
// the block code reads the traits, so a new family that only recombines these choices is a new
// row, and one that needs new math (MLA, MoE) adds a trait and its code path.
#pragma once

#include <string>
#include <string_view>

namespace kvforge::model {

enum class Arch { kLlama, kQwen2, kQwen3, kGemma, kPhi3, kFalcon, kDeepseek2 };
enum class NormKind { kRms, kLayer };           // LayerNorm: mean-centred, with a bias
enum class FfnKind { kSwiGlu, kGeGlu, kGelu };  // gate/up pair, or a single up (Falcon)

struct ArchTraits {
  Arch arch;
  const char* name;  // general.architecture
  NormKind norm = NormKind::kRms;
  FfnKind ffn = FfnKind::kSwiGlu;
  bool rope_neox = false;         // rotate (i, i + d/2) pairs instead of (2i, 2i+1)
  bool qkv_bias = false;          // attn_q/k/v.bias (qwen2)
  bool qk_norm = false;           // per-head RMSNorm of q and k before RoPE (qwen3)
  bool fused_qkv = false;         // one attn_qkv matrix: q rows, then k, then v (phi3, falcon)
  bool fused_gate_up = false;     // ffn_up holds the gate's rows, then the up's (phi3)
  bool parallel_block = false;    // x + attn(n(x)) + ffn(n(x)) from one norm (falcon)
  bool scale_embeddings = false;  // input embeddings x sqrt(n_embd) (gemma)
  bool always_tied = false;       // no output.weight: the output is token_embd (gemma)
  bool rope_factors = false;      // may carry rope_freqs.weight (llama 3.1+)
  // DeepSeek-V2/V3: multi-head latent attention (one latent KV row per token, absorbed
  // projections; forward_mla.cc) and Mixture-of-Experts feed-forward after the leading dense
  // layers (moe.cc).
  bool mla = false;
  const char* eps_key = "attention.layer_norm_rms_epsilon";
};

// The traits of a general.architecture value, or nullptr.
const ArchTraits* FindArch(std::string_view name);
// "llama, qwen2, ..." for error messages.
std::string SupportedArchNames();
// One line on what the family's block computes ("RMSNorm, SwiGLU, ..."), for `kvforge info`.
std::string DescribeBlock(const ArchTraits& t);

}  // namespace kvforge::model
