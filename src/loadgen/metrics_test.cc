#include "loadgen/metrics.h"

#include <gtest/gtest.h>

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
  // E2E {300, 600, 400, 1200}
  EXPECT_NEAR(m.e2e_ms.mean, 625, 1e-9);
  EXPECT_NEAR(m.e2e_ms.median, 500, 1e-9);
  EXPECT_FALSE(m.slo_enabled);
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
