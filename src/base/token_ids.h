// base/token_ids.h — the one check that token ids read from a caller (a prompt, an HTTP body,
// a batch) lie inside the vocabulary. Errors: kInvalidArgument naming the first bad id.
#pragma once

#include <cstdint>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::base {

Status CheckTokenIds(const std::vector<int32_t>& ids, int64_t n_vocab);

}  // namespace kvforge::base
