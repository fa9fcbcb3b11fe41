// Each ecoserve subcommand lives in its own cmd_*.cc and registers itself here.
// A command's callback stores its exit code in `exit_code` (0 on success).
#pragma once

#include <CLI/CLI.hpp>

namespace ecoserve::apps {

void add_model_command(CLI::App& app, int& exit_code);     // cmd_model.cc
void add_generate_command(CLI::App& app, int& exit_code);  // cmd_generate.cc
void add_profile_command(CLI::App& app, int& exit_code);   // cmd_profile.cc
void add_serve_command(CLI::App& app, int& exit_code);     // cmd_serve.cc
void add_bench_command(CLI::App& app, int& exit_code);     // cmd_bench.cc
// `model tokenize` lives in cmd_model_tokenize.cc; cmd_model.cc calls this to add it.
void add_model_tokenize_subcommand(CLI::App* model_cmd, int& exit_code);

}  // namespace ecoserve::apps
