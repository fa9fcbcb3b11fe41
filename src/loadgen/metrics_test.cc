#include "loadgen/metrics.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "loadgen/report.h"

namespace ecoserve::loadgen {
namespace {

// A successful request: sent at `sent`, chunks at the given absolute times, output tokens n.
RequestRecord make(double sent, std::vector<double> chunks, std::int64_t out, double end = -1) {
  RequestRecord r;
  r.sent_s = sent;
  r.scheduled_s = sent;
  r.chunk_s = chunks;
  r.first_token_s = chunks.empty() ? -1 : chunks.front();
  r.end_s = end >= 0 ? end : chunks.back();
  r.output_tokens = out;
  r.input_tokens = 10;
  r.output_tokens_from_usage = true;
  r.success = true;
  r.http_status = 200;
  return r;
}

TEST(Percentile, NumpyLinearInterpolation) {
  std::vector<double> v = {1, 2, 3, 4, 10};
  // numpy.percentile([1,2,3,4,10], q): 50 -> 3, 90 -> 7.6, 99 -> 9.76, 25 -> 2, 0 -> 1, 100 -> 10
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3.0);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 7.6);
  EXPECT_NEAR(percentile(v, 99), 9.76, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 2.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);  // unsorted input, even count
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
}

TEST(Metrics, TpotExcludesFirstTokenAndItlPoolsGaps) {
  // Sent at 1.0; first token at 1.5 (TTFT 500 ms); 4 more chunks at 1.6, 1.8, 1.9, 2.3.
  auto r = make(1.0, {1.5, 1.6, 1.8, 1.9, 2.3}, 5);
  EXPECT_DOUBLE_EQ(r.ttft_s(), 0.5);
  ASSERT_TRUE(tpot_s(r).has_value());
  EXPECT_NEAR(*tpot_s(r), (1.3 - 0.5) / 4.0, 1e-12);  // 0.2 s
  auto gaps = itl_s(r);
  ASSERT_EQ(gaps.size(), 4u);
  EXPECT_NEAR(gaps[0], 0.1, 1e-12);
  EXPECT_NEAR(gaps[1], 0.2, 1e-12);
  EXPECT_NEAR(gaps[2], 0.1, 1e-12);
  EXPECT_NEAR(gaps[3], 0.4, 1e-12);
  // TPOT uses usage's token count, not the chunk count: 9 tokens in 5 chunks.
  auto multi = make(0.0, {0.2, 1.0}, 9);
  EXPECT_NEAR(*tpot_s(multi), 0.8 / 8.0, 1e-12);
  // One-token outputs have no TPOT.
  EXPECT_FALSE(tpot_s(make(0.0, {0.3}, 1)).has_value());
}

