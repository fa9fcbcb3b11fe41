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
std::string format_report(const BenchmarkMetrics& m, const ReportInfo& info);
// One line per probe, e.g. "probe 3: rate 12.50 req/s -> attainment 93.0% ... PASS".
std::string format_probe(int number, const GoodputProbe& p);
std::string format_search_summary(const GoodputSearchResult& r, double target_attainment);

nlohmann::json metrics_json(const BenchmarkMetrics& m);
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
