// Test helper: builds small random-weight Llama-family models in memory, written
// plainly here (not with model/synth) so that engine tests check the engine
// against a model whose layout they state themselves.
//
// Weights are F32 drawn from a seeded mt19937_64 (normal, std `weight_std`); norm
// weights are 1 + N(0, 0.1) so that a missing norm multiplication shows. The
// tokenizer keys are copied from a vocab GGUF (the 2048-token TinyStories vocab
// when present, else the llama-spm vocab).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/test_data.h"
#include "model/gguf.h"
#include "model/llama_model.h"

namespace ecoserve::engine::testing {

struct TinyLlamaSpec {
  std::string arch = "llama";  // "llama" or "qwen2" (q/k/v biases, NeoX RoPE)
  int n_embd = 64;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int n_ff = 96;
  int n_ctx = 256;
  int rope_dim = 0;             // 0: head_dim
  float rope_base = 10000.0f;
  float rope_scale_factor = 0.0f;  // > 0: rope.scaling.type linear with this factor
  float rms_eps = 1e-5f;
  bool tied = false;            // no output.weight
  uint64_t seed = 1;
  float weight_std = 0.08f;
};

// Vocab GGUF to copy tokenizer.* keys from, or nullopt when the shared data is missing.
inline std::optional<std::string> tiny_vocab_path() {
  if (auto p = shared_data_path("models/tinystories-656k-q8_0.gguf")) return p;
  return shared_data_path("vocab/ggml-vocab-llama-spm.gguf");
}

inline StatusOr<std::shared_ptr<const model::LlamaModel>> build_tiny_llama(const TinyLlamaSpec& s,
                                                                           const std::string& vocab_path) {
  auto vocab = model::GgufFile::open(vocab_path);
  if (!vocab.ok()) return vocab.status();
  model::GgufWriter w;
  const std::string a = s.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "engine-test-tiny");
  w.set_uint32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_uint32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_uint32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.set_uint32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_uint32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_uint32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  const int head_dim = s.n_embd / s.n_head;
  w.set_uint32(a + ".rope.dimension_count", static_cast<uint32_t>(s.rope_dim > 0 ? s.rope_dim : head_dim));
  w.set_float32(a + ".rope.freq_base", s.rope_base);
  if (s.rope_scale_factor > 0.0f) {
    w.set_string(a + ".rope.scaling.type", "linear");
    w.set_float32(a + ".rope.scaling.factor", s.rope_scale_factor);
  }
  w.set_float32(a + ".attention.layer_norm_rms_epsilon", s.rms_eps);
  int64_t n_vocab = 0;
  for (const auto& [key, value] : (*vocab)->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    w.set(key, value);
    if (key == "tokenizer.ggml.tokens") n_vocab = static_cast<int64_t>(value.array().size());
  }
  if (n_vocab == 0) return invalid_argument_error("{} has no tokenizer.ggml.tokens", vocab_path);

  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto add = [&](const std::string& name, std::vector<int64_t> dims, float mean, float std) -> Status {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = mean + std * normal(rng);
    std::vector<uint8_t> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return w.add_tensor(name, std::move(dims), kernels::GgmlType::kF32, std::move(bytes));
  };
  const int64_t e = s.n_embd;
  const int64_t kv = static_cast<int64_t>(s.n_head_kv) * head_dim;
  const float sd = s.weight_std;
  // Embedding rows larger than the other weights so that token identity dominates.
  ECO_RETURN_IF_ERROR(add("token_embd.weight", {e, n_vocab}, 0.0f, 1.0f));
  ECO_RETURN_IF_ERROR(add("output_norm.weight", {e}, 1.0f, 0.1f));
  if (!s.tied) ECO_RETURN_IF_ERROR(add("output.weight", {e, n_vocab}, 0.0f, sd));
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ECO_RETURN_IF_ERROR(add(b + "attn_norm.weight", {e}, 1.0f, 0.1f));
    ECO_RETURN_IF_ERROR(add(b + "attn_q.weight", {e, e}, 0.0f, sd * 3));  // sharper attention
    ECO_RETURN_IF_ERROR(add(b + "attn_k.weight", {e, kv}, 0.0f, sd * 3));
    ECO_RETURN_IF_ERROR(add(b + "attn_v.weight", {e, kv}, 0.0f, sd));
    if (s.arch == "qwen2") {
      ECO_RETURN_IF_ERROR(add(b + "attn_q.bias", {e}, 0.0f, 0.2f));
      ECO_RETURN_IF_ERROR(add(b + "attn_k.bias", {kv}, 0.0f, 0.2f));
      ECO_RETURN_IF_ERROR(add(b + "attn_v.bias", {kv}, 0.0f, 0.2f));
    }
    ECO_RETURN_IF_ERROR(add(b + "attn_output.weight", {e, e}, 0.0f, sd));
    ECO_RETURN_IF_ERROR(add(b + "ffn_norm.weight", {e}, 1.0f, 0.1f));
    ECO_RETURN_IF_ERROR(add(b + "ffn_gate.weight", {e, s.n_ff}, 0.0f, sd));
    ECO_RETURN_IF_ERROR(add(b + "ffn_up.weight", {e, s.n_ff}, 0.0f, sd));
    ECO_RETURN_IF_ERROR(add(b + "ffn_down.weight", {s.n_ff, e}, 0.0f, sd));
  }
  auto bytes = w.to_bytes();
  if (!bytes.ok()) return bytes.status();
  auto file = model::GgufFile::from_bytes(std::move(*bytes));
  if (!file.ok()) return file.status();
  return model::LlamaModel::from_gguf(std::move(*file));
}

}  // namespace ecoserve::engine::testing
