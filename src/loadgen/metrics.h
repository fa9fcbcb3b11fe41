// Benchmark metrics as pure functions of recorded request timelines.
//
// Definitions (the same as `vllm bench serve`):
//   TTFT  = first content chunk - sent.
//   TPOT  = (E2E - TTFT) / (output_tokens - 1): excludes the first token; undefined
//           (not in the TPOT distribution) for outputs of 0 or 1 token.
//   ITL   = every gap between consecutive content chunks, pooled over requests.
//   First token gap (first_gap_ms) = the gap between the first and second content
//           chunks of a request; requests with fewer than two content chunks are
//           excluded. One value per request: it isolates the wait a phase switch or
//           a KV transfer after the first token adds, which TPOT and ITL average away.
//   E2E   = response complete - sent.
// Percentiles use numpy's default linear interpolation: for sorted x[0..n-1] and
// p in [0,100], rank = p/100 * (n-1), result = x[floor] + (rank-floor)*(x[ceil]-x[floor]).
// Distributions cover successful requests only. SLO attainment is over ALL
// requests (a failed request never attains); a request attains only if its TTFT
// <= slo_ttft_ms and its TPOT <= slo_tpot_ms (an undefined TPOT holds).
// Goodput = attaining requests / benchmark duration.
// Classes: with MetricsOptions::by_priority (--high-priority-fraction) and/or by_length
// (--long-fraction) the same metrics are also computed over each class's requests alone
// ("high"/"normal" by RequestRecord::priority_class, "long"/"short" by long_request),
// with the whole run's duration for throughputs and goodput.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loadgen/request_record.h"

namespace ecoserve::loadgen {

// Linear-interpolated percentile (numpy default) of sorted, non-empty values.
double percentile_sorted(std::span<const double> sorted, double p);
// Copies and sorts; 0 for an empty input.
double percentile(std::vector<double> values, double p);

struct Distribution {
  std::size_t count = 0;
  double mean = 0;
  double median = 0;
  double stddev = 0;  // population standard deviation (numpy std)
  double min = 0;
  double max = 0;
  std::vector<std::pair<double, double>> percentiles;  // (p, value), in the asked order
  double at(double p) const;  // value of a listed percentile, or computed NaN if absent
};
Distribution summarize(std::vector<double> values, std::span<const double> percentiles);

struct SloOptions {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  bool enabled() const { return ttft_ms.has_value() || tpot_ms.has_value(); }
};

struct MetricsOptions {
  std::vector<double> percentiles = {90, 99};  // besides mean and median
  SloOptions slo;
  bool by_priority = false;  // add the "high" and "normal" classes' metrics
  bool by_length = false;    // add the "long" and "short" classes' metrics
};

std::optional<double> tpot_s(const RequestRecord& r);
std::vector<double> itl_s(const RequestRecord& r);
// chunk_s[1] - chunk_s[0] of a successful request; nullopt with fewer than two chunks.
std::optional<double> first_gap_s(const RequestRecord& r);
bool attains_slo(const RequestRecord& r, const SloOptions& slo);

struct ClassMetrics;

struct BenchmarkMetrics {
  std::int64_t num_requests = 0;  // issued
  std::int64_t completed = 0;     // successful
  std::int64_t failed = 0;
  double duration_s = 0;
  std::int64_t total_input_tokens = 0;   // over successful requests
  std::int64_t total_output_tokens = 0;
  double request_throughput = 0;        // completed / duration
  double input_throughput = 0;          // tok/s
  double output_throughput = 0;         // tok/s
  double total_token_throughput = 0;    // tok/s
  double max_output_throughput = 0;     // peak tok/s over 1 s bins
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
  Distribution first_gap_ms;  // one value per successful request with >= 2 content chunks
  bool slo_enabled = false;
  std::int64_t attained = 0;
  double attainment = 0;  // fraction of num_requests in [0,1]
  double goodput = 0;     // attaining req/s
  std::map<std::string, std::int64_t> errors;  // error_key -> count
  std::map<std::string, std::string> error_examples;  // error_key -> the first such request's message
  std::int64_t outputs_counted_without_usage = 0;  // token counts approximated/counted by chunks
  // Per-class metrics (MetricsOptions::by_priority, by_length), in the order high,
  // normal, long, short; empty otherwise. A class's own `classes` is empty.
  std::vector<ClassMetrics> classes;
};

// The metrics of one class of a run's requests.
struct ClassMetrics {
  std::string group;  // "priority" or "length"
  std::string name;   // "high" or "normal"; "long" or "short"
  BenchmarkMetrics metrics;
};

BenchmarkMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s,
                                 const MetricsOptions& options);

// Output tokens per second in bins of bin_s seconds from t = 0, attributing each
// request's output_tokens evenly to its content chunks.
std::vector<double> output_tokens_per_second(std::span<const RequestRecord> records, double bin_s);

}  // namespace ecoserve::loadgen
