// sampling/speculative.h — speculative decoding's acceptance rule (Leviathan et al. 2023, Chen et
// al. 2023): a drafted token x drawn from the draft's distribution q is kept with probability
// min(1, p(x) / q(x)) under the target's distribution p; when refused, the replacement is drawn
// from the normalized residual (p - q)+. Every kept or drawn token is then distributed exactly as
// p, whatever q is. A drafter without a distribution (n-gram lookup) is a point mass at x: the
// residual is p without x. Under greedy p (temperature 0) x is kept iff it is p's argmax, and the
// replacement is the argmax: no random draw.
// Thread-safety: as Sampler (one per sequence).
#pragma once

#include <cstdint>

#include "sampling/sampler.h"

namespace kvforge::sampling {

struct DraftVerdict {
  bool accepted = false;
  int32_t token = -1;  // x when accepted, else the replacement (-1: p is empty)
};

// `q` null: the draft is a point mass at `x`. Draws from `sampler`'s stream.
DraftVerdict VerifyDraft(Sampler& sampler, const TokenDistribution& p, int32_t x,
                         const TokenDistribution* q);

}  // namespace kvforge::sampling
