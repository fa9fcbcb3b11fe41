#include "loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "loadgen/svg_plot.h"

namespace ecoserve::loadgen {
namespace {

std::string banner(std::string_view s, char c) {
  std::size_t n = 50;
  if (s.size() >= n) return std::string(s);
  std::size_t left = (n - s.size()) / 2;
  return std::string(left, c) + std::string(s) + std::string(n - s.size() - left, c);
}

std::string row(std::string_view label, const std::string& value) {
  std::string line = fmt::format("{:<40} {}", label, value);
  return line + "\n";
}
std::string rowi(std::string_view label, std::int64_t v) { return row(label, std::to_string(v)); }
std::string rowf(std::string_view label, double v) { return row(label, fmt::format("{:.2f}", v)); }

std::string pname(double p) {
  if (p == std::floor(p)) return fmt::format("{}", static_cast<long long>(p));
  return fmt::format("{}", p);
}

void section(std::string& o, std::string_view title, std::string_view abbrev, const Distribution& d) {
  o += banner(title, '-') + "\n";
  if (d.count == 0) {
    o += row(fmt::format("Mean {} (ms):", abbrev), "n/a");
    return;
  }
  o += rowf(fmt::format("Mean {} (ms):", abbrev), d.mean);
  o += rowf(fmt::format("Median {} (ms):", abbrev), d.median);
  for (const auto& [p, v] : d.percentiles) o += rowf(fmt::format("P{} {} (ms):", pname(p), abbrev), v);
}

// One class's block of the text report: counts, TTFT/TPOT/E2E mean, median and the
// asked percentiles, SLO attainment; every label starts with the class name.
void class_section(std::string& o, const ClassMetrics& c) {
  const BenchmarkMetrics& m = c.metrics;
  o += banner(fmt::format("Class {} ({} {})", c.name, m.num_requests, m.num_requests == 1 ? "request" : "requests"),
              '-') + "\n";
  o += rowi(c.name + " successful requests:", m.completed);
  o += rowi(c.name + " failed requests:", m.failed);
  auto dist = [&](std::string_view abbrev, const Distribution& d) {
    if (d.count == 0) {
      o += row(fmt::format("{} Mean {} (ms):", c.name, abbrev), "n/a");
      return;
    }
    o += rowf(fmt::format("{} Mean {} (ms):", c.name, abbrev), d.mean);
    o += rowf(fmt::format("{} Median {} (ms):", c.name, abbrev), d.median);
    for (const auto& [p, v] : d.percentiles) o += rowf(fmt::format("{} P{} {} (ms):", c.name, pname(p), abbrev), v);
  };
  dist("TTFT", m.ttft_ms);
  dist("TPOT", m.tpot_ms);
  dist("E2EL", m.e2e_ms);
  if (m.slo_enabled) {
    o += row(c.name + " requests attaining SLO:", fmt::format("{}/{}", m.attained, m.num_requests));
    o += row(c.name + " SLO attainment (%):", fmt::format("{:.2f}", m.attainment * 100));
  }
}

nlohmann::json dist_json(const Distribution& d) {
  nlohmann::json j = {{"count", d.count}, {"mean", d.mean}, {"median", d.median}, {"std", d.stddev},
                      {"min", d.min},     {"max", d.max}};
  for (const auto& [p, v] : d.percentiles) j["p" + pname(p)] = v;
  return j;
}

Status write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  if (!out) return permission_denied_error("cannot write '{}'", p.string());
  out << text;
  if (!out) return data_loss_error("write to '{}' failed", p.string());
  return ok_status();
}

}  // namespace

