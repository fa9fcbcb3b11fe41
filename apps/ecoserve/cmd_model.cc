// ecoserve model: inspect (info), create (synth) and convert (convert-llama2c) GGUF models.
// `model tokenize` is added by cmd_model_tokenize.cc.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "apps/ecoserve/commands.h"
#include "kernels/attention.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/cpu_features.h"
#include "kernels/ggml_type.h"
#include "kernels/matmul.h"
#include "model/gguf.h"
#include "model/llama2c.h"
#include "model/synth.h"

namespace ecoserve::apps {
namespace {

void print_error(const Status& s) { std::fprintf(stderr, "error: %s\n", s.message().c_str()); }

// ---------------- info ----------------

struct InfoArgs {
  std::string file;
  bool json = false;
  bool all_metadata = false;
};

struct TypeStats {
  std::int64_t tensors = 0;
  std::uint64_t bytes = 0;
  std::int64_t params = 0;
};

std::optional<std::int64_t> opt_int(const model::GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  return v.ok() ? std::optional<std::int64_t>(*v) : std::nullopt;
}
std::optional<double> opt_float(const model::GgufFile& f, const std::string& key) {
  auto v = f.get_float(key);
  return v.ok() ? std::optional<double>(*v) : std::nullopt;
}
std::optional<std::string> opt_string(const model::GgufFile& f, const std::string& key) {
  auto v = f.get_string(key);
  return v.ok() ? std::optional<std::string>(*v) : std::nullopt;
}

nlohmann::json value_to_json(const model::GgufValue& v) {
  using model::GgufValueType;
  if (v.is_string()) return v.string_value();
  if (v.type() == GgufValueType::kBool) return v.int_value() != 0;
  if (v.is_float()) return v.float_value();
  if (v.is_integer()) return v.int_value();
  const auto& a = v.array();
  if (a.elem_type == GgufValueType::kString) return a.strings;
  if (a.elem_type == GgufValueType::kFloat32 || a.elem_type == GgufValueType::kFloat64) return a.floats;
  return a.ints;
}

std::string human_bytes(std::uint64_t b) {
  if (b >= (1ULL << 30)) return fmt::format("{:.2f} GiB", b / double(1ULL << 30));
  if (b >= (1ULL << 20)) return fmt::format("{:.2f} MiB", b / double(1ULL << 20));
  if (b >= (1ULL << 10)) return fmt::format("{:.2f} KiB", b / double(1ULL << 10));
  return fmt::format("{} B", b);
}

std::string human_count(std::int64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1000) return fmt::format("{:.2f}K", n / 1e3);
  return fmt::format("{}", n);
}

int run_info(const InfoArgs& a) {
  auto opened = model::GgufFile::open(a.file);
  if (!opened.ok()) {
    print_error(opened.status());
    return 1;
  }
  const model::GgufFile& f = **opened;
  const std::string arch = opt_string(f, "general.architecture").value_or("");
  const std::string p = arch + ".";

  std::map<std::string, TypeStats> by_type;
  std::int64_t params = 0;
  std::uint64_t tensor_bytes = 0;
  int unsupported = 0;
  for (const auto& t : f.tensors()) {
    auto& s = by_type[std::string(kernels::type_name(t.type))];
    ++s.tensors;
    s.bytes += t.nbytes;
    s.params += t.num_elements();
    params += t.num_elements();
    tensor_bytes += t.nbytes;
    if (!kernels::type_traits(t.type)->supported) ++unsupported;
  }
  std::optional<std::int64_t> n_vocab;
  if (const auto* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    n_vocab = static_cast<std::int64_t>(tokens->array().size());
  }
  const bool has_template = f.find("tokenizer.chat_template") != nullptr;

  struct Field {
    const char* label;
    const char* json_key;
    std::optional<std::int64_t> i;
    std::optional<double> d;
  };
  const Field fields[] = {
      {"context length", "context_length", opt_int(f, p + "context_length"), {}},
      {"embedding length", "embedding_length", opt_int(f, p + "embedding_length"), {}},
      {"layers", "block_count", opt_int(f, p + "block_count"), {}},
      {"feed-forward length", "feed_forward_length", opt_int(f, p + "feed_forward_length"), {}},
      {"attention heads", "head_count", opt_int(f, p + "attention.head_count"), {}},
      {"kv heads", "head_count_kv", opt_int(f, p + "attention.head_count_kv"), {}},
      {"rope dimensions", "rope_dimension_count", opt_int(f, p + "rope.dimension_count"), {}},
      {"rope base", "rope_freq_base", {}, opt_float(f, p + "rope.freq_base")},
      {"rms epsilon", "rms_epsilon", {}, opt_float(f, p + "attention.layer_norm_rms_epsilon")},
  };

  if (a.json) {
    nlohmann::json j;
    j["file"] = a.file;
    j["file_bytes"] = f.file_size();
    j["gguf_version"] = f.version();
    j["alignment"] = f.alignment();
    j["architecture"] = arch;
    j["name"] = opt_string(f, "general.name").value_or("");
    j["parameters"] = params;
    j["tensor_count"] = f.tensors().size();
    j["tensor_bytes"] = tensor_bytes;
    j["unsupported_tensors"] = unsupported;
    j["tied_embeddings"] = f.find_tensor("token_embd.weight") && !f.find_tensor("output.weight");
    for (const auto& fld : fields) {
      if (fld.i) {
        j[fld.json_key] = *fld.i;
      } else if (fld.d) {
        j[fld.json_key] = *fld.d;
      } else {
        j[fld.json_key] = nullptr;
      }
    }
    nlohmann::json types = nlohmann::json::object();
    for (const auto& [name, s] : by_type) {
      types[name] = {{"tensors", s.tensors}, {"bytes", s.bytes}, {"parameters", s.params}};
    }
    j["tensor_types"] = types;
    nlohmann::json tok;
    tok["model"] = opt_string(f, "tokenizer.ggml.model") ? nlohmann::json(*opt_string(f, "tokenizer.ggml.model"))
                                                         : nlohmann::json(nullptr);
    tok["pre"] = opt_string(f, "tokenizer.ggml.pre") ? nlohmann::json(*opt_string(f, "tokenizer.ggml.pre"))
                                                     : nlohmann::json(nullptr);
    tok["vocab_size"] = n_vocab ? nlohmann::json(*n_vocab) : nlohmann::json(nullptr);
    auto bos = opt_int(f, "tokenizer.ggml.bos_token_id");
    auto eos = opt_int(f, "tokenizer.ggml.eos_token_id");
    tok["bos_token_id"] = bos ? nlohmann::json(*bos) : nlohmann::json(nullptr);
    tok["eos_token_id"] = eos ? nlohmann::json(*eos) : nlohmann::json(nullptr);
    tok["chat_template"] = has_template;
    j["tokenizer"] = tok;
    {
      const kernels::CpuFeatures cpu = kernels::detect_cpu_features();
      nlohmann::json levels = nlohmann::json::array();
      for (kernels::Isa i : kernels::supported_isas(cpu)) levels.push_back(std::string(kernels::isa_name(i)));
      j["kernels"] = {{"isa", std::string(kernels::isa_name(kernels::default_isa()))},
                      {"supported", levels},
                      {"cpu", cpu.brand},
                      {"cpu_flags", cpu.flags()},
                      {"full_rate_512", cpu.full_rate_512},
                      {"fast_bf16_dot", cpu.fast_bf16_dot},
                      {"float_matmul", kernels::float_matmul_kernels_summary(kernels::default_isa())},
                      {"gemv_streams", kernels::default_gemv_streams()},
                      {"gemv_prefetch", kernels::default_gemv_prefetch()},
                      {"q4k_tile_pairs", kernels::default_q4k_tile_pairs()},
                      {"q4k_gfni", cpu.gfni},
                      {"q8_lanes", kernels::default_q8_lanes()},
                      {"q4k_lanes", kernels::default_q4k_lanes()},
                      {"q6k_lanes", kernels::default_q6k_lanes()},
                      {"attention_f32_wide", kernels::default_attention_f32_wide()},
                      {"attention_row_prefetch", kernels::default_attention_row_prefetch()},
                      {"amx_bf16", kernels::default_amx_bf16() && kernels::amx_bf16_supported(cpu)},
                      {"bf16_weights",
                       kernels::amx_bf16_supported(cpu) || kernels::bf16_vectors_supported(cpu)
                           ? std::string(kernels::bf16_weights_mode_name(kernels::default_bf16_weights()))
                           : std::string("unsupported")},
                      {"attention_fp16_math", kernels::default_attention_fp16_math() && cpu.avx512_fp16},
                      {"attention_bf16_vectors", kernels::default_attention_bf16() && cpu.avx512_bf16 &&
                                                     kernels::default_isa() == kernels::Isa::kAvx512VnniZmm},
                      {"matmul_bf16_vectors", kernels::default_matmul_bf16() && kernels::bf16_vectors_supported(cpu) &&
                                                  kernels::default_isa() == kernels::Isa::kAvx512VnniZmm},
                      {"openblas_core", kernels::openblas_core()}};
    }
    if (a.all_metadata) {
      nlohmann::json md = nlohmann::json::object();
      for (const auto& [k, v] : f.metadata()) md[k] = value_to_json(v);
      j["metadata"] = md;
    }
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }

  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("{:<22}{}\n", std::string(label) + ":", value);
  };
  line("file", fmt::format("{} ({}, GGUF v{}, alignment {})", a.file, human_bytes(f.file_size()), f.version(),
                           f.alignment()));
  line("architecture", arch.empty() ? "(not set)" : arch);
  if (auto name = opt_string(f, "general.name")) line("name", *name);
  line("parameters", fmt::format("{} ({})", human_count(params), params));
  line("tensors", fmt::format("{} ({})", f.tensors().size(), human_bytes(tensor_bytes)));
  for (const auto& [name, s] : by_type) {
    line(fmt::format("  {}", name), fmt::format("{} tensors, {}, {} params", s.tensors, human_bytes(s.bytes),
                                                human_count(s.params)));
  }
  if (unsupported > 0) line("unsupported tensors", fmt::format("{} (ecoserve cannot compute them)", unsupported));
  line("output", f.find_tensor("output.weight") ? "separate output.weight" : "tied to token_embd.weight");
  for (const auto& fld : fields) {
    if (fld.i) {
      line(fld.label, fmt::format("{}", *fld.i));
    } else if (fld.d) {
      line(fld.label, fmt::format("{}", static_cast<float>(*fld.d)));
    } else {
      line(fld.label, "-");
    }
  }
  line("tokenizer", fmt::format("{} (pre {}), {} tokens", opt_string(f, "tokenizer.ggml.model").value_or("-"),
                                opt_string(f, "tokenizer.ggml.pre").value_or("-"),
                                n_vocab ? fmt::format("{}", *n_vocab) : std::string("-")));
  auto id_str = [&](const char* key) {
    auto id = opt_int(f, key);
    return id ? fmt::format("{}", *id) : std::string("-");
  };
  line("bos / eos", fmt::format("{} / {}", id_str("tokenizer.ggml.bos_token_id"), id_str("tokenizer.ggml.eos_token_id")));
  line("chat template", has_template ? "present" : "none");
  {
    const kernels::CpuFeatures cpu = kernels::detect_cpu_features();
    const kernels::Isa isa = kernels::default_isa();
    std::string levels;
    for (kernels::Isa i : kernels::supported_isas(cpu)) levels += (levels.empty() ? "" : ", ") + std::string(kernels::isa_name(i));
    line("kernels", fmt::format("{} (int8 dot: {}); this CPU runs: {}", kernels::isa_name(isa),
                                kernels::isa_int8_dot(isa), levels));
    line("cpu", fmt::format("{} ({}{}{})", cpu.brand.empty() ? "unknown model" : cpu.brand, cpu.flags(),
                            cpu.full_rate_512 ? "; 512-bit vectors at full rate" : "",
                            cpu.avx512_bf16 && !cpu.fast_bf16_dot ? "; vdpbf16ps slower than float FMAs" : ""));
    // What chose a GEMV or attention setting: its environment variable, else the CPU's vendor.
    auto chosen_by = [&cpu](const char* variable) -> std::string {
      if (std::getenv(variable) != nullptr) return variable;
      return cpu.vendor.empty() ? "unknown vendor" : cpu.vendor;
    };
    // The variables of a line that are set, or the vendor when none is.
    auto chosen_by_any = [&](std::initializer_list<const char*> variables) -> std::string {
      std::string set;
      for (const char* v : variables) {
        if (std::getenv(v) != nullptr) set += (set.empty() ? "" : ", ") + std::string(v);
      }
      return set.empty() ? chosen_by(*variables.begin()) : set;
    };
    line("int8 gemv", fmt::format("batch-1 decode of Q8_0 / Q4_K (read in rows of 8) on {} ({})",
                                  kernels::gemv_streams_summary(kernels::default_gemv_streams()),
                                  chosen_by("ECOSERVE_GEMV_STREAMS")));
    line("gemv prefetch", fmt::format("batch-1 to 4 decode, every weight type: {} ({})",
                                      kernels::gemv_prefetch_summary(kernels::default_gemv_prefetch()),
                                      chosen_by("ECOSERVE_GEMV_PREFETCH")));
    // The tile and attention settings below are the avx512vnni-zmm level's: below it, the level's
    // own (compiled) shapes, and the settings as what that level would run where the CPU has it.
    const bool zmm = isa >= kernels::Isa::kAvx512VnniZmm;
    const bool zmm_on_cpu = kernels::isa_supported(kernels::Isa::kAvx512VnniZmm, cpu);
    auto zmm_line = [&](const char* label, const std::string& here, const std::string& on_zmm) {
      if (zmm) return line(label, on_zmm);
      line(label, zmm_on_cpu ? fmt::format("{}; on avx512vnni-zmm: {}", here, on_zmm) : here);
    };
    auto tiles_line = [&](const char* label, kernels::GgmlType type, const std::string& zmm_tiles) {
      zmm_line(label,
               fmt::format("5+ tokens on {}: {} (the level's own)", kernels::isa_name(isa),
                           kernels::int8_tiles_summary(isa, type)),
               zmm ? fmt::format("5+ tokens on avx512vnni-zmm: {}", zmm_tiles) : zmm_tiles);
    };
    tiles_line("q4_k tiles", kernels::GgmlType::kQ4_K,
               fmt::format("{} ({})",
                           kernels::q4k_tile_summary(kernels::default_q4k_tile_pairs(), cpu.gfni,
                                                     kernels::default_q4k_lanes()),
                           chosen_by_any({"ECOSERVE_Q4K_TILE_PAIRS", "ECOSERVE_Q4K_LANES"})));
    tiles_line("q8_0 tiles", kernels::GgmlType::kQ8_0,
               fmt::format("{} ({})", kernels::q8_tile_summary(kernels::default_q8_lanes()),
                           chosen_by("ECOSERVE_Q8_LANES")));
    tiles_line("q6_k tiles", kernels::GgmlType::kQ6_K,
               fmt::format("{} ({})", kernels::q6k_tile_summary(kernels::default_q6k_lanes()),
                           chosen_by("ECOSERVE_Q6K_LANES")));
    const std::string attention_zmm =
        fmt::format("fp16 KV on 512-bit registers, f32 KV on 512-bit for GQA groups of 8 and {}-bit for groups of 2 "
                    "and 4 ({}); GQA groups 2-8 and head_dim 64 or 128, else 256-bit",
                    kernels::default_attention_f32_wide() ? 512 : 256, chosen_by("ECOSERVE_ATTENTION_F32_WIDE"));
    zmm_line("decode attention", fmt::format("on {}: f32 and fp16 KV on 256-bit registers", kernels::isa_name(isa)),
             zmm ? "on avx512vnni-zmm, " + attention_zmm : attention_zmm);
    const std::string prefetch = fmt::format(
        "K/V rows 32 positions on: {} ({})",
        kernels::default_attention_row_prefetch() ? "line by line in row order"
                                                  : "each line as the same line 32 positions before",
        std::getenv("ECOSERVE_ATTENTION_ROW_PREFETCH") != nullptr ? "ECOSERVE_ATTENTION_ROW_PREFETCH" : "every CPU");
    zmm_line("attention prefetch",
             fmt::format("256-bit decode kernel on {}, K/V rows 32 positions on: in its own order (fixed)",
                         kernels::isa_name(isa)),
             zmm ? "512-bit decode kernel, " + prefetch : "its 512-bit decode kernel, " + prefetch);
    line("amx bf16", kernels::amx_bf16_summary(kernels::default_amx_bf16(), cpu));
    line("matmul bf16", kernels::bf16_vectors_summary(kernels::default_matmul_bf16(), cpu));
    line("bf16 weights", kernels::bf16_weights_summary(kernels::default_bf16_weights(), cpu));
    line("attention fp16 math",
         !cpu.avx512_fp16 ? std::string("not on this CPU (AVX512-FP16)")
         : kernels::default_attention_fp16_math()
             ? std::string("fp16 KV: the 512-bit decode kernel's value pass multiplies in half precision (unset or "
                           "ECOSERVE_ATTENTION_FP16_MATH=1; =0: widened to float)")
             : std::string("off (ECOSERVE_ATTENTION_FP16_MATH=0: fp16 KV widened to float)"));
    line("attention bf16",
         !cpu.avx512_bf16                            ? std::string("not on this CPU (AVX512-BF16)")
         : isa == kernels::Isa::kAvx512Amx           ? std::string("on AMX tiles where amx bf16 is on (above)")
         : isa != kernels::Isa::kAvx512VnniZmm       ? std::string("not at this level (avx512vnni-zmm only)")
         : kernels::default_attention_bf16()
             ? std::string("prompt chunks of 32+ tokens, head sizes a multiple of 32: on vdpbf16ps vectors, the "
                           "query, K, V and weights in bf16; decode of fp16 caches, GQA groups of 8, head size 64 "
                           "or 128: scores on vdpbf16ps, the query and K in bf16 (ECOSERVE_ATTENTION_BF16 unset "
                           "where vdpbf16ps is fast, or 1; =0: the float kernels)")
         : std::getenv("ECOSERVE_ATTENTION_BF16") == nullptr
             ? "off (" + kernels::bf16_dot_slow_reason("ECOSERVE_ATTENTION_BF16") + "; =1: on)"
             : std::string("off (ECOSERVE_ATTENTION_BF16=0: attention on the float kernels)"));
    line("float matmul", kernels::float_matmul_kernels_summary(isa));
    line("openblas", fmt::format("{} kernels (prefill attention of head sizes not a multiple of 16)",
                                 kernels::openblas_core()));
  }
  if (a.all_metadata) {
    out += fmt::format("\nmetadata ({} keys):\n", f.metadata().size());
    for (const auto& [k, v] : f.metadata()) {
      out += fmt::format("  {} ({}) = {}\n", k,
                         v.is_array() ? fmt::format("array of {}", model::gguf_value_type_name(v.array().elem_type))
                                      : std::string(model::gguf_value_type_name(v.type())),
                         v.to_display_string(16));
    }
    out += fmt::format("\ntensors ({}):\n", f.tensors().size());
    for (const auto& t : f.tensors()) {
      out += fmt::format("  {:<32} {:<6} [{}] {}\n", t.name, kernels::type_name(t.type), fmt::join(t.dims, ", "),
                         human_bytes(t.nbytes));
    }
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

// ---------------- synth ----------------

struct SynthArgs {
  std::string preset;
  std::string type = "f32";
  std::string out;
  std::uint64_t seed = 1;
  std::string vocab;
  bool tied = false;
  std::int64_t context_length = 0;
};

int run_synth(const SynthArgs& a) {
  model::SynthOptions o;
  o.preset = a.preset;
  auto type = model::synth_type(a.type);
  if (!type.ok()) {
    print_error(type.status());
    return 2;
  }
  o.type = *type;
  o.seed = a.seed;
  o.vocab_path = a.vocab;
  o.tied = a.tied;
  o.context_length = a.context_length;
  Status s = model::write_synth_model(o, a.out);
  if (!s.ok()) {
    print_error(s);
    return 1;
  }
  auto f = model::GgufFile::open(a.out);
  if (!f.ok()) {
    print_error(f.status().with_prefix("wrote a file that does not read back"));
    return 1;
  }
  std::int64_t params = 0;
  for (const auto& t : (*f)->tensors()) params += t.num_elements();
  auto context = (*f)->get_int("llama.context_length");
  std::printf("wrote %s: preset %s, %s weights, %s parameters, context %lld, %s, vocab from %s\n", a.out.c_str(),
              a.preset.c_str(), a.type.c_str(), human_count(params).c_str(),
              static_cast<long long>(context.ok() ? *context : 0), human_bytes((*f)->file_size()).c_str(),
              a.vocab.empty() ? model::default_vocab_path().c_str() : a.vocab.c_str());
  return 0;
}

// ---------------- convert-llama2c ----------------

struct ConvertArgs {
  std::string checkpoint;
  std::string tokenizer;
  std::string out;
};

int run_convert(const ConvertArgs& a) {
  Status s = model::convert_llama2c(a.checkpoint, a.tokenizer, a.out);
  if (!s.ok()) {
    print_error(s);
    return 1;
  }
  auto c = model::read_llama2c_config(a.checkpoint);
  if (c.ok()) {
    std::printf("wrote %s: dim %d, hidden %d, %d layers, %d heads, %d kv heads, vocab %d, context %d, %s output\n",
                a.out.c_str(), c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
                c->seq_len, c->shared_classifier ? "tied" : "separate");
  }
  return 0;
}

}  // namespace

void add_model_command(CLI::App& app, int& exit_code) {
  CLI::App* model_cmd = app.add_subcommand("model", "Inspect, create and convert GGUF model files");
  model_cmd->require_subcommand(1);

  {
    auto args = std::make_shared<InfoArgs>();
    CLI::App* c = model_cmd->add_subcommand(
        "info", "Print a GGUF model's architecture, parameter count, tensor types, shape and tokenizer");
    c->add_option("file", args->file, "GGUF model file")->required();
    c->add_flag("--json", args->json, "Print machine-readable JSON instead of text");
    c->add_flag("--all-metadata", args->all_metadata, "Also list every metadata key and every tensor");
    c->callback([args, &exit_code] { exit_code = run_info(*args); });
  }
  {
    auto args = std::make_shared<SynthArgs>();
    CLI::App* c = model_cmd->add_subcommand(
        "synth", "Write a random-weight Llama GGUF model of a preset shape with a real vocabulary");
    c->add_option("--preset", args->preset,
                  "Shape: tiny (dim 64, 2 layers, GQA), 15m (stories15M), 110m (stories110M), 1b (TinyLlama-1.1B)")
        ->required()
        ->check(CLI::IsMember(model::synth_preset_names()));
    c->add_option("--type", args->type,
                  "Type of the 2-D weight matrices (norms are always f32); q4_k and q6_k need presets 110m or 1b")
        ->check(CLI::IsMember(model::synth_type_names()))
        ->capture_default_str();
    c->add_option("-o,--output", args->out, "Output GGUF file")->required();
    c->add_option("--seed", args->seed, "Seed of the random weights (same seed, same file)")->capture_default_str();
    c->add_option("--vocab", args->vocab,
                  "Vocab GGUF whose tokenizer.* keys are copied (default: "
                  "../shared/data/vocab/ggml-vocab-llama-spm.gguf)");
    c->add_flag("--tied", args->tied, "Tie the output projection to the token embedding (no output.weight)");
    c->add_option("--context-length", args->context_length,
                  "Longest sequence the model takes (llama.context_length; 0: the preset's, 2048 for 1b and 1024 "
                  "for 110m); e.g. 32768 to measure decode attention at long contexts with profile engine --context")
        ->check(CLI::Range(std::int64_t{0}, model::kMaxSynthContext))
        ->capture_default_str();
    c->callback([args, &exit_code] { exit_code = run_synth(*args); });
  }
  {
    auto args = std::make_shared<ConvertArgs>();
    CLI::App* c = model_cmd->add_subcommand(
        "convert-llama2c", "Convert a llama2.c legacy checkpoint and its tokenizer.bin to a GGUF llama model (F32)");
    c->add_option("checkpoint", args->checkpoint, "llama2.c checkpoint (.bin, legacy format)")->required();
    c->add_option("tokenizer", args->tokenizer, "llama2.c tokenizer file (e.g. tokenizer.bin, tok512.bin)")
        ->required();
    c->add_option("-o,--output", args->out, "Output GGUF file")->required();
    c->callback([args, &exit_code] { exit_code = run_convert(*args); });
  }
  add_model_tokenize_subcommand(model_cmd, exit_code);
}

}  // namespace ecoserve::apps
