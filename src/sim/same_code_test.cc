// The simulator runs the live code: one recorded request stream, driven through
// instance::InstanceCore the way the live loop drives it (with the test-only
// FakeExecutor, which checks every KV slot) and through sim::SimInstance (the same
// InstanceCore with the cost-model executor, in simulated time), produces the
// same step plans, step by step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "instance/fake_executor.h"
#include "instance/instance_core.h"
#include "sim/sim_instance.h"
#include "sim/sim_runtime.h"

namespace ecoserve::sim {
namespace {

struct Arrival {
  double at_s;
  int32_t prompt;
  int32_t max_tokens;
};

// Requests that queue, chunk (budget 64), share a prefix and preempt (40 blocks).
const std::vector<Arrival> kStream = {{0.000, 100, 8}, {0.003, 40, 20}, {0.004, 70, 5},  {0.017, 30, 30},
                                      {0.021, 90, 12}, {0.034, 20, 40}, {0.035, 64, 9},  {0.052, 110, 6},
                                      {0.071, 50, 25}, {0.073, 80, 15}, {0.099, 33, 33}, {0.101, 60, 3}};
constexpr double kStepSeconds = 0.010;

instance::GenerationRequest make(size_t i) {
  instance::GenerationRequest g;
  g.id = RequestId(i + 1);
  for (int32_t p = 0; p < kStream[i].prompt; ++p) {
    // Requests 0, 4 and 7 share their first 48 tokens (prefix-cache hits).
    const bool shared = (i == 0 || i == 4 || i == 7) && p < 48;
    g.prompt.push_back(shared ? 100 + p : 1000 + static_cast<int32_t>(i) * 200 + p);
  }
  g.sampling.max_tokens = kStream[i].max_tokens;
  g.sampling.ignore_eos = true;
  g.sampling.seed = i;
  g.sampling.has_seed = true;
  return g;
}

instance::InstanceCoreOptions core_options(const std::string& policy) {
  instance::InstanceCoreOptions o;
  o.policy = policy;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 64;
  o.chunk_size = 64;
  return o;
}

// The live loop's order: take what has arrived, step, and let the step take its time.
std::vector<std::string> live_plans(const std::string& policy) {
  instance::testing::FakeExecutor fake(16, 40, 512);
  fake.next_token = [](RequestId, int32_t) { return 1; };
  auto core = instance::InstanceCore::create(core_options(policy), fake);
  EXPECT_TRUE(core.ok());
  size_t next = 0;
  double t = 0.0;
  int finals = 0;
  while (finals < static_cast<int>(kStream.size())) {
    while (next < kStream.size() && kStream[next].at_s <= t + 1e-12) {
      (*core)->add_request(make(next), [&](const instance::TokenEvent& ev) { finals += ev.finished; },
                           TimePoint(from_seconds(kStream[next].at_s)));
      ++next;
    }
    const instance::StepReport r = (*core)->step(TimePoint(from_seconds(t)), fake);
    if (r.ran) {
      t += kStepSeconds;
    } else if (next < kStream.size()) {
      t = kStream[next].at_s;
    } else {
      ADD_FAILURE() << "stuck at " << t;
      break;
    }
  }
  EXPECT_EQ(fake.kv_mismatches, 0);
  return fake.plans;
}

std::vector<std::string> simulated_plans(const std::string& policy) {
  SimRuntime runtime;
  std::vector<std::string> plans;
  SimInstanceOptions o;
  o.name = "i0";
  o.core = core_options(policy);
  o.executor.block_size = 16;
  o.executor.num_kv_blocks = 40;
  o.executor.max_context = 512;
  o.executor.on_plan = [&](const StepPlan& p) { plans.push_back(instance::testing::FakeExecutor::summarize(p)); };
  int finals = 0;
  auto inst = SimInstance::create(InstanceId(0), o, std::make_shared<ConstantCostModel>(kStepSeconds, 0.0, 0.0),
                                  runtime, [&](InstanceId, const instance::TokenEvent& ev) { finals += ev.finished; });
  EXPECT_TRUE(inst.ok());
  for (size_t i = 0; i < kStream.size(); ++i) {
    runtime.schedule_at(TimePoint(from_seconds(kStream[i].at_s)), [&, i] { (*inst)->add_request(make(i)); });
  }
  runtime.run();
  EXPECT_EQ(finals, static_cast<int>(kStream.size()));
  return plans;
}

class SameCode : public ::testing::TestWithParam<std::string> {};

TEST_P(SameCode, LiveAndSimulatedStepPlansAreIdentical) {
  const std::vector<std::string> live = live_plans(GetParam());
  const std::vector<std::string> simulated = simulated_plans(GetParam());
  ASSERT_GT(live.size(), 20u);
  EXPECT_EQ(live, simulated);
}

INSTANTIATE_TEST_SUITE_P(Policies, SameCode, ::testing::Values("chunked", "prefill-first"));

}  // namespace
}  // namespace ecoserve::sim
