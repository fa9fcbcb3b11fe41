// ecoserve profile engine: prefill and batched-decode throughput of one model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/ecoserve/commands.h"
#include "engine/model_runner.h"
#include "model/llama_model.h"

namespace ecoserve::apps {

namespace {

struct ProfileArgs {
  bool mmap = false;  // map the GGUF instead of reading it into huge pages
  std::string model;
  std::vector<int32_t> threads = {1, 2};
  int32_t prompt_len = 512;
  std::vector<int32_t> batches = {1, 8, 32, 64};
  int32_t context = 128;
  int32_t decode_steps = 32;
  int32_t repeats = 2;
  int32_t block_size = 16;
  bool json = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Tokens/s of prefilling one prompt_len-token prompt (best of `repeats`).
StatusOr<double> measure_prefill(engine::ModelRunner& r, const ProfileArgs& a, std::mt19937& rng) {
  const int32_t vocab = r.model().config().n_vocab;
  std::uniform_int_distribution<int32_t> tok(3, vocab - 1);
  policy::StepPlan plan;
  plan.seqs.resize(1);
  auto& s = plan.seqs[0];
  s.id = RequestId(1);
  for (int32_t b = 0; b < (a.prompt_len + a.block_size - 1) / a.block_size; ++b) s.block_table.push_back(BlockId(b));
  for (int32_t i = 0; i < a.prompt_len; ++i) s.tokens.push_back(tok(rng));
  s.sample = true;
  double best = 0;
  for (int32_t rep = 0; rep < a.repeats; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    ECO_ASSIGN_OR_RETURN(engine::StepOutput o, r.execute(plan));
    best = std::max(best, a.prompt_len / seconds_since(t0));
  }
  return best;
}

// Tokens/s of decode steps for `batch` sequences that each hold `context` tokens.
StatusOr<double> measure_decode(engine::ModelRunner& r, const ProfileArgs& a, int32_t batch, std::mt19937& rng) {
  const int32_t vocab = r.model().config().n_vocab;
  std::uniform_int_distribution<int32_t> tok(3, vocab - 1);
  const int32_t per_seq = (a.context + a.decode_steps + a.block_size - 1) / a.block_size;
  policy::StepPlan plan;
  plan.seqs.resize(batch);
  for (int32_t i = 0; i < batch; ++i) {
    auto& s = plan.seqs[i];
    s.id = RequestId(i + 1);
    for (int32_t b = 0; b < per_seq; ++b) s.block_table.push_back(BlockId(i * per_seq + b));
  }
  // Fill the contexts (untimed), a few sequences per pass.
  for (int32_t i = 0; i < batch; ++i) {
    policy::StepPlan fill;
    fill.seqs.push_back(plan.seqs[i]);
    for (int32_t j = 0; j < a.context; ++j) fill.seqs[0].tokens.push_back(tok(rng));
    ECO_ASSIGN_OR_RETURN(engine::StepOutput o, r.execute(fill));
  }
  for (auto& s : plan.seqs) {
    s.sample = true;
    s.tokens = {tok(rng)};
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int32_t step = 0; step < a.decode_steps; ++step) {
    for (auto& s : plan.seqs) s.num_computed = a.context + step;
    ECO_ASSIGN_OR_RETURN(engine::StepOutput o, r.execute(plan));
    for (int32_t i = 0; i < batch; ++i) plan.seqs[i].tokens[0] = o.seqs[i].token;
  }
  return static_cast<double>(batch) * a.decode_steps / seconds_since(t0);
}

int run_profile(const ProfileArgs& a) {
  auto model = model::LlamaModel::load(a.model, a.mmap ? model::GgufFile::Load::kMmap : model::GgufFile::Load::kReadHugePages);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  const auto& c = (*model)->config();
  const int32_t max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  const int32_t per_seq = (a.context + a.decode_steps + a.block_size - 1) / a.block_size;
  const int32_t need_blocks = std::max(max_batch * per_seq, (a.prompt_len + a.block_size - 1) / a.block_size);
  if (a.prompt_len > c.n_ctx_train || a.context + a.decode_steps > c.n_ctx_train) {
    std::fprintf(stderr, "error: prompt/context longer than the model's context of %d tokens\n", c.n_ctx_train);
    return 1;
  }
  nlohmann::json results = nlohmann::json::array();
  if (!a.json) {
    std::printf("model: %s (%s, %.1fM params, %s)\n", a.model.c_str(), c.arch.c_str(), c.num_params / 1e6,
                std::string(kernels::type_name((*model)->layers()[0].wq.type)).c_str());
    std::printf("%-8s %-22s %12s\n", "threads", "test", "tokens/s");
  }
  std::mt19937 rng(1234);
  for (int32_t th : a.threads) {
    engine::EngineOptions eo;
    eo.num_threads = th;
    eo.block_size = a.block_size;
    eo.num_kv_blocks = need_blocks;
    auto runner = engine::ModelRunner::create(*model, eo);
    if (!runner.ok()) {
      std::fprintf(stderr, "error: %s\n", runner.status().message().c_str());
      return 1;
    }
    auto report = [&](const std::string& test, StatusOr<double> v) {
      if (!v.ok()) {
        std::fprintf(stderr, "error: %s\n", v.status().message().c_str());
        return false;
      }
      if (a.json) {
        results.push_back({{"threads", th}, {"test", test}, {"tokens_per_second", *v}});
      } else {
        std::printf("%-8d %-22s %12.1f\n", th, test.c_str(), *v);
        std::fflush(stdout);
      }
      return true;
    };
    if (!report("prefill pp" + std::to_string(a.prompt_len), measure_prefill(**runner, a, rng))) return 1;
    for (int32_t b : a.batches) {
      if (!report("decode batch " + std::to_string(b), measure_decode(**runner, a, b, rng))) return 1;
    }
  }
  if (a.json) std::printf("%s\n", results.dump(2).c_str());
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("profile", "Measure engine speed (prefill and batched decode tokens/s)");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ProfileArgs>();
  auto* eng = cmd->add_subcommand("engine", "Prefill tok/s for one prompt and decode tok/s at several batch sizes");
  eng->add_option("-m,--model", args->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  eng->add_flag("--mmap", args->mmap,
                  "map the model file (shared page cache, less memory) instead of reading it into huge-page memory (faster decode)");
  eng->add_option("-t,--threads", args->threads, "thread counts to measure")->capture_default_str()->delimiter(',');
  eng->add_option("--prompt-len", args->prompt_len, "prefill prompt length")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eng->add_option("--batches", args->batches, "decode batch sizes")->capture_default_str()->delimiter(',');
  eng->add_option("--context", args->context, "tokens already in each decoding sequence")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eng->add_option("--decode-steps", args->decode_steps, "timed decode steps per batch size")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eng->add_option("--repeats", args->repeats, "prefill repetitions (best is reported)")->capture_default_str()->check(CLI::Range(1, 100));
  eng->add_option("--block-size", args->block_size, "KV block size")->capture_default_str()->check(CLI::Range(1, 4096));
  eng->add_flag("--json", args->json, "print JSON instead of a table");
  eng->callback([args, &exit_code] { exit_code = run_profile(*args); });
}

}  // namespace ecoserve::apps
