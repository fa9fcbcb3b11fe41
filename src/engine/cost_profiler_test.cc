// Cost profiler: JSON round trip and rejection of bad documents, save/load, and
// real measurements on a tiny in-memory model (structure only: timings are noisy;
// a clock that ticks a fixed amount per reading makes the numbers exact).
#include "engine/cost_profiler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "base/test_data.h"
#include "engine/testdata/tiny_llama.h"

namespace ecoserve::engine {
namespace {

CostProfile sample_profile() {
  CostProfile p;
  p.model_id = "stories \"15M\".gguf:24,1234";
  p.machine = "AMD EPYC 7B13 \xC2\xB5-arch";
  p.threads = 2;
  p.kv_cache_dtype = "f16";
  p.prefill = {{16, 0, 0.1}, {32, 0, 1.0 / 3.0}, {16, 256, 1.2345678901234567e-7}};
  p.decode = {{1, 32, 2.0 / 7.0}, {2, 32, 1e-300}, {1, 1024, 12345.678}};
  return p;
}

void expect_same(const CostProfile& a, const CostProfile& b) {
  EXPECT_EQ(a.model_id, b.model_id);
  EXPECT_EQ(a.machine, b.machine);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.kv_cache_dtype, b.kv_cache_dtype);
  ASSERT_EQ(a.prefill.size(), b.prefill.size());
  for (size_t i = 0; i < a.prefill.size(); ++i) {
    EXPECT_EQ(a.prefill[i].tokens, b.prefill[i].tokens) << i;
    EXPECT_EQ(a.prefill[i].context, b.prefill[i].context) << i;
    EXPECT_EQ(a.prefill[i].seconds, b.prefill[i].seconds) << i;  // bit-exact
  }
  ASSERT_EQ(a.decode.size(), b.decode.size());
  for (size_t i = 0; i < a.decode.size(); ++i) {
    EXPECT_EQ(a.decode[i].batch, b.decode[i].batch) << i;
    EXPECT_EQ(a.decode[i].context, b.decode[i].context) << i;
    EXPECT_EQ(a.decode[i].seconds, b.decode[i].seconds) << i;
  }
}

TEST(CostProfileJsonTest, RoundTripIsExact) {
  const CostProfile p = sample_profile();
  const std::string json = cost_profile_to_json(p);
  auto back = cost_profile_from_json(json);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_same(p, *back);
  EXPECT_EQ(cost_profile_to_json(*back), json);
}

TEST(CostProfileJsonTest, OptionalFieldsDefault) {
  auto p = cost_profile_from_json(R"({"model_id": "m", "prefill": [], "decode": []})");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->model_id, "m");
  EXPECT_EQ(p->machine, "");
  EXPECT_EQ(p->threads, 0);
  EXPECT_EQ(p->kv_cache_dtype, "f32");
}

void expect_invalid(std::string_view json, const std::string& needle) {
  auto p = cost_profile_from_json(json);
  ASSERT_FALSE(p.ok()) << json;
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << p.status().to_string();
  EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().message();
}

TEST(CostProfileJsonTest, RejectsMalformedJson) {
  expect_invalid("", "not valid JSON");
  expect_invalid("{", "not valid JSON");
  expect_invalid(R"({"model_id": "m", "prefill": [}, "decode": []})", "not valid JSON");
  expect_invalid("not json", "not valid JSON");
  expect_invalid("[1, 2]", "expected a JSON object, got array");
}

