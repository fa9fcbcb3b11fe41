// Random-weight Llama GGUF models ("synth" models) for tests and benchmarks.
//
// A synth model has the shape of a preset (tiny, 15m, 110m, 1b), weights drawn
// deterministically from a seed (approximately N(0, 0.02); norm weights 1.0),
// and a real vocabulary copied from a vocab GGUF (every tokenizer.* key), so it
// tokenizes real text and loads in llama.cpp unchanged. Pure functions of their
// options; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/ggml_type.h"
#include "model/gguf.h"

namespace ecoserve::model {

struct SynthPreset {
  std::string name;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int ffn_dim = 0;
  int context_length = 2048;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
};

// Presets: "tiny" (dim 64, 2 layers, 4 heads, 2 kv heads, ffn 192), "15m" (stories15M shape),
// "110m" (stories110M shape), "1b" (TinyLlama-1.1B shape). INVALID_ARGUMENT naming the
// valid presets otherwise.
StatusOr<SynthPreset> synth_preset(std::string_view name);
std::vector<std::string> synth_preset_names();

// The weight types synth writes, by their ggml names ("f32", "f16", "q8_0",
// "q4_0", "q4_k", "q6_k"), and the lookup; INVALID_ARGUMENT naming them otherwise.
std::vector<std::string> synth_type_names();
StatusOr<kernels::GgmlType> synth_type(std::string_view name);

inline constexpr std::int64_t kMaxSynthContext = 1 << 20;

struct SynthOptions {
  std::string preset = "tiny";
  // Of the 2-D matrices: F32, F16, Q8_0, Q4_0, Q4_K or Q6_K (the K-quants need
  // dim and ffn_dim to be multiples of 256: presets 110m and 1b).
  kernels::GgmlType type = kernels::GgmlType::kF32;
  std::uint64_t seed = 1;
  std::string vocab_path;   // empty: default_vocab_path()
  bool tied = false;        // true: no output.weight (the token embedding is reused)
  // llama.context_length, the longest sequence the model takes; 0: the preset's (2048 for
  // 1b, 1024 for 110m). Long contexts (4k-32k) measure decode attention in the engine.
  // INVALID_ARGUMENT outside [0, kMaxSynthContext].
  std::int64_t context_length = 0;
  float weight_std = 0.02f;
};

// ../shared/data/vocab/ggml-vocab-llama-spm.gguf relative to the current directory if it
// exists, else under shared_data_root().
std::string default_vocab_path();

// Copies every tokenizer.* key of `vocab` into `w`; returns the number of tokens.
// INVALID_ARGUMENT when the vocab has no tokenizer.ggml.tokens array.
StatusOr<std::int64_t> copy_vocab(const GgufFile& vocab, GgufWriter& w);

// Fills w with metadata and (lazily generated) tensors of a synth model.
Status build_synth_model(const SynthOptions& options, GgufWriter& w);
// build_synth_model + write to path (streamed: memory stays ~ one tensor).
Status write_synth_model(const SynthOptions& options, const std::string& path);

// Number of parameters (elements of all tensors) of a preset with a vocab of n_vocab tokens.
std::int64_t synth_param_count(const SynthPreset& p, std::int64_t n_vocab, bool tied);

}  // namespace ecoserve::model
