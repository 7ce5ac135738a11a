// sched/step_cost_model.h — an online model of what a forward step costs, fitted from the steps
// the engine has run, so the scheduler can size a step's prefill to an inter-token-latency target
// (decode-priority scheduling, Sarathi-Serve's stall-free batching; docs/adr/0012).
//
// A step's wall time is modelled as linear in four features of its plan:
//   ms = c0 + c_decode * decode_tokens + c_prefill * prefill_tokens + c_attn * attention_pairs
// where attention_pairs counts (query, key) pairs: a chunk of n tokens at positions
// [pos0, pos0 + n) attends to pos0 * n + n * (n + 1) / 2 keys. The weights are read once per step
// (c0 and the per-token terms absorb the memory-bound and compute-bound parts), attention grows
// with context. The fit is least squares with exponential forgetting (the machine's speed drifts),
// constrained to non-negative coefficients (a negative cost would let a budget grow without
// bound); four unknowns, so every subset of them is solved and the best feasible one kept.
// Steps of the same shape still vary (the machine is shared, caches differ): tail_factor()
// tracks the 95th percentile of measured / predicted over the steps with decodes, so that a
// budget of target / tail_factor() is met by about 95% of the steps it plans.
// Plain arithmetic: the caller measures time; nothing here reads a clock.
// Thread-safety: none (the engine thread owns it).
#pragma once

#include <array>
#include <cstdint>

namespace kvforge::sched {

struct StepShape {
  int64_t decode_tokens = 0;    // tokens of decode chunks (one per running sequence)
  int64_t prefill_tokens = 0;   // tokens of prefill / recompute chunks
  int64_t attention_pairs = 0;  // (query, key) pairs over all chunks
};

// Pairs a chunk of `n` tokens starting at position `pos0` attends to (causal, itself included).
int64_t ChunkAttentionPairs(int64_t pos0, int64_t n);

class StepCostModel {
 public:
  // Each new observation multiplies the weight of the earlier ones by `forgetting` (0 < f <= 1).
  explicit StepCostModel(double forgetting = 0.99);

  // Records a step of this shape that took `ms` (ignored unless finite and >= 0, or for an
  // empty shape).
  void Observe(const StepShape& shape, double ms);
  // True once enough varied steps were seen to tell decode, prefill and fixed costs apart: at
  // least kMinSteps steps with prefill tokens and kMinSteps with decode tokens.
  bool ready() const;
  int64_t num_observed() const { return num_observed_; }

  // Predicted wall time of a step of this shape, ms (0 before any observation).
  double PredictMs(const StepShape& shape) const;
  // The 95th percentile of measured / predicted ms over the steps with decodes seen once the
  // model was ready (1 until then), kept in [0.5, 4].
  double tail_factor() const { return tail_factor_; }
  // Extra ms a chunk of `n` tokens at `pos0` adds to a step (no fixed cost): a prefill chunk, or
  // with prefill false a decode chunk.
  double ChunkMs(int64_t pos0, int64_t n, bool prefill = true) const;
  // The largest n in [0, max_tokens] with ChunkMs(pos0, n) <= budget_ms (max_tokens when the
  // fit says prefill costs nothing).
  int64_t MaxChunkTokens(double budget_ms, int64_t pos0, int64_t max_tokens) const;

  // The fitted coefficients, in ms: fixed, per decode token, per prefill token, per pair.
  struct Coefficients {
    double fixed_ms = 0;
    double decode_ms = 0;
    double prefill_ms = 0;
    double pair_ms = 0;
  };
  const Coefficients& coefficients() const { return coef_; }

  static constexpr int64_t kMinSteps = 4;
  static constexpr double kTailQuantile = 0.95;

 private:
  static constexpr int kN = 4;
  using Vec = std::array<double, kN>;
  static Vec Features(const StepShape& s);
  void Refit();
  void TrackTail(double measured_ms, double predicted_ms);

  double forgetting_;
  // Weighted normal equations of the scaled features: xtx_ = sum w x x^T, xty_ = sum w x y.
  std::array<Vec, kN> xtx_{};
  Vec xty_{};
  double yty_ = 0;
  int64_t num_observed_ = 0;
  int64_t prefill_steps_ = 0;
  int64_t decode_steps_ = 0;
  Coefficients coef_;
  double tail_factor_ = 1.0;
};

}  // namespace kvforge::sched
