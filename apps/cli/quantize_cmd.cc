// kvforge quantize — rewrites a float (f32/f16/bf16) GGUF model with quantized weight matrices.
//
// Rules follow llama.cpp's quantizer:
// - tensors with 2+ dims whose name ends in "weight" are quantized to --type; everything else
//   (norms, biases: 1-D) is stored as f32;
// - the output projection (output.weight, or token_embd.weight when the output is tied to it)
//   uses q6_k when --type is q4_k or q5_k (as llama.cpp's *_K_S/_M mixes do), or f16 with
//   --keep-output-f16;
// - a tensor whose row length is not a multiple of the block size falls back per tensor:
//   q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, and f16 when even 32 does not divide the row;
//   each fallback is logged;
// - all metadata is copied except general.file_type (set from --type, llama_ftype numbering)
//   and general.quantization_version (set to 2, ggml's current block layouts).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/strings.h"
#include "commands.h"
#include "flags.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/dequant.h"
#include "tensor/quantize.h"

namespace kvforge::cli {
namespace {

using base::StrFormat;
using tensor::DType;

constexpr const char* kTypeList = "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k";

bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama.cpp's per-tensor fallback when the row length does not fit the k-quant super-block.
DType KQuantFallback(DType t) {
  switch (t) {
    case DType::kQ4_K:
      return DType::kQ5_0;
    case DType::kQ5_K:
      return DType::kQ5_1;
    case DType::kQ6_K:
      return DType::kQ8_0;
    default:
      return t;
  }
}

struct Options {
  DType type = DType::kQ8_0;
  bool keep_output_f16 = false;
};

// The type a tensor is written as, plus a note when it differs from the plan (for the log).
DType ChooseType(const gguf::TensorInfo& t, const Options& o, bool is_output, std::string* note) {
  if (t.dims.size() < 2 || !EndsWith(t.name, "weight")) return DType::kF32;
  DType want = o.type;
  if (is_output) {
    if (o.keep_output_f16) return DType::kF16;
    if (o.type == DType::kQ4_K || o.type == DType::kQ5_K) want = DType::kQ6_K;
  }
  const auto cols = static_cast<uint64_t>(t.dims[0]);
  if (tensor::RowBytes(want, cols)) return want;
  DType fb = KQuantFallback(want);
  std::string sizes = std::to_string(tensor::Traits(want).block_elems);
  if (fb != want && !tensor::RowBytes(fb, cols))
    sizes += " or " + std::to_string(tensor::Traits(fb).block_elems);
  if (fb == want || !tensor::RowBytes(fb, cols)) fb = DType::kF16;
  *note = StrFormat("%s: row length %llu is not a multiple of %s, using %s instead of %s",
                    t.name.c_str(), (unsigned long long)cols, sizes.c_str(),
                    tensor::DTypeName(fb).data(), tensor::DTypeName(want).data());
  return fb;
}

// Converts one tensor's data to `to` row by row.
Status ConvertTensor(const gguf::TensorInfo& t, DType to, std::vector<uint8_t>* out) {
  const int64_t cols = t.dims[0];
  const int64_t rows = t.NumElements() / (cols == 0 ? 1 : cols);
  const uint64_t in_row = *tensor::RowBytes(t.dtype, static_cast<uint64_t>(cols));
  const uint64_t out_row = *tensor::RowBytes(to, static_cast<uint64_t>(cols));
  out->assign(static_cast<size_t>(out_row * static_cast<uint64_t>(rows)), 0);
  std::vector<float> buf(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    KVF_RETURN_IF_ERROR(tensor::DequantizeRow(t.dtype, t.data + static_cast<uint64_t>(r) * in_row,
                                              buf.data(), cols));
    KVF_RETURN_IF_ERROR(tensor::QuantizeRow(
        to, buf.data(), out->data() + static_cast<uint64_t>(r) * out_row, cols));
  }
  return Status::Ok();
}

Status Quantize(const std::string& in, const std::string& out, const Options& o) {
  KVF_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::Open(in));
  for (const auto& t : file->tensors())
    if (!IsFloat(t.dtype))
      return Status::InvalidArgument(StrFormat(
          "%s is not a float model: tensor '%s' is already %s (quantize from an f32, f16 or "
          "bf16 GGUF)",
          in.c_str(), t.name.c_str(), tensor::DTypeName(t.dtype).data()));
  const bool has_output = file->FindTensor("output.weight") != nullptr;

