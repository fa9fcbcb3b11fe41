#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include <thread>

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

instance::StepStats step(double plan_s, double execute_s, int32_t num_seqs) {
  instance::StepStats st;
  st.plan_seconds = plan_s;
  st.execute_seconds = execute_s;
  st.num_seqs = num_seqs;
  return st;
}

// The text of one metric family, from its # HELP line to its _count line.
std::string family(const std::string& text, const std::string& name) {
  const size_t begin = text.find("# HELP " + name + " ");
  if (begin == std::string::npos) return "<missing " + name + ">";
  const size_t count = text.find(name + "_count", begin);
  if (count == std::string::npos) return "<no count for " + name + ">";
  return text.substr(begin, text.find('\n', count) + 1 - begin);
}

TEST(ServerMetrics, StepBuckets) {
  ASSERT_EQ(plan_time_buckets().size(), 16u);
  EXPECT_EQ(plan_time_buckets().front(), 1e-6);
  EXPECT_EQ(plan_time_buckets().back(), 0.1);
  ASSERT_EQ(step_execute_buckets().size(), 17u);
  EXPECT_EQ(step_execute_buckets().front(), 1e-4);
  EXPECT_EQ(step_execute_buckets().back(), 30.0);
  EXPECT_EQ(step_num_seqs_buckets().back(), 512.0);
  for (auto b : {plan_time_buckets(), step_execute_buckets(), step_num_seqs_buckets()}) {
    for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
  }
}

TEST(ServerMetrics, RendersStepHistogramsExactly) {
  ServerMetrics m("tiny");
  m.observe_step(step(3e-6, 0.004, 3));
  m.observe_step(step(2e-4, 0.02, 16));
  m.observe_step(step(0.5, 40.0, 600));  // beyond every bound: +Inf only
  const std::string text = m.render(instance::InstanceStatus{});
  const std::string l = "{model_name=\"tiny\",le=";
  EXPECT_EQ(family(text, "ecoserve:scheduler_plan_seconds"),
            "# HELP ecoserve:scheduler_plan_seconds Histogram of the scheduler's planning time per step in seconds.\n"
            "# TYPE ecoserve:scheduler_plan_seconds histogram\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"1e-06\"} 0\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"2.5e-06\"} 0\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"5e-06\"} 1\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"1e-05\"} 1\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"2.5e-05\"} 1\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"5e-05\"} 1\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.0001\"} 1\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.00025\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.0005\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.001\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.0025\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.005\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.01\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.025\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.05\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"0.1\"} 2\n"
            "ecoserve:scheduler_plan_seconds_bucket" + l + "\"+Inf\"} 3\n"
            "ecoserve:scheduler_plan_seconds_sum{model_name=\"tiny\"} 0.500203\n"
            "ecoserve:scheduler_plan_seconds_count{model_name=\"tiny\"} 3\n");
  EXPECT_EQ(family(text, "ecoserve:step_execute_seconds"),
            "# HELP ecoserve:step_execute_seconds Histogram of the forward-pass (execute) time per step in seconds.\n"
            "# TYPE ecoserve:step_execute_seconds histogram\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.0001\"} 0\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.00025\"} 0\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.0005\"} 0\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.001\"} 0\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.0025\"} 0\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.005\"} 1\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.01\"} 1\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.025\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.05\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.1\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.25\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"0.5\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"1.0\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"2.5\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"5.0\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"10.0\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"30.0\"} 2\n"
            "ecoserve:step_execute_seconds_bucket" + l + "\"+Inf\"} 3\n"
            "ecoserve:step_execute_seconds_sum{model_name=\"tiny\"} 40.024\n"
            "ecoserve:step_execute_seconds_count{model_name=\"tiny\"} 3\n");
  EXPECT_EQ(family(text, "ecoserve:step_num_seqs"),
            "# HELP ecoserve:step_num_seqs Histogram of the number of sequences in each step's batch.\n"
            "# TYPE ecoserve:step_num_seqs histogram\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"1.0\"} 0\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"2.0\"} 0\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"4.0\"} 1\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"8.0\"} 1\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"16.0\"} 2\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"32.0\"} 2\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"64.0\"} 2\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"128.0\"} 2\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"256.0\"} 2\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"512.0\"} 2\n"
            "ecoserve:step_num_seqs_bucket" + l + "\"+Inf\"} 3\n"
            "ecoserve:step_num_seqs_sum{model_name=\"tiny\"} 619.0\n"
            "ecoserve:step_num_seqs_count{model_name=\"tiny\"} 3\n");
}

TEST(ServerMetrics, PercentileInterpolatesLikeNumpy) {
  std::vector<double> v = {5, 1, 3};
  EXPECT_EQ(percentile_of(v, 50), 3.0);
  EXPECT_EQ(percentile_of(v, 0), 1.0);
  EXPECT_EQ(percentile_of(v, 100), 5.0);
  EXPECT_EQ(percentile_of(v, 25), 2.0);
  EXPECT_DOUBLE_EQ(percentile_of(v, 99), 4.96);
  std::vector<double> one = {7};
  EXPECT_EQ(percentile_of(one, 99), 7.0);
  std::vector<double> none;
  EXPECT_EQ(percentile_of(none, 50), 0.0);
}

