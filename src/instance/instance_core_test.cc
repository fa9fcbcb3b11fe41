#include "instance/instance_core.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>

#include "instance/fake_executor.h"

namespace ecoserve::instance {
namespace {

using testing::FakeExecutor;

TimePoint at_ms(int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }

std::vector<int32_t> prompt_of(int32_t n, int32_t start = 1) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = start + i;
  return p;
}

GenerationRequest request(uint64_t id, int32_t prompt_len, int32_t max_tokens) {
  GenerationRequest r;
  r.id = RequestId(id);
  r.prompt = prompt_of(prompt_len, static_cast<int32_t>(id) * 100);
  r.sampling.max_tokens = max_tokens;
  r.sampling.has_seed = true;
  r.sampling.seed = 7 + id;
  return r;
}

// Records every event per request.
struct Events {
  std::map<uint64_t, std::vector<TokenEvent>> by_id;
  EventSink sink() {
    return [this](const TokenEvent& ev) { by_id[ev.id.value].push_back(ev); };
  }
  std::vector<int32_t> tokens(uint64_t id) const {
    std::vector<int32_t> out;
    auto it = by_id.find(id);
    if (it == by_id.end()) return out;
    for (const auto& e : it->second) {
      if (e.token >= 0) out.push_back(e.token);
    }
    return out;
  }
  const TokenEvent& final_event(uint64_t id) const { return by_id.at(id).back(); }
};

InstanceCoreOptions options(const std::string& policy = "chunked") {
  InstanceCoreOptions o;
  o.policy = policy;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 16;
  o.chunk_size = 16;
  o.vocab_size = 4096;
  o.eog_token_ids = {2};
  return o;
}

TEST(InstanceCoreTest, StepsPlanExecuteAndEmitExactEvents) {
  FakeExecutor exec(/*block_size=*/4, /*num_blocks=*/32, /*max_context=*/128);
  auto core = InstanceCore::create(options(), exec);
  ASSERT_TRUE(core.ok()) << core.status().to_string();
  Events ev;
  (*core)->add_request(request(1, 6, 3), ev.sink(), at_ms(0));
  (*core)->add_request(request(2, 20, 2), ev.sink(), at_ms(1));
  std::vector<StepReport> reports;
  for (int64_t t = 10; (*core)->has_unfinished(); t += 10) reports.push_back((*core)->step(at_ms(t), exec));
  // Budget 16: request 1's prompt (6) and the first 10 of request 2's; then chunked
  // decode-first: 1 decodes while 2 finishes its prompt (10 more), then both decode.
  EXPECT_EQ(exec.plans, (std::vector<std::string>{"1:0+6s 2:0+10", "1:6+1s 2:10+10s", "1:7+1s 2:20+1s"}));
  EXPECT_EQ(exec.kv_mismatches, 0);
  EXPECT_EQ(ev.tokens(1), (std::vector<int32_t>{FakeExecutor::default_token(RequestId(1), 0),
                                                 FakeExecutor::default_token(RequestId(1), 1),
                                                 FakeExecutor::default_token(RequestId(1), 2)}));
  EXPECT_EQ(ev.tokens(2).size(), 2u);
  for (uint64_t id : {1u, 2u}) {
    const TokenEvent& f = ev.final_event(id);
    EXPECT_TRUE(f.finished);
    EXPECT_EQ(f.token, -1);
    EXPECT_EQ(f.finish_reason, "length");
  }
  EXPECT_EQ(ev.final_event(1).prompt_tokens, 6);
  EXPECT_EQ(ev.final_event(2).prompt_tokens, 20);
  // First scheduled in the first step, at its `now`.
  EXPECT_EQ(ev.final_event(1).scheduled_time, at_ms(10));
  EXPECT_EQ(ev.by_id.at(2).front().scheduled_time, at_ms(10));
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_TRUE(reports[0].ran);
  EXPECT_EQ(reports[0].num_tokens, 16);
  EXPECT_EQ(reports[0].prompt_tokens, 16);
  EXPECT_EQ(reports[0].num_prefill_seqs, 2);
  EXPECT_EQ(reports[0].generated_tokens, 1);
  EXPECT_EQ(reports[1].num_decode_seqs, 1);
  EXPECT_EQ(reports[1].num_prefill_seqs, 1);
  EXPECT_EQ(reports[2].num_decode_seqs, 2);
  InstanceStatus st;
  (*core)->fill_status(st);
  EXPECT_EQ(st.prompt_tokens_total, 26);
  EXPECT_EQ(st.generation_tokens_total, 5);
  EXPECT_EQ(st.kv_usage, 0.0);
  EXPECT_EQ((*core)->num_tracked(), 0);
  // Nothing left: a step does nothing.
  EXPECT_FALSE((*core)->step(at_ms(100), exec).ran);
  EXPECT_EQ(exec.plans.size(), 3u);
}

TEST(InstanceCoreTest, EndOfGenerationTokenStopsWithoutBeingEmitted) {
  FakeExecutor exec(4, 32, 128);
  exec.next_token = [](RequestId, int32_t k) { return k == 2 ? 2 : 1500 + k; };  // 2 is end-of-generation
  auto core = InstanceCore::create(options(), exec);
  ASSERT_TRUE(core.ok());
  Events ev;
  (*core)->add_request(request(1, 5, 10), ev.sink(), at_ms(0));
  auto ignore = request(2, 5, 4);
  ignore.sampling.ignore_eos = true;
  (*core)->add_request(std::move(ignore), ev.sink(), at_ms(0));
  for (int64_t t = 0; (*core)->has_unfinished(); ++t) (*core)->step(at_ms(t), exec);
  EXPECT_EQ(ev.tokens(1), (std::vector<int32_t>{1500, 1501}));
  EXPECT_EQ(ev.final_event(1).finish_reason, "stop");
  EXPECT_EQ(ev.tokens(2), (std::vector<int32_t>{1500, 1501, 2, 1503}));
  EXPECT_EQ(ev.final_event(2).finish_reason, "length");
}

TEST(InstanceCoreTest, AbortEndsAtOnceAndFreesBlocks) {
  FakeExecutor exec(4, 32, 128);
  auto core = InstanceCore::create(options(), exec);
  ASSERT_TRUE(core.ok());
  Events ev;
  (*core)->add_request(request(1, 8, 50), ev.sink(), at_ms(0));
  (*core)->add_request(request(2, 8, 50), ev.sink(), at_ms(0));
  (*core)->step(at_ms(1), exec);
  (*core)->step(at_ms(2), exec);
  InstanceStatus st;
  (*core)->fill_status(st);
  EXPECT_GT(st.kv_usage, 0.0);
  const RequestId ids[] = {RequestId(1), RequestId(99)};  // 99 is unknown: ignored
  (*core)->abort(ids);
  EXPECT_EQ(ev.final_event(1).finish_reason, "abort");
  EXPECT_EQ(ev.tokens(1).size(), 2u);
  EXPECT_EQ(ev.by_id.count(99), 0u);
  EXPECT_FALSE(ev.by_id.at(2).back().finished);
  (*core)->abort_all();
  EXPECT_EQ(ev.final_event(2).finish_reason, "abort");
  (*core)->fill_status(st);
  EXPECT_EQ(st.kv_usage, 0.0);
  EXPECT_FALSE((*core)->has_unfinished());
  EXPECT_EQ((*core)->num_tracked(), 0);
}

TEST(InstanceCoreTest, ExecutorFailureFinishesThePlansRequestsWithError) {
  FakeExecutor exec(4, 32, 128);
  auto core = InstanceCore::create(options(), exec);
  ASSERT_TRUE(core.ok());
  Events ev;
  (*core)->add_request(request(1, 6, 3), ev.sink(), at_ms(0));
  exec.fail_next = "device lost";
  StepReport r = (*core)->step(at_ms(1), exec);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.error.code(), StatusCode::kInternal);
  EXPECT_EQ(ev.final_event(1).finish_reason, "error");
  EXPECT_EQ(ev.final_event(1).error, "device lost");
  // The core keeps serving.
  (*core)->add_request(request(2, 6, 2), ev.sink(), at_ms(2));
  for (int64_t t = 3; (*core)->has_unfinished(); ++t) (*core)->step(at_ms(t), exec);
  EXPECT_EQ(ev.final_event(2).finish_reason, "length");
  EXPECT_EQ(ev.tokens(2).size(), 2u);
}

