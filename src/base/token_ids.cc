#include "base/token_ids.h"

#include "base/strings.h"

namespace kvforge::base {

Status CheckTokenIds(const std::vector<int32_t>& ids, int64_t n_vocab) {
  for (int32_t t : ids)
    if (t < 0 || t >= n_vocab)
      return Status::InvalidArgument(StrFormat("token id %d is outside the vocabulary (0..%lld)", t,
                                               static_cast<long long>(n_vocab) - 1));
  return Status::Ok();
}

}  // namespace kvforge::base