TEST(CostProfileJsonTest, RejectsMissingAndWrongTypedFields) {
  expect_invalid(R"({"prefill": [], "decode": []})", "model_id is missing");
  expect_invalid(R"({"model_id": "m", "decode": []})", "prefill is missing");
  expect_invalid(R"({"model_id": 7, "prefill": [], "decode": []})", "model_id: expected a string, got number");
  expect_invalid(R"({"model_id": "m", "prefill": {}, "decode": []})", "prefill: expected an array, got object");
  expect_invalid(R"({"model_id": "m", "prefill": [], "decode": [3]})", "decode[0]: expected an object, got number");
  expect_invalid(R"({"model_id": "m", "threads": 2.5, "prefill": [], "decode": []})",
                 "threads: expected an integer, got number");
  expect_invalid(R"({"model_id": "m", "version": 2, "prefill": [], "decode": []})", "version 2 is not supported");
  expect_invalid(R"({"model_id": "m", "decode": [],
                     "prefill": [{"tokens": 16, "context": 0, "seconds": 0.1},
                                 {"tokens": "32", "context": 0, "seconds": 0.2}]})",
                 "prefill[1].tokens: expected an integer, got string");
  expect_invalid(R"({"model_id": "m", "prefill": [],
                     "decode": [{"batch": 1, "context": 0, "seconds": "fast"}]})",
                 "decode[0].seconds: expected a number, got string");
  expect_invalid(R"({"model_id": "m", "prefill": [], "decode": [{"batch": 1, "seconds": 0.5}]})",
                 "decode[0].context is missing");
  expect_invalid(R"({"model_id": "m", "decode": [],
                     "prefill": [{"tokens": 4294967296, "context": 0, "seconds": 0.1}]})",
                 "prefill[0].tokens is out of the 32-bit integer range");
  expect_invalid(R"({"model_id": "m", "decode": [],
                     "prefill": [{"tokens": -4294967296, "context": 0, "seconds": 0.1}]})",
                 "prefill[0].tokens is out of the 32-bit integer range");
}

TEST(CostProfileFileTest, SaveLoadAndDefaultPath) {
  const auto dir = std::filesystem::temp_directory_path() / ("cost_profiler_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.gguf.profile.json").string();
  const CostProfile p = sample_profile();
  ASSERT_TRUE(save_cost_profile(p, path).ok());
  auto back = load_cost_profile(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_same(p, *back);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  auto missing = load_cost_profile((dir / "nope.json").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  {
    std::ofstream(dir / "bad.json") << R"({"model_id": 1})";
  }
  auto bad = load_cost_profile((dir / "bad.json").string());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.json: cost profile: model_id"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(save_cost_profile(p, (dir / "no" / "such" / "dir.json").string()).ok());
  std::filesystem::remove_all(dir);

  EXPECT_EQ(default_cost_profile_path("/models/stories15M.gguf"), "/models/stories15M.gguf.profile.json");
  EXPECT_EQ(model_file_id("/no/such/file.gguf"), "file.gguf:?");
}

// Each reading is 1 ms after the previous one: every timed step takes exactly 1 ms.
class TickClock final : public Clock {
 public:
  TimePoint now() const override { return TimePoint(from_ms(1) * ticks_.fetch_add(1)); }

 private:
  mutable std::atomic<int64_t> ticks_{0};
};

class CostProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto vocab = testing::tiny_vocab_path();
    if (!vocab) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
    auto m = testing::build_tiny_llama(testing::TinyLlamaSpec{}, *vocab);  // context 256
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = *m;
  }

  // A small grid: prefill 4, 8, 16, 32 tokens at contexts 0 and 64; decode batch 1, 2, 4 at contexts 8 and 64.
  static CostProfilerOptions small_grid(const Clock* clock) {
    CostProfilerOptions o;
    o.clock = clock;
    o.min_prefill_tokens = 4;
    o.max_prefill_tokens = 32;
    o.prefill_contexts = {64, 0};  // any order
    o.max_batch = 4;
    o.decode_contexts = {8, 64};
    o.repeats = 3;
    return o;
  }

  std::unique_ptr<ModelRunner> runner(const CostProfilerOptions& o, int32_t max_context = 0, int32_t extra_blocks = 0) {
    EngineOptions eo;
    eo.num_threads = 2;
    eo.block_size = 16;
    eo.max_context = max_context;
    eo.num_kv_blocks =
        cost_profile_blocks_needed(o, eo.block_size, max_context > 0 ? max_context : model_->config().n_ctx_train) +
        extra_blocks;
    auto r = ModelRunner::create(model_, eo);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }

  std::shared_ptr<const model::LlamaModel> model_;
};