std::string format_report(const BenchmarkMetrics& m, const ReportInfo& info) {
  std::string o = banner(" Serving Benchmark Result ", '=') + "\n";
  o += rowi("Successful requests:", m.completed);
  o += rowi("Failed requests:", m.failed);
  if (info.max_concurrency > 0) o += rowi("Maximum request concurrency:", info.max_concurrency);
  o += rowf("Benchmark duration (s):", m.duration_s);
  o += rowi("Total input tokens:", m.total_input_tokens);
  o += rowi("Total generated tokens:", m.total_output_tokens);
  o += rowf("Request throughput (req/s):", m.request_throughput);
  if (m.slo_enabled) o += rowf("Request goodput (req/s):", m.goodput);
  o += rowf("Input token throughput (tok/s):", m.input_throughput);
  o += rowf("Output token throughput (tok/s):", m.output_throughput);
  o += rowf("Peak output token throughput (tok/s):", m.max_output_throughput);
  o += rowf("Total Token throughput (tok/s):", m.total_token_throughput);
  section(o, "Time to First Token", "TTFT", m.ttft_ms);
  section(o, "Time per Output Token (excl. 1st token)", "TPOT", m.tpot_ms);
  section(o, "Inter-token Latency", "ITL", m.itl_ms);
  section(o, "First Token Gap (1st to 2nd token)", "first gap", m.first_gap_ms);
  section(o, "End-to-end Latency", "E2EL", m.e2e_ms);
  if (m.slo_enabled) {
    o += banner("SLO Attainment", '-') + "\n";
    if (info.slo.ttft_ms) o += rowf("SLO TTFT (ms):", *info.slo.ttft_ms);
    if (info.slo.tpot_ms) o += rowf("SLO TPOT (ms):", *info.slo.tpot_ms);
    o += row("Requests attaining SLO:", fmt::format("{}/{}", m.attained, m.num_requests));
    o += row("SLO attainment (%):", fmt::format("{:.2f}", m.attainment * 100));
    o += rowf("Goodput (req/s):", m.goodput);
  }
  for (const auto& c : m.classes) class_section(o, c);
  if (m.failed > 0) {
    o += banner("Errors", '-') + "\n";
    for (const auto& [k, v] : m.errors) {
      auto it = m.error_examples.find(k);
      if (it == m.error_examples.end() || it->second.empty()) {
        o += rowi(k + ":", v);
        continue;
      }
      std::string msg = it->second.substr(0, 60);
      if (it->second.size() > 60) msg += "...";
      for (char& c : msg)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      o += row(k + ":", fmt::format("{} ({})", v, msg));
    }
  }
  if (!info.token_counts_exact && m.completed > 0) {  // nothing to qualify when no request succeeded
    bool all_usage = m.completed > 0 && m.outputs_counted_without_usage == 0;
    o += banner("Note", '-') + "\n";
    o += all_usage ? "Input token counts of the workload are approximate (no --tokenizer);\n"
                     "reported counts come from the server's usage.\n"
                   : "Token counts are approximate: no --tokenizer, and the server sent no\n"
                     "usage for some requests (their outputs were counted by chunks).\n";
  }
  o += std::string(50, '=') + "\n";
  return o;
}

std::string format_probe(int number, const GoodputProbe& p) {
  return fmt::format("probe {}: rate {:.3f} req/s -> attainment {:.1f}%, goodput {:.3f} req/s  {}", number, p.rate,
                     p.attainment * 100, p.goodput, p.pass ? "PASS" : "FAIL");
}

std::string format_search_summary(const GoodputSearchResult& r, double target) {
  std::string o = banner(" Goodput Search Result ", '=') + "\n";
  o += row("Target attainment (%):", fmt::format("{:.1f}", target * 100));
  o += rowi("Probes:", static_cast<std::int64_t>(r.probes.size()));
  if (r.best_rate) {
    o += row("Max rate meeting target (req/s):", fmt::format("{:.3f}", *r.best_rate));
    o += row("Goodput at that rate (req/s):", fmt::format("{:.3f}", r.best_goodput.value_or(0)));
    o += row("Search resolution (req/s):", fmt::format("{:.3f}", r.resolution));
  } else {
    o += row("Max rate meeting target (req/s):", "none (even the minimum rate fails)");
  }
  o += std::string(50, '=') + "\n";
  return o;
}

