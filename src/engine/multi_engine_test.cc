// Several engines in one process, each with its own thread pool, running at the
// same time (two instances with one thread each on a 2-core machine).
#include <gtest/gtest.h>

#include <thread>

#include "base/test_data.h"
#include "engine/generator.h"
#include "engine/model_runner.h"

namespace ecoserve::engine {
namespace {

TEST(MultiEngineTest, TwoEnginesWithOwnPoolsRunConcurrentlyAndAgree) {
  auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
  if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
  auto model = model::LlamaModel::load(*path);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EngineOptions eo;
  eo.num_threads = 1;
  eo.num_kv_blocks = 64;
  auto a = ModelRunner::create(*model, eo);
  auto b = ModelRunner::create(*model, eo);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->num_threads(), 1);
  const std::vector<int32_t> prompt = (*model)->tokenizer().encode("Once upon a time", true);
  GenerateOptions go;
  go.sampling.temperature = 0;
  go.sampling.max_tokens = 48;
  go.sampling.ignore_eos = true;

  std::vector<int32_t> solo;
  {
    Generator g(**a);
    auto r = g.generate(prompt, go);
    ASSERT_TRUE(r.ok());
    solo = r->tokens;
  }
  std::vector<int32_t> out_a, out_b;
  std::thread ta([&] { out_a = Generator(**a).generate(prompt, go)->tokens; });
  std::thread tb([&] { out_b = Generator(**b).generate(prompt, go)->tokens; });
  ta.join();
  tb.join();
  EXPECT_EQ(out_a, solo);
  EXPECT_EQ(out_b, solo);
  EXPECT_EQ(solo.size(), 48u);
}

}  // namespace
}  // namespace ecoserve::engine