TEST(InstanceCoreTest, SeedsComeFromTheRequestOrTheCoresGenerator) {
  auto run = [](uint64_t core_seed) {
    FakeExecutor exec(4, 32, 128);
    InstanceCoreOptions o = options();
    o.seed = core_seed;
    auto core = InstanceCore::create(o, exec);
    EXPECT_TRUE(core.ok());
    Events ev;
    auto seeded = request(1, 4, 1);  // seed 8
    auto unseeded = request(2, 4, 1);
    unseeded.sampling.has_seed = false;
    (*core)->add_request(std::move(seeded), ev.sink(), at_ms(0));
    (*core)->add_request(std::move(unseeded), ev.sink(), at_ms(0));
    (*core)->step(at_ms(1), exec);
    return exec.seeds;
  };
  const auto a = run(1), b = run(1), c = run(2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], 8u);
  EXPECT_EQ(a, b);        // the same core seed draws the same seeds
  EXPECT_EQ(c[0], 8u);    // an explicit seed is kept
  EXPECT_NE(a[1], c[1]);  // another core seed draws another
}

TEST(InstanceCoreTest, ValidateAndRejectedRequests) {
  FakeExecutor exec(4, 8, 40);  // 8 blocks of 4 = 32 tokens of KV
  auto core = InstanceCore::create(options(), exec);
  ASSERT_TRUE(core.ok());
  EXPECT_EQ((*core)->validate(request(1, 30, 10)).code(), StatusCode::kOk);
  Status over = (*core)->validate(request(1, 30, 11));
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("maximum context length is 40 tokens. However, you requested 41 tokens"),
            std::string::npos)
      << over.message();
  GenerationRequest bad = request(1, 3, 1);
  bad.prompt[1] = 4096;
  EXPECT_EQ((*core)->validate(bad).message(), "prompt token id 4096 is outside the vocabulary of 4096");
  EXPECT_EQ((*core)->validate(GenerationRequest{}).message(), "the prompt has no tokens");
  // The scheduler refuses a prompt larger than the whole KV cache: a final "error" event at once.
  Events ev;
  (*core)->add_request(request(5, 36, 1), ev.sink(), at_ms(0));
  ASSERT_EQ(ev.by_id.at(5).size(), 1u);
  EXPECT_EQ(ev.final_event(5).finish_reason, "error");
  EXPECT_FALSE(ev.final_event(5).error.empty());
  // A duplicate id is refused without touching the first.
  (*core)->add_request(request(6, 4, 5), ev.sink(), at_ms(0));
  (*core)->add_request(request(6, 4, 5), ev.sink(), at_ms(0));
  ASSERT_EQ(ev.by_id.at(6).size(), 1u);
  EXPECT_EQ(ev.final_event(6).error, "a request with this id is already running");
  EXPECT_EQ((*core)->num_tracked(), 1);
  for (int64_t t = 0; (*core)->has_unfinished(); ++t) (*core)->step(at_ms(t), exec);
  EXPECT_EQ(ev.final_event(6).finish_reason, "length");
  EXPECT_EQ(ev.tokens(6).size(), 5u);
}

