#include "server/server_metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ecoserve::server {

namespace {

constexpr double kTtft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                            1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
constexpr double kTpot[] = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                            0.75, 1.0,   2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
constexpr double kLatency[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                               30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// 1-2.5-5 per decade.
constexpr double kPlan[] = {1e-6,   2.5e-6, 5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4,   2.5e-4,
                            5e-4,   1e-3,   2.5e-3, 5e-3, 0.01,   0.025, 0.05,  0.1};
constexpr double kExecute[] = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05,
                               0.1,  0.25,   0.5,  1.0,  2.5,    5.0,  10.0, 30.0};
constexpr double kNumSeqs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

void render_scalar(std::string& out, const std::string& name, const char* type, const std::string& help,
                   const std::string& labels, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name, labels,
                     prometheus_number(value));
}

// llumnix: migrations by outcome, bytes moved, and the downtime histogram.
void render_migration_families(std::string& out, const cluster::ClusterStats& c, const std::string& labels) {
  render_scalar(out, "ecoserve:migrations_started_total", "counter", "Live migrations started (llumnix).", labels,
                static_cast<double>(c.migrations_started));
  render_scalar(out, "ecoserve:migrations_completed_total", "counter",
                "Live migrations completed: the request runs on its destination (llumnix).", labels,
                static_cast<double>(c.migrations_completed));
  out += "# HELP ecoserve:migrations_aborted_total Live migrations aborted, by reason; the request stayed on its source "
         "(llumnix).\n# TYPE ecoserve:migrations_aborted_total counter\n";
  for (const auto& [reason, n] : c.migrations_aborted) {
    out += fmt::format("ecoserve:migrations_aborted_total{{{},reason=\"{}\"}} {}\n", labels, reason,
                       prometheus_number(static_cast<double>(n)));
  }
  render_scalar(out, "ecoserve:migrated_bytes_total", "counter", "KV-cache bytes copied by live migrations (llumnix).",
                labels, static_cast<double>(c.migrated_bytes));
  const std::string name = "ecoserve:migration_downtime_seconds";
  out += fmt::format("# HELP {} Histogram of the stop-and-copy gap of completed migrations in seconds (llumnix).\n"
                     "# TYPE {} histogram\n", name, name);
  constexpr size_t kBuckets = std::size(cluster::kMigrationDowntimeBuckets);
  for (size_t b = 0; b <= kBuckets; ++b) {
    const int64_t n = b < c.migration_downtime_buckets.size() ? c.migration_downtime_buckets[b] : 0;
    const std::string le = b < kBuckets ? prometheus_number(cluster::kMigrationDowntimeBuckets[b]) : "+Inf";
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, n);
  }
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, prometheus_number(c.migration_downtime_seconds_total));
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, c.migrations_completed);
}

}  // namespace

std::span<const double> ttft_buckets() { return kTtft; }
std::span<const double> tpot_buckets() { return kTpot; }
std::span<const double> request_latency_buckets() { return kLatency; }
std::span<const double> plan_time_buckets() { return kPlan; }
std::span<const double> step_execute_buckets() { return kExecute; }
std::span<const double> step_num_seqs_buckets() { return kNumSeqs; }

double percentile_of(std::vector<double>& v, double q) {
  if (v.empty()) return 0.0;
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + lo, v.end());
  const double a = v[lo];
  if (hi == lo) return a;
  const double b = *std::min_element(v.begin() + lo + 1, v.end());  // the (lo+1)-th smallest
  return a + (rank - static_cast<double>(lo)) * (b - a);
}

std::string format_step_summary(const StepSummary& s) {
  auto t = [](double sec) {
    if (sec < 1e-3) return fmt::format("{:.1f} us", sec * 1e6);
    if (sec < 1.0) return fmt::format("{:.2f} ms", sec * 1e3);
    return fmt::format("{:.3f} s", sec);
  };
  std::string out = fmt::format("scheduler overhead: {} steps", s.steps);
  if (s.samples < s.steps) out += fmt::format(" (last {} sampled)", s.samples);
  out += fmt::format(", plan p50 {} p99 {}, execute p50 {} p99 {}, plan share of step p50 {:.2f}% p99 {:.2f}% "
                     "total {:.2f}%",
                     t(s.plan_p50_s), t(s.plan_p99_s), t(s.execute_p50_s), t(s.execute_p99_s),
                     s.plan_share_p50_perc, s.plan_share_p99_perc, s.plan_share_total_perc);
  return out;
}

std::string prometheus_number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);
}

std::string prometheus_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()), counts_(bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
  // Bucket i holds bounds_[i-1] < v <= bounds_[i].
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[i];
  ++count_;
  sum_ += v;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? prometheus_number(bounds_[i]) : "+Inf";
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, prometheus_number(sum_));
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

