// engine/kv_calibrate.h — calibrates a kvquant3 KV cache on text at start-up.
//
// KVQuant fits its thresholds and lookup tables offline on calibration text. Without a
// calibration file, a kvquant3 cache would otherwise calibrate each layer on the first batch it
// sees — possibly a five-token request, whose per-channel ranges say nothing about later tokens.
// So the engine runs one prefill of the built-in calibration text (a few hundred tokens of
// English prose written for kvforge) through a temporary sequence before serving; every layer
// calibrates on it and the sequence is freed. `--kv-scales calibrate` keeps the first-batch
// behaviour and `--kv-scales FILE` loads a calibration made on the user's own text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvforge/status.h"

namespace kvforge::kernels {
class ThreadPool;
}
namespace kvforge::kvstore {
class PagedKvCache;
}
namespace kvforge::model {
class Model;
}
namespace kvforge::tokenizer {
class Tokenizer;
}

namespace kvforge::engine {

// True when `kv` stores a kvquant3 stream whose layers are not calibrated yet.
bool NeedsKvCalibration(const kvstore::PagedKvCache& kv);

// Prefills the calibration text (at most max_tokens tokens, and what the free blocks hold) in a
// temporary sequence, then frees it. Returns the tokens used; 0 when nothing was needed.
Result<int64_t> CalibrateKvOnText(const model::Model& model, const tokenizer::Tokenizer& tok,
                                  kvstore::PagedKvCache& kv, kernels::ThreadPool& pool,
                                  int64_t max_tokens);
// What both engines run at start-up: CalibrateKvOnText unless the user's `kv_scales` asks for
// first-batch calibration ("calibrate"), and a log line saying how many tokens it took.
Status CalibrateKvAtStartup(const model::Model& model, const tokenizer::Tokenizer& tok,
                            kvstore::PagedKvCache& kv, kernels::ThreadPool& pool,
                            int64_t max_tokens, const std::string& kv_scales);

}  // namespace kvforge::engine