TEST(InstanceCoreTest, UnknownPolicyOrPreemptionModeIsRejected) {
  FakeExecutor exec(4, 8, 40);
  InstanceCoreOptions o = options("fastest");
  EXPECT_EQ(InstanceCore::create(o, exec).status().message(), "instance: unknown instance policy 'fastest' (expected one of: prefill-first, chunked, prefill-only, decode-only, temporal)");
  o = options();
  o.preemption_mode = "drop";
  EXPECT_EQ(InstanceCore::create(o, exec).status().code(), StatusCode::kInvalidArgument);
}

// Preemption under a KV cache too small for all requests: every request still
// gets exactly the tokens it would get alone, and every KV slot read is right.
TEST(InstanceCoreTest, PreemptionKeepsOutputsExact) {
  for (const char* mode : {"recompute", "swap"}) {
    FakeExecutor exec(4, 12, 128, /*num_host_blocks=*/64);
    InstanceCoreOptions o = options();
    o.preemption_mode = mode;
    auto core = InstanceCore::create(o, exec);
    ASSERT_TRUE(core.ok());
    Events ev;
    for (uint64_t id = 1; id <= 4; ++id) (*core)->add_request(request(id, 6, 12), ev.sink(), at_ms(0));
    for (int64_t t = 0; (*core)->has_unfinished() && t < 1000; ++t) (*core)->step(at_ms(t), exec);
    EXPECT_EQ(exec.kv_mismatches, 0) << mode;
    for (uint64_t id = 1; id <= 4; ++id) {
      std::vector<int32_t> want;
      for (int32_t k = 0; k < 12; ++k) want.push_back(FakeExecutor::default_token(RequestId(id), k));
      EXPECT_EQ(ev.tokens(id), want) << mode << " request " << id;
      EXPECT_EQ(ev.final_event(id).finish_reason, "length");
    }
    EXPECT_GT((*core)->scheduler().num_preemptions(), 0) << mode;
  }
}

}  // namespace
}  // namespace ecoserve::instance

