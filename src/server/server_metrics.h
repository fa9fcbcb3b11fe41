// ServerMetrics: request-level latency histograms recorded by the HTTP server,
// rendered together with the instance's status as Prometheus text (format
// 0.0.4) for GET /metrics. Names and bucket bounds follow vLLM's
// (vllm:time_to_first_token_seconds etc.), with the `ecoserve:` prefix and a
// `model_name` label.
// Thread-safe: observe_*() and render() may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "instance/instance_loop.h"

namespace ecoserve::server {

// vLLM's bucket upper bounds (seconds).
std::span<const double> ttft_buckets();           // time to first token
std::span<const double> tpot_buckets();           // time per output token, inter-token latency
std::span<const double> request_latency_buckets();  // e2e latency, queue time

// A cumulative Prometheus histogram. Not thread-safe by itself.
class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds);
  void observe(double v);
  // `# HELP`, `# TYPE` and the _bucket/_sum/_count lines; `labels` is `k="v"` text.
  void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  uint64_t count_ = 0;
  double sum_ = 0.0;
};

// Prometheus number text: "0.001", "1.0", "2560.0" (like prometheus_client), "+Inf".
std::string prometheus_number(double v);
// Label value escaping (backslash, double quote, newline).
std::string prometheus_escape(const std::string& s);

class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  void observe_ttft(double seconds);
  void observe_tpot(double seconds);
  void observe_inter_token(double seconds);
  void observe_e2e(double seconds);
  void observe_queue_time(double seconds);

  // All metric families, gauges and counters taken from `status`.
  std::string render(const instance::InstanceStatus& status) const;

 private:
  std::string labels_;
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram itl_;
  Histogram e2e_;
  Histogram queue_;
};

}  // namespace ecoserve::server
