#include "sim/model_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace ecoserve::sim {

namespace {

struct Preset {
  std::string_view name;
  int32_t hidden, layers, heads, kv_heads, ffn, vocab;
  bool gated_mlp;
  int32_t max_context;
  bool tied_embeddings;
};

// Published configurations. OPT: Zhang et al. 2022, Table 1 (and facebook/opt-*
// config.json: vocab 50272, 2048 positions, ReLU MLP of 4 x hidden, tied lm_head).
// Llama 2: meta-llama/Llama-2-*-hf config.json. LLaMA-1 33B ("llama-30b"):
// huggyllama/llama-30b. Code Llama 34B: codellama/CodeLlama-34b-hf. Llama 3:
// meta-llama/Meta-Llama-3-*. Qwen2: Qwen/Qwen2-7B, Qwen/Qwen2-72B (32768 positions
// without rope scaling; lm_head untied).
constexpr std::array<Preset, 12> kPresets{{
    {"opt-13b", 5120, 40, 40, 40, 20480, 50272, false, 2048, true},
    {"opt-66b", 9216, 64, 72, 72, 36864, 50272, false, 2048, true},
    {"opt-175b", 12288, 96, 96, 96, 49152, 50272, false, 2048, true},
    {"llama-2-7b", 4096, 32, 32, 32, 11008, 32000, true, 4096, false},
    {"llama-2-13b", 5120, 40, 40, 40, 13824, 32000, true, 4096, false},
    {"llama-2-70b", 8192, 80, 64, 8, 28672, 32000, true, 4096, false},
    {"llama-30b", 6656, 60, 52, 52, 17920, 32000, true, 2048, false},
    {"codellama-34b", 8192, 48, 64, 8, 22016, 32000, true, 16384, false},
    {"llama-3-8b", 4096, 32, 32, 8, 14336, 128256, true, 8192, false},
    {"llama-3-70b", 8192, 80, 64, 8, 28672, 128256, true, 8192, false},
    {"qwen2-7b", 3584, 28, 28, 4, 18944, 152064, true, 32768, false},
    {"qwen2-72b", 8192, 80, 64, 8, 29568, 152064, true, 32768, false},
}};

// The shapes of ../shared/data/profiles/h100-bf16/meta.json ("models").
struct ProfiledShape {
  std::string_view profile_name;
  int32_t hidden, layers, heads, kv_heads, ffn, vocab;
};
constexpr std::array<ProfiledShape, 5> kProfiledShapes{{
    {"llama2-7b", 4096, 32, 32, 32, 11008, 32000},
    {"llama3-8b", 4096, 32, 32, 8, 14336, 128256},
    {"llama2-13b", 5120, 40, 40, 40, 13824, 32000},
    {"qwen2-7b", 3584, 28, 28, 4, 18944, 152064},
    {"llama2-70b", 8192, 80, 64, 8, 28672, 32000},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

int64_t ModelSpec::layer_params() const {
  const int64_t h = hidden;
  const int64_t hd = head_dim();
  const int64_t attn = h * heads * hd              // Q
                       + 2 * h * kv_heads * hd     // K, V
                       + int64_t{heads} * hd * h;  // O
  const int64_t mlp = (gated_mlp ? 3 : 2) * h * ffn;
  return attn + mlp;
}

int64_t ModelSpec::params() const {
  const int64_t embedding = int64_t{vocab} * hidden;
  return int64_t{layers} * layer_params() + embedding * (tied_embeddings ? 1 : 2);
}

int64_t ModelSpec::kv_bytes_per_token() const { return int64_t{2} * layers * kv_heads * head_dim() * dtype_bytes; }

Status validate_model_spec(const ModelSpec& s) {
  const std::pair<std::string_view, int32_t> fields[] = {{"hidden", s.hidden},
                                                         {"layers", s.layers},
                                                         {"heads", s.heads},
                                                         {"kv_heads", s.kv_heads},
                                                         {"ffn", s.ffn},
                                                         {"vocab", s.vocab},
                                                         {"max_context", s.max_context},
                                                         {"dtype_bytes", s.dtype_bytes}};
  for (const auto& [field, value] : fields) {
    if (value <= 0) return invalid_argument_error("model '{}': {} must be > 0 (got {})", s.name, field, value);
  }
  if (s.hidden % s.heads != 0) {
    return invalid_argument_error("model '{}': hidden {} is not a multiple of heads {}", s.name, s.hidden, s.heads);
  }
  if (s.heads % s.kv_heads != 0) {
    return invalid_argument_error("model '{}': kv_heads {} does not divide heads {}", s.name, s.kv_heads, s.heads);
  }
  return ok_status();
}

StatusOr<ModelSpec> model_preset(std::string_view name) {
  const std::string key = lower(name);
  for (const Preset& p : kPresets) {
    if (p.name != key) continue;
    ModelSpec s;
    s.name = std::string(p.name);
    s.hidden = p.hidden;
    s.layers = p.layers;
    s.heads = p.heads;
    s.kv_heads = p.kv_heads;
    s.ffn = p.ffn;
    s.vocab = p.vocab;
    s.gated_mlp = p.gated_mlp;
    s.max_context = p.max_context;
    s.tied_embeddings = p.tied_embeddings;
    return s;
  }
  return invalid_argument_error("unknown model preset '{}' (known: {})", name, fmt::join(model_preset_names(), ", "));
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

std::string profile_model_name(const ModelSpec& s) {
  if (!s.gated_mlp || s.dtype_bytes != 2) return "";  // the profile is bf16 SwiGLU layers
  for (const ProfiledShape& p : kProfiledShapes) {
    if (p.hidden == s.hidden && p.layers == s.layers && p.heads == s.heads && p.kv_heads == s.kv_heads &&
        p.ffn == s.ffn && p.vocab == s.vocab) {
      return std::string(p.profile_name);
    }
  }
  return "";
}

std::vector<std::string> profiled_model_names() {
  std::vector<std::string> names;
  for (const ProfiledShape& p : kProfiledShapes) names.emplace_back(p.profile_name);
  return names;
}

}  // namespace ecoserve::sim
