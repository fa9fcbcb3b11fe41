// Fuzz target: the H100 operator profile (sim::GpuProfile::parse: meta.json and
// five CSV files -> interpolation tables, elementwise slopes and the fitted launch
// overhead; the same code GpuProfile::load runs on ../shared/data/profiles/h100-bf16)
// and the CSV reader under it (sim::parse_profile_csv).
//
// The first byte picks what the rest of the input is:
//   0-5  the text of one file (meta.json, linear.csv, attn_prefill.csv,
//        attn_decode.csv, elementwise.csv, layer_mixed.csv), the others being a
//        small valid profile (the toy profile of gpu_profile_cost_model_test.cc);
//   6    all six files in that order, separated by NUL bytes (missing ones absent);
//   7    one CSV text for parse_profile_csv, against the header picked by the next byte.
//
// Properties: never a crash, exception, sanitizer report or unbounded work; an error
// is INVALID_ARGUMENT, or NOT_FOUND for a missing file; a loaded profile has a launch
// overhead in the fit's range, finite non-negative elementwise slopes, tables whose
// series are increasing in x, positive, finite and non-decreasing in y, and every
// (model, tp) it covers gives a cost model whose step times are finite and >= 0
// (no NaN or infinity from any profile it accepts).
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "fuzz_util.h"
#include "sim/gpu_profile_cost_model.h"
#include "sim/toy_gpu_profile.h"
#include "sim/profile_csv.h"

namespace {

using namespace ecoserve;
using namespace ecoserve::sim;

constexpr std::array<std::string_view, 6> kFiles{"meta.json",       "linear.csv",      "attn_prefill.csv",
                                                 "attn_decode.csv", "elementwise.csv", "layer_mixed.csv"};
constexpr std::array<std::string_view, 5> kCsvHeaders{
    "model,tp,op,tokens,k,n,time_us", "model,tp,q_len,kv_len,time_us", "model,tp,batch,kv_len,time_us,kv_read_GBps",
    "model,op,tokens,time_us",
    "model,prefill_tokens,decode_batch,decode_kv_len,measured_eager_us,measured_cuda_graph_us,op_sum_us"};

// The toy profile of gpu_profile_cost_model_test.cc (one model "toy", tp 1).
const std::map<std::string, std::string>& toy_files() { return ecoserve::sim::toy_gpu_profile_files(); }

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0.0; }

void check_series(const ProfileSeries& s, const std::string& what) {
  FUZZ_CHECK(!s.x.empty() && s.x.size() == s.y.size(), what);
  for (size_t i = 0; i < s.x.size(); ++i) {
    FUZZ_CHECK(std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && s.y[i] > 0.0, what);
    if (i > 0) FUZZ_CHECK(s.x[i - 1] < s.x[i] && s.y[i - 1] <= s.y[i], what);
  }
}

void check_grid(const ProfileGrid& g, const std::string& what) {
  FUZZ_CHECK(!g.rows.empty() && g.rows.size() == g.contexts.size(), what);
  for (size_t j = 0; j < g.rows.size(); ++j) {
    FUZZ_CHECK(std::isfinite(g.contexts[j]) && g.contexts[j] >= 0.0, what);
    if (j > 0) FUZZ_CHECK(g.contexts[j - 1] < g.contexts[j], what);
    check_series(g.rows[j], what);
  }
}