ServerMetrics::ServerMetrics(std::string model_name, size_t step_sample_capacity)
    : labels_("model_name=\"" + prometheus_escape(model_name) + "\""),
      ttft_(kTtft),
      tpot_(kTpot),
      itl_(kTpot),
      e2e_(kLatency),
      queue_(kLatency),
      plan_(kPlan),
      execute_(kExecute),
      num_seqs_(kNumSeqs),
      ring_capacity_(std::max<size_t>(1, step_sample_capacity)) {
  ring_.reserve(std::min<size_t>(ring_capacity_, 4096));
}

void ServerMetrics::observe_step(const instance::StepStats& st) {
  std::lock_guard lock(step_mu_);
  plan_.observe(st.plan_seconds);
  execute_.observe(st.execute_seconds);
  num_seqs_.observe(st.num_seqs);
  const StepSample sample{st.plan_seconds, st.execute_seconds};
  if (ring_.size() < ring_capacity_) {
    ring_.push_back(sample);
  } else {
    ring_[ring_next_] = sample;
  }
  ring_next_ = (ring_next_ + 1) % ring_capacity_;
  ++steps_;
}

StepSummary ServerMetrics::step_summary() const {
  std::vector<StepSample> samples;
  StepSummary s;
  {
    std::lock_guard lock(step_mu_);
    samples = ring_;
    s.steps = steps_;
  }
  s.samples = static_cast<int64_t>(samples.size());
  if (samples.empty()) return s;
  std::vector<double> plan, execute, share;
  double plan_sum = 0, step_sum = 0;
  for (const StepSample& x : samples) {
    plan.push_back(x.plan_s);
    execute.push_back(x.execute_s);
    const double step = x.plan_s + x.execute_s;
    share.push_back(step > 0 ? 100.0 * x.plan_s / step : 0.0);
    plan_sum += x.plan_s;
    step_sum += step;
  }
  s.plan_p50_s = percentile_of(plan, 50);
  s.plan_p99_s = percentile_of(plan, 99);
  s.execute_p50_s = percentile_of(execute, 50);
  s.execute_p99_s = percentile_of(execute, 99);
  s.plan_share_p50_perc = percentile_of(share, 50);
  s.plan_share_p99_perc = percentile_of(share, 99);
  s.plan_share_total_perc = step_sum > 0 ? 100.0 * plan_sum / step_sum : 0.0;
  return s;
}

void ServerMetrics::observe_ttft(double s) { std::lock_guard lock(mu_); ttft_.observe(s); }
void ServerMetrics::observe_tpot(double s) { std::lock_guard lock(mu_); tpot_.observe(s); }
void ServerMetrics::observe_inter_token(double s) { std::lock_guard lock(mu_); itl_.observe(s); }
void ServerMetrics::observe_e2e(double s) { std::lock_guard lock(mu_); e2e_.observe(s); }
void ServerMetrics::observe_queue_time(double s) { std::lock_guard lock(mu_); queue_.observe(s); }