TEST(Metrics, HandMadeTimelineGivesExactSummary) {
  std::vector<RequestRecord> rs;
  rs.push_back(make(0.0, {0.1, 0.2, 0.3}, 3));        // ttft 100, tpot 100, e2e 300
  rs.push_back(make(1.0, {1.2, 1.3, 1.6}, 3));        // ttft 200, tpot 200, e2e 600
  rs.push_back(make(2.0, {2.4}, 1));                  // ttft 400, no tpot, e2e 400
  rs.push_back(make(3.0, {3.8, 4.0, 4.1, 4.2}, 4));   // ttft 800, tpot 133.3, e2e 1200
  RequestRecord failed;
  failed.sent_s = 4.0;
  failed.end_s = 4.5;
  failed.error = ErrorKind::kHttpStatus;
  failed.http_status = 429;
  failed.input_tokens = 10;
  rs.push_back(failed);
  RequestRecord refused;
  refused.error = ErrorKind::kConnectionRefused;
  rs.push_back(refused);

  MetricsOptions o;
  o.percentiles = {90, 99, 75};
  auto m = compute_metrics(rs, 5.0, o);
  EXPECT_EQ(m.num_requests, 6);
  EXPECT_EQ(m.completed, 4);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.total_input_tokens, 40);
  EXPECT_EQ(m.total_output_tokens, 11);
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.8);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2.2);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 10.2);
  EXPECT_EQ(m.errors.at("http_429"), 1);
  EXPECT_EQ(m.errors.at("connection_refused"), 1);
  // TTFT {100, 200, 400, 800}: mean 375, median 300, p90 = 400 + 0.7*400 = 680, p75 = 500.
  EXPECT_NEAR(m.ttft_ms.mean, 375, 1e-9);
  EXPECT_NEAR(m.ttft_ms.median, 300, 1e-9);
  EXPECT_NEAR(m.ttft_ms.at(90), 680, 1e-9);
  EXPECT_NEAR(m.ttft_ms.at(75), 500, 1e-9);
  EXPECT_NEAR(m.ttft_ms.at(99), 400 + 0.97 * 400, 1e-9);
  // TPOT {100, 200, 133.33}: the 1-token request is excluded.
  EXPECT_EQ(m.tpot_ms.count, 3u);
  EXPECT_NEAR(m.tpot_ms.mean, (100 + 200 + 400.0 / 3) / 3, 1e-9);
  EXPECT_NEAR(m.tpot_ms.median, 400.0 / 3, 1e-9);
  // ITL: gaps 100,100 | 100,300 | - | 200,100,100 -> 7 gaps.
  EXPECT_EQ(m.itl_ms.count, 7u);
  EXPECT_NEAR(m.itl_ms.mean, 1000.0 / 7, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 100, 1e-9);
  EXPECT_NEAR(m.itl_ms.max, 300, 1e-9);
  // First token gap: 100 | 100 | - (one chunk) | 200 -> 3 values; failures excluded.
  EXPECT_EQ(m.first_gap_ms.count, 3u);
  EXPECT_NEAR(m.first_gap_ms.mean, 400.0 / 3, 1e-9);
  EXPECT_NEAR(m.first_gap_ms.median, 100, 1e-9);
  EXPECT_NEAR(m.first_gap_ms.at(75), 150, 1e-9);
  // E2E {300, 600, 400, 1200}
  EXPECT_NEAR(m.e2e_ms.mean, 625, 1e-9);
  EXPECT_NEAR(m.e2e_ms.median, 500, 1e-9);
  EXPECT_FALSE(m.slo_enabled);
}

// Requests whose first gaps are {250, 50, -, 100, 400} ms, plus a failure with two chunks.
std::vector<RequestRecord> first_gap_timeline() {
  std::vector<RequestRecord> rs;
  rs.push_back(make(0.0, {0.10, 0.35, 0.40, 0.45}, 4));  // ttft 100, first gap 250
  rs.push_back(make(1.0, {1.20, 1.25, 1.30}, 3));        // ttft 200, first gap 50
  rs.push_back(make(2.0, {2.30}, 1));                    // one chunk: no first gap
  rs.push_back(make(3.0, {3.10, 3.20, 3.90}, 3));        // first gap 100 (the 700 ms gap is later)
  rs.push_back(make(4.0, {4.05, 4.45}, 2));              // first gap 400
  RequestRecord reset = make(5.0, {5.10, 5.60}, 2);      // failed after two chunks: excluded
  reset.success = false;
  reset.error = ErrorKind::kConnectionReset;
  rs.push_back(reset);
  return rs;
}

TEST(Metrics, FirstGapIsTheGapBetweenTheFirstTwoChunks) {
  auto r = make(0.0, {0.10, 0.35, 0.40, 0.45}, 4);
  EXPECT_NEAR(r.ttft_s() * 1000, 100, 1e-9);
  ASSERT_TRUE(first_gap_s(r).has_value());
  EXPECT_NEAR(*first_gap_s(r) * 1000, 250, 1e-9);
  // The sent time does not matter: only the first two chunks.
  auto late = make(7.0, {7.5, 7.52, 9.0}, 3);
  EXPECT_NEAR(*first_gap_s(late) * 1000, 20, 1e-9);
  // Fewer than two content chunks: no first gap.
  EXPECT_FALSE(first_gap_s(make(0.0, {0.3}, 1)).has_value());
  EXPECT_FALSE(first_gap_s(make(0.0, {0.3}, 5)).has_value());  // 5 tokens in one chunk
  RequestRecord empty = make(0.0, {}, 0, 0.5);
  EXPECT_FALSE(first_gap_s(empty).has_value());
  // A failed request has none, whatever it streamed.
  auto failed = make(0.0, {0.1, 0.2}, 2);
  failed.success = false;
  failed.error = ErrorKind::kTimeout;
  EXPECT_FALSE(first_gap_s(failed).has_value());
}

