// random_tensor_maker.h — writes N(0, std) matrices in any weight type and constant vectors into a
// GgufWriter (internal to random_model*.cc).
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "kvforge/status.h"
#include "tensor/quantize.h"

namespace kvforge::model {

struct RandomTensors {
  std::mt19937_64 rng;
  gguf::GgufWriter* w;

  // A [rows x cols] matrix, or `stack` of them as one 3-D tensor {cols, rows, stack}.
  Status Matrix(const std::string& name, int64_t cols, int64_t rows, float std, tensor::DType t,
                int64_t stack = 1) {
    std::normal_distribution<float> nd(0.0f, std);
    std::vector<float> row(static_cast<size_t>(cols));
    const uint64_t rb = *tensor::RowBytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> data(static_cast<size_t>(rb * static_cast<uint64_t>(rows * stack)));
    for (int64_t r = 0; r < rows * stack; ++r) {
      for (auto& x : row) x = nd(rng);
      KVF_RETURN_IF_ERROR(tensor::QuantizeRow(t, row.data(), data.data() + r * rb, cols));
    }
    if (stack > 1) return w->AddTensor(name, t, {cols, rows, stack}, std::move(data));
    return w->AddTensor(name, t, {cols, rows}, std::move(data));
  }
  Status Vector(const std::string& name, int64_t n, float value, float jitter) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<uint8_t> data(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = value + (jitter > 0 ? jitter * nd(rng) : 0.0f);
      std::memcpy(data.data() + 4 * i, &v, 4);
    }
    return w->AddTensor(name, tensor::DType::kF32, {n}, std::move(data));
  }
};

}  // namespace kvforge::model