namespace ecoserve::instance {
namespace {

// Disaggregated prefill between two cores: the prefill core ends the request
// after its first token ("prefill_done") holding its blocks; the KV moves as a
// blob into blocks the decode core reserves; decoding continues there with the
// same tokens a single core produces, and every KV slot the decode core reads
// holds the right token (FakeExecutor checks each step).
TEST(InstanceCoreTest, PrefillOnOneCoreDecodeOnAnother) {
  FakeExecutor pexec(4, 32, 128), dexec(4, 32, 128);
  InstanceCoreOptions po = options("prefill-only");
  auto prefill = InstanceCore::create(po, pexec);
  auto decode = InstanceCore::create(options("chunked"), dexec);
  ASSERT_TRUE(prefill.ok() && decode.ok()) << prefill.status().to_string();
  // Different block layouts on the two sides: fill some of the decode core's blocks first.
  Events ev;
  (*decode)->add_request(request(9, 10, 2), ev.sink(), at_ms(0));
  (*decode)->step(at_ms(0), dexec);
  (*prefill)->add_request(request(1, 11, 6), ev.sink(), at_ms(0));
  (*prefill)->step(at_ms(1), pexec);
  ASSERT_EQ(ev.by_id.at(1).size(), 2u);
  EXPECT_EQ(ev.by_id.at(1)[0].token, FakeExecutor::default_token(RequestId(1), 0));
  EXPECT_EQ(ev.final_event(1).finish_reason, "prefill_done");
  EXPECT_EQ((*prefill)->num_held(), 1);
  InstanceStatus ps;
  (*prefill)->fill_status(ps);
  EXPECT_GT(ps.kv_usage, 0.0);  // the held blocks

  auto blob = (*prefill)->export_held(RequestId(1), pexec);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  ASSERT_TRUE((*prefill)->release_held(RequestId(1)).ok());
  EXPECT_EQ((*prefill)->release_held(RequestId(1)).code(), StatusCode::kNotFound);
  (*prefill)->fill_status(ps);
  EXPECT_EQ(ps.kv_usage, 0.0);

  Events dev;
  (*decode)->add_prefilled_request(request(1, 11, 6), {ev.by_id.at(1)[0].token}, std::move(*blob), dev.sink(),
                                   at_ms(2));
  EXPECT_EQ((*decode)->num_waiting_for_kv(), 1);
  for (int64_t t = 3; (*decode)->has_unfinished(); ++t) (*decode)->step(at_ms(t), dexec);
  EXPECT_EQ(dexec.kv_mismatches, 0);
  std::vector<int32_t> rest;
  for (int32_t k = 1; k < 6; ++k) rest.push_back(FakeExecutor::default_token(RequestId(1), k));
  EXPECT_EQ(dev.tokens(1), rest);
  EXPECT_EQ(dev.final_event(1).finish_reason, "length");
  EXPECT_EQ(ev.final_event(9).finish_reason, "length");
}

TEST(InstanceCoreTest, PrefilledRequestsWaitForBlocksAndBadKvIsAnError) {
  FakeExecutor pexec(4, 32, 128), dexec(4, 6, 128);  // the decode side has 6 blocks of 4
  auto prefill = InstanceCore::create(options("prefill-only"), pexec);
  auto decode = InstanceCore::create(options("chunked"), dexec);
  ASSERT_TRUE(prefill.ok() && decode.ok());
  Events ev;
  // A local request takes 4 of the decode side's blocks (14 tokens + room to grow).
  (*decode)->add_request(request(5, 14, 2), ev.sink(), at_ms(0));
  (*decode)->step(at_ms(0), dexec);
  (*prefill)->add_request(request(1, 11, 3), ev.sink(), at_ms(0));
  (*prefill)->step(at_ms(1), pexec);
  auto blob = (*prefill)->export_held(RequestId(1), pexec);
  ASSERT_TRUE(blob.ok());
  Events dev;
  (*decode)->add_prefilled_request(request(1, 11, 3), {ev.by_id.at(1)[0].token}, *blob, dev.sink(), at_ms(2));
  (*decode)->step(at_ms(2), dexec);
  EXPECT_EQ((*decode)->num_waiting_for_kv(), 1);  // 3 blocks needed, 2 free: waits
  for (int64_t t = 3; (*decode)->has_unfinished(); ++t) (*decode)->step(at_ms(t), dexec);
  EXPECT_EQ(dev.tokens(1).size(), 2u);  // loaded once request 5 finished
  EXPECT_EQ(dexec.kv_mismatches, 0);

  // An import the executor refuses ends the request with an error and frees its blocks.
  dexec.fail_import = "KV was exported by another model";
  (*decode)->add_prefilled_request(request(2, 11, 3), {1500}, *blob, dev.sink(), at_ms(50));
  (*decode)->step(at_ms(50), dexec);
  EXPECT_EQ(dev.final_event(2).finish_reason, "error");
  EXPECT_EQ(dev.final_event(2).error, "loading the transferred KV failed: KV was exported by another model");
  InstanceStatus ds;
  (*decode)->fill_status(ds);
  EXPECT_EQ(ds.kv_usage, 0.0);
  // Aborting a request still waiting for its KV ends it at once.
  dexec.fail_import.clear();
  (*decode)->add_request(request(6, 20, 8), ev.sink(), at_ms(60));
  (*decode)->step(at_ms(60), dexec);
  (*decode)->add_prefilled_request(request(3, 11, 3), {1500}, *blob, dev.sink(), at_ms(61));
  (*decode)->step(at_ms(61), dexec);
  ASSERT_EQ((*decode)->num_waiting_for_kv(), 1);
  const RequestId ids[] = {RequestId(3)};
  (*decode)->abort(ids);
  EXPECT_EQ(dev.final_event(3).finish_reason, "abort");
  EXPECT_EQ((*decode)->num_waiting_for_kv(), 0);
  // Aborting a held request on the prefill side frees its blocks.
  const RequestId held[] = {RequestId(1)};
  (*prefill)->abort(held);
  EXPECT_EQ((*prefill)->num_held(), 0);
  InstanceStatus ps;
  (*prefill)->fill_status(ps);
  EXPECT_EQ(ps.kv_usage, 0.0);
}


// Live migration: moves request `id` from `src` to `dst` in stages (two copies
// while it decodes, each followed by one more source step, then stop-and-copy)
// and returns the positions each stage carried.
std::vector<std::pair<int32_t, int32_t>> migrate(InstanceCore& src, FakeExecutor& sexec, InstanceCore& dst,
                                                 FakeExecutor& dexec, uint64_t id, Events& dst_events, int64_t& t) {
  std::vector<std::pair<int32_t, int32_t>> stages;
  const RequestId rid(id);
  EXPECT_TRUE(dst.migrate_in_reserve(rid, 8).ok());
  int32_t begin = 0;
  for (int i = 0; i < 2; ++i) {
    auto chunk = src.migrate_out_copy(rid, begin, sexec);
    EXPECT_TRUE(chunk.ok()) << chunk.status().to_string();
    if (!chunk.ok()) return stages;
    stages.emplace_back(chunk->begin, chunk->end);
    EXPECT_TRUE(dst.migrate_in_load(rid, *chunk, dexec).ok());
    begin = chunk->end;
    src.step(at_ms(t++), sexec);  // it keeps decoding on the source meanwhile
  }
  auto last = src.migrate_out_stop(rid, begin, sexec);
  EXPECT_TRUE(last.ok()) << last.status().to_string();
  if (!last.ok()) return stages;
  stages.emplace_back(last->begin, last->end);
  EXPECT_TRUE(last->last);
  EXPECT_EQ(src.num_suspended(), 1);
  src.step(at_ms(t++), sexec);  // suspended: no token for it
  Status commit = dst.migrate_in_commit(*last, dst_events.sink(), dexec);
  EXPECT_TRUE(commit.ok()) << commit.to_string();
  EXPECT_TRUE(src.migrate_out_finish(rid, /*committed=*/true).ok());
  EXPECT_EQ(src.num_suspended(), 0);
  return stages;
}

TEST(InstanceCoreTest, MigrationInStagesContinuesExactlyOnTheDestination) {
  FakeExecutor aexec(4, 32, 128), bexec(4, 32, 128);
  auto a = InstanceCore::create(options(), aexec);
  auto b = InstanceCore::create(options(), bexec);
  ASSERT_TRUE(a.ok() && b.ok());
  // Another request on the destination first, so the block layouts differ.
  Events ev, bev;
  (*b)->add_request(request(9, 10, 30), bev.sink(), at_ms(0));
  (*b)->step(at_ms(0), bexec);
  (*a)->add_request(request(1, 11, 12), ev.sink(), at_ms(0));
  int64_t t = 1;
  for (; ev.tokens(1).size() < 3u; ++t) (*a)->step(at_ms(t), aexec);
  // 11 prompt + 3 outputs: 13 positions computed. Stage 1 copies [0, 13), the source
  // decodes one token, stage 2 copies [13, 14), one more, stop-and-copy [14, 15).
  auto stages = migrate(**a, aexec, **b, bexec, 1, ev, t);
  EXPECT_EQ(stages, (std::vector<std::pair<int32_t, int32_t>>{{0, 13}, {13, 14}, {14, 15}}));
  EXPECT_EQ(ev.tokens(1).size(), 5u);
  for (; (*b)->has_unfinished(); ++t) (*b)->step(at_ms(t), bexec);
  EXPECT_EQ(bexec.kv_mismatches, 0);
  EXPECT_EQ(aexec.kv_mismatches, 0);
  std::vector<int32_t> want;
  for (int32_t k = 0; k < 12; ++k) want.push_back(FakeExecutor::default_token(RequestId(1), k));
  EXPECT_EQ(ev.tokens(1), want);  // one stream, no token lost or repeated
  EXPECT_EQ(ev.final_event(1).finish_reason, "length");
  EXPECT_EQ(ev.final_event(1).prompt_tokens, 11);
  EXPECT_EQ(ev.final_event(1).scheduled_time, at_ms(1));  // queue time survives the move
  // The sampler seed moved with it: every sampled step of request 1 used 7 + 1.
  for (uint64_t seed : bexec.seeds) EXPECT_TRUE(seed == 8 || seed == 16) << seed;
  InstanceStatus as;
  (*a)->fill_status(as);
  EXPECT_EQ(as.kv_usage, 0.0);
  EXPECT_EQ((*a)->num_tracked(), 0);
  InstanceStatus bs;
  (*b)->fill_status(bs);
  EXPECT_EQ(bs.kv_usage, 0.0);
  EXPECT_EQ((*b)->num_migrating_in(), 0);
}

TEST(InstanceCoreTest, MigrationThereAndBackIsExact) {
  FakeExecutor aexec(4, 32, 128), bexec(4, 32, 128);
  auto a = InstanceCore::create(options(), aexec);
  auto b = InstanceCore::create(options(), bexec);
  ASSERT_TRUE(a.ok() && b.ok());
  Events ev;
  (*a)->add_request(request(1, 9, 20), ev.sink(), at_ms(0));
  (*a)->add_request(request(2, 5, 20), ev.sink(), at_ms(0));  // stays on A, shares its steps
  int64_t t = 1;
  for (; ev.tokens(1).size() < 2u; ++t) (*a)->step(at_ms(t), aexec);
  migrate(**a, aexec, **b, bexec, 1, ev, t);
  for (int i = 0; i < 3; ++i, ++t) {
    (*a)->step(at_ms(t), aexec);
    (*b)->step(at_ms(t), bexec);
  }
  migrate(**b, bexec, **a, aexec, 1, ev, t);
  for (; (*a)->has_unfinished() || (*b)->has_unfinished(); ++t) {
    (*a)->step(at_ms(t), aexec);
    (*b)->step(at_ms(t), bexec);
  }
  EXPECT_EQ(aexec.kv_mismatches + bexec.kv_mismatches, 0);
  for (uint64_t id : {1u, 2u}) {
    std::vector<int32_t> want;
    for (int32_t k = 0; k < 20; ++k) want.push_back(FakeExecutor::default_token(RequestId(id), k));
    EXPECT_EQ(ev.tokens(id), want) << id;
    EXPECT_EQ(ev.final_event(id).finish_reason, "length");
    EXPECT_EQ(std::count_if(ev.by_id.at(id).begin(), ev.by_id.at(id).end(),
                            [](const TokenEvent& e) { return e.finished; }),
              1);
  }
  InstanceStatus s;
  (*a)->fill_status(s);
  EXPECT_EQ(s.kv_usage, 0.0);
  (*b)->fill_status(s);
  EXPECT_EQ(s.kv_usage, 0.0);
}

TEST(InstanceCoreTest, FailedMigrationsLeaveTheRequestOnTheSourceAndNothingReserved) {
  FakeExecutor aexec(4, 32, 128), bexec(4, 3, 128);  // the destination has 3 blocks of 4
  auto a = InstanceCore::create(options(), aexec);
  auto b = InstanceCore::create(options(), bexec);
  ASSERT_TRUE(a.ok() && b.ok());
  Events ev;
  (*a)->add_request(request(1, 15, 10), ev.sink(), at_ms(0));
  int64_t t = 1;
  for (; ev.tokens(1).size() < 2u; ++t) (*a)->step(at_ms(t), aexec);
  const RequestId id(1);
  // 16 positions need 4 blocks: the destination has 3.
  EXPECT_EQ((*b)->migrate_in_reserve(id, 16).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*b)->num_migrating_in(), 0);
  ASSERT_TRUE((*b)->migrate_in_reserve(id, 8).ok());
  auto chunk = (*a)->migrate_out_copy(id, 0, aexec);
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ((*b)->migrate_in_load(id, *chunk, bexec).code(), StatusCode::kResourceExhausted);
  // A stage that skips positions is refused.
  auto gap = (*a)->migrate_out_copy(id, 4, aexec);
  ASSERT_TRUE(gap.ok());
  EXPECT_EQ((*b)->migrate_in_load(id, *gap, bexec).code(), StatusCode::kInvalidArgument);
  (*b)->migrate_in_cancel(id);
  InstanceStatus bs;
  (*b)->fill_status(bs);
  EXPECT_EQ(bs.kv_usage, 0.0);
  // Stop-and-copy, then the destination fails: the source resumes it.
  auto last = (*a)->migrate_out_stop(id, 0, aexec);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ((*a)->migrate_out_copy(id, 0, aexec).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*a)->migrate_out_finish(id, /*committed=*/false).ok());
  EXPECT_EQ((*a)->migrate_out_finish(id, false).code(), StatusCode::kNotFound);
  for (; (*a)->has_unfinished(); ++t) (*a)->step(at_ms(t), aexec);
  std::vector<int32_t> want;
  for (int32_t k = 0; k < 10; ++k) want.push_back(FakeExecutor::default_token(id, k));
  EXPECT_EQ(ev.tokens(1), want);
  EXPECT_EQ(aexec.kv_mismatches, 0);
  InstanceStatus as;
  (*a)->fill_status(as);
  EXPECT_EQ(as.kv_usage, 0.0);
  // Unknown and queued requests cannot be migrated.
  EXPECT_EQ((*a)->migrate_out_copy(RequestId(5), 0, aexec).status().code(), StatusCode::kNotFound);
  (*a)->add_request(request(6, 5, 3), ev.sink(), at_ms(t));
  EXPECT_EQ((*a)->migrate_out_copy(RequestId(6), 0, aexec).status().code(), StatusCode::kFailedPrecondition);
}

