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
  EXPECT_EQ(t["instances"][0]["steps"][0], nlohmann::json::array({-2.0, 0.5, 512, 0, 1, 0, 0}));
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
  EXPECT_TRUE(j["instances"][0]["step_seconds"].is_null());  // between steps
  instance::InstanceStatus st = b.status();
  st.in_step = true;
  st.step_started = TimePoint(std::chrono::milliseconds(500));
  b.set_status(st);
  EXPECT_EQ(admin_cluster_json(b, "tiny", TimePoint(std::chrono::seconds(3)))["instances"][0]["step_seconds"], 2.5);
  EXPECT_EQ(j["instances"][0]["num_total_blocks"], 100);
  EXPECT_EQ(j["router"]["routed"], 0);
  EXPECT_TRUE(j["router"].contains("kv_transfer_bytes"));
}

// /health: a loop in one long step is alive until the step timeout; between steps its heartbeat decides.
TEST(AdminApi, HealthJudgesAStepByTheStepTimeoutAndTheLoopByItsHeartbeat) {
  const TimePoint now(std::chrono::seconds(100));
  instance::InstanceStatus s;
  s.running = true;
  s.last_heartbeat = TimePoint(std::chrono::seconds(40));
  s.in_step = true;
  s.step_started = TimePoint(std::chrono::seconds(40));
  const Duration beat = std::chrono::seconds(5);
  EXPECT_EQ(health_reply(s, false, now, beat, std::chrono::seconds(300)).status, 200);
  const AdminReply hung = health_reply(s, false, now, beat, std::chrono::seconds(30));
  EXPECT_EQ(hung.status, 503);
  EXPECT_EQ(hung.body["status"], "instance step has run 60.0 s");
  s.in_step = false;
  EXPECT_EQ(health_reply(s, false, now, beat, std::chrono::seconds(300)).body["status"],
            "instance loop heartbeat is 60.0 s old");
  s.last_heartbeat = TimePoint(std::chrono::seconds(96));
  EXPECT_EQ(health_reply(s, false, now, beat, std::chrono::seconds(300)).body["status"], "ok");
  EXPECT_EQ(health_reply(s, true, now, beat, std::chrono::seconds(300)).body["status"], "draining");
  s.running = false;
  EXPECT_EQ(health_reply(s, false, now, beat, std::chrono::seconds(300)).status, 503);
}

// A backend that scales: records what it was asked and answers as told.
class ScalingBackend final : public cluster::testing::FakeBackend {
 public:
  StatusOr<std::string> add_instance(const std::string& address) override {
    added.push_back(address);
    if (!add_status.ok()) return add_status;
    return address.empty() ? std::string("7") : address;
  }
  Status remove_instance(const std::string& name) override {
    removed.push_back(name);
    return remove_status;
  }
  std::vector<cluster::InstanceReport> instances() const override {
    auto r = FakeBackend::instances();
    r[0].state = "removing";
    r[0].macro = 1;
    r[0].status.phase = 1;
    r[0].status.phase_switches = 4;
    r[0].status.last_phase_switch = TimePoint(std::chrono::seconds(1));
    r[0].num_slo_decoding = 2;
    r[0].mean_saved_tpot_seconds = 0.25;
    return r;
  }
  cluster::ClusterStats cluster_stats() const override {
    cluster::ClusterStats c;
    c.macros = {{1, {"0", "3"}}};
    return c;
  }
  std::vector<std::string> added, removed;
  Status add_status, remove_status;
};

TEST(AdminApi, ClusterShowsMacroInstancesPhasesAndSavedTpot) {
  ScalingBackend b;
  const auto j = admin_cluster_json(b, "tiny", TimePoint(std::chrono::seconds(3)));
  EXPECT_EQ(j["macro_instances"], nlohmann::json::parse(R"([{"id": 1, "members": ["0", "3"]}])"));
  const auto& i = j["instances"][0];
  EXPECT_EQ(i["state"], "removing");
  EXPECT_EQ(i["padg"]["phase"], "prefill");
  EXPECT_EQ(i["padg"]["phase_switches"], 4);
  EXPECT_EQ(i["padg"]["seconds_in_phase"], 2.0);
  EXPECT_EQ(i["padg"]["macro_instance"], 1);
  EXPECT_EQ(i["padg"]["mean_saved_tpot_seconds"], 0.25);
}

TEST(AdminApi, AddAndRemoveInstancesMapStatusesToHttpCodes) {
  ScalingBackend b;
  ManualClock clock;
  AdminReply r = admin_add_instance(b, "", clock);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body["name"], "7");
  r = admin_add_instance(b, R"({"address": "tcp://127.0.0.1:5555"})", clock);
  EXPECT_EQ(r.body["name"], "tcp://127.0.0.1:5555");
  EXPECT_EQ(b.added, (std::vector<std::string>{"", "tcp://127.0.0.1:5555"}));
  // Bad bodies never reach the backend.
  EXPECT_EQ(admin_add_instance(b, "[1]", clock).error->http_status, 400);
  EXPECT_EQ(admin_add_instance(b, R"({"address": 5})", clock).error->param, "address");
  EXPECT_EQ(admin_add_instance(b, "{", clock).error->http_status, 400);
  EXPECT_EQ(b.added.size(), 2u);
  b.add_status = unimplemented_error("fixed");
  EXPECT_EQ(admin_add_instance(b, "{}", clock).error->http_status, 501);
  b.add_status = invalid_argument_error("other model");
  EXPECT_EQ(admin_add_instance(b, "{}", clock).error->http_status, 400);

  r = admin_remove_instance(b, "3");
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body["state"], "removing");
  b.remove_status = not_found_error("no instance named '9'");
  EXPECT_EQ(admin_remove_instance(b, "9").error->http_status, 404);
  b.remove_status = failed_precondition_error("the last active instance");
  EXPECT_EQ(admin_remove_instance(b, "0").error->http_status, 409);
  EXPECT_EQ(b.removed, (std::vector<std::string>{"3", "9", "0"}));
}

}  // namespace
}  // namespace ecoserve::server
