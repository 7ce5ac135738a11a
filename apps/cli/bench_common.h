// bench_common.h — helpers shared by the `kvforge bench` subcommands: percentiles, a progress bar
// on stderr, gnuplot plots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands.h"
#include "kvforge/status.h"

namespace kvforge::cli {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
  static Percentiles Of(std::vector<double> v);
  std::string ToJson() const;
};

class ProgressBar {
 public:
  ProgressBar(bool enabled, std::string label, int64_t total);
  void Update(int64_t done);
  void Finish();

 private:
  bool enabled_;
  std::string label_;
  int64_t total_;
  int last_percent_ = -1;
};

struct PlotRow {
  std::string label;
  double throughput;                            // tokens/s
  double ttft_p50, ttft_p99, itl_p50, itl_p99;  // ms
};
// Two panels (throughput; latency percentiles) as PNG or SVG by the file's extension, via gnuplot.
Status PlotBars(const std::string& path, const std::string& title,
                const std::vector<PlotRow>& rows);

int LatencyMain(const Args& args);  // bench_latency.cc
int BatchedMain(const Args& args);  // bench_latency.cc
int MemoryMain(const Args& args);   // bench_memory.cc

}  // namespace kvforge::cli