nlohmann::json metrics_json(const BenchmarkMetrics& m) {
  nlohmann::json j = {
      {"num_requests", m.num_requests},
      {"completed", m.completed},
      {"failed", m.failed},
      {"duration_s", m.duration_s},
      {"total_input_tokens", m.total_input_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"request_throughput", m.request_throughput},
      {"input_throughput", m.input_throughput},
      {"output_throughput", m.output_throughput},
      {"max_output_throughput", m.max_output_throughput},
      {"total_token_throughput", m.total_token_throughput},
      {"ttft_ms", dist_json(m.ttft_ms)},
      {"tpot_ms", dist_json(m.tpot_ms)},
      {"itl_ms", dist_json(m.itl_ms)},
      {"first_gap_ms", dist_json(m.first_gap_ms)},
      {"e2e_ms", dist_json(m.e2e_ms)},
      {"errors", m.errors},
      {"error_examples", m.error_examples},
      {"outputs_counted_without_usage", m.outputs_counted_without_usage},
  };
  if (m.slo_enabled) {
    j["slo_attained"] = m.attained;
    j["slo_attainment"] = m.attainment;
    j["goodput"] = m.goodput;
  }
  for (const auto& c : m.classes) j["by_" + c.group][c.name] = metrics_json(c.metrics);
  return j;
}

nlohmann::json record_json(const RequestRecord& r) {
  nlohmann::json j = {{"index", r.index},
                      {"scheduled_s", r.scheduled_s},
                      {"sent_s", r.sent_s},
                      {"end_s", r.end_s},
                      {"success", r.success},
                      {"input_tokens", r.input_tokens},
                      {"output_tokens", r.output_tokens},
                      {"max_tokens", r.expected_output_tokens},
                      {"output_tokens_from_usage", r.output_tokens_from_usage},
                      {"http_status", r.http_status},
                      {"priority_class", std::string(priority_class_name(r.priority_class))},
                      {"long", r.long_request}};
  if (r.priority) j["priority"] = *r.priority;
  if (r.success) {
    j["ttft_ms"] = r.ttft_s() * 1000;
    j["e2e_ms"] = r.e2e_s() * 1000;
    if (auto t = tpot_s(r)) j["tpot_ms"] = *t * 1000;
    if (auto g = first_gap_s(r)) j["first_gap_ms"] = *g * 1000;
  } else {
    j["error"] = error_key(r);
    j["error_message"] = r.error_message;
  }
  j["chunk_s"] = r.chunk_s;
  if (!r.generated_text.empty()) j["generated_text"] = r.generated_text;
  return j;
}

nlohmann::json result_json(const nlohmann::json& config, const BenchmarkMetrics& m,
                           std::span<const RequestRecord> records,
                           const std::optional<GoodputSearchResult>& search) {
  nlohmann::json j;
  j["config"] = config;
  j["metrics"] = metrics_json(m);
  auto& reqs = j["requests"] = nlohmann::json::array();
  for (const auto& r : records) reqs.push_back(record_json(r));
  if (search) {
    nlohmann::json s;
    s["best_rate"] = search->best_rate ? nlohmann::json(*search->best_rate) : nlohmann::json(nullptr);
    s["best_goodput"] = search->best_goodput ? nlohmann::json(*search->best_goodput) : nlohmann::json(nullptr);
    s["resolution"] = search->resolution;
    auto& probes = s["probes"] = nlohmann::json::array();
    for (const auto& p : search->probes)
      probes.push_back({{"rate", p.rate}, {"attainment", p.attainment}, {"goodput", p.goodput}, {"pass", p.pass}});
    j["goodput_search"] = s;
  }
  return j;
}