TEST(InstanceCoreTest, AbortOfASuspendedRequestEndsItOnceAndFreesItsBlocks) {
  FakeExecutor aexec(4, 32, 128), bexec(4, 32, 128);
  auto a = InstanceCore::create(options(), aexec);
  auto b = InstanceCore::create(options(), bexec);
  ASSERT_TRUE(a.ok() && b.ok());
  Events ev;
  (*a)->add_request(request(1, 6, 10), ev.sink(), at_ms(0));
  for (int64_t t = 1; ev.tokens(1).size() < 2u; ++t) (*a)->step(at_ms(t), aexec);
  const RequestId id(1);
  ASSERT_TRUE((*b)->migrate_in_reserve(id, 7).ok());
  ASSERT_TRUE((*a)->migrate_out_stop(id, 0, aexec).ok());
  const RequestId ids[] = {id};
  (*a)->abort(ids);
  (*b)->abort(ids);  // the destination's reservation goes too
  EXPECT_EQ(ev.final_event(1).finish_reason, "abort");
  EXPECT_EQ(std::count_if(ev.by_id.at(1).begin(), ev.by_id.at(1).end(), [](const TokenEvent& e) { return e.finished; }),
            1);
  InstanceStatus s;
  (*a)->fill_status(s);
  EXPECT_EQ(s.kv_usage, 0.0);
  EXPECT_EQ((*a)->num_suspended(), 0);
  (*b)->fill_status(s);
  EXPECT_EQ(s.kv_usage, 0.0);
  EXPECT_EQ((*b)->num_migrating_in(), 0);
}