void check_profile(const std::shared_ptr<const GpuProfile>& profile) {
  const GpuProfile& p = *profile;
  FUZZ_CHECK(!p.models().empty());
  const double launch = p.launch_overhead_seconds();
  FUZZ_CHECK(launch >= 0.0 && launch <= kLaunchOverheadFitMaxSeconds + 1e-12, fmt::format("{}", launch));
  for (double s : p.elementwise_us_per_element()) FUZZ_CHECK(finite_non_negative(s), fmt::format("{}", s));
  FUZZ_CHECK(!p.layer_mixed().empty());
  const LayerMixedError err = profile_layer_mixed_error(p, LayerMixedFit::kInSample);
  FUZZ_CHECK(std::isfinite(err.mean_abs_pct) && std::isfinite(err.max_abs_pct));

  const policy::StepShape shapes[] = {
      {.decode_seqs = 1, .decode_context_tokens = 1},
      {.decode_seqs = 7, .decode_context_tokens = 7 * 300},
      {.decode_seqs = 256, .decode_context_tokens = 256LL * 100000},
      {.prefill_seqs = 1, .prefill_tokens = 1},
      {.prefill_seqs = 1, .prefill_tokens = 512, .prefill_context_tokens = 4096},
      {.prefill_seqs = 3, .prefill_tokens = 100000, .prefill_context_tokens = 1000000},
      {.prefill_seqs = 2, .prefill_tokens = 64, .prefill_context_tokens = 0, .decode_seqs = 32,
       .decode_context_tokens = 32 * 2048},
      {},
  };
  for (const ProfiledModel& m : p.models()) {
    for (int32_t tp : m.tps) {
      auto tables = p.tables(m.name, tp);
      if (!tables.ok()) {
        FUZZ_CHECK(tables.status().code() == StatusCode::kInvalidArgument, tables.status().to_string());
        continue;
      }
      const ProfileTables& t = **tables;
      for (const ProfileSeries& s : t.gemm) check_series(s, "gemm " + m.name);
      check_grid(t.prefill, "prefill " + m.name);
      check_grid(t.decode, "decode " + m.name);
      for (auto attention : {GpuProfileCostModel::PrefillAttention::kProfiled,
                             GpuProfileCostModel::PrefillAttention::kFlashEquivalent}) {
        GpuProfileCostModel::Options o;
        o.prefill_attention = attention;
        auto model = GpuProfileCostModel::create(profile, m.name, tp, o);
        FUZZ_CHECK(model.ok(), model.status().to_string());
        for (const policy::StepShape& s : shapes) {
          const double step = (*model)->step_seconds(s), layer = (*model)->layer_seconds(s);
          FUZZ_CHECK(finite_non_negative(step) && finite_non_negative(layer),
                     fmt::format("{} tp {}: step {} layer {} for prefill {}/{}+{} decode {}/{}", m.name, tp, step,
                                 layer, s.prefill_seqs, s.prefill_tokens, s.prefill_context_tokens, s.decode_seqs,
                                 s.decode_context_tokens));
        }
        FUZZ_CHECK(finite_non_negative((*model)->lm_head_seconds(1000)));
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ecoserve::fuzz::InputReader in(data, size);
  const int mode = in.byte() % 8;
  if (mode == 7) {
    const std::string_view header = kCsvHeaders[in.byte() % kCsvHeaders.size()];
    auto csv = parse_profile_csv(in.rest(), header, "fuzz.csv");
    if (!csv.ok()) {
      FUZZ_CHECK(csv.status().code() == StatusCode::kInvalidArgument, csv.status().to_string());
      return 0;
    }
    int32_t last_line = 1;
    for (const ProfileCsvRow& row : csv->rows) {
      FUZZ_CHECK(row.fields.size() == csv->columns.size());
      FUZZ_CHECK(row.line > last_line);
      last_line = row.line;
    }
    return 0;
  }
  std::map<std::string, std::string> files;
  if (mode == 6) {
    for (std::string_view name : kFiles) {
      if (in.empty()) break;
      files[std::string(name)] = std::string(in.take_until('\0'));
    }
  } else {
    files = toy_files();
    files[std::string(kFiles[mode])] = std::string(in.rest());
  }
  auto profile = GpuProfile::parse(files, "fuzz");
  if (!profile.ok()) {
    FUZZ_CHECK(profile.status().code() == StatusCode::kInvalidArgument ||
                   profile.status().code() == StatusCode::kNotFound,
               profile.status().to_string());
    return 0;
  }
  check_profile(*profile);
  return 0;
}
