#include "server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvforge::server {

void LabeledCounter::Inc(const std::string& label_value, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[label_value] += v;
}

double LabeledCounter::value(const std::string& label_value) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(label_value);
  return it == values_.end() ? 0 : it->second;
}

std::map<std::string, double> LabeledCounter::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_;
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::Observe(double v) {
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  counts_[bucket]++;
  sum_ += v;
  count_++;
}

Histogram::Snapshot Histogram::Get() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t acc = 0;
  for (uint64_t c : counts_) {
    acc += c;
    s.cumulative.push_back(acc);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::string PrometheusNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  for (int precision = 6; precision <= 17; ++precision) {  // the shortest text that round-trips
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string EscapeLabelValue(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

namespace {

// `{a="x",b="y"}` from a sample's own label (empty: none) and the metric's constant labels.
std::string LabelSet(const std::string& own, const std::string& constant) {
  if (own.empty() && constant.empty()) return "";
  if (own.empty()) return "{" + constant + "}";
  if (constant.empty()) return "{" + own + "}";
  return "{" + own + "," + constant + "}";
}

}  // namespace

struct MetricsRegistry::Entry {
  std::string name, help, type;
  std::string labels;  // constant labels, rendered: a="x",b="y"
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<LabeledCounter> labeled;
  std::unique_ptr<Histogram> histogram;
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Entry* MetricsRegistry::Push(const std::string& name, const std::string& help,
                                              const char* type, const MetricLabels& labels) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = type;
  for (const auto& [k, v] : labels)
    e->labels += (e->labels.empty() ? "" : ",") + k + "=\"" + EscapeLabelValue(v) + "\"";
  entries_.push_back(std::move(e));
  return entries_.back().get();
}

Counter* MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  Entry* e = Push(name, help, "counter", labels);
  e->counter = std::make_unique<Counter>();
  return e->counter.get();
}

Gauge* MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                 bool is_counter, const MetricLabels& labels) {
  Entry* e = Push(name, help, is_counter ? "counter" : "gauge", labels);
  e->gauge = std::make_unique<Gauge>();
  return e->gauge.get();
}

LabeledCounter* MetricsRegistry::AddLabeledCounter(const std::string& name, const std::string& help,
                                                   const std::string& label,
                                                   const MetricLabels& labels) {
  Entry* e = Push(name, help, "counter", labels);
  e->labeled = std::make_unique<LabeledCounter>(label);
  return e->labeled.get();
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         std::vector<double> upper_bounds,
                                         const MetricLabels& labels) {
  Entry* e = Push(name, help, "histogram", labels);
  e->histogram = std::make_unique<Histogram>(std::move(upper_bounds));
  return e->histogram.get();
}

std::string MetricsRegistry::Render() const {
  std::string out;
  for (const auto& e : entries_) {
    out += "# HELP " + e->name + " " + e->help + "\n";
    out += "# TYPE " + e->name + " " + e->type + "\n";
    const std::string plain = LabelSet("", e->labels);
    if (e->counter) {
      out += e->name + plain + " " + PrometheusNumber(e->counter->value()) + "\n";
    } else if (e->gauge) {
      out += e->name + plain + " " + PrometheusNumber(e->gauge->value()) + "\n";
    } else if (e->labeled) {
      for (const auto& [label_value, v] : e->labeled->Snapshot())
        out += e->name +
               LabelSet(e->labeled->label() + "=\"" + EscapeLabelValue(label_value) + "\"",
                        e->labels) +
               " " + PrometheusNumber(v) + "\n";
    } else if (e->histogram) {
      const Histogram::Snapshot s = e->histogram->Get();
      for (size_t i = 0; i < s.cumulative.size(); ++i) {
        const std::string le =
            i < s.upper_bounds.size() ? PrometheusNumber(s.upper_bounds[i]) : "+Inf";
        out += e->name + "_bucket" + LabelSet("le=\"" + le + "\"", e->labels) + " " +
               std::to_string(s.cumulative[i]) + "\n";
      }
      out += e->name + "_sum" + plain + " " + PrometheusNumber(s.sum) + "\n";
      out += e->name + "_count" + plain + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

}  // namespace kvforge::server
