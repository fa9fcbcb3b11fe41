#include "policy/make_instance_policy.h"

#include <gtest/gtest.h>

#include "policy/scheduler.h"

namespace ecoserve::policy {
namespace {

TEST(MakeInstancePolicyTest, ByName) {
  PolicyOptions o;
  for (auto [name, role] : {std::pair{"prefill-first", InstanceRole::kMixed}, std::pair{"chunked", InstanceRole::kMixed},
                            std::pair{"prefill-only", InstanceRole::kPrefill},
                            std::pair{"decode-only", InstanceRole::kDecode}}) {
    auto p = make_instance_policy(name, o);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->name(), name);
    EXPECT_EQ((*p)->role(), role);
  }
  auto bad = make_instance_policy("fastest", o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'fastest'"), std::string::npos);
}

TEST(MakeInstancePolicyTest, BadOptionsNameTheField) {
  PolicyOptions o;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 32;
  auto p = make_instance_policy("chunked", o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("max_num_batched_tokens"), std::string::npos);
  o = PolicyOptions{};
  o.chunk_size = -1;
  EXPECT_NE(validate_policy_options(o).message().find("chunk_size"), std::string::npos);
  o = PolicyOptions{};
  o.max_num_seqs = 0;
  EXPECT_NE(validate_policy_options(o).message().find("max_num_seqs"), std::string::npos);
}

TEST(MakeInstancePolicyTest, SchedulerCreateValidates) {
  Scheduler::Options so;
  so.num_blocks = 0;
  auto s = Scheduler::create(so, *make_instance_policy("chunked", PolicyOptions{}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("num_blocks"), std::string::npos);
  so.num_blocks = 8;
  so.block_size = 0;
  EXPECT_NE(Scheduler::validate(so).message().find("block_size"), std::string::npos);
  so.block_size = 16;
  EXPECT_EQ(Scheduler::create(so, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Scheduler::create(so, *make_instance_policy("chunked", PolicyOptions{})).ok());
  PolicyOptions wm;
  wm.watermark_blocks = 8;
  auto w = Scheduler::create(so, *make_instance_policy("chunked", wm));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("watermark_blocks"), std::string::npos);
}

}  // namespace
}  // namespace ecoserve::policy