std::string ServerMetrics::render(const instance::InstanceStatus& st, std::span<const cluster::InstanceReport> instances,
                                  const cluster::ClusterStats& cluster) const {
  std::string out;
  render_scalar(out, "ecoserve:num_requests_running", "gauge", "Number of requests in the running batch.", labels_,
                st.num_running);
  render_scalar(out, "ecoserve:num_requests_waiting", "gauge", "Number of requests waiting to be scheduled.",
                labels_, st.num_waiting);
  render_scalar(out, "ecoserve:num_requests_swapped", "gauge", "Number of requests swapped out to host memory.",
                labels_, st.num_swapped);
  render_scalar(out, "ecoserve:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", labels_,
                st.kv_usage);
  render_scalar(out, "ecoserve:prompt_tokens_total", "counter", "Number of prefill tokens processed.", labels_,
                static_cast<double>(st.prompt_tokens_total));
  render_scalar(out, "ecoserve:generation_tokens_total", "counter", "Number of generation tokens processed.",
                labels_, static_cast<double>(st.generation_tokens_total));
  render_scalar(out, "ecoserve:prefix_cache_queries_total", "counter",
                "Prefix-cache queries, in terms of number of queried tokens.", labels_,
                static_cast<double>(st.prefix_cache_queries));
  render_scalar(out, "ecoserve:prefix_cache_hits_total", "counter",
                "Prefix-cache hits, in terms of number of cached tokens.", labels_,
                static_cast<double>(st.prefix_cache_hits));
  render_scalar(out, "ecoserve:num_preemptions_total", "counter", "Cumulative number of preemptions.", labels_,
                static_cast<double>(st.preemptions));
  // A router (even one left with a single instance) adds per-instance and routing series.
  if (instances.size() > 1 || cluster.routed > 0 || cluster.instances_removed > 0) {
    // One series per instance: label values are names we chose (digits, addresses), no escaping needed
    // beyond quotes and backslashes, which they never contain.
    auto family = [&](const std::string& name, const char* type, const std::string& help, auto value_of) {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
      for (const cluster::InstanceReport& r : instances) {
        out += fmt::format("{}{{{},instance=\"{}\",role=\"{}\"}} {}\n", name, labels_, r.name, r.role,
                           prometheus_number(value_of(r)));
      }
    };
    family("ecoserve:instance_healthy", "gauge", "1 when the instance is healthy (heartbeat fresh, loop running).",
           [](const cluster::InstanceReport& r) { return r.healthy ? 1.0 : 0.0; });
    family("ecoserve:instance_num_requests_running", "gauge", "Requests in the instance's running batch.",
           [](const cluster::InstanceReport& r) { return static_cast<double>(r.status.num_running); });
    family("ecoserve:instance_num_requests_waiting", "gauge", "Requests waiting on the instance.",
           [](const cluster::InstanceReport& r) { return static_cast<double>(r.status.num_waiting); });
    family("ecoserve:instance_kv_cache_usage_perc", "gauge", "The instance's KV-cache usage. 1 means 100 percent.",
           [](const cluster::InstanceReport& r) { return r.status.kv_usage; });
    family("ecoserve:instance_generation_tokens_total", "counter", "Generation tokens of the instance.",
           [](const cluster::InstanceReport& r) { return static_cast<double>(r.status.generation_tokens_total); });
    family("ecoserve:instance_phase", "gauge",
           "The instance's phase: 0 mixed batches, 1 prefill phase, 2 decode phase (padg's temporal policy).",
           [](const cluster::InstanceReport& r) { return static_cast<double>(r.status.phase); });
    family("ecoserve:instance_phase_switches_total", "counter", "Phase switches of the instance (padg).",
           [](const cluster::InstanceReport& r) { return static_cast<double>(r.status.phase_switches); });
    render_scalar(out, "ecoserve:router_instances_added_total", "counter", "Instances added while serving.", labels_,
                  static_cast<double>(cluster.instances_added));
    render_scalar(out, "ecoserve:router_instances_removed_total", "counter",
                  "Instances removed (stopped after their requests finished).", labels_,
                  static_cast<double>(cluster.instances_removed));
    render_scalar(out, "ecoserve:router_requests_routed_total", "counter", "Requests routed to an instance.", labels_,
                  static_cast<double>(cluster.routed));
    render_scalar(out, "ecoserve:router_requests_rejected_total", "counter",
                  "Requests no healthy instance could take.", labels_, static_cast<double>(cluster.rejected));
    render_scalar(out, "ecoserve:router_routing_seconds_total", "counter", "Time spent in routing decisions.", labels_,
                  cluster.route_seconds_total);
    render_scalar(out, "ecoserve:router_unhealthy_instances", "gauge", "Unhealthy instances at the last decision.",
                  labels_, static_cast<double>(cluster.unhealthy_instances));
    render_scalar(out, "ecoserve:kv_transfers_total", "counter",
                  "Prompt KV caches moved from a prefill to a decode instance (fudg).", labels_,
                  static_cast<double>(cluster.kv_transfers));
    render_scalar(out, "ecoserve:kv_transfer_bytes_total", "counter", "Bytes of KV cache moved (fudg).", labels_,
                  static_cast<double>(cluster.kv_transfer_bytes));
    render_scalar(out, "ecoserve:kv_transfer_seconds_total", "counter",
                  "Time from the end of a prefill to its KV handed to the decode instance (fudg).", labels_,
                  cluster.kv_transfer_seconds);
    render_scalar(out, "ecoserve:kv_transfer_failures_total", "counter", "KV transfers that failed (fudg).", labels_,
                  static_cast<double>(cluster.kv_transfer_failures));
    render_scalar(out, "ecoserve:local_prefills_total", "counter",
                  "Prompts prefilled on their decode instance (fudg, conditional disaggregation).", labels_,
                  static_cast<double>(cluster.local_prefills));
    render_migration_families(out, cluster, labels_);
  }
  std::lock_guard lock(mu_);
  ttft_.render(out, "ecoserve:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels_);
  tpot_.render(out, "ecoserve:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
               labels_);
  itl_.render(out, "ecoserve:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels_);
  e2e_.render(out, "ecoserve:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
              labels_);
  queue_.render(out, "ecoserve:request_queue_time_seconds", "Histogram of time spent waiting in the queue in seconds.",
                labels_);
  std::lock_guard step_lock(step_mu_);
  plan_.render(out, "ecoserve:scheduler_plan_seconds", "Histogram of the scheduler's planning time per step in seconds.",
               labels_);
  execute_.render(out, "ecoserve:step_execute_seconds",
                  "Histogram of the forward-pass (execute) time per step in seconds.", labels_);
  num_seqs_.render(out, "ecoserve:step_num_seqs", "Histogram of the number of sequences in each step's batch.",
                   labels_);
  return out;
}

}  // namespace ecoserve::server