  gguf::GgufWriter w(file->alignment());
  for (const std::string& key : file->keys()) {
    // The writer emits general.alignment itself; the two below are rewritten.
    if (key == "general.alignment" || key == "general.file_type" ||
        key == "general.quantization_version")
      continue;
    w.CopyValue(key, *file->Find(key));
  }
  w.SetU32("general.quantization_version", 2);
  w.SetU32("general.file_type", *tensor::LlamaFileType(o.type));

  std::map<std::string, int> counts;
  int fallbacks = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  std::vector<uint8_t> data;
  for (const auto& t : file->tensors()) {
    const bool is_output =
        t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
    std::string note;
    const DType to = ChooseType(t, o, is_output, &note);
    if (!note.empty()) {
      ++fallbacks;
      std::fprintf(stderr, "kvforge: %s\n", note.c_str());
    }
    KVF_RETURN_IF_ERROR(ConvertTensor(t, to, &data).WithContext(in + ": " + t.name));
    bytes_in += t.nbytes;
    bytes_out += data.size();
    ++counts[std::string(tensor::DTypeName(to))];
    KVF_RETURN_IF_ERROR(w.AddTensor(t.name, to, t.dims, std::move(data)));
    data = {};
  }
  KVF_RETURN_IF_ERROR(w.WriteFile(out));
  std::string mix;
  for (const auto& [name, n] : counts)
    mix += StrFormat("%s%d %s", mix.empty() ? "" : ", ", n, name.c_str());
  std::fprintf(stderr, "kvforge: wrote %s (%s): %zu tensors (%s)%s, %.2f MiB -> %.2f MiB\n",
               out.c_str(), tensor::DTypeName(o.type).data(), file->tensors().size(), mix.c_str(),
               fallbacks ? StrFormat(", %d fell back (row length)", fallbacks).c_str() : "",
               bytes_in / 1048576.0, bytes_out / 1048576.0);
  return Status::Ok();
}

}  // namespace

int QuantizeMain(const Args& args) {
  std::string in, out, type_name;
  Options o;
  FlagParser p("quantize",
               "Writes a copy of a float (f32/f16/bf16) GGUF model with its weight matrices\n"
               "quantized. 1-D tensors (norms, biases) are stored as f32. q4_k/q5_k put the\n"
               "output projection in q6_k. Tensors whose rows do not fit the block size fall\n"
               "back per tensor (q4_k->q5_0, q5_k->q5_1, q6_k->q8_0, else f16), as llama.cpp.");
  p.AddString("in", &in, "input GGUF (f32/f16/bf16 weights)");
  p.AddString("out", &out, "output GGUF path");
  p.AddString("type", &type_name, std::string("weight type: ") + kTypeList);
  p.AddBool("keep-output-f16", &o.keep_output_f16,
            "store the output projection (output.weight, or a tied token_embd) as f16");
  p.Require("in");
  p.Require("out");
  p.Require("type");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  const auto type = tensor::DTypeFromName(type_name);
  if (!type || IsFloat(*type) || !tensor::CanQuantize(*type) ||
      !tensor::IsComputeSupported(*type)) {
    std::fprintf(stderr, "kvforge: unknown --type '%s' (one of %s)\n", type_name.c_str(),
                 kTypeList);
    return 2;
  }
  o.type = *type;
  if (Status st = Quantize(in, out, o); !st.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kvforge::cli