Status write_plots(const std::string& dir, std::span<const RequestRecord> records,
                   const std::optional<GoodputSearchResult>& search, double target_attainment) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return permission_denied_error("--plot: cannot create directory '{}': {}", dir, ec.message());
  std::filesystem::path base(dir);
  std::vector<double> ttft, tpot, e2e, itl, first_gap;
  for (const auto& r : records) {
    if (!r.success) continue;
    ttft.push_back(r.ttft_s() * 1000);
    e2e.push_back(r.e2e_s() * 1000);
    if (auto t = tpot_s(r)) tpot.push_back(*t * 1000);
    for (double g : itl_s(r)) itl.push_back(g * 1000);
    if (auto g = first_gap_s(r)) first_gap.push_back(*g * 1000);
  }
  auto cdf = [&](const char* file, const char* title, const char* label, const char* unit,
                 std::vector<double> v) -> Status {
    SvgPlot plot(title, label, fmt::format("fraction of {}", unit));
    plot.set_y_range(0, 1);
    plot.add({.name = fmt::format("{} (n={} {})", title, v.size(), unit), .points = cdf_points(std::move(v)),
              .step = true});
    return write_text(base / file, plot.render());
  };
  ECO_RETURN_IF_ERROR(cdf("ttft_cdf.svg", "TTFT CDF", "time to first token (ms)", "requests", ttft));
  ECO_RETURN_IF_ERROR(cdf("tpot_cdf.svg", "TPOT CDF", "time per output token (ms)", "requests", tpot));
  ECO_RETURN_IF_ERROR(cdf("e2e_cdf.svg", "E2E latency CDF", "end-to-end latency (ms)", "requests", e2e));
  ECO_RETURN_IF_ERROR(cdf("itl_cdf.svg", "ITL CDF", "inter-token latency (ms)", "token gaps", itl));
  ECO_RETURN_IF_ERROR(cdf("first_gap_cdf.svg", "First token gap CDF", "first to second token gap (ms)",
                          "requests", first_gap));
  {
    auto bins = output_tokens_per_second(records, 1.0);
    // The last bin is usually partial: rate over the part the run covered, or dropped when
    // that part is under half a bin (a rate over a sliver would be noise).
    double last_s = 0;
    for (const auto& r : records)
      if (r.success && !r.chunk_s.empty()) last_s = std::max(last_s, r.chunk_s.back());
    SvgPlot plot("Output tokens per second", "time since start (s)", "tokens/s");
    SvgSeries s{.name = "output tokens/s (1 s bins)", .points = {}, .step = false, .markers = bins.size() <= 30};
    for (std::size_t i = 0; i < bins.size(); ++i) {
      const double start = static_cast<double>(i);
      const double covered = std::min(1.0, last_s - start);
      if (i + 1 == bins.size() && covered < 1.0) {
        if (covered >= 0.5) s.points.emplace_back(start + covered / 2, bins[i] / covered);
        continue;
      }
      s.points.emplace_back(start + 0.5, bins[i]);
    }
    plot.add(std::move(s));
    ECO_RETURN_IF_ERROR(write_text(base / "throughput.svg", plot.render()));
  }
  if (search && !search->probes.empty()) {
    auto probes = search->probes;
    std::sort(probes.begin(), probes.end(), [](const auto& a, const auto& b) { return a.rate < b.rate; });
    SvgPlot plot("SLO attainment vs request rate", "request rate (req/s)", "SLO attainment (%)");
    plot.set_y_range(0, 100);
    SvgSeries s{.name = "attainment", .points = {}, .step = false, .markers = true};
    for (const auto& p : probes) s.points.emplace_back(p.rate, p.attainment * 100);
    double x0 = probes.front().rate, x1 = probes.back().rate;
    plot.add(std::move(s));
    plot.add({.name = fmt::format("target {:.0f}%", target_attainment * 100),
              .points = {{std::min(0.0, x0), target_attainment * 100}, {x1, target_attainment * 100}},
              .dashed = true});
    ECO_RETURN_IF_ERROR(write_text(base / "attainment_vs_rate.svg", plot.render()));
  }
  return ok_status();
}

}  // namespace ecoserve::loadgen
