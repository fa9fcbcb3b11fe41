// ModelSpec: the shape of a decoder-only transformer, as the simulator's GPU cost
// models (roofline_cost_model.h, gpu_profile_cost_model.h) and memory planning
// (gpu_spec.h's kv_capacity_tokens) need it: no weights, only sizes.
//
// Presets carry the published configurations (Hugging Face config.json of each
// model; OPT from the OPT paper's Table 1). Plain value type; the free functions
// are pure and may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ecoserve::sim {

struct ModelSpec {
  std::string name;
  int32_t hidden = 0;
  int32_t layers = 0;
  int32_t heads = 0;     // query heads
  int32_t kv_heads = 0;  // key/value heads (== heads without GQA)
  int32_t ffn = 0;       // MLP intermediate size
  int32_t vocab = 0;
  // Llama-style SwiGLU MLP (gate, up, down: 3 matrices, silu(gate) * up) when true;
  // OPT-style 2-matrix MLP with one activation (GELU/ReLU) when false.
  bool gated_mlp = true;
  int32_t max_context = 0;
  int32_t dtype_bytes = 2;  // weights, activations and KV (bf16)
  // lm_head shares the input embedding's matrix (OPT); counted once in params().
  bool tied_embeddings = false;

  int32_t head_dim() const { return heads > 0 ? hidden / heads : 0; }
  // Weight-matrix parameters of one layer: Q, K, V, O and the MLP (norm weights
  // and biases, < 0.1% of any preset, are not counted anywhere).
  int64_t layer_params() const;
  // All layers + the input embedding + lm_head (once when tied).
  int64_t params() const;
  int64_t weight_bytes() const { return params() * dtype_bytes; }
  // KV cache bytes of one token over all layers, K and V.
  int64_t kv_bytes_per_token() const;
};

// OK when every size is positive, hidden divides evenly into heads, and kv_heads
// divides heads; else INVALID_ARGUMENT naming the model and the field.
Status validate_model_spec(const ModelSpec& spec);

// A preset by name, case-insensitive ("Llama-2-70B" works). INVALID_ARGUMENT
// listing the known names for anything else.
StatusOr<ModelSpec> model_preset(std::string_view name);
// The preset names, in a fixed order (by family, then size).
std::vector<std::string> model_preset_names();

// The name under which the H100 operator profile (../shared/data/profiles/h100-bf16)
// measured a model of this shape: "llama2-7b", "llama3-8b", "llama2-13b",
// "qwen2-7b" or "llama2-70b"; empty when the shape was not profiled. Matched on
// the shape (hidden, layers, heads, kv_heads, ffn, vocab, gated MLP, 2-byte dtype),
// not the name.
std::string profile_model_name(const ModelSpec& spec);
// The five profiled names, in meta.json's order.
std::vector<std::string> profiled_model_names();

}  // namespace ecoserve::sim
