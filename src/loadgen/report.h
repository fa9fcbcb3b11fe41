// Reports for `ecoserve bench`: the text block (in the layout of `vllm bench serve`),
// the --result-json document and the --plot SVG files. Pure formatting.
#pragma once

#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "loadgen/goodput_search.h"
#include "loadgen/metrics.h"
#include "loadgen/request_record.h"

namespace ecoserve::loadgen {

struct ReportInfo {
  int max_concurrency = 0;       // 0 = unlimited
  bool token_counts_exact = false;  // a tokenizer was given
  std::vector<double> percentiles = {90, 99};
  SloOptions slo;
};

// "============ Serving Benchmark Result ============" ... "=================...".
// With per-class metrics (BenchmarkMetrics::classes) a block per class follows the SLO
// section: "---Class high (5 requests)---", then rows whose labels start with the class
// name ("high P99 TTFT (ms):"), so the overall rows keep their labels and stay unique.
std::string format_report(const BenchmarkMetrics& m, const ReportInfo& info);
// One line per probe, e.g. "probe 3: rate 12.50 req/s -> attainment 93.0% ... PASS".
std::string format_probe(int number, const GoodputProbe& p);
std::string format_search_summary(const GoodputSearchResult& r, double target_attainment);

// Per-class metrics go under "by_priority" {"high", "normal"} and "by_length"
// {"long", "short"}, each with the same keys as the overall metrics.
nlohmann::json metrics_json(const BenchmarkMetrics& m);
// Every record has "priority_class" ("high"/"normal") and "long" (bool); "priority"
// only when one was sent.
nlohmann::json record_json(const RequestRecord& r);
// {"config": config, "metrics": ..., "requests": [...], "goodput_search": ...}
nlohmann::json result_json(const nlohmann::json& config, const BenchmarkMetrics& m,
                           std::span<const RequestRecord> records,
                           const std::optional<GoodputSearchResult>& search);

// Writes DIR/ttft_cdf.svg, tpot_cdf.svg, e2e_cdf.svg, itl_cdf.svg, first_gap_cdf.svg,
// throughput.svg and, with a search, attainment_vs_rate.svg. Creates DIR.
Status write_plots(const std::string& dir, std::span<const RequestRecord> records,
                   const std::optional<GoodputSearchResult>& search, double target_attainment);

}  // namespace ecoserve::loadgen
