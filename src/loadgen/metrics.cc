#include "loadgen/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/status.h"

namespace ecoserve::loadgen {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone: return "none";
    case ErrorKind::kConnectionRefused: return "connection_refused";
    case ErrorKind::kConnectionError: return "connection_error";
    case ErrorKind::kConnectionReset: return "connection_reset";
    case ErrorKind::kHttpStatus: return "http";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kStreamError: return "stream_error";
    case ErrorKind::kProtocolError: return "protocol_error";
  }
  return "unknown";
}

std::string error_key(const RequestRecord& r) {
  if (r.error == ErrorKind::kHttpStatus) return "http_" + std::to_string(r.http_status);
  return std::string(error_kind_name(r.error));
}

double percentile_sorted(std::span<const double> sorted, double p) {
  ECO_CHECK(!sorted.empty());
  p = std::clamp(p, 0.0, 100.0);
  double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(rank));
  auto hi = static_cast<std::size_t>(std::ceil(rank));
  double frac = rank - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, p);
}

double Distribution::at(double p) const {
  for (const auto& [q, v] : percentiles)
    if (q == p) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

Distribution summarize(std::vector<double> values, std::span<const double> percentiles) {
  Distribution d;
  d.count = values.size();
  for (double p : percentiles) d.percentiles.emplace_back(p, 0.0);
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  double n = static_cast<double>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double ss = 0;
  for (double v : values) ss += (v - d.mean) * (v - d.mean);
  d.stddev = std::sqrt(ss / n);
  d.median = percentile_sorted(values, 50);
  d.min = values.front();
  d.max = values.back();
  for (auto& [p, v] : d.percentiles) v = percentile_sorted(values, p);
  return d;
}

std::optional<double> tpot_s(const RequestRecord& r) {
  if (!r.success || r.output_tokens <= 1 || r.first_token_s < 0) return std::nullopt;
  return (r.e2e_s() - r.ttft_s()) / static_cast<double>(r.output_tokens - 1);
}

std::vector<double> itl_s(const RequestRecord& r) {
  std::vector<double> out;
  for (std::size_t i = 1; i < r.chunk_s.size(); ++i) out.push_back(r.chunk_s[i] - r.chunk_s[i - 1]);
  return out;
}

std::optional<double> first_gap_s(const RequestRecord& r) {
  if (!r.success || r.chunk_s.size() < 2) return std::nullopt;
  return r.chunk_s[1] - r.chunk_s[0];
}

bool attains_slo(const RequestRecord& r, const SloOptions& slo) {
  if (!r.success || r.first_token_s < 0) return false;
  if (slo.ttft_ms && r.ttft_s() * 1000.0 > *slo.ttft_ms) return false;
  if (slo.tpot_ms) {
    auto t = tpot_s(r);
    if (t && *t * 1000.0 > *slo.tpot_ms) return false;
  }
  return true;
}

namespace {

// Every request (the overall metrics).
struct KeepAll {
  bool operator()(const RequestRecord&) const { return true; }
};

template <typename Keep>
std::vector<double> output_tokens_per_second_of(std::span<const RequestRecord> records, double bin_s, Keep keep) {
  std::vector<double> bins;
  if (bin_s <= 0) return bins;
  for (const auto& r : records) {
    if (!keep(r) || !r.success || r.chunk_s.empty()) continue;
    double per_chunk = static_cast<double>(r.output_tokens) / static_cast<double>(r.chunk_s.size());
    for (double t : r.chunk_s) {
      auto b = static_cast<std::size_t>(std::max(0.0, t) / bin_s);
      if (b >= bins.size()) bins.resize(b + 1, 0.0);
      bins[b] += per_chunk;
    }
  }
  for (auto& v : bins) v /= bin_s;
  return bins;
}

// The metrics of the records `keep` accepts (no classes).
template <typename Keep>
BenchmarkMetrics compute_kept(std::span<const RequestRecord> records, double duration_s,
                              const MetricsOptions& options, Keep keep) {
  BenchmarkMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e, first_gap;
  for (const auto& r : records) {
    if (!keep(r)) continue;
    ++m.num_requests;
    if (!r.success) {
      ++m.failed;
      const std::string key = error_key(r);
      ++m.errors[key];
      m.error_examples.try_emplace(key, r.error_message);
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.input_tokens;
    m.total_output_tokens += r.output_tokens;
    if (!r.output_tokens_from_usage) ++m.outputs_counted_without_usage;
    if (r.first_token_s >= 0) ttft.push_back(r.ttft_s() * 1000.0);
    if (auto t = tpot_s(r)) tpot.push_back(*t * 1000.0);
    for (double g : itl_s(r)) itl.push_back(g * 1000.0);
    if (auto g = first_gap_s(r)) first_gap.push_back(*g * 1000.0);
    e2e.push_back(r.e2e_s() * 1000.0);
  }
  m.ttft_ms = summarize(std::move(ttft), options.percentiles);
  m.tpot_ms = summarize(std::move(tpot), options.percentiles);
  m.itl_ms = summarize(std::move(itl), options.percentiles);
  m.e2e_ms = summarize(std::move(e2e), options.percentiles);
  m.first_gap_ms = summarize(std::move(first_gap), options.percentiles);
  if (duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration_s;
    m.input_throughput = static_cast<double>(m.total_input_tokens) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
  }
  auto bins = output_tokens_per_second_of(records, 1.0, keep);
  // The last 1 s bin may cover only part of a second: rate it over the time it covers
  // (a run shorter than 1 s is one such bin), or drop it when that is under half a bin.
  if (!bins.empty() && duration_s > 0) {
    const double covered = duration_s - static_cast<double>(bins.size() - 1);
    if (covered > 0 && covered < 1.0) {
      if (covered >= 0.5 || bins.size() == 1) {
        bins.back() /= covered;
      } else {
        bins.pop_back();
      }
    }
  }
  if (!bins.empty()) m.max_output_throughput = *std::max_element(bins.begin(), bins.end());
  m.slo_enabled = options.slo.enabled();
  if (m.slo_enabled) {
    for (const auto& r : records)
      if (keep(r) && attains_slo(r, options.slo)) ++m.attained;
    m.attainment = m.num_requests > 0
                       ? static_cast<double>(m.attained) / static_cast<double>(m.num_requests)
                       : 0.0;
    m.goodput = duration_s > 0 ? static_cast<double>(m.attained) / duration_s : 0.0;
  }
  return m;
}

}  // namespace

BenchmarkMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s,
                                 const MetricsOptions& options) {
  BenchmarkMetrics m = compute_kept(records, duration_s, options, KeepAll{});
  auto add_class = [&](const char* group, const char* name, auto keep) {
    m.classes.push_back({.group = group, .name = name, .metrics = compute_kept(records, duration_s, options, keep)});
  };
  if (options.by_priority) {
    add_class("priority", "high", [](const RequestRecord& r) { return r.priority_class == PriorityClass::kHigh; });
    add_class("priority", "normal", [](const RequestRecord& r) { return r.priority_class != PriorityClass::kHigh; });
  }
  if (options.by_length) {
    add_class("length", "long", [](const RequestRecord& r) { return r.long_request; });
    add_class("length", "short", [](const RequestRecord& r) { return !r.long_request; });
  }
  return m;
}

std::vector<double> output_tokens_per_second(std::span<const RequestRecord> records, double bin_s) {
  return output_tokens_per_second_of(records, bin_s, KeepAll{});
}

}  // namespace ecoserve::loadgen