TEST(Metrics, FirstGapDistributionExcludesSingleChunkAndFailedRequests) {
  const auto rs = first_gap_timeline();
  auto m = compute_metrics(rs, 6.0, {});  // percentiles 90, 99
  // {50, 100, 250, 400}: mean 200, median 175, p90 = 250 + 0.7*150 = 355,
  // p99 = 250 + 0.97*150 = 395.5, std = sqrt((150^2 + 100^2 + 50^2 + 200^2) / 4).
  const Distribution& d = m.first_gap_ms;
  EXPECT_EQ(d.count, 4u);
  EXPECT_NEAR(d.mean, 200, 1e-9);
  EXPECT_NEAR(d.median, 175, 1e-9);
  EXPECT_NEAR(d.at(90), 355, 1e-9);
  EXPECT_NEAR(d.at(99), 395.5, 1e-9);
  EXPECT_NEAR(d.min, 50, 1e-9);
  EXPECT_NEAR(d.max, 400, 1e-9);
  EXPECT_NEAR(d.stddev, std::sqrt(18750.0), 1e-9);
  // The other metrics are unchanged by it: TTFT counts the one-chunk request too.
  EXPECT_EQ(m.ttft_ms.count, 5u);
  EXPECT_EQ(m.itl_ms.count, 8u);  // 3 + 2 + 0 + 2 + 1
  EXPECT_NEAR(m.itl_ms.max, 700, 1e-9);
  // No request with two chunks: an empty distribution.
  std::vector<RequestRecord> singles;
  singles.push_back(make(0.0, {0.2}, 1));
  m = compute_metrics(singles, 1.0, {});
  EXPECT_EQ(m.first_gap_ms.count, 0u);
  EXPECT_EQ(m.first_gap_ms.mean, 0.0);
}

TEST(Report, FirstGapInTextJsonAndPlots) {
  const auto rs = first_gap_timeline();
  const auto m = compute_metrics(rs, 6.0, {});
  const std::string text = format_report(m, {});
  EXPECT_NE(text.find("First Token Gap"), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{:<40} 200.00\n", "Mean first gap (ms):")), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{:<40} 175.00\n", "Median first gap (ms):")), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{:<40} 355.00\n", "P90 first gap (ms):")), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{:<40} 395.50\n", "P99 first gap (ms):")), std::string::npos) << text;
  // It follows ITL and precedes E2E.
  EXPECT_LT(text.find("Inter-token Latency"), text.find("First Token Gap"));
  EXPECT_LT(text.find("First Token Gap"), text.find("End-to-end Latency"));
  // Without values: n/a, like the others.
  std::vector<RequestRecord> singles;
  singles.push_back(make(0.0, {0.2}, 1));
  const std::string empty = format_report(compute_metrics(singles, 1.0, {}), {});
  EXPECT_NE(empty.find(fmt::format("{:<40} n/a\n", "Mean first gap (ms):")), std::string::npos) << empty;

  const auto j = metrics_json(m);
  ASSERT_TRUE(j.contains("first_gap_ms"));
  EXPECT_EQ(j["first_gap_ms"]["count"], 4);
  EXPECT_NEAR(j["first_gap_ms"]["mean"].get<double>(), 200, 1e-9);
  EXPECT_NEAR(j["first_gap_ms"]["median"].get<double>(), 175, 1e-9);
  EXPECT_NEAR(j["first_gap_ms"]["p90"].get<double>(), 355, 1e-9);
  EXPECT_NEAR(j["first_gap_ms"]["p99"].get<double>(), 395.5, 1e-9);
  EXPECT_NEAR(j["first_gap_ms"]["min"].get<double>(), 50, 1e-9);
  EXPECT_NEAR(j["first_gap_ms"]["max"].get<double>(), 400, 1e-9);
  // Per request: present only where defined.
  const auto full = result_json(nlohmann::json::object(), m, rs, std::nullopt);
  EXPECT_NEAR(full["metrics"]["first_gap_ms"]["mean"].get<double>(), 200, 1e-9);
  const auto& reqs = full["requests"];
  ASSERT_EQ(reqs.size(), rs.size());
  EXPECT_NEAR(reqs[0]["first_gap_ms"].get<double>(), 250, 1e-9);
  EXPECT_NEAR(reqs[0]["ttft_ms"].get<double>(), 100, 1e-9);
  EXPECT_FALSE(reqs[2].contains("first_gap_ms"));  // one chunk
  EXPECT_FALSE(reqs[5].contains("first_gap_ms"));  // failed

  // --plot writes a CDF of it next to the others.
  const auto dir = std::filesystem::path(testing::TempDir()) /
                   fmt::format("first_gap_plots_{}", testing::UnitTest::GetInstance()->random_seed());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(write_plots(dir.string(), rs, std::nullopt, 0.9).ok());
  std::ifstream in(dir / "first_gap_cdf.svg");
  ASSERT_TRUE(in.good());
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find("First token gap CDF (n=4 requests)"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir / "itl_cdf.svg"));
  std::filesystem::remove_all(dir);
}

