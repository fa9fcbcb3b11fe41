// ecoserve generate: run one prompt through the engine and stream the text.
#include <cstdio>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/ecoserve/commands.h"
#include "engine/generator.h"
#include "engine/model_runner.h"
#include "model/llama_model.h"

namespace ecoserve::apps {

namespace {

struct GenerateArgs {
  bool mmap = false;  // map the GGUF instead of reading it into huge pages
  std::string model;
  std::string prompt;
  int32_t n = 64;
  float temp = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int64_t seed = -1;
  int32_t threads = 0;
  int32_t ctx = 0;
  int32_t block_size = 16;
  engine::KvCacheType kv_cache_type = engine::KvCacheType::kF32;
  kernels::Isa isa = kernels::default_isa();
  bool no_bos = false;
  bool ignore_eos = false;
  bool quiet = false;
  bool json = false;  // one JSON object (ids, text, timings) instead of streamed text
};

int run_generate(const GenerateArgs& a) {
  auto model = model::LlamaModel::load(a.model, a.mmap ? model::GgufFile::Load::kMmap : model::GgufFile::Load::kReadHugePages);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  const model::Tokenizer& tok = (*model)->tokenizer();
  std::vector<int32_t> prompt = tok.encode(a.prompt, !a.no_bos, /*parse_special=*/true);
  if (prompt.empty()) {
    std::fprintf(stderr, "error: the prompt encodes to no tokens (give --prompt TEXT)\n");
    return 1;
  }
  engine::EngineOptions eo;
  eo.num_threads = a.threads;
  eo.block_size = a.block_size;
  eo.max_context = a.ctx;
  eo.kv_cache_type = a.kv_cache_type;
  eo.isa = a.isa;
  const int64_t ctx = a.ctx > 0 ? a.ctx : (*model)->config().n_ctx_train;
  // Enough KV for one sequence of the whole context.
  eo.num_kv_blocks = static_cast<int32_t>((ctx + a.block_size - 1) / a.block_size);
  auto runner = engine::ModelRunner::create(*model, eo);
  if (!runner.ok()) {
    std::fprintf(stderr, "error: %s\n", runner.status().message().c_str());
    return 1;
  }
  engine::GenerateOptions go;
  go.sampling.max_tokens = a.n;
  go.sampling.temperature = a.temp;
  go.sampling.top_k = a.top_k;
  go.sampling.top_p = a.top_p;
  go.sampling.min_p = a.min_p;
  go.sampling.repetition_penalty = a.repeat_penalty;
  go.sampling.frequency_penalty = a.frequency_penalty;
  go.sampling.presence_penalty = a.presence_penalty;
  go.sampling.ignore_eos = a.ignore_eos;
  go.sampling.seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
  go.sampling.has_seed = true;

  if (static_cast<int64_t>(prompt.size()) + a.n > (*runner)->max_context()) {
    std::fprintf(stderr, "error: the prompt (%zu tokens) + max tokens (%d) exceeds the context of %d tokens\n",
                 prompt.size(), a.n, (*runner)->max_context());
    return 1;
  }
  model::IncrementalDetokenizer detok(tok, /*render_special=*/false, /*strip_leading_space=*/false);
  if (!a.json) {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  std::string text;
  engine::Generator gen(**runner);
  auto r = gen.generate(prompt, go, [&](int32_t id) {
    std::string piece = detok.push(id);
    if (a.json) {
      text += piece;
    } else {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  std::string rest = detok.flush();
  if (!r.ok()) {
    if (!a.json) std::fputc('\n', stdout);
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return 1;
  }
  if (a.json) {
    text += rest;
    nlohmann::json j = {{"prompt_ids", prompt},
                        {"ids", r->tokens},
                        {"text", text},
                        {"finish_reason", r->finish_reason},
                        {"prefill_seconds", r->prefill_seconds},
                        {"decode_seconds", r->decode_seconds},
                        {"threads", (*runner)->num_threads()}};
    // Invalid UTF-8 (a byte-fallback piece cut by max_tokens) is replaced, never an exception.
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  if (!a.quiet) {
    const size_t n = r->tokens.size();
    std::fprintf(stderr,
                 "\n[ecoserve] prompt %zu tokens in %.1f ms (%.1f tok/s); generated %zu tokens in %.1f ms (%.1f tok/s); "
                 "finish: %s; threads %d\n",
                 prompt.size(), r->prefill_seconds * 1e3, prompt.size() / std::max(1e-9, r->prefill_seconds), n,
                 r->decode_seconds * 1e3, n > 1 ? (n - 1) / std::max(1e-9, r->decode_seconds) : 0.0,
                 r->finish_reason.c_str(), (*runner)->num_threads());
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt with one model (streams to stdout)");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--mmap", args->mmap,
                  "map the model file (shared page cache, less memory) instead of reading it into huge-page "
                  "memory (faster decode; Q8_0 and Q4_K matrices repacked for faster int8 kernels: ~2x prefill)");
  cmd->add_option("-p,--prompt", args->prompt, "prompt text")->required();
  cmd->add_option("-n,--max-tokens", args->n, "tokens to generate at most")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temp,--temperature", args->temp, "sampling temperature; 0 = greedy")->capture_default_str()->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens; 0 = off")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass; 1 = off")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", args->min_p, "drop tokens below min_p * p(max); 0 = off")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", args->repeat_penalty, "repetition penalty over prompt and output; 1 = off")->capture_default_str();
  cmd->add_option("--frequency-penalty", args->frequency_penalty, "OpenAI frequency penalty")->capture_default_str();
  cmd->add_option("--presence-penalty", args->presence_penalty, "OpenAI presence penalty")->capture_default_str();
  cmd->add_option("-s,--seed", args->seed, "sampling seed; -1 = random")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "threads; 0 = all cores")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("-c,--ctx-size", args->ctx, "context length; 0 = the model's")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--block-size", args->block_size, "KV block size in tokens")->capture_default_str()->check(CLI::Range(1, 4096));
  add_kv_cache_dtype_option(cmd, args->kv_cache_type);
  add_isa_option(cmd, args->isa);
  cmd->add_flag("--no-bos", args->no_bos, "do not add the BOS token");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep generating after end-of-generation tokens");
  cmd->add_flag("-q,--quiet", args->quiet, "no timing line on stderr");
  cmd->add_flag("--json", args->json,
                "print one JSON object (prompt_ids, ids, text, finish_reason, timings) instead of streaming text");
  cmd->callback([args, &exit_code] { exit_code = run_generate(*args); });
}

}  // namespace ecoserve::apps
