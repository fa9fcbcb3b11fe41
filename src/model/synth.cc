#include "model/synth.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/test_data.h"
#include "kernels/quant.h"

namespace ecoserve::model {
namespace {

using kernels::GgmlType;

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Approximately normal values: the sum of four 16-bit uniforms (Irwin-Hall), scaled to `std`.
class NormalGen {
 public:
  NormalGen(std::uint64_t seed, float std) : state_(seed) {
    // Each u/32768 - 1 is ~U(-1, 1) with variance 1/3; four of them sum to variance 4/3.
    scale_ = std / std::sqrt(4.0f / 3.0f) / 32768.0f;
  }
  float next() {
    const std::uint64_t r = splitmix64(state_);
    const int sum = static_cast<int>(r & 0xFFFF) + static_cast<int>((r >> 16) & 0xFFFF) +
                    static_cast<int>((r >> 32) & 0xFFFF) + static_cast<int>(r >> 48) - 4 * 32768;
    return static_cast<float>(sum) * scale_;
  }

 private:
  std::uint64_t state_;
  float scale_;
};

// Filler for a [rows, cols] matrix of random values encoded in `type`.
GgufWriter::TensorFiller random_matrix(std::uint64_t seed, float std, std::int64_t cols, std::int64_t rows,
                                       GgmlType type) {
  return [=](std::uint8_t* dst, std::size_t nbytes) -> Status {
    const kernels::TypeTraits* t = kernels::type_traits(type);
    const std::size_t rb = kernels::row_bytes(*t, cols);
    if (rb * static_cast<std::size_t>(rows) != nbytes) return internal_error("synth: size mismatch");
    NormalGen gen(seed, std);
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = gen.next();
      kernels::quantize_row(type, row.data(), dst + static_cast<std::size_t>(r) * rb, cols);
    }
    return ok_status();
  };
}

GgufWriter::TensorFiller ones(std::int64_t n) {
  return [n](std::uint8_t* dst, std::size_t nbytes) -> Status {
    if (static_cast<std::size_t>(n) * 4 != nbytes) return internal_error("synth: size mismatch");
    const float one = 1.0f;
    for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + 4 * i, &one, 4);
    return ok_status();
  };
}

}  // namespace

std::vector<std::string> synth_preset_names() { return {"tiny", "15m", "110m", "1b"}; }

StatusOr<SynthPreset> synth_preset(std::string_view name) {
  // name, dim, layers, heads, kv heads, ffn, context, rope base, rms eps
  if (name == "tiny") return SynthPreset{"tiny", 64, 2, 4, 2, 192, 2048, 10000.0f, 1e-5f};
  if (name == "15m") return SynthPreset{"15m", 288, 6, 6, 6, 768, 1024, 10000.0f, 1e-5f};
  if (name == "110m") return SynthPreset{"110m", 768, 12, 12, 12, 2048, 1024, 10000.0f, 1e-5f};
  if (name == "1b") return SynthPreset{"1b", 2048, 22, 32, 4, 5632, 2048, 10000.0f, 1e-5f};
  return invalid_argument_error("synth: unknown preset '{}' (valid: {})", name, fmt::join(synth_preset_names(), ", "));
}

std::string default_vocab_path() {
  const std::string rel = "vocab/ggml-vocab-llama-spm.gguf";
  std::error_code ec;
  const std::filesystem::path local = std::filesystem::path("../shared/data") / rel;
  if (std::filesystem::exists(local, ec)) return local.string();
  return (std::filesystem::path(shared_data_root()) / rel).string();
}

StatusOr<std::int64_t> copy_vocab(const GgufFile& vocab, GgufWriter& w) {
  const GgufValue* tokens = vocab.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array() || tokens->array().elem_type != GgufValueType::kString) {
    return invalid_argument_error("synth: '{}' has no tokenizer.ggml.tokens string array (not a vocab GGUF)",
                                  vocab.path());
  }
  if (tokens->array().size() == 0) return invalid_argument_error("synth: '{}' has an empty vocabulary", vocab.path());
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
  }
  return static_cast<std::int64_t>(tokens->array().size());
}

std::int64_t synth_param_count(const SynthPreset& p, std::int64_t n_vocab, bool tied) {
  const std::int64_t d = p.dim, kv = static_cast<std::int64_t>(p.dim) / p.n_heads * p.n_kv_heads, f = p.ffn_dim;
  const std::int64_t per_layer = 2 * d + 2 * d * d + 2 * d * kv + 3 * d * f;
  return n_vocab * d * (tied ? 1 : 2) + d + p.n_layers * per_layer;
}

