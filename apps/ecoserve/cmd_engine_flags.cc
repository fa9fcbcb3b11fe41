// Engine flags shared by the commands that create a ModelRunner (generate, serve, profile).
#include <string>

#include "apps/ecoserve/commands.h"

namespace ecoserve::apps {

CLI::Option* add_kv_cache_dtype_option(CLI::App* cmd, engine::KvCacheType& out) {
  // engine::parse_kv_cache_type is the one list of names: it validates and converts.
  CLI::Validator valid(
      [](std::string& name) {
        auto t = engine::parse_kv_cache_type(name);
        return t.ok() ? std::string() : t.status().message();
      },
      "f32|f16");
  return cmd
      ->add_option_function<std::string>(
          "--kv-cache-dtype", [&out](const std::string& name) { out = *engine::parse_kv_cache_type(name); },
          "KV cache element type: f32 (exact) or f16 (half the memory and attention reads; llama.cpp's default)")
      ->check(valid)
      ->default_str(engine::kv_cache_type_name(out));
}

CLI::Option* add_isa_option(CLI::App* cmd, kernels::Isa& out) {
  CLI::Validator valid(
      [](std::string& name) {
        auto isa = kernels::resolve_isa(name, kernels::detect_cpu_features());
        return isa.ok() ? std::string() : isa.status().message();
      },
      "avx2|avxvnni|avx512vnni|avx512vnni-zmm|avx512amx|native");
  return cmd
      ->add_option_function<std::string>(
          "--isa",
          [&out](const std::string& name) {
            // native is the process default: ECOSERVE_ISA's level when set, else the CPU's best.
            const bool native = name == "native" || name == "best";
            out = native ? kernels::default_isa() : *kernels::resolve_isa(name, kernels::detect_cpu_features());
          },
          "kernel instruction-set path: avx2, avxvnni, avx512vnni, avx512vnni-zmm (512-bit int8 tiles), avx512amx "
          "(avx512vnni-zmm with AMX tiles for repacked Q8_0 and Q4_K prompts and large decode batches) or native (the "
          "level the environment variable ECOSERVE_ISA names, else the best this CPU has)")
      ->check(valid)
      ->default_str(std::string(kernels::isa_name(out)));
}

}  // namespace ecoserve::apps
