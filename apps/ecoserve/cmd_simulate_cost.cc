// `ecoserve simulate cost`: the simulator's GPU cost models as a calculator. For
// one model on one GPU type and parallel layout it prints the predicted time of
// one whole-model step of the given shape from every GPU cost model that covers
// the case (the roofline always; the H100 operator profile when the GPU is an
// h100-sxm and the model's shape and tp were profiled), the roofline's breakdown
// and the instance's KV capacity.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/ecoserve/commands.h"
#include "sim/gpu_profile_cost_model.h"
#include "sim/gpu_spec.h"
#include "sim/model_spec.h"
#include "sim/roofline_cost_model.h"

namespace ecoserve::apps {

void add_simulate_cost_subcommand(CLI::App* simulate, int& exit_code);

namespace {

struct CostArgs {
  std::string model;
  std::string gpu;
  int32_t tp = 1;
  int32_t pp = 1;
  int32_t prefill_tokens = 0;
  int64_t prefill_context = 0;
  int32_t decode_batch = 0;
  int64_t decode_context = 0;
  std::string profile_dir = "../shared/data/profiles/h100-bf16";
  bool json = false;
};

// The profile's prediction, or why it does not apply.
struct ProfileResult {
  bool covered = false;
  std::string reason;
  double step_seconds = 0.0;
  std::string profile_model;
  double launch_overhead_us = 0.0;
};

StatusOr<ProfileResult> predict_with_profile(const CostArgs& a, const sim::ModelSpec& model,
                                             const policy::StepShape& shape) {
  ProfileResult r;
  if (a.gpu != "h100-sxm") {
    r.reason = fmt::format("the profile was measured on h100-sxm, not {}", a.gpu);
    return r;
  }
  r.profile_model = sim::profile_model_name(model);
  if (r.profile_model.empty()) {
    r.reason = fmt::format("no profiled model has {}'s shape (profiled: {})", model.name,
                           fmt::join(sim::profiled_model_names(), ", "));
    return r;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(a.profile_dir, ec)) {
    r.reason = fmt::format("profile directory {} not found (pass --profile-dir)", a.profile_dir);
    return r;
  }
  ECO_ASSIGN_OR_RETURN(auto profile, sim::GpuProfile::load(a.profile_dir));
  sim::GpuProfileCostModel::Options o;
  o.pp = a.pp;
  auto cost = sim::GpuProfileCostModel::create(profile, r.profile_model, a.tp, o);
  if (!cost.ok()) {
    r.reason = cost.status().message();
    return r;
  }
  r.covered = true;
  r.step_seconds = (*cost)->step_seconds(shape);
  r.launch_overhead_us = (*cost)->launch_overhead_seconds() * 1e6;
  return r;
}

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

int run_cost(const CostArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  };
  auto model = sim::model_preset(a.model);
  if (!model.ok()) return fail(model.status());
  auto gpu = sim::gpu_preset(a.gpu);
  if (!gpu.ok()) return fail(gpu.status());
  if (a.prefill_tokens == 0 && a.decode_batch == 0) {
    return fail(invalid_argument_error("nothing to run: give --prefill-tokens and/or --decode-batch"));
  }
  if (a.decode_batch > 0 && a.decode_context < 1) {
    return fail(invalid_argument_error("--decode-context must be >= 1 when --decode-batch is > 0"));
  }
  const sim::Parallelism par{.tp = a.tp, .pp = a.pp};
  auto roofline = sim::RooflineCostModel::create(*model, *gpu, par);
  if (!roofline.ok()) return fail(roofline.status());
  const policy::StepShape shape{.prefill_seqs = a.prefill_tokens > 0 ? 1 : 0,
                                .prefill_tokens = a.prefill_tokens,
                                .prefill_context_tokens = a.prefill_tokens > 0 ? a.prefill_context : 0,
                                .decode_seqs = a.decode_batch,
                                .decode_context_tokens = a.decode_batch * a.decode_context};
  const sim::RooflineBreakdown rb = (*roofline)->breakdown(shape);
  const auto capacity = sim::kv_capacity_tokens(*model, *gpu, par);
  CostArgs args = a;
  args.gpu = gpu->name;  // the canonical (lower-case) preset name
  auto profile = predict_with_profile(args, *model, shape);
  if (!profile.ok()) return fail(profile.status());

  if (a.json) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (const sim::RooflineOpTime& t : rb.layer_ops) {
      ops.push_back({{"name", std::string(t.op.name)},
                     {"seconds", t.seconds},
                     {"per_layer", t.op.name != "lm_head"},
                     {"compute_bound", t.compute_bound}});
    }
    nlohmann::ordered_json prof = {{"name", "h100-profile"}, {"covered", profile->covered}};
    if (profile->covered) {
      prof["step_seconds"] = profile->step_seconds;
      prof["profile_model"] = profile->profile_model;
      prof["launch_overhead_seconds"] = profile->launch_overhead_us * 1e-6;
    } else {
      prof["reason"] = profile->reason;
    }
    nlohmann::ordered_json out = {
        {"model",
         {{"name", model->name},
          {"layers", model->layers},
          {"params", model->params()},
          {"weight_bytes", model->weight_bytes()},
          {"kv_bytes_per_token", model->kv_bytes_per_token()}}},
        {"gpu", gpu->name},
        {"tp", a.tp},
        {"pp", a.pp},
        {"step",
         {{"prefill_tokens", shape.prefill_tokens},
          {"prefill_context", shape.prefill_context_tokens},
          {"decode_batch", shape.decode_seqs},
          {"decode_context", a.decode_batch > 0 ? a.decode_context : 0}}},
        {"kv_capacity_tokens", capacity.ok() ? nlohmann::ordered_json(*capacity) : nlohmann::ordered_json(nullptr)},
        {"predictions",
         {{{"name", "roofline"},
           {"covered", true},
           {"step_seconds", rb.total_seconds},
           {"breakdown",
            {{"compute_seconds", rb.compute_seconds},
             {"memory_seconds", rb.memory_seconds},
             {"overhead_seconds", rb.overhead_seconds},
             {"tp_comm_seconds", rb.tp_comm_seconds},
             {"pp_comm_seconds", rb.pp_comm_seconds},
             {"ops", ops}}}},
          prof}}};
    if (!capacity.ok()) out["kv_capacity_error"] = capacity.status().message();
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }

