// ServerMetrics: request-level latency histograms recorded by the HTTP server,
// rendered together with the instance's status as Prometheus text (format
// 0.0.4) for GET /metrics. Names and bucket bounds follow vLLM's
// (vllm:time_to_first_token_seconds etc.), with the `ecoserve:` prefix and a
// `model_name` label.
// It also records the instance loop's per-step measurements (observe_step, fed by
// InstanceOptions::on_step on the loop thread): Prometheus histograms of the
// scheduler's planning time, the forward-pass time and the batch size, plus the
// exact plan/execute times of the last `step_sample_capacity` steps in a ring, from
// which step_summary() computes medians and p99s (the scheduler-overhead figure).
// Thread-safe: observe_*(), render() and step_summary() may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cluster/generation_backend.h"
#include "base/instance_types.h"

namespace ecoserve::server {

// vLLM's bucket upper bounds (seconds).
std::span<const double> ttft_buckets();           // time to first token
std::span<const double> tpot_buckets();           // time per output token, inter-token latency
std::span<const double> request_latency_buckets();  // e2e latency, queue time
std::span<const double> plan_time_buckets();        // scheduler planning time per step: 1 us .. 0.1 s
std::span<const double> step_execute_buckets();     // forward-pass time per step: 0.1 ms .. 30 s
std::span<const double> step_num_seqs_buckets();    // sequences per step: 1 .. 512

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

// Scheduler overhead over the recorded steps (the last `samples` of `steps`).
// Times in seconds; shares in percent of the step time (plan + execute).
struct StepSummary {
  int64_t steps = 0;        // steps observed in total
  int64_t samples = 0;      // steps the figures below are computed from (<= ring capacity)
  double plan_p50_s = 0, plan_p99_s = 0;
  double execute_p50_s = 0, execute_p99_s = 0;
  double plan_share_p50_perc = 0, plan_share_p99_perc = 0;  // per-step plan / (plan + execute)
  double plan_share_total_perc = 0;                          // sum(plan) / sum(plan + execute)
};

// One line: "scheduler overhead: 1200 steps, plan p50 12.0 us p99 40.0 us, execute p50 3.10 ms
// p99 9.00 ms, plan share of step p50 0.39% p99 1.21% total 0.42%".
std::string format_step_summary(const StepSummary& s);

// Linear-interpolated percentile (numpy's default) of `values`, q in [0, 100]; 0 when empty.
// Reorders `values`.
double percentile_of(std::vector<double>& values, double q);

class ServerMetrics {
 public:
  static constexpr size_t kDefaultStepSampleCapacity = 100000;
  explicit ServerMetrics(std::string model_name, size_t step_sample_capacity = kDefaultStepSampleCapacity);

  // One instance-loop step (called on the loop thread; cheap: a lock and a few stores).
  void observe_step(const instance::StepStats& step);
  StepSummary step_summary() const;

  void observe_ttft(double seconds);
  void observe_tpot(double seconds);
  void observe_inter_token(double seconds);
  void observe_e2e(double seconds);
  void observe_queue_time(double seconds);

  // All metric families, gauges and counters taken from `status`; with more than
  // one instance also per-instance gauges (labels instance="NAME", role="ROLE")
  // and the router's counters.
  std::string render(const instance::InstanceStatus& status, std::span<const cluster::InstanceReport> instances = {},
                     const cluster::ClusterStats& cluster = {}) const;

 private:
  std::string labels_;
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram itl_;
  Histogram e2e_;
  Histogram queue_;

  mutable std::mutex step_mu_;  // separate so the loop thread never waits on request histograms
  Histogram plan_;
  Histogram execute_;
  Histogram num_seqs_;
  struct StepSample {
    double plan_s;
    double execute_s;
  };
  std::vector<StepSample> ring_;  // capacity fixed at construction
  size_t ring_capacity_;
  size_t ring_next_ = 0;          // next slot to write
  int64_t steps_ = 0;
};

}  // namespace ecoserve::server
