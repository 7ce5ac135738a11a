#include "engine/kv_calibrate.h"

#include <algorithm>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "kernels/thread_pool.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::engine {
namespace {

// A sequence id no engine hands out (they count up from 0).
constexpr int64_t kCalibrationSeq = int64_t{1} << 62;

// Varied everyday prose: narrative, dialogue, numbers, lists and explanation, so that keys and
// values see the kinds of tokens requests bring. Written for kvforge.
constexpr std::string_view kText =
    "Once upon a time, in a small town by the sea, there lived a girl named Mia who loved to "
    "build boats out of wood and string. Every morning she walked to the harbor with her dog, "
    "Max, and watched the fishermen pull in their nets. \"Why do the boats come back so early?\" "
    "she asked an old sailor one day. He smiled and said, \"Because the wind turns at noon, and a "
    "wise sailor never fights the wind.\" Mia thought about this for a long time.\n\n"
    "The next week a storm came. Rain hit the windows, the lights went out, and the whole town "
    "waited in the dark. Mia's mother lit three candles and made hot soup with carrots, onions "
    "and beans. They counted the seconds between the flashes and the thunder: one, two, three, "
    "four. \"The storm is moving away,\" said her mother, and she was right.\n\n"
    "When the sun returned, the children ran outside to look at the damage. A tree had fallen "
    "across the road, and the little bridge over the river was covered in mud. Everyone helped. "
    "The baker brought bread, the teacher brought tools, and Mia brought her best rope.\n\n"
    "How does a boat float? A boat pushes water out of the way, and the water pushes back. If "
    "the boat weighs less than the water it moves, it stays on top. That is why a heavy ship "
    "made of steel can float, while a small stone sinks to the bottom in a second.\n\n"
    "In 2024 the town counted 1,250 people, 310 houses, 42 boats and one very old lighthouse. "
    "The lighthouse keeper, Mr. Brown, wrote in his notebook every night: the time, the "
    "weather, the ships that passed and the birds he saw. \"Small notes,\" he liked to say, "
    "\"make big stories.\" Years later, Mia read those notebooks and decided to write a book "
    "about the sea, the storm, and the day the whole town worked together.";

}  // namespace

bool NeedsKvCalibration(const kvstore::PagedKvCache& kv) {
  const kvstore::KvStoreConfig& sc = kv.store().config();
  if (!kvquant::IsNuq(sc.k_dtype) && !kvquant::IsNuq(sc.v_dtype)) return false;
  return !kv.nuq_calibration().calibrated(0);
}

Result<int64_t> CalibrateKvOnText(const model::Model& model, const tokenizer::Tokenizer& tok,
                                  kvstore::PagedKvCache& kv, kernels::ThreadPool& pool,
                                  int64_t max_tokens) {
  if (!NeedsKvCalibration(kv)) return int64_t{0};
  std::vector<int32_t> ids = tok.Encode(kText, true, false);
  const int64_t room = kv.num_free_blocks() * kv.block_tokens();
  const int64_t n = std::min({static_cast<int64_t>(ids.size()), max_tokens, room});
  if (n < 2)
    return Status::ResourceExhausted(
        "kvquant3: no room in the KV cache to calibrate on the built-in text");
  ids.resize(static_cast<size_t>(n));
  if (!kv.AddSequence(kCalibrationSeq, n))
    return Status::ResourceExhausted("kvquant3: no room in the KV cache to calibrate");
  model::Batch batch;
  batch.tokens = ids;
  batch.seqs.push_back({kCalibrationSeq, 0, 0, n, false, true});
  model::Workspace ws;
  std::vector<float> logits;
  const Status st = model.Forward(batch, kv, ws, pool, &logits);
  kv.Free(kCalibrationSeq);
  if (!st.ok()) return st;
  return n;
}

Status CalibrateKvAtStartup(const model::Model& model, const tokenizer::Tokenizer& tok,
                            kvstore::PagedKvCache& kv, kernels::ThreadPool& pool,
                            int64_t max_tokens, const std::string& kv_scales) {
  if (kv_scales == "calibrate") return Status::Ok();
  KVF_ASSIGN_OR_RETURN(const int64_t n, CalibrateKvOnText(model, tok, kv, pool, max_tokens));
  if (n > 0) KVF_LOG_INFO("kvquant3 calibrated on %lld tokens of built-in text", (long long)n);
  return Status::Ok();
}

}  // namespace kvforge::engine
