#include "bench_common.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "base/strings.h"

namespace kvforge::cli {

Percentiles Percentiles::Of(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double idx = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(idx);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return p;
}

std::string Percentiles::ToJson() const {
  return base::StrFormat("{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"mean\":%.3f}", p50, p90, p99,
                         mean);
}

ProgressBar::ProgressBar(bool enabled, std::string label, int64_t total)
    : enabled_(enabled && total > 0), label_(std::move(label)), total_(total) {}

void ProgressBar::Update(int64_t done) {
  if (!enabled_) return;
  const int pct = static_cast<int>(100 * done / total_);
  if (pct == last_percent_) return;
  last_percent_ = pct;
  const int width = 30;
  const int fill = pct * width / 100;
  std::fprintf(stderr, "\r%s [%s%s] %3d%% (%lld/%lld)", label_.c_str(),
               std::string(static_cast<size_t>(fill), '#').c_str(),
               std::string(static_cast<size_t>(width - fill), '.').c_str(), pct, (long long)done,
               (long long)total_);
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (enabled_) std::fputs("\n", stderr);
}

Status PlotBars(const std::string& path, const std::string& title,
                const std::vector<PlotRow>& rows) {
  std::string term;
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".png") == 0)
    term = "pngcairo size 1000,450";
  else if (path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0)
    term = "svg size 1000,450";
  else
    return Status::InvalidArgument("--plot needs a .png or .svg file name");
  char tmpl[] = "/tmp/kvforge-plot-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return Status::IoError("cannot create a temporary file for gnuplot");
  close(fd);
  const std::string data = std::string(tmpl) + ".dat", script = std::string(tmpl) + ".gp";
  FILE* d = std::fopen(data.c_str(), "w");
  if (!d) return Status::IoError("cannot write " + data);
  std::fprintf(d, "label throughput ttft_p50 ttft_p99 itl_p50 itl_p99\n");
  for (const auto& r : rows)
    std::fprintf(d, "\"%s\" %.3f %.3f %.3f %.3f %.3f\n", r.label.c_str(), r.throughput, r.ttft_p50,
                 r.ttft_p99, r.itl_p50, r.itl_p99);
  std::fclose(d);
  FILE* g = std::fopen(script.c_str(), "w");
  if (!g) return Status::IoError("cannot write " + script);
  std::fprintf(g,
               "set terminal %s\nset output '%s'\nset multiplot layout 1,2 title '%s'\n"
               "set style data histograms\nset style histogram clustered gap 1\nset style fill "
               "solid 0.8 border -1\n"
               "set key autotitle columnhead\nset grid ytics\nset yrange [0:*]\n"
               "set title 'output tokens/s'\nplot '%s' using 2:xtic(1) notitle lc rgb '#3366aa'\n"
               "set title 'latency (ms)'\nset key top left\n"
               "plot '%s' using 3:xtic(1) title 'TTFT p50', '' using 4 title 'TTFT p99', '' using "
               "5 title 'ITL p50', "
               "'' using 6 title 'ITL p99'\nunset multiplot\n",
               term.c_str(), path.c_str(), title.c_str(), data.c_str(), data.c_str());
  std::fclose(g);
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::remove(data.c_str());
  std::remove(script.c_str());
  std::remove(tmpl);
  if (rc != 0)
    return Status::Unavailable("gnuplot failed or is not installed (apt-get install gnuplot-nox)");
  return Status::Ok();
}

}  // namespace kvforge::cli
