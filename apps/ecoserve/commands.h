// Each ecoserve subcommand lives in its own cmd_*.cc and registers itself here.
// A command's callback stores its exit code in `exit_code` (0 on success).
#pragma once

#include <CLI/CLI.hpp>

#include "engine/model_runner.h"

namespace ecoserve::apps {

void add_model_command(CLI::App& app, int& exit_code);     // cmd_model.cc
void add_generate_command(CLI::App& app, int& exit_code);  // cmd_generate.cc
void add_profile_command(CLI::App& app, int& exit_code);   // cmd_profile.cc
void add_serve_command(CLI::App& app, int& exit_code);     // cmd_serve.cc
void add_router_command(CLI::App& app, int& exit_code);    // cmd_serve.cc
void add_instance_command(CLI::App& app, int& exit_code);  // cmd_serve.cc
void add_bench_command(CLI::App& app, int& exit_code);     // cmd_bench.cc
void add_timeline_command(CLI::App& app, int& exit_code);  // cmd_timeline.cc
void add_simulate_command(CLI::App& app, int& exit_code);  // cmd_simulate.cc (+ `simulate cost`: cmd_simulate_cost.cc)
void add_plan_command(CLI::App& app, int& exit_code);      // cmd_plan.cc
// `model tokenize` lives in cmd_model_tokenize.cc; cmd_model.cc calls this to add it.
void add_model_tokenize_subcommand(CLI::App* model_cmd, int& exit_code);

// `--kv-cache-dtype f32|f16` on cmd, stored into `out` (whose value is the default).
// cmd_engine_flags.cc.
CLI::Option* add_kv_cache_dtype_option(CLI::App* cmd, engine::KvCacheType& out);
// --isa: which kernel build runs (kernels/cpu_features.h); refuses levels this CPU lacks.
CLI::Option* add_isa_option(CLI::App* cmd, kernels::Isa& out);

}  // namespace ecoserve::apps