TEST(InstanceCoreTest, PinnedBlocksOutliveTheirRequestUntilUnpinned) {
  FakeExecutor exec(4, 4, 128);  // 4 blocks of 4
  auto core = InstanceCore::create(options(), exec);
  ASSERT_TRUE(core.ok());
  Events ev;
  (*core)->add_request(request(1, 6, 10), ev.sink(), at_ms(0));
  int64_t t = 1;
  for (; ev.tokens(1).size() < 2u; ++t) (*core)->step(at_ms(t), exec);
  // 6 prompt + 2 outputs: positions [0, 7) computed, in 2 blocks.
  auto src = (*core)->migrate_out_begin(RequestId(1), 0, /*stop=*/false);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_EQ(src->end, 7);
  const RequestId ids[] = {RequestId(1)};
  (*core)->abort(ids);  // the copy is still reading: its blocks must stay
  EXPECT_EQ(ev.final_event(1).finish_reason, "abort");
  InstanceStatus s;
  (*core)->fill_status(s);
  EXPECT_EQ(s.kv_usage, 0.5);
  EXPECT_EQ(s.num_free_blocks, 2);
  // Another request takes the two free blocks, not the pinned ones.
  (*core)->add_request(request(2, 7, 1), ev.sink(), at_ms(t));
  for (; (*core)->has_unfinished(); ++t) (*core)->step(at_ms(t), exec);
  EXPECT_EQ(exec.kv_mismatches, 0);
  auto chunk = InstanceCore::export_source(*src, exec);
  ASSERT_TRUE(chunk.ok());
  std::vector<int32_t> v(chunk->kv.size() / sizeof(int32_t));
  std::memcpy(v.data(), chunk->kv.data(), chunk->kv.size());
  std::vector<int32_t> want = {0, 7};  // the fake blob: begin, end, then each position's token
  for (int32_t tok : prompt_of(6, 100)) want.push_back(tok);
  want.push_back(FakeExecutor::default_token(RequestId(1), 0));
  EXPECT_EQ(v, want);
  (*core)->migrate_out_unpin(*src);
  (*core)->fill_status(s);
  EXPECT_EQ(s.kv_usage, 0.0);
  EXPECT_EQ(s.num_free_blocks, 4);
}

}  // namespace
}  // namespace ecoserve::instance