TEST(ServerMetrics, StepSummaryUsesTheLastStepsOfTheRing) {
  ServerMetrics m("tiny", /*step_sample_capacity=*/4);
  EXPECT_EQ(m.step_summary().steps, 0);
  EXPECT_EQ(m.step_summary().samples, 0);
  m.observe_step(step(1.0, 1.0, 1));  // overwritten by the ring
  m.observe_step(step(1.0, 1.0, 1));
  for (int i = 1; i <= 4; ++i) m.observe_step(step(i * 1e-5, 0.01 - i * 1e-5, 2));
  const StepSummary s = m.step_summary();
  EXPECT_EQ(s.steps, 6);
  EXPECT_EQ(s.samples, 4);
  EXPECT_NEAR(s.plan_p50_s, 2.5e-5, 1e-15);
  EXPECT_NEAR(s.plan_p99_s, 3.97e-5, 1e-15);
  EXPECT_NEAR(s.execute_p50_s, 0.01 - 2.5e-5, 1e-15);
  EXPECT_NEAR(s.execute_p99_s, 0.01 - 1.03e-5, 1e-15);
  EXPECT_NEAR(s.plan_share_p50_perc, 0.25, 1e-12);
  EXPECT_NEAR(s.plan_share_p99_perc, 0.397, 1e-12);
  EXPECT_NEAR(s.plan_share_total_perc, 0.25, 1e-12);
}

TEST(ServerMetrics, FormatsTheSummaryLine) {
  StepSummary s;
  s.steps = 1200;
  s.samples = 1000;
  s.plan_p50_s = 12e-6;
  s.plan_p99_s = 40e-6;
  s.execute_p50_s = 3.1e-3;
  s.execute_p99_s = 2.5;
  s.plan_share_p50_perc = 0.387;
  s.plan_share_p99_perc = 1.214;
  s.plan_share_total_perc = 0.42;
  EXPECT_EQ(format_step_summary(s),
            "scheduler overhead: 1200 steps (last 1000 sampled), plan p50 12.0 us p99 40.0 us, execute p50 3.10 ms "
            "p99 2.500 s, plan share of step p50 0.39% p99 1.21% total 0.42%");
  s.samples = 1200;
  EXPECT_EQ(format_step_summary(s).substr(0, 40), "scheduler overhead: 1200 steps, plan p50");
}

TEST(ServerMetrics, StepsFromAnotherThreadWhileRendering) {
  ServerMetrics m("tiny", 1000);
  std::thread loop([&] {
    for (int i = 0; i < 20000; ++i) m.observe_step(step(1e-6, 1e-3, 1));
  });
  for (int i = 0; i < 50; ++i) (void)m.render(instance::InstanceStatus{});
  loop.join();
  EXPECT_NE(m.render(instance::InstanceStatus{}).find("ecoserve:scheduler_plan_seconds_count{model_name=\"tiny\"} 20000\n"),
            std::string::npos);
  EXPECT_EQ(m.step_summary().steps, 20000);
  EXPECT_EQ(m.step_summary().samples, 1000);
}

TEST(ServerMetrics, RendersMigrationsOfARouterLeftWithOneInstance) {
  ServerMetrics m("tiny");
  cluster::InstanceReport r;
  r.name = "0";
  cluster::ClusterStats c;
  c.routed = 3;
  c.migrations_started = 4;
  c.migrations_completed = 2;
  c.migrations_aborted = {{"destination_full", 1}, {"finished", 1}};
  c.migrated_bytes = 4096;
  // Downtimes 3 ms and 40 ms: cumulative counts over 1, 2, 5, 10, 20, 50, ... ms, then +Inf.
  c.migration_downtime_buckets = {0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2};
  c.migration_downtime_seconds_total = 0.043;
  const std::string text = m.render(instance::InstanceStatus{}, std::span<const cluster::InstanceReport>(&r, 1), c);
  EXPECT_NE(text.find("ecoserve:migrations_started_total{model_name=\"tiny\"} 4.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ecoserve:migrations_completed_total{model_name=\"tiny\"} 2.0\n"), std::string::npos);
  EXPECT_NE(text.find("ecoserve:migrations_aborted_total{model_name=\"tiny\",reason=\"destination_full\"} 1.0\n"),
            std::string::npos);
  EXPECT_NE(text.find("ecoserve:migrated_bytes_total{model_name=\"tiny\"} 4096.0\n"), std::string::npos);
  EXPECT_NE(text.find("ecoserve:migration_downtime_seconds_bucket{model_name=\"tiny\",le=\"0.002\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("ecoserve:migration_downtime_seconds_bucket{model_name=\"tiny\",le=\"0.005\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ecoserve:migration_downtime_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("ecoserve:migration_downtime_seconds_count{model_name=\"tiny\"} 2\n"), std::string::npos);
  // A single instance (no router) has no router series.
  EXPECT_EQ(m.render(instance::InstanceStatus{}).find("migrations_started"), std::string::npos);
}

}  // namespace
}  // namespace ecoserve::server