// fill_synthetic_context prefills the first prefill_tokens positions (whole blocks)
// and copies those blocks cyclically over the rest of the context, then to the other
// sequences: every position's K/V is a real one, in a block of its own.
TEST_F(CostProfilerTest, FillSyntheticContextPrefillsAPrefixAndCopiesItsBlocks) {
  const CostProfilerOptions o = small_grid(nullptr);
  auto r = runner(o, 0, 6);  // the grid's 20 blocks and 6 more
  ASSERT_EQ(r->num_kv_blocks(), 2 * 13);
  std::mt19937 rng(7);
  // 200 positions in blocks of 16 (13 blocks, the last holding 8); 40 prefilled -> 3 blocks (48).
  ASSERT_TRUE(fill_synthetic_context(*r, 2, 200, 13, rng, 40).ok());
  std::vector<BlockId> seq0, seq1;
  for (int32_t b = 0; b < 13; ++b) {
    seq0.emplace_back(b);
    seq1.emplace_back(13 + b);
  }
  // The payload of positions [begin, end) (what follows the header, which names the range).
  auto payload = [&](const std::vector<BlockId>& blocks, int32_t begin, int32_t end) {
    auto bytes = r->export_kv(blocks, begin, end);
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    return std::vector<uint8_t>(bytes->begin() + sizeof(KvExportHeader), bytes->end());
  };
  // The three prefilled blocks differ from each other (RoPE and new tokens)...
  EXPECT_NE(payload(seq0, 0, 16), payload(seq0, 16, 32));
  EXPECT_NE(payload(seq0, 16, 32), payload(seq0, 32, 48));
  // ...and the rest repeat them: block b holds block b mod 3's values.
  EXPECT_EQ(payload(seq0, 48, 96), payload(seq0, 0, 48));
  EXPECT_EQ(payload(seq0, 144, 192), payload(seq0, 0, 48));
  EXPECT_EQ(payload(seq0, 192, 200), payload(seq0, 0, 8));
  // The second sequence's blocks are copies of the first's.
  EXPECT_EQ(payload(seq1, 0, 200), payload(seq0, 0, 200));
  // A prefix as long as the context prefills all of it (no repeats).
  std::mt19937 rng2(7);
  ASSERT_TRUE(fill_synthetic_context(*r, 1, 64, 13, rng2, 512).ok());
  EXPECT_NE(payload(seq0, 48, 64), payload(seq0, 0, 16));
  EXPECT_EQ(fill_synthetic_context(*r, 1, 64, 13, rng2, 0).code(), StatusCode::kInvalidArgument);
}

TEST_F(CostProfilerTest, MeasuresEveryGridPointOnATinyModel) {
  SteadyClock clock;
  CostProfilerOptions o = small_grid(&clock);
  o.model_id = "tiny.gguf:1";
  o.machine = "test machine";
  std::vector<std::string> progress;
  o.on_progress = [&](const std::string& line) { progress.push_back(line); };
  // Decode batch 4 at context 64 needs 4 sequences of 5 blocks (65 positions).
  EXPECT_EQ(cost_profile_blocks_needed(o, 16, 256), 20);
  auto r = runner(o);
  auto p = measure_cost_profile(*r, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->model_id, "tiny.gguf:1");
  EXPECT_EQ(p->machine, "test machine");
  EXPECT_EQ(p->threads, 2);
  EXPECT_EQ(p->kv_cache_dtype, "f32");
  ASSERT_EQ(p->prefill.size(), 8u);
  ASSERT_EQ(p->decode.size(), 6u);
  const int32_t tokens[] = {4, 8, 16, 32};
  for (size_t i = 0; i < p->prefill.size(); ++i) {
    EXPECT_EQ(p->prefill[i].context, i < 4 ? 0 : 64) << i;
    EXPECT_EQ(p->prefill[i].tokens, tokens[i % 4]) << i;
    EXPECT_GT(p->prefill[i].seconds, 0.0) << i;
  }
  const int32_t batches[] = {1, 2, 4};
  for (size_t i = 0; i < p->decode.size(); ++i) {
    EXPECT_EQ(p->decode[i].context, i < 3 ? 8 : 64) << i;
    EXPECT_EQ(p->decode[i].batch, batches[i % 3]) << i;
    EXPECT_GT(p->decode[i].seconds, 0.0) << i;
  }
  // One line per context of each table, and a summary.
  EXPECT_EQ(progress.size(), 5u);
  EXPECT_EQ(progress.front(), "prefill at context 0: tokens 4,8,16,32");
}

