// The settings of `ecoserve simulate` and `ecoserve plan`'s verification runs:
// their names, defaults and help (one table, used for the config file's keys and
// the command-line flags alike), and how they become a sim::DeploymentSpec.
//
// The knobs `serve` also has (scheduler limits, router, padg, autoscaling, llumnix)
// take serve's defaults and go through serve's own translation
// (apps::router_options, apps::resolve_cluster_flags), so a simulation of a live
// setup needs no flag that serve did not need. Settings whose value is null are
// resolved per deployment (resolve_auto_settings): the scheduler limits are
// serve's (64 sequences, 512 tokens, chunk = budget) on a CPU profile and vLLM's
// GPU defaults (256, 2048, chunk 512) on a GPU cost model.
// Pure functions (no I/O but loading the profiles a setting names).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sim/deployment.h"

namespace ecoserve::apps {

// Every setting with its default (null: resolved per deployment).
nlohmann::json default_simulate_settings();

// Declares one flag per setting on `cmd` (--max-num-seqs for max_num_seqs, ...);
// a flag given lands in *flags under the setting's key.
void add_simulate_setting_flags(CLI::App* cmd, const std::shared_ptr<nlohmann::json>& flags);

// Fills the null settings of `s` for its cost model (see the file comment).
// INVALID_ARGUMENT for a setting of the wrong type.
Status resolve_auto_settings(nlohmann::json& s);

// The deployment the (resolved) settings describe, with the cluster's policies
// translated as serve translates its flags, and every request's SLOs.
// INVALID_ARGUMENT naming the setting for a wrong type or an impossible combination
// (serve's own messages for the cluster flags).
struct SimulateDeployment {
  sim::DeploymentSpec spec;
  double request_slo_ttft_s = 0.0;  // given to every request (0: none), as serve's default SLOs
  double request_slo_tpot_s = 0.0;
  int32_t prompt_extra_tokens = 0;  // added to every prompt (the BOS token serve's tokenizer adds)
  double step_overhead_s = 0.0;
};
StatusOr<SimulateDeployment> simulate_deployment(const nlohmann::json& s, bool record_steps);

// A setting's value: INVALID_ARGUMENT naming it when it has the wrong type.
template <typename T>
StatusOr<T> setting(const nlohmann::json& s, const char* key) {
  try {
    return s.at(key).get<T>();
  } catch (const std::exception&) {
    return invalid_argument_error("setting '{}' has the wrong type: {}", key, s.contains(key) ? s.at(key).dump() : "missing");
  }
}
// A setting as text (strings as they are, numbers as JSON).
std::string setting_text(const nlohmann::json& s, const char* key);

}  // namespace ecoserve::apps