  std::string text;
  text += fmt::format("model: {} ({} layers, {:.2f}B params = {:.2f} GiB, KV {:.0f} KiB per token)\n", model->name,
                      model->layers, model->params() / 1e9, gib(static_cast<double>(model->weight_bytes())),
                      model->kv_bytes_per_token() / 1024.0);
  text += fmt::format("instance: {} x {} (tp={}, pp={}; {} {:.0f} GB/s per direction)\n", par.gpus(), gpu->name, a.tp,
                      a.pp, gpu->intra_link, gpu->intra_link_bytes_per_s / 1e9);
  if (capacity.ok()) {
    text += fmt::format(
        "kv capacity: {} tokens (90% of each GPU's {:.1f} GiB, after {:.2f} GiB of weights and a "
        "{:.1f} GiB reserve)\n",
        *capacity, gib(static_cast<double>(gpu->memory_bytes)),
        gib(static_cast<double>(sim::weight_bytes_per_gpu(*model, par))),
        gib(static_cast<double>(sim::kActivationReserveBytesPerGpu)));
  } else {
    text += fmt::format("kv capacity: none: {}\n", capacity.status().message());
  }
  std::string step;
  if (a.prefill_tokens > 0)
    step += fmt::format("prefill {} tokens over {} cached", a.prefill_tokens, a.prefill_context);
  if (a.decode_batch > 0) {
    step += fmt::format("{}decode {} x {} context tokens", step.empty() ? "" : " + ", a.decode_batch, a.decode_context);
  }
  text += fmt::format("step: {}\n", step);
  text += fmt::format(
      "roofline: {:.3f} ms = compute {:.3f} + memory {:.3f} + overhead {:.3f} + tp comm {:.3f} + pp comm {:.3f} ms\n",
      rb.total_seconds * 1e3, rb.compute_seconds * 1e3, rb.memory_seconds * 1e3, rb.overhead_seconds * 1e3,
      rb.tp_comm_seconds * 1e3, rb.pp_comm_seconds * 1e3);
  for (const sim::RooflineOpTime& t : rb.layer_ops) {
    text += fmt::format("  {:<13}{:>10.1f} us{} ({})\n", t.op.name, t.seconds * 1e6,
                        t.op.name == "lm_head" ? " once    " : " per layer", t.compute_bound ? "compute" : "memory");
  }
  if (profile->covered) {
    text += fmt::format("h100-profile: {:.3f} ms ({} at tp={}, launch overhead {:.2f} us per kernel)\n",
                        profile->step_seconds * 1e3, profile->profile_model, a.tp, profile->launch_overhead_us);
  } else {
    text += fmt::format("h100-profile: not covered: {}\n", profile->reason);
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

void add_simulate_cost_subcommand(CLI::App* simulate, int& exit_code) {
  auto a = std::make_shared<CostArgs>();
  CLI::App* cmd = simulate->add_subcommand(
      "cost",
      "Predict the time of one whole-model step (every layer plus lm_head on the sampled rows) of a model on a GPU "
      "type with the simulator's GPU cost models: the roofline (any model, any GPU) and the H100 operator profile "
      "(h100-sxm, profiled shapes and tps only). Prints the roofline's breakdown and the instance's KV capacity.");
  cmd->add_option("--model", a->model, "model preset: " + fmt::format("{}", fmt::join(sim::model_preset_names(), ", ")))
      ->required();
  cmd->add_option("--gpu", a->gpu, "GPU preset: " + fmt::format("{}", fmt::join(sim::gpu_preset_names(), ", ")))
      ->required();
  cmd->add_option("--tp", a->tp, "tensor-parallel GPUs per instance (must divide the heads and ffn)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pp", a->pp, "pipeline stages per instance (layers split; adds latency, not speed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prefill-tokens", a->prefill_tokens, "new tokens of one prefill chunk in the step (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefill-context", a->prefill_context, "tokens already in the KV cache before that chunk")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--decode-batch", a->decode_batch, "sequences decoding one token each in the step (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--decode-context", a->decode_context, "KV tokens each decoding sequence attends to")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--profile-dir", a->profile_dir,
                  "the H100 operator profile (meta.json and CSVs), relative to the current directory")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "print one JSON object instead of text");
  cmd->callback([a, &exit_code] { exit_code = run_cost(*a); });
}

}  // namespace ecoserve::apps