TEST_F(CostProfilerTest, TimesWithTheInjectedClockAndTakesTheMedian) {
  TickClock clock;
  CostProfilerOptions o = small_grid(&clock);
  o.repeats = 2;  // even: the mean of the middle two, still exactly 1 ms
  auto r = runner(o);
  auto p = measure_cost_profile(*r, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->model_id, "engine-test-tiny");  // no model_id given: the model's general.name
  for (const auto& x : p->prefill) EXPECT_DOUBLE_EQ(x.seconds, 0.001);
  for (const auto& x : p->decode) EXPECT_DOUBLE_EQ(x.seconds, 0.001);
}

TEST_F(CostProfilerTest, LeavesOutPointsBeyondTheContext) {
  TickClock clock;
  CostProfilerOptions o = small_grid(&clock);
  o.prefill_contexts = {0, 48, 60};
  o.decode_contexts = {8, 100};
  o.repeats = 1;
  // Context 64: prefill at 48 keeps 4, 8 and 16 tokens; at 60 only 4 would fit, a
  // row of one point: left out; decode at 100 is left out.
  EXPECT_EQ(cost_profile_blocks_needed(o, 16, 64), 4);  // 48 + 16 tokens; 4 x ceil(9 / 16)
  auto r = runner(o, /*max_context=*/64);
  auto p = measure_cost_profile(*r, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->prefill.size(), 7u);
  EXPECT_EQ(p->prefill.back().tokens, 16);
  EXPECT_EQ(p->prefill.back().context, 48);
  ASSERT_EQ(p->decode.size(), 3u);
  EXPECT_EQ(p->decode.back().context, 8);
}

TEST(CostProfilerGridTest, DefaultContextsFollowTheModelsContext) {
  const CostProfilerOptions o;
  EXPECT_EQ(cost_profile_prefill_contexts(o, 2048), (std::vector<int32_t>{0, 512, 1024}));
  EXPECT_EQ(cost_profile_decode_contexts(o, 2048), (std::vector<int32_t>{32, 512, 1024}));
  EXPECT_EQ(cost_profile_prefill_contexts(o, 64), (std::vector<int32_t>{0, 16, 32}));
  EXPECT_EQ(cost_profile_decode_contexts(o, 64), (std::vector<int32_t>{16, 32}));
  CostProfilerOptions mine;
  mine.prefill_contexts = {100, 0, 100};
  EXPECT_EQ(cost_profile_prefill_contexts(mine, 64), (std::vector<int32_t>{0, 100}));
  // 2048: prefill at 1024 + 512 tokens = 96 blocks; decode 32 x ceil(1025 / 16) = 32 x 65 = 2080.
  EXPECT_EQ(cost_profile_blocks_needed(o, 16, 2048), 2080);
}

TEST_F(CostProfilerTest, RejectsBadOptionsAndTooSmallRunners) {
  TickClock clock;
  CostProfilerOptions o = small_grid(&clock);
  auto r = runner(o, 0, /*extra_blocks=*/-1);
  auto few = measure_cost_profile(*r, o);
  EXPECT_EQ(few.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(few.status().message().find("the runner has 19 KV blocks, the grid needs 20"), std::string::npos)
      << few.status().message();

  auto r2 = runner(o);
  CostProfilerOptions bad = o;
  bad.clock = nullptr;
  EXPECT_NE(measure_cost_profile(*r2, bad).status().message().find("clock"), std::string::npos);
  bad = o;
  bad.repeats = 0;
  EXPECT_NE(measure_cost_profile(*r2, bad).status().message().find("repeats"), std::string::npos);
  bad = o;
  bad.prefill_contexts = {-1};
  EXPECT_NE(measure_cost_profile(*r2, bad).status().message().find("prefill context -1 is negative"),
            std::string::npos);
  bad = o;
  bad.decode_contexts = {1000};
  EXPECT_NE(measure_cost_profile(*r2, bad).status().message().find("no decode grid point fits"), std::string::npos);
}

}  // namespace
}  // namespace ecoserve::engine
