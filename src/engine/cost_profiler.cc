#include "engine/cost_profiler.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ecoserve::engine {

namespace {

constexpr int kJsonVersion = 1;

int32_t ceil_div(int64_t a, int32_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// first, 2*first, 4*first, ... while <= last, then last itself.
std::vector<int32_t> doubling(int32_t first, int32_t last) {
  std::vector<int32_t> v;
  for (int64_t x = first; x <= last; x *= 2) v.push_back(static_cast<int32_t>(x));
  if (v.empty() || v.back() != last) v.push_back(last);
  return v;
}

std::vector<int32_t> sorted_unique(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The grids of one options struct, with the points that fit max_context.
struct Grid {
  struct Row {
    int32_t context = 0;
    std::vector<int32_t> sizes;  // prefill tokens or decode batch sizes
  };
  std::vector<Row> prefill;
  std::vector<Row> decode;
};

Grid make_grid(const CostProfilerOptions& o, int32_t max_context) {
  Grid g;
  const std::vector<int32_t> tokens = doubling(o.min_prefill_tokens, o.max_prefill_tokens);
  const std::vector<int32_t> batches = doubling(1, o.max_batch);
  const size_t min_row = std::min<size_t>(2, tokens.size());
  for (int32_t c : cost_profile_prefill_contexts(o, max_context)) {
    Grid::Row r;
    r.context = c;
    for (int32_t t : tokens) {
      if (static_cast<int64_t>(c) + t <= max_context) r.sizes.push_back(t);
    }
    if (r.sizes.size() >= min_row) g.prefill.push_back(std::move(r));
  }
  for (int32_t c : cost_profile_decode_contexts(o, max_context)) {
    if (static_cast<int64_t>(c) + 1 <= max_context) g.decode.push_back(Grid::Row{.context = c, .sizes = batches});
  }
  return g;
}

int32_t prefill_blocks_per_seq(const Grid::Row& r, int32_t block_size) {
  return ceil_div(static_cast<int64_t>(r.context) + r.sizes.back(), block_size);
}
int32_t decode_blocks_per_seq(const Grid::Row& r, int32_t block_size) {
  return ceil_div(static_cast<int64_t>(r.context) + 1, block_size);
}

Status validate_options(const CostProfilerOptions& o) {
  if (o.clock == nullptr) return invalid_argument_error("cost profiler: options.clock is not set");
  if (o.repeats < 1) return invalid_argument_error("cost profiler: repeats is {}, must be >= 1", o.repeats);
  if (o.min_prefill_tokens < 1 || o.max_prefill_tokens < o.min_prefill_tokens) {
    return invalid_argument_error("cost profiler: prefill tokens {}..{}: need 1 <= min <= max", o.min_prefill_tokens,
                                  o.max_prefill_tokens);
  }
  if (o.max_batch < 1) return invalid_argument_error("cost profiler: max_batch is {}, must be >= 1", o.max_batch);
  for (int32_t c : o.prefill_contexts) {
    if (c < 0) return invalid_argument_error("cost profiler: prefill context {} is negative", c);
  }
  for (int32_t c : o.decode_contexts) {
    if (c < 0) return invalid_argument_error("cost profiler: decode context {} is negative", c);
  }
  return ok_status();
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

// ---- Building blocks ----

StepPlan synthetic_step(int32_t batch, int32_t context, int32_t tokens, int32_t blocks_per_seq, int32_t vocab,
                        std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(3, vocab - 1);
  StepPlan plan;
  plan.seqs.resize(static_cast<size_t>(batch));
  for (int32_t i = 0; i < batch; ++i) {
    SeqStep& s = plan.seqs[static_cast<size_t>(i)];
    s.id = RequestId(static_cast<uint64_t>(i) + 1);
    s.num_computed = context;
    s.tokens.resize(static_cast<size_t>(tokens));
    for (int32_t& t : s.tokens) t = tok(rng);
    s.block_table.reserve(static_cast<size_t>(blocks_per_seq));
    for (int32_t b = 0; b < blocks_per_seq; ++b) s.block_table.emplace_back(i * blocks_per_seq + b);
    s.sample = true;
  }
  return plan;
}

Status fill_synthetic_context(ModelRunner& runner, int32_t batch, int32_t context, int32_t blocks_per_seq,
                              std::mt19937& rng, int32_t prefill_tokens) {
  if (context <= 0) return ok_status();
  if (prefill_tokens < 1) {
    return invalid_argument_error("fill_synthetic_context: prefill_tokens is {}, must be >= 1", prefill_tokens);
  }
  const int32_t bs = runner.block_size();
  const int32_t used = ceil_div(context, bs);
  const int32_t prefilled_blocks = std::min(used, ceil_div(prefill_tokens, bs));
  const int32_t prefilled = std::min(context, prefilled_blocks * bs);
  StepPlan fill = synthetic_step(1, 0, prefilled, blocks_per_seq, runner.model().config().n_vocab, rng);
  fill.seqs[0].sample = false;
  ECO_ASSIGN_OR_RETURN(StepOutput out, runner.execute(fill));
  (void)out;
  for (int32_t b = prefilled_blocks; b < used; ++b) runner.copy_block(BlockId(b % prefilled_blocks), BlockId(b));
  for (int32_t i = 1; i < batch; ++i) {
    for (int32_t b = 0; b < used; ++b) runner.copy_block(BlockId(b), BlockId(i * blocks_per_seq + b));
  }
  return ok_status();
}

StatusOr<double> time_step(ModelRunner& runner, const StepPlan& plan, const Clock& clock) {
  const TimePoint t0 = clock.now();
  StatusOr<StepOutput> out = runner.execute(plan);
  const TimePoint t1 = clock.now();
  if (!out.ok()) return out.status();
  return to_seconds(t1 - t0);
}

StatusOr<double> median_step_seconds(ModelRunner& runner, const StepPlan& plan, const Clock& clock,
                                     int32_t repeats) {
  if (repeats < 1) return invalid_argument_error("median_step_seconds: repeats is {}, must be >= 1", repeats);
  std::vector<double> s;
  for (int32_t r = 0; r < repeats; ++r) {
    ECO_ASSIGN_OR_RETURN(double secs, time_step(runner, plan, clock));
    s.push_back(secs);
  }
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
}

// ---- Measurement ----

std::vector<int32_t> cost_profile_prefill_contexts(const CostProfilerOptions& options, int32_t max_context) {
  if (!options.prefill_contexts.empty()) return sorted_unique(options.prefill_contexts);
  return sorted_unique({0, max_context / 4, max_context / 2});
}

std::vector<int32_t> cost_profile_decode_contexts(const CostProfilerOptions& options, int32_t max_context) {
  if (!options.decode_contexts.empty()) return sorted_unique(options.decode_contexts);
  return sorted_unique({std::min(32, max_context / 4), max_context / 4, max_context / 2});
}

int32_t cost_profile_blocks_needed(const CostProfilerOptions& options, int32_t block_size, int32_t max_context) {
  const Grid g = make_grid(options, max_context);
  int32_t need = 0;
  for (const auto& r : g.prefill) need = std::max(need, prefill_blocks_per_seq(r, block_size));
  for (const auto& r : g.decode) need = std::max(need, r.sizes.back() * decode_blocks_per_seq(r, block_size));
  return need;
}

StatusOr<CostProfile> measure_cost_profile(ModelRunner& runner, const CostProfilerOptions& options) {
  ECO_RETURN_IF_ERROR(validate_options(options));
  const Grid grid = make_grid(options, runner.max_context());
  if (grid.prefill.empty() || grid.decode.empty()) {
    return invalid_argument_error("cost profiler: no {} grid point fits the runner's context of {} tokens",
                                  grid.prefill.empty() ? "prefill" : "decode", runner.max_context());
  }
  const int32_t bs = runner.block_size();
  const int32_t need = cost_profile_blocks_needed(options, bs, runner.max_context());
  if (runner.num_kv_blocks() < need) {
    return invalid_argument_error("cost profiler: the runner has {} KV blocks, the grid needs {}",
                                  runner.num_kv_blocks(), need);
  }
  const Clock& clock = *options.clock;
  const auto& config = runner.model().config();
  const int32_t vocab = config.n_vocab;
  auto progress = [&](const std::string& line) {
    if (options.on_progress) options.on_progress(line);
  };

  CostProfile profile;
  profile.model_id = !options.model_id.empty() ? options.model_id : !config.name.empty() ? config.name : config.arch;
  profile.machine = !options.machine.empty() ? options.machine : cpu_model_name();
  profile.threads = runner.num_threads();
  profile.kv_cache_dtype = kv_cache_type_name(runner.kv_cache_type());
  std::mt19937 rng(options.seed);

  // Warm-up (untimed): first-touch of scratch buffers and the thread pool.
  {
    const Grid::Row& r = grid.prefill.front();
    StepPlan warm = synthetic_step(1, 0, r.sizes.front(), ceil_div(r.sizes.front(), bs), vocab, rng);
    ECO_ASSIGN_OR_RETURN(StepOutput out, runner.execute(warm));
    (void)out;
  }
  for (const Grid::Row& r : grid.prefill) {
    progress(fmt::format("prefill at context {}: tokens {}", r.context, join(r.sizes)));
    const int32_t bps = prefill_blocks_per_seq(r, bs);
    ECO_RETURN_IF_ERROR(fill_synthetic_context(runner, 1, r.context, bps, rng));
    for (int32_t t : r.sizes) {
      const StepPlan plan = synthetic_step(1, r.context, t, bps, vocab, rng);
      ECO_ASSIGN_OR_RETURN(double secs, median_step_seconds(runner, plan, clock, options.repeats));
      profile.prefill.push_back({.tokens = t, .context = r.context, .seconds = secs});
    }
  }
  for (const Grid::Row& r : grid.decode) {
    progress(fmt::format("decode at context {}: batch {}", r.context, join(r.sizes)));
    const int32_t bps = decode_blocks_per_seq(r, bs);
    ECO_RETURN_IF_ERROR(fill_synthetic_context(runner, r.sizes.back(), r.context, bps, rng));
    for (int32_t b : r.sizes) {
      const StepPlan plan = synthetic_step(b, r.context, 1, bps, vocab, rng);
      ECO_ASSIGN_OR_RETURN(double secs, median_step_seconds(runner, plan, clock, options.repeats));
      profile.decode.push_back({.batch = b, .context = r.context, .seconds = secs});
    }
  }
  progress(fmt::format("measured {} prefill and {} decode points", profile.prefill.size(), profile.decode.size()));
  return profile;
}

// ---- JSON ----

std::string cost_profile_to_json(const CostProfile& p) {
  nlohmann::ordered_json j;
  j["version"] = kJsonVersion;
  j["model_id"] = p.model_id;
  j["machine"] = p.machine;
  j["threads"] = p.threads;
  j["kv_cache_dtype"] = p.kv_cache_dtype;
  auto& prefill = j["prefill"] = nlohmann::ordered_json::array();
  for (const auto& x : p.prefill) {
    prefill.push_back({{"tokens", x.tokens}, {"context", x.context}, {"seconds", x.seconds}});
  }
  auto& decode = j["decode"] = nlohmann::ordered_json::array();
  for (const auto& x : p.decode) {
    decode.push_back({{"batch", x.batch}, {"context", x.context}, {"seconds", x.seconds}});
  }
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

namespace {

using Json = nlohmann::json;

// Reads fields of one JSON object, naming `where` ("prefill[3]") in errors.
class FieldReader {
 public:
  FieldReader(const Json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  const Json* find(const char* key, bool required, Status& status) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (required) status = invalid_argument_error("cost profile: {} is missing", path(key));
      return nullptr;
    }
    return &*it;
  }
  Status get(const char* key, bool required, int32_t& out) const {
    Status st;
    const Json* v = find(key, required, st);
    if (v == nullptr) return st;
    if (!v->is_number_integer()) return type_error(key, "an integer", *v);
    if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
                                : (v->get<int64_t>() > std::numeric_limits<int32_t>::max() ||
                                   v->get<int64_t>() < std::numeric_limits<int32_t>::min())) {
      return invalid_argument_error("cost profile: {} is out of the 32-bit integer range", path(key));
    }
    out = static_cast<int32_t>(v->get<int64_t>());
    return ok_status();
  }
  Status get(const char* key, bool required, double& out) const {
    Status st;
    const Json* v = find(key, required, st);
    if (v == nullptr) return st;
    if (!v->is_number()) return type_error(key, "a number", *v);
    out = v->get<double>();
    return ok_status();
  }
  Status get(const char* key, bool required, std::string& out) const {
    Status st;
    const Json* v = find(key, required, st);
    if (v == nullptr) return st;
    if (!v->is_string()) return type_error(key, "a string", *v);
    out = v->get<std::string>();
    return ok_status();
  }
  std::string path(const char* key) const { return where_.empty() ? key : where_ + "." + key; }

 private:
  Status type_error(const char* key, const char* expected, const Json& v) const {
    return invalid_argument_error("cost profile: {}: expected {}, got {}", path(key), expected, v.type_name());
  }
  const Json& obj_;
  std::string where_;
};

// Reads the array `key` of `root`, each element an object read by `read_point`.
template <typename P, typename ReadPoint>
Status read_points(const FieldReader& root, const char* key, std::vector<P>& out, const ReadPoint& read_point) {
  Status st;
  const Json* arr = root.find(key, true, st);
  if (arr == nullptr) return st;
  if (!arr->is_array()) {
    return invalid_argument_error("cost profile: {}: expected an array, got {}", key, arr->type_name());
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string where = fmt::format("{}[{}]", key, i);
    const Json& e = (*arr)[i];
    if (!e.is_object()) return invalid_argument_error("cost profile: {}: expected an object, got {}", where, e.type_name());
    P p;
    ECO_RETURN_IF_ERROR(read_point(FieldReader(e, where), p));
    out.push_back(p);
  }
  return ok_status();
}

StatusOr<CostProfile> from_json_document(const Json& j) {
  if (!j.is_object()) return invalid_argument_error("cost profile: expected a JSON object, got {}", j.type_name());
  const FieldReader root(j, "");
  int32_t version = kJsonVersion;
  ECO_RETURN_IF_ERROR(root.get("version", false, version));
  if (version != kJsonVersion) {
    return invalid_argument_error("cost profile: version {} is not supported (this build reads {})", version,
                                  kJsonVersion);
  }
  CostProfile p;
  ECO_RETURN_IF_ERROR(root.get("model_id", true, p.model_id));
  ECO_RETURN_IF_ERROR(root.get("machine", false, p.machine));
  ECO_RETURN_IF_ERROR(root.get("threads", false, p.threads));
  ECO_RETURN_IF_ERROR(root.get("kv_cache_dtype", false, p.kv_cache_dtype));
  ECO_RETURN_IF_ERROR(read_points(root, "prefill", p.prefill, [](const FieldReader& r, CostProfile::PrefillPoint& x) {
    ECO_RETURN_IF_ERROR(r.get("tokens", true, x.tokens));
    ECO_RETURN_IF_ERROR(r.get("context", true, x.context));
    return r.get("seconds", true, x.seconds);
  }));
  ECO_RETURN_IF_ERROR(read_points(root, "decode", p.decode, [](const FieldReader& r, CostProfile::DecodePoint& x) {
    ECO_RETURN_IF_ERROR(r.get("batch", true, x.batch));
    ECO_RETURN_IF_ERROR(r.get("context", true, x.context));
    return r.get("seconds", true, x.seconds);
  }));
  return p;
}

}  // namespace

StatusOr<CostProfile> cost_profile_from_json(std::string_view json) {
  try {
    const Json j = Json::parse(json);
    return from_json_document(j);
  } catch (const std::exception& e) {  // parse errors (with the byte offset); nothing else is expected
    return invalid_argument_error("cost profile: not valid JSON: {}", e.what());
  }
}

Status save_cost_profile(const CostProfile& profile, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return permission_denied_error("cannot write '{}': {}", tmp, std::strerror(errno));
    out << cost_profile_to_json(profile);
    out.close();
    if (!out) return internal_error("cannot write '{}': {}", tmp, std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return permission_denied_error("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
  return ok_status();
}

StatusOr<CostProfile> load_cost_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error("cannot open cost profile '{}': {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<CostProfile> p = cost_profile_from_json(text.str());
  if (!p.ok()) return p.status().with_prefix(path);
  return p;
}

std::string default_cost_profile_path(const std::string& model_path) { return model_path + ".profile.json"; }

std::string model_file_id(const std::string& model_path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(model_path, ec);
  return std::filesystem::path(model_path).filename().string() + ":" + (ec ? std::string("?") : std::to_string(size));
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? std::string() : line.substr(first);
  }
  return "";
}

StatusOr<CostProfile> measure_cost_profile(std::shared_ptr<const model::LlamaModel> model,
                                           const EngineOptions& engine, const CostProfilerOptions& options) {
  if (!model) return invalid_argument_error("cost profiler: no model");
  ECO_RETURN_IF_ERROR(validate_options(options));
  EngineOptions eo = engine;
  eo.kv_cache_bytes = 0;
  eo.num_host_blocks = 0;
  const int32_t max_context = eo.max_context > 0 ? eo.max_context : model->config().n_ctx_train;
  eo.num_kv_blocks = std::max(1, cost_profile_blocks_needed(options, eo.block_size, max_context));
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, ModelRunner::create(std::move(model), eo));
  return measure_cost_profile(*runner, options);
}

CostProfilerOptions quick_cost_profiler_options(const Clock* clock, int32_t max_prefill) {
  CostProfilerOptions o;
  o.clock = clock;
  o.max_prefill_tokens = std::clamp(max_prefill, 16, 256);
  o.min_prefill_tokens = 16;
  o.max_batch = 8;
  o.repeats = 1;
  return o;
}

}  // namespace ecoserve::engine
