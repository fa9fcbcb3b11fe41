// llama.cpp's prefill and decode speed with the timing loop in C++: this
// links the very libllama/libggml shipped in the node-llama-cpp npm package
// (the build bench_llamacpp.mjs drives through Node), so the figures carry no
// JS-to-C++ hop. Built and run by scripts/compare_llamacpp.sh; not a test.
//
// Usage: llamacpp_native_bench BINS_DIR MODEL.gguf THREADS PROMPT_LEN CONTEXT STEPS f16|f32
// Prints one JSON object: prompt-prefill tok/s (best of 3), decode tok/s (STEPS
// single-token llama_decode calls after CONTEXT tokens, each computing the
// logits and sampling greedily), the CPU backend variant that ggml loaded.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// The libggml-cpu-*.so that ggml_backend_load_best kept mapped (it unloads the
// variants it only scored).
std::string loaded_cpu_variant() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto at = line.find("libggml-cpu-");
    if (at == std::string::npos) continue;
    const auto end = line.find(".so", at);
    return line.substr(at + 12, end - at - 12);
  }
  return "unknown";
}

// A prompt of `n` ids valid for this model: a fixed English text through the
// model's own tokenizer (no special tokens), repeated.
std::vector<llama_token> prompt_tokens(const llama_vocab* vocab, int32_t n) {
  const std::string text =
      " Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends. One day, she saw a big red ball under a tree and ran to get it. The sun was warm and the birds "
      "were singing.";
  std::vector<llama_token> ids(text.size() + 8);
  const int32_t got = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                     static_cast<int32_t>(ids.size()), /*add_special=*/false, /*parse_special=*/false);
  ids.resize(std::max(0, got));
  std::erase_if(ids, [&](llama_token t) { return llama_vocab_is_control(vocab, t); });
  if (ids.empty()) {
    std::fprintf(stderr, "error: the model's tokenizer gave no tokens for the prompt text\n");
    std::exit(1);
  }
  std::vector<llama_token> out(n);
  for (int32_t i = 0; i < n; ++i) out[i] = ids[i % ids.size()];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s BINS_DIR MODEL.gguf THREADS PROMPT_LEN CONTEXT STEPS f16|f32\n", argv[0]);
    return 2;
  }
  const char* bins = argv[1];
  const char* model_path = argv[2];
  const int32_t threads = std::atoi(argv[3]);
  const int32_t prompt_len = std::atoi(argv[4]);
  const int32_t context = std::atoi(argv[5]);
  const int32_t steps = std::atoi(argv[6]);
  const std::string kv = argv[7];
  if (kv != "f16" && kv != "f32") {
    std::fprintf(stderr, "error: KV type must be f16 or f32\n");
    return 2;
  }
  llama_log_set(quiet_log, nullptr);
  ggml_backend_load_all_from_path(bins);
  llama_backend_init();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mode = LLAMA_LOAD_MODE_NONE;  // read into memory, like bench_llamacpp.mjs (useMmap: false)
  llama_model* model = llama_model_load_from_file(model_path, mp);
  if (model == nullptr) {
    std::fprintf(stderr, "error: cannot load %s\n", model_path);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(std::max(prompt_len, context + steps + 1));
  // The prompt and the decode context are each one batch (a context longer than the prompt too).
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(std::max(prompt_len, context));
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.type_k = cp.type_v = kv == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;  // node-llama-cpp's default
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) {
    std::fprintf(stderr, "error: cannot create a llama.cpp context\n");
    return 1;
  }
  const std::vector<llama_token> prompt = prompt_tokens(vocab, std::max(prompt_len, context + 1));

  // Prefill: the whole prompt in one llama_decode; only the last token's logits.
  double best_s = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    llama_memory_clear(llama_get_memory(ctx), true);
    std::vector<llama_token> p(prompt.begin(), prompt.begin() + prompt_len);
    const double t0 = now_s();
    if (llama_decode(ctx, llama_batch_get_one(p.data(), prompt_len)) != 0) {
      std::fprintf(stderr, "error: llama_decode failed on the prompt\n");
      return 1;
    }
    llama_synchronize(ctx);
    best_s = std::min(best_s, now_s() - t0);
  }

  // Decode: CONTEXT tokens in the cache (untimed), then STEPS tokens one at a
  // time, each with its logits and a greedy pick that becomes the next input.
  llama_memory_clear(llama_get_memory(ctx), true);
  std::vector<llama_token> fill(prompt.begin(), prompt.begin() + context);
  if (llama_decode(ctx, llama_batch_get_one(fill.data(), context)) != 0) {
    std::fprintf(stderr, "error: llama_decode failed on the context\n");
    return 1;
  }
  llama_synchronize(ctx);
  llama_sampler* greedy = llama_sampler_init_greedy();
  llama_token tok = prompt[context];
  const double t0 = now_s();
  for (int32_t i = 0; i < steps; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) {
      std::fprintf(stderr, "error: llama_decode failed at decode step %d\n", i);
      return 1;
    }
    tok = llama_sampler_sample(greedy, ctx, -1);  // reads the logits (waits for them)
  }
  const double decode_s = now_s() - t0;

  std::printf(
      "{\"threads\": %d, \"prompt_len\": %d, \"context\": %d, \"decode_steps\": %d, \"kv_cache_type\": \"%s\", "
      "\"cpu_variant\": \"%s\", \"vocab\": %d, \"pp\": %.3f, \"decode\": %.3f}\n",
      threads, prompt_len, context, steps, kv.c_str(), loaded_cpu_variant().c_str(), llama_vocab_n_tokens(vocab),
      prompt_len / best_s, steps / decode_s);
  llama_sampler_free(greedy);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
