#include "server/admin_api.h"

#include <gtest/gtest.h>

#include <chrono>

#include "cluster/fake_backend.h"

namespace ecoserve::server {
namespace {

// A backend with a fixed timeline.
class TimelineBackend final : public cluster::testing::FakeBackend {
 public:
  std::vector<cluster::InstanceTimeline> timeline(TimePoint since) const override {
    since_seen = since;
    cluster::InstanceTimeline t{"0", "prefill", {}};
    instance::StepRecord r;
    r.start = TimePoint(std::chrono::seconds(98));
    r.seconds = 0.5;
    r.num_prefill_tokens = 512;
    r.num_prefill_seqs = 1;
    t.steps.push_back(r);
    return {t};
  }
  mutable TimePoint since_seen{};
};

TEST(AdminApi, TimelineIsRelativeToNowAndSecondsAreChecked) {
  TimelineBackend b;
  const TimePoint now(std::chrono::seconds(100));
  auto j = admin_timeline_json(b, "/admin/timeline?seconds=30&x=1", now);
  ASSERT_TRUE(std::holds_alternative<nlohmann::json>(j));
  const auto& t = std::get<nlohmann::json>(j);
  EXPECT_EQ(t["seconds"], 30.0);
  EXPECT_EQ(b.since_seen, TimePoint(std::chrono::seconds(70)));
  EXPECT_EQ(t["instances"][0]["role"], "prefill");
  EXPECT_EQ(t["instances"][0]["steps"][0], nlohmann::json::array({-2.0, 0.5, 512, 0, 1, 0}));
  EXPECT_EQ(std::get<nlohmann::json>(admin_timeline_json(b, "/admin/timeline", now))["seconds"], 10.0);
  for (const char* bad : {"/admin/timeline?seconds=", "/admin/timeline?seconds=abc", "/admin/timeline?seconds=0",
                          "/admin/timeline?seconds=3601", "/admin/timeline?seconds=5s"}) {
    auto e = admin_timeline_json(b, bad, now);
    ASSERT_TRUE(std::holds_alternative<ApiError>(e)) << bad;
    EXPECT_EQ(std::get<ApiError>(e).http_status, 400);
    EXPECT_EQ(std::get<ApiError>(e).param, "seconds");
  }
}

TEST(AdminApi, ClusterListsInstancesAndRouterCounters) {
  cluster::testing::FakeBackend b;
  const auto j = admin_cluster_json(b, "tiny", TimePoint(std::chrono::seconds(3)));
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["instances"].size(), 1u);
  EXPECT_EQ(j["instances"][0]["heartbeat_age_seconds"], 3.0);
  EXPECT_EQ(j["instances"][0]["num_total_blocks"], 100);
  EXPECT_EQ(j["router"]["routed"], 0);
  EXPECT_TRUE(j["router"].contains("kv_transfer_bytes"));
}

}  // namespace
}  // namespace ecoserve::server