namespace {

struct SynthType {
  const char* name;
  GgmlType type;
  std::uint32_t file_type;  // general.file_type (llama.cpp's LLAMA_FTYPE_*)
};
// Q4_K alone is llama.cpp's "Q4_K_S" file type (14); a Q4_K_M file mixes in Q6_K.
constexpr SynthType kSynthTypes[] = {
    {"f32", GgmlType::kF32, 0},   {"f16", GgmlType::kF16, 1},   {"q8_0", GgmlType::kQ8_0, 7},
    {"q4_0", GgmlType::kQ4_0, 2}, {"q4_k", GgmlType::kQ4_K, 14}, {"q6_k", GgmlType::kQ6_K, 18},
};

const SynthType* find_synth_type(GgmlType t) {
  for (const auto& st : kSynthTypes) {
    if (st.type == t) return &st;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> synth_type_names() {
  std::vector<std::string> names;
  for (const auto& st : kSynthTypes) names.emplace_back(st.name);
  return names;
}

StatusOr<GgmlType> synth_type(std::string_view name) {
  for (const auto& st : kSynthTypes) {
    if (name == st.name) return st.type;
  }
  return invalid_argument_error("synth: unknown weight type '{}' (expected one of {})", name,
                                fmt::join(synth_type_names(), ", "));
}

Status build_synth_model(const SynthOptions& o, GgufWriter& w) {
  ECO_ASSIGN_OR_RETURN(SynthPreset p, synth_preset(o.preset));
  if (o.context_length < 0 || o.context_length > kMaxSynthContext) {
    return invalid_argument_error("synth: context length must be in [1, {}] (0: the preset's {}), got {}",
                                  kMaxSynthContext, p.context_length, o.context_length);
  }
  if (o.context_length > 0) p.context_length = static_cast<int>(o.context_length);
  const SynthType* st = find_synth_type(o.type);
  if (st == nullptr) {
    return invalid_argument_error("synth: weight type must be one of {}, got {}", fmt::join(synth_type_names(), ", "),
                                  kernels::type_name(o.type));
  }
  const std::int64_t block = kernels::type_traits(o.type)->block_elems;
  if (p.dim % block != 0 || p.ffn_dim % block != 0) {
    return invalid_argument_error(
        "synth: {} packs rows in blocks of {} values, but preset {} has dim {} and ffn_dim {} (use 110m or 1b)",
        st->name, block, p.name, p.dim, p.ffn_dim);
  }
  const std::string vocab_path = o.vocab_path.empty() ? default_vocab_path() : o.vocab_path;
  auto vocab = GgufFile::open(vocab_path);
  if (!vocab.ok()) return vocab.status().with_prefix("synth: cannot read vocab");

  const std::int64_t d = p.dim, head_dim = p.dim / p.n_heads, kv = head_dim * p.n_kv_heads, f = p.ffn_dim;
  const bool quantized = o.type != GgmlType::kF32 && o.type != GgmlType::kF16;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", fmt::format("ecoserve-synth-{}-{}", p.name, kernels::type_name(o.type)));
  w.set_uint32("llama.context_length", static_cast<std::uint32_t>(p.context_length));
  w.set_uint32("llama.embedding_length", static_cast<std::uint32_t>(d));
  w.set_uint32("llama.block_count", static_cast<std::uint32_t>(p.n_layers));
  w.set_uint32("llama.feed_forward_length", static_cast<std::uint32_t>(f));
  w.set_uint32("llama.attention.head_count", static_cast<std::uint32_t>(p.n_heads));
  w.set_uint32("llama.attention.head_count_kv", static_cast<std::uint32_t>(p.n_kv_heads));
  w.set_uint32("llama.rope.dimension_count", static_cast<std::uint32_t>(head_dim));
  w.set_float32("llama.rope.freq_base", p.rope_base);
  w.set_float32("llama.attention.layer_norm_rms_epsilon", p.rms_eps);
  w.set_uint32("general.file_type", st->file_type);
  ECO_ASSIGN_OR_RETURN(std::int64_t n_vocab, copy_vocab(**vocab, w));
  w.set_uint32("llama.vocab_size", static_cast<std::uint32_t>(n_vocab));
  if (quantized) w.set_uint32("general.quantization_version", 2);

  auto seed_of = [&](std::string_view name) {
    std::uint64_t s = o.seed ^ fnv1a(name);
    return splitmix64(s);
  };
  auto matrix = [&](const std::string& name, std::int64_t cols, std::int64_t rows) {
    return w.add_tensor_lazy(name, {cols, rows}, o.type, random_matrix(seed_of(name), o.weight_std, cols, rows, o.type));
  };
  auto norm = [&](const std::string& name) { return w.add_tensor_lazy(name, {d}, GgmlType::kF32, ones(d)); };

  ECO_RETURN_IF_ERROR(matrix("token_embd.weight", d, n_vocab));
  ECO_RETURN_IF_ERROR(norm("output_norm.weight"));
  if (!o.tied) ECO_RETURN_IF_ERROR(matrix("output.weight", d, n_vocab));
  for (int l = 0; l < p.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    ECO_RETURN_IF_ERROR(norm(b + "attn_norm.weight"));
    ECO_RETURN_IF_ERROR(matrix(b + "attn_q.weight", d, d));
    ECO_RETURN_IF_ERROR(matrix(b + "attn_k.weight", d, kv));
    ECO_RETURN_IF_ERROR(matrix(b + "attn_v.weight", d, kv));
    ECO_RETURN_IF_ERROR(matrix(b + "attn_output.weight", d, d));
    ECO_RETURN_IF_ERROR(norm(b + "ffn_norm.weight"));
    ECO_RETURN_IF_ERROR(matrix(b + "ffn_gate.weight", d, f));
    ECO_RETURN_IF_ERROR(matrix(b + "ffn_up.weight", d, f));
    ECO_RETURN_IF_ERROR(matrix(b + "ffn_down.weight", f, d));
  }
  return ok_status();
}

Status write_synth_model(const SynthOptions& options, const std::string& path) {
  GgufWriter w;
  ECO_RETURN_IF_ERROR(build_synth_model(options, w));
  return w.write(path);
}

}  // namespace ecoserve::model
