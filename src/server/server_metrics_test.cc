#include "server/server_metrics.h"

#include <gtest/gtest.h>

namespace ecoserve::server {
namespace {

TEST(ServerMetrics, VllmBuckets) {
  ASSERT_EQ(ttft_buckets().size(), 22u);
  EXPECT_EQ(ttft_buckets().front(), 0.001);
  EXPECT_EQ(ttft_buckets().back(), 2560.0);
  ASSERT_EQ(tpot_buckets().size(), 19u);
  EXPECT_EQ(tpot_buckets().front(), 0.01);
  EXPECT_EQ(tpot_buckets().back(), 80.0);
  ASSERT_EQ(request_latency_buckets().size(), 21u);
  EXPECT_EQ(request_latency_buckets().front(), 0.3);
  EXPECT_EQ(request_latency_buckets().back(), 7680.0);
}

TEST(ServerMetrics, NumbersLikePrometheusClient) {
  EXPECT_EQ(prometheus_number(0.001), "0.001");
  EXPECT_EQ(prometheus_number(1.0), "1.0");
  EXPECT_EQ(prometheus_number(2560.0), "2560.0");
  EXPECT_EQ(prometheus_number(0.25), "0.25");
  EXPECT_EQ(prometheus_escape("a\"b\\c\n"), "a\\\"b\\\\c\\n");
}

TEST(ServerMetrics, HistogramIsCumulativeWithUpperInclusiveBounds) {
  const double bounds[] = {0.1, 1.0};
  Histogram h(bounds);
  h.observe(0.1);   // le 0.1
  h.observe(0.5);   // le 1.0
  h.observe(7.0);   // +Inf
  std::string out;
  h.render(out, "x", "help", "model_name=\"m\"");
  EXPECT_EQ(out,
            "# HELP x help\n# TYPE x histogram\n"
            "x_bucket{model_name=\"m\",le=\"0.1\"} 1\n"
            "x_bucket{model_name=\"m\",le=\"1.0\"} 2\n"
            "x_bucket{model_name=\"m\",le=\"+Inf\"} 3\n"
            "x_sum{model_name=\"m\"} 7.6\n"
            "x_count{model_name=\"m\"} 3\n");
}

TEST(ServerMetrics, RendersEveryFamily) {
  ServerMetrics m("tiny");
  m.observe_ttft(0.03);
  m.observe_e2e(1.2);
  instance::InstanceStatus st;
  st.num_running = 3;
  st.num_waiting = 2;
  st.kv_usage = 0.5;
  st.prompt_tokens_total = 120;
  st.generation_tokens_total = 40;
  st.prefix_cache_queries = 64;
  st.prefix_cache_hits = 32;
  st.preemptions = 1;
  const std::string text = m.render(st);
  for (const char* line : {
           "# TYPE ecoserve:num_requests_running gauge\necoserve:num_requests_running{model_name=\"tiny\"} 3.0\n",
           "ecoserve:num_requests_waiting{model_name=\"tiny\"} 2.0\n",
           "ecoserve:kv_cache_usage_perc{model_name=\"tiny\"} 0.5\n",
           "# TYPE ecoserve:prompt_tokens_total counter\necoserve:prompt_tokens_total{model_name=\"tiny\"} 120.0\n",
           "ecoserve:generation_tokens_total{model_name=\"tiny\"} 40.0\n",
           "ecoserve:prefix_cache_queries_total{model_name=\"tiny\"} 64.0\n",
           "ecoserve:prefix_cache_hits_total{model_name=\"tiny\"} 32.0\n",
           "ecoserve:num_preemptions_total{model_name=\"tiny\"} 1.0\n",
           "ecoserve:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.02\"} 0\n",
           "ecoserve:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.04\"} 1\n",
           "ecoserve:time_to_first_token_seconds_count{model_name=\"tiny\"} 1\n",
           "# TYPE ecoserve:time_per_output_token_seconds histogram\n",
           "# TYPE ecoserve:inter_token_latency_seconds histogram\n",
           "ecoserve:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"1.5\"} 1\n",
           "ecoserve:request_queue_time_seconds_count{model_name=\"tiny\"} 0\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace ecoserve::server
