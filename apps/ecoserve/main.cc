// ecoserve: one CLI for serving, benchmarking, simulating and inspecting models.
#include <cstdio>

#include "apps/ecoserve/commands.h"
#include "base/log.h"
#include "kernels/attention.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"

int main(int argc, char** argv) {
  // A bad ECOSERVE_ISA (or GEMV or attention setting) is an error, not a silent fallback to
  // another kernel path.
  for (const ecoserve::Status& s :
       {ecoserve::kernels::isa_from_env().status(), ecoserve::kernels::gemv_streams_from_env().status(),
        ecoserve::kernels::gemv_prefetch_from_env().status(), ecoserve::kernels::q4k_tile_pairs_from_env().status(),
        ecoserve::kernels::q8_lanes_from_env().status(), ecoserve::kernels::q4k_lanes_from_env().status(),
        ecoserve::kernels::q6k_lanes_from_env().status(),
        ecoserve::kernels::attention_f32_wide_from_env().status(),
        ecoserve::kernels::attention_row_prefetch_from_env().status(),
        ecoserve::kernels::amx_bf16_from_env().status(),
        ecoserve::kernels::attention_fp16_math_from_env().status(),
        ecoserve::kernels::attention_bf16_from_env().status(), ecoserve::kernels::matmul_bf16_from_env().status(),
        ecoserve::kernels::bf16_weights_from_env().status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 2;
    }
  }
  CLI::App app{
      "ecoserve: an LLM serving system with four ways to share hardware between\n"
      "prefill and decode (nodg, fudg, padg, llumnix). Run 'ecoserve COMMAND --help'."};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")->capture_default_str();
  int exit_code = 0;
  ecoserve::apps::add_model_command(app, exit_code);
  ecoserve::apps::add_generate_command(app, exit_code);
  ecoserve::apps::add_profile_command(app, exit_code);
  ecoserve::apps::add_serve_command(app, exit_code);
  ecoserve::apps::add_router_command(app, exit_code);
  ecoserve::apps::add_instance_command(app, exit_code);
  ecoserve::apps::add_bench_command(app, exit_code);
  ecoserve::apps::add_timeline_command(app, exit_code);
  ecoserve::apps::add_simulate_command(app, exit_code);
  ecoserve::apps::add_plan_command(app, exit_code);
  app.parse_complete_callback([&] { ecoserve::init_logging(log_level); });
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