TEST(Metrics, SloAttainmentNeedsBothAndFailuresNeverAttain) {
  std::vector<RequestRecord> rs;
  rs.push_back(make(0.0, {0.1, 0.2, 0.3}, 3));        // ttft 100, tpot 100
  rs.push_back(make(1.0, {1.2, 1.3, 1.6}, 3));        // ttft 200, tpot 200 -> fails TPOT
  rs.push_back(make(2.0, {2.4}, 1));                  // ttft 400 -> fails TTFT (no TPOT)
  rs.push_back(make(3.0, {3.25}, 1));                 // ttft 250, no TPOT -> attains
  RequestRecord failed;
  failed.error = ErrorKind::kTimeout;
  rs.push_back(failed);
  MetricsOptions o;
  o.slo.ttft_ms = 300;
  o.slo.tpot_ms = 150;
  auto m = compute_metrics(rs, 4.0, o);
  EXPECT_TRUE(m.slo_enabled);
  EXPECT_EQ(m.attained, 2);
  EXPECT_DOUBLE_EQ(m.attainment, 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(m.goodput, 0.5);
  EXPECT_EQ(m.errors.at("timeout"), 1);
  // Only a TTFT SLO: request 2 now attains too.
  o.slo.tpot_ms.reset();
  m = compute_metrics(rs, 4.0, o);
  EXPECT_EQ(m.attained, 3);
  // Boundary values attain (<=).
  o.slo.ttft_ms = 100;
  EXPECT_TRUE(attains_slo(rs[0], o.slo));
}

// Three high-priority requests (one failed) and three normal ones; requests 0 and 2 are long.
std::vector<RequestRecord> class_timeline() {
  std::vector<RequestRecord> rs;
  rs.push_back(make(0.0, {0.1, 0.2, 0.3}, 3));  // high: ttft 100, tpot 100, e2e 300
  rs.push_back(make(1.0, {1.3, 1.4}, 2));       // high: ttft 300, tpot 100, e2e 400
  RequestRecord timeout;                        // high: failed
  timeout.sent_s = 1.5;
  timeout.end_s = 2.0;
  timeout.error = ErrorKind::kTimeout;
  rs.push_back(timeout);
  rs.push_back(make(2.0, {2.5, 2.7, 2.9}, 3));  // normal: ttft 500, tpot 200, e2e 900
  rs.push_back(make(3.0, {3.2, 3.6}, 2));       // normal: ttft 200, tpot 400, e2e 600
  rs.push_back(make(4.0, {4.8}, 1));            // normal: ttft 800, no tpot, e2e 800
  for (int i = 0; i < 3; ++i) {
    rs[i].priority_class = PriorityClass::kHigh;
    rs[i].priority = -1;
  }
  rs[0].long_request = rs[3].long_request = true;
  return rs;
}

TEST(Metrics, PerClassResultsOverEachClassOfRequests) {
  const auto rs = class_timeline();
  MetricsOptions o;
  o.slo.ttft_ms = 400;
  o.slo.tpot_ms = 250;
  // Without the class options: no classes, and the overall numbers are the same either way.
  const auto plain = compute_metrics(rs, 5.0, o);
  EXPECT_TRUE(plain.classes.empty());
  o.by_priority = true;
  const auto m = compute_metrics(rs, 5.0, o);
  EXPECT_EQ(m.num_requests, 6);
  EXPECT_EQ(m.completed, plain.completed);
  EXPECT_EQ(m.attained, 2);
  EXPECT_DOUBLE_EQ(m.ttft_ms.at(99), plain.ttft_ms.at(99));
  ASSERT_EQ(m.classes.size(), 2u);
  const ClassMetrics& high = m.classes[0];
  const ClassMetrics& normal = m.classes[1];
  EXPECT_EQ(high.group, "priority");
  EXPECT_EQ(high.name, "high");
  EXPECT_EQ(normal.name, "normal");
  EXPECT_TRUE(high.metrics.classes.empty());

  EXPECT_EQ(high.metrics.num_requests, 3);
  EXPECT_EQ(high.metrics.completed, 2);
  EXPECT_EQ(high.metrics.failed, 1);
  EXPECT_EQ(high.metrics.errors.at("timeout"), 1);
  // TTFT {100, 300}: p90 = 100 + 0.9 x 200, p99 = 100 + 0.99 x 200.
  EXPECT_NEAR(high.metrics.ttft_ms.mean, 200, 1e-9);
  EXPECT_NEAR(high.metrics.ttft_ms.median, 200, 1e-9);
  EXPECT_NEAR(high.metrics.ttft_ms.at(90), 280, 1e-9);
  EXPECT_NEAR(high.metrics.ttft_ms.at(99), 298, 1e-9);
  EXPECT_NEAR(high.metrics.tpot_ms.mean, 100, 1e-9);
  EXPECT_NEAR(high.metrics.tpot_ms.at(99), 100, 1e-9);
  EXPECT_NEAR(high.metrics.e2e_ms.mean, 350, 1e-9);
  EXPECT_NEAR(high.metrics.e2e_ms.at(90), 390, 1e-9);
  EXPECT_NEAR(high.metrics.e2e_ms.at(99), 399, 1e-9);
  // Both successful high requests attain; the failed one does not: 2 of 3.
  EXPECT_EQ(high.metrics.attained, 2);
  EXPECT_DOUBLE_EQ(high.metrics.attainment, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(high.metrics.goodput, 2.0 / 5.0);         // over the whole run's 5 s
  EXPECT_DOUBLE_EQ(high.metrics.request_throughput, 2.0 / 5.0);

  EXPECT_EQ(normal.metrics.num_requests, 3);
  EXPECT_EQ(normal.metrics.completed, 3);
  EXPECT_EQ(normal.metrics.failed, 0);
  // TTFT {200, 500, 800}: p90 = 500 + 0.8 x 300, p99 = 500 + 0.98 x 300.
  EXPECT_NEAR(normal.metrics.ttft_ms.mean, 500, 1e-9);
  EXPECT_NEAR(normal.metrics.ttft_ms.median, 500, 1e-9);
  EXPECT_NEAR(normal.metrics.ttft_ms.at(90), 740, 1e-9);
  EXPECT_NEAR(normal.metrics.ttft_ms.at(99), 794, 1e-9);
  EXPECT_EQ(normal.metrics.tpot_ms.count, 2u);  // the 1-token request has none
  EXPECT_NEAR(normal.metrics.tpot_ms.mean, 300, 1e-9);
  EXPECT_NEAR(normal.metrics.tpot_ms.at(99), 398, 1e-9);
  EXPECT_NEAR(normal.metrics.e2e_ms.mean, 2300.0 / 3, 1e-9);
  EXPECT_NEAR(normal.metrics.e2e_ms.median, 800, 1e-9);
  EXPECT_NEAR(normal.metrics.e2e_ms.at(99), 898, 1e-9);
  EXPECT_EQ(normal.metrics.attained, 0);  // TTFT 500 and 800 miss, TPOT 400 misses

  // By length as well: long {0, 3}, short the rest, after the priority classes.
  o.by_length = true;
  const auto both = compute_metrics(rs, 5.0, o);
  ASSERT_EQ(both.classes.size(), 4u);
  EXPECT_EQ(both.classes[2].group, "length");
  EXPECT_EQ(both.classes[2].name, "long");
  EXPECT_EQ(both.classes[2].metrics.num_requests, 2);
  EXPECT_NEAR(both.classes[2].metrics.ttft_ms.mean, 300, 1e-9);  // {100, 500}
  EXPECT_EQ(both.classes[3].name, "short");
  EXPECT_EQ(both.classes[3].metrics.num_requests, 4);
  EXPECT_EQ(both.classes[3].metrics.failed, 1);
}

std::size_t occurrences(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

TEST(Report, PerClassBlocksAndJsonKeys) {
  const auto rs = class_timeline();
  MetricsOptions o;
  o.slo.ttft_ms = 400;
  o.slo.tpot_ms = 250;
  const auto plain = compute_metrics(rs, 5.0, o);
  ReportInfo info{.slo = o.slo};
  const std::string plain_text = format_report(plain, info);
  EXPECT_EQ(plain_text.find("Class "), std::string::npos) << plain_text;
  o.by_priority = true;
  const auto m = compute_metrics(rs, 5.0, o);
  const std::string text = format_report(m, info);
  // The overall report is unchanged: the class blocks come after the SLO section.
  EXPECT_EQ(text.substr(0, text.find("Goodput (req/s):")), plain_text.substr(0, plain_text.find("Goodput (req/s):")));
  EXPECT_NE(text.find("\n-------------Class high (3 requests)--------------\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n------------Class normal (3 requests)-------------\n"), std::string::npos) << text;
  auto has = [&](const std::string& label, const std::string& value) {
    return text.find(fmt::format("{:<40} {}\n", label, value)) != std::string::npos;
  };
  EXPECT_TRUE(has("high successful requests:", "2")) << text;
  EXPECT_TRUE(has("high failed requests:", "1")) << text;
  EXPECT_TRUE(has("high Mean TTFT (ms):", "200.00")) << text;
  EXPECT_TRUE(has("high Median TTFT (ms):", "200.00")) << text;
  EXPECT_TRUE(has("high P90 TTFT (ms):", "280.00")) << text;
  EXPECT_TRUE(has("high P99 TTFT (ms):", "298.00")) << text;
  EXPECT_TRUE(has("high P99 TPOT (ms):", "100.00")) << text;
  EXPECT_TRUE(has("high P99 E2EL (ms):", "399.00")) << text;
  EXPECT_TRUE(has("high requests attaining SLO:", "2/3")) << text;
  EXPECT_TRUE(has("high SLO attainment (%):", "66.67")) << text;
  EXPECT_TRUE(has("normal P99 TTFT (ms):", "794.00")) << text;
  EXPECT_TRUE(has("normal Mean E2EL (ms):", "766.67")) << text;
  EXPECT_TRUE(has("normal SLO attainment (%):", "0.00")) << text;
  // Overall labels stay unique (scripts grep them).
  EXPECT_EQ(occurrences(text, "\nP99 TTFT (ms):"), 1u);
  EXPECT_EQ(occurrences(text, "Successful requests:"), 1u);
  EXPECT_EQ(occurrences(text, "\nSLO attainment (%):"), 1u);
  // Errors still close the report.
  EXPECT_LT(text.find("Class normal"), text.find("-Errors-"));

  // JSON: the overall keys as before, plus by_priority.{high,normal} with the same keys.
  const auto j = metrics_json(m);
  const auto pj = metrics_json(plain);
  for (const auto& [k, v] : pj.items()) EXPECT_EQ(j[k], v) << k;
  EXPECT_FALSE(pj.contains("by_priority"));
  EXPECT_FALSE(j.contains("by_length"));
  ASSERT_TRUE(j.contains("by_priority"));
  const auto& hj = j["by_priority"]["high"];
  EXPECT_EQ(hj["num_requests"], 3);
  EXPECT_EQ(hj["completed"], 2);
  EXPECT_EQ(hj["failed"], 1);
  EXPECT_NEAR(hj["ttft_ms"]["mean"].get<double>(), 200, 1e-9);
  EXPECT_NEAR(hj["ttft_ms"]["median"].get<double>(), 200, 1e-9);
  EXPECT_NEAR(hj["ttft_ms"]["p90"].get<double>(), 280, 1e-9);
  EXPECT_NEAR(hj["ttft_ms"]["p99"].get<double>(), 298, 1e-9);
  EXPECT_NEAR(hj["e2e_ms"]["p99"].get<double>(), 399, 1e-9);
  EXPECT_NEAR(hj["tpot_ms"]["mean"].get<double>(), 100, 1e-9);
  EXPECT_NEAR(hj["slo_attainment"].get<double>(), 2.0 / 3.0, 1e-12);
  EXPECT_EQ(hj["slo_attained"], 2);
  const auto& nj = j["by_priority"]["normal"];
  EXPECT_EQ(nj["completed"], 3);
  EXPECT_NEAR(nj["ttft_ms"]["p99"].get<double>(), 794, 1e-9);
  EXPECT_EQ(nj["slo_attained"], 0);
  o.by_length = true;
  const auto lj = metrics_json(compute_metrics(rs, 5.0, o));
  EXPECT_EQ(lj["by_length"]["long"]["num_requests"], 2);
  EXPECT_EQ(lj["by_length"]["short"]["num_requests"], 4);

  // Per request: the class always, the priority only when one was sent.
  const auto full = result_json(nlohmann::json::object(), m, rs, std::nullopt);
  const auto& reqs = full["requests"];
  EXPECT_EQ(reqs[0]["priority_class"], "high");
  EXPECT_EQ(reqs[0]["priority"], -1);
  EXPECT_EQ(reqs[0]["long"], true);
  EXPECT_EQ(reqs[2]["priority_class"], "high");  // failed: still its class
  EXPECT_EQ(reqs[3]["priority_class"], "normal");
  EXPECT_FALSE(reqs[3].contains("priority"));
  EXPECT_EQ(reqs[4]["long"], false);
}

TEST(Metrics, TokensPerSecondBins) {
  std::vector<RequestRecord> rs;
  rs.push_back(make(0.0, {0.5, 1.5, 1.7}, 6));  // 2 tokens per chunk
  rs.push_back(make(0.0, {2.1}, 1));
  auto bins = output_tokens_per_second(rs, 1.0);
  ASSERT_EQ(bins.size(), 3u);
  EXPECT_DOUBLE_EQ(bins[0], 2);
  EXPECT_DOUBLE_EQ(bins[1], 4);
  EXPECT_DOUBLE_EQ(bins[2], 1);
  auto m = compute_metrics(rs, 3.0, {});
  EXPECT_DOUBLE_EQ(m.max_output_throughput, 4);
  // A run of 2.2 s: the last bin covers 0.2 s (< half a bin) and is dropped.
  m = compute_metrics(rs, 2.2, {});
  EXPECT_DOUBLE_EQ(m.max_output_throughput, 4);
  // A run of 0.8 s: its only bin is rated over 0.8 s.
  std::vector<RequestRecord> short_run;
  short_run.push_back(make(0.0, {0.2, 0.4, 0.6}, 3));
  m = compute_metrics(short_run, 0.8, {});
  EXPECT_DOUBLE_EQ(m.max_output_throughput, 3 / 0.8);
}

}  // namespace
}  // namespace ecoserve::loadgen
