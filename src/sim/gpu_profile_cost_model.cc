#include "sim/gpu_profile_cost_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/profile_csv.h"

namespace ecoserve::sim {

namespace {

// ---- CSV reading ----------------------------------------------------------------

using Csv = ProfileCsv;
using CsvRow = ProfileCsvRow;

// The text of one file of the profile (GpuProfile::load reads DIR/FILE, parse takes
// them from a map); NOT_FOUND naming the file when there is none.
using FileReader = std::function<StatusOr<std::string>(const std::string& file)>;

StatusOr<Csv> read_csv(const FileReader& read, const std::string& file, std::string_view header) {
  ECO_ASSIGN_OR_RETURN(const std::string text, read(file));
  return parse_profile_csv(text, header, file);
}

StatusOr<int32_t> int_field(const Csv& csv, const CsvRow& row, size_t i, int32_t min_value) {
  const std::string& s = row.fields[i];
  int32_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < min_value) {
    return invalid_argument_error("{} line {}: {} '{}' is not an integer >= {}", csv.file, row.line, csv.columns[i], s,
                                  min_value);
  }
  return v;
}

StatusOr<double> positive_field(const Csv& csv, const CsvRow& row, size_t i) {
  const std::string& s = row.fields[i];
  double v = 0.0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !(v > 0.0) || !std::isfinite(v)) {
    return invalid_argument_error("{} line {}: {} '{}' is not a positive number", csv.file, row.line, csv.columns[i],
                                  s);
  }
  if (v > kMaxProfileTimeUs) {  // keeps every sum and fit of the predictor finite
    return invalid_argument_error("{} line {}: {} '{}' is more than {:g} us", csv.file, row.line, csv.columns[i], s,
                                  kMaxProfileTimeUs);
  }
  return v;
}

// Points of one series with the line each came from (duplicates are errors).
using Points = std::map<double, std::pair<double, int32_t>>;

Status add_point(Points& pts, double x, double y, const Csv& csv, const CsvRow& row) {
  auto [it, inserted] = pts.emplace(x, std::make_pair(y, row.line));
  if (!inserted) {
    return invalid_argument_error("{} line {}: duplicate of line {}", csv.file, row.line, it->second.second);
  }
  return ok_status();
}

// The series with each point lowered to the minimum of itself and all larger sizes.
ProfileSeries monotone_series(const Points& pts) {
  ProfileSeries s;
  for (const auto& [x, yl] : pts) {
    s.x.push_back(x);
    s.y.push_back(yl.first);
  }
  for (size_t i = s.y.size(); i-- > 1;) s.y[i - 1] = std::min(s.y[i - 1], s.y[i]);
  return s;
}

// Rows made non-decreasing in size (monotone_series) and in context: from the
// longest context down, each point is lowered to the next context's value at its
// size (the minimum of two non-decreasing series is non-decreasing).
ProfileGrid monotone_grid(const std::map<double, Points>& rows) {
  ProfileGrid g;
  for (const auto& [context, pts] : rows) {
    g.contexts.push_back(context);
    g.rows.push_back(monotone_series(pts));
  }
  for (size_t j = g.rows.size(); j-- > 1;) {
    ProfileSeries& lower = g.rows[j - 1];
    for (size_t i = 0; i < lower.x.size(); ++i) lower.y[i] = std::min(lower.y[i], g.rows[j].at(lower.x[i]));
  }
  return g;
}

// Linear interpolation of f(row) between the rows bracketing `context` (clamped).
template <typename F>
double across_rows(const ProfileGrid& g, double context, F&& f) {
  const auto& c = g.contexts;
  if (context <= c.front()) return f(g.rows.front());
  if (context >= c.back()) return f(g.rows.back());
  const size_t j = static_cast<size_t>(std::upper_bound(c.begin(), c.end(), context) - c.begin()) - 1;
  const double w = (context - c[j]) / (c[j + 1] - c[j]);
  return (1.0 - w) * f(g.rows[j]) + w * f(g.rows[j + 1]);
}

double attention_work(double q, double c) { return q * (c + q / 2.0); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr std::array<std::string_view, 3> kElementwiseOps{"rmsnorm", "residual_add", "silu_mul"};

}  // namespace

// ---- interpolation --------------------------------------------------------------

double ProfileSeries::at(double v) const {
  if (x.empty()) return 0.0;
  if (v <= x.front()) return y.front();
  if (v >= x.back()) return y.back() * v / x.back();
  const size_t j = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), v) - x.begin()) - 1;
  const double w = (v - x[j]) / (x[j + 1] - x[j]);
  return (1.0 - w) * y[j] + w * y[j + 1];
}

double ProfileLayerOps::corrected_us(double launch_overhead_us) const {
  double total = elementwise_us;
  for (double t : launched_us) total += std::max(t - launch_overhead_us, 0.0);
  return total;
}

double ProfileTables::prefill_attention_us(double q, double context) const {
  double q_max = 0.0;
  for (const ProfileSeries& r : prefill.rows) q_max = std::max(q_max, r.x.back());
  const double qq = std::min(q, q_max);
  const double cc = std::clamp(context, prefill.contexts.front(), prefill.contexts.back());
  double v = across_rows(prefill, cc, [&](const ProfileSeries& r) { return r.at(qq); });
  if (q > q_max || context > prefill.contexts.back()) v *= attention_work(q, context) / attention_work(qq, cc);
  return v;
}

double ProfileTables::decode_attention_us(double batch, double context) const {
  const double k_max = decode.contexts.back();
  const double v = across_rows(decode, context, [&](const ProfileSeries& r) { return r.at(batch); });
  return context > k_max ? v * context / k_max : v;
}

ProfileLayerOps ProfileTables::layer_ops(const policy::StepShape& s, bool flash_equivalent_prefill) const {
  ProfileLayerOps ops;
  const double prefill_tokens = std::max(s.prefill_tokens, 0);
  const double batch = std::max(s.decode_seqs, 0);
  const double t = prefill_tokens + batch;
  if (t <= 0.0) return ops;
  for (Gemm g : {kQkv, kO, kGateUp, kDown}) ops.launched_us.push_back(gemm_us(g, t));
  if (prefill_tokens > 0.0) {
    const int32_t n = std::max(s.prefill_seqs, 1);
    const double q = prefill_tokens / n;
    const double c = static_cast<double>(std::max<int64_t>(s.prefill_context_tokens, 0)) / n;
    const double us = flash_equivalent_prefill ? prefill_attention_us(std::sqrt(q * q + 2.0 * q * c), 0.0)
                                               : prefill_attention_us(q, c);
    ops.launched_us.insert(ops.launched_us.end(), n, us);
  }
  if (batch > 0.0) {
    const double k = static_cast<double>(std::max<int64_t>(s.decode_context_tokens, 0)) / batch;
    ops.launched_us.push_back(decode_attention_us(batch, k));
  }
  const auto& e = elementwise_us_per_element;
  ops.elementwise_us =
      t * (2.0 * e[0] * model->hidden + 2.0 * e[1] * model->hidden + e[2] * static_cast<double>(model->ffn) / tp);
  return ops;
}

ModelSpec ProfiledModel::spec() const {
  ModelSpec s;
  s.name = name;
  s.hidden = hidden;
  s.layers = layers;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.ffn = ffn;
  s.vocab = vocab;
  s.gated_mlp = true;
  s.max_context = 16384;
  s.dtype_bytes = 2;
  return s;
}

// ---- loading --------------------------------------------------------------------

StatusOr<std::shared_ptr<const GpuProfile>> GpuProfile::load(const std::string& dir) {
  const FileReader read = [&dir](const std::string& file) -> StatusOr<std::string> {
    const std::string path = (std::filesystem::path(dir) / file).string();
    std::ifstream in(path, std::ios::binary);
    if (!in) return not_found_error("gpu profile: cannot open {}", path);
    std::ostringstream text;
    text << in.rdbuf();
    return std::move(text).str();
  };
  std::shared_ptr<GpuProfile> p(new GpuProfile());
  ECO_RETURN_IF_ERROR(p->build(dir, read));
  return std::shared_ptr<const GpuProfile>(std::move(p));
}

StatusOr<std::shared_ptr<const GpuProfile>> GpuProfile::parse(const std::map<std::string, std::string>& files,
                                                              const std::string& name) {
  const FileReader read = [&](const std::string& file) -> StatusOr<std::string> {
    auto it = files.find(file);
    if (it == files.end()) {
      return not_found_error("gpu profile: no file {}", (std::filesystem::path(name) / file).string());
    }
    return it->second;
  };
  std::shared_ptr<GpuProfile> p(new GpuProfile());
  ECO_RETURN_IF_ERROR(p->build(name, read));
  return std::shared_ptr<const GpuProfile>(std::move(p));
}

const ProfiledModel* GpuProfile::find_model(std::string_view name) const {
  for (const ProfiledModel& m : models_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string GpuProfile::describe_models() const {
  std::vector<std::string> parts;
  for (const ProfiledModel& m : models_) parts.push_back(fmt::format("{} (tp {})", m.name, fmt::join(m.tps, ", ")));
  return fmt::format("{}", fmt::join(parts, ", "));
}

StatusOr<const ProfileTables*> GpuProfile::tables(std::string_view model, int32_t tp) const {
  const ProfiledModel* m = find_model(model);
  if (m == nullptr) {
    return invalid_argument_error("gpu profile {} has no model '{}' (profiled: {})", dir_, model, describe_models());
  }
  if (std::find(m->tps.begin(), m->tps.end(), tp) == m->tps.end()) {
    return invalid_argument_error("gpu profile {} has no tp={} for {} (profiled: tp {})", dir_, tp, model,
                                  fmt::join(m->tps, ", "));
  }
  auto it = tables_.find({m->name, tp});
  if (it == tables_.end()) {
    return invalid_argument_error("gpu profile {}: meta.json lists {} tp={} but the CSVs have no rows for it", dir_,
                                  model, tp);
  }
  const ProfileTables& t = it->second;
  for (size_t g = 0; g < t.gemm.size(); ++g) {
    if (t.gemm[g].x.empty()) {
      return invalid_argument_error("gpu profile {}: linear.csv has no '{}' rows for {} tp={}", dir_,
                                    ProfileTables::kGemmNames[g], model, tp);
    }
  }
  if (t.prefill.rows.empty()) {
    return invalid_argument_error("gpu profile {}: attn_prefill.csv has no rows for {} tp={}", dir_, model, tp);
  }
  if (t.decode.rows.empty()) {
    return invalid_argument_error("gpu profile {}: attn_decode.csv has no rows for {} tp={}", dir_, model, tp);
  }
  return &t;
}

Status GpuProfile::build(const std::string& dir, const FileReader& read) {
  dir_ = dir;
  // meta.json: the model shapes and the tps.
  const std::string meta_path = (std::filesystem::path(dir) / "meta.json").string();
  ECO_ASSIGN_OR_RETURN(const std::string meta_text, read("meta.json"));
  const nlohmann::ordered_json meta = nlohmann::ordered_json::parse(meta_text, nullptr, false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("models") || !meta["models"].is_object() ||
      !meta.contains("tps") || !meta["tps"].is_object()) {
    return invalid_argument_error("{}: not JSON with objects 'models' and 'tps'", meta_path);
  }
  for (const auto& [name, dims] : meta["models"].items()) {
    if (!dims.is_array() || dims.size() != 6 ||
        !std::all_of(dims.begin(), dims.end(),
                     [](const nlohmann::ordered_json& d) {
                       return d.is_number_integer() && d > 0 && d <= kMaxProfiledModelDim;
                     })) {
      return invalid_argument_error("{}: models.{} is not [hidden, layers, heads, kv_heads, ffn, vocab]", meta_path,
                                    name);
    }
    ProfiledModel m;
    m.name = name;
    m.hidden = dims[0];
    m.layers = dims[1];
    m.heads = dims[2];
    m.kv_heads = dims[3];
    m.ffn = dims[4];
    m.vocab = dims[5];
    const nlohmann::ordered_json& tps =
        meta["tps"].contains(name) ? meta["tps"][name] : nlohmann::ordered_json::array();
    for (const auto& tp : tps) {
      if (!tp.is_number_integer() || tp < 1 || tp > kMaxProfiledTp) {
        return invalid_argument_error("{}: tps.{} has a bad tp", meta_path, name);
      }
      m.tps.push_back(tp);
    }
    if (m.tps.empty()) return invalid_argument_error("{}: no tps listed for model {}", meta_path, name);
    models_.push_back(std::move(m));
  }
  if (models_.empty()) return invalid_argument_error("{}: no models", meta_path);

  auto model_of = [&](const Csv& csv, const CsvRow& row) -> StatusOr<const ProfiledModel*> {
    const ProfiledModel* m = find_model(row.fields[0]);
    if (m == nullptr) {
      return invalid_argument_error("{} line {}: model '{}' is not in meta.json ({})", csv.file, row.line,
                                    row.fields[0], describe_models());
    }
    return m;
  };

  // linear.csv: GEMM rows; a shape's time is the smallest over its repeats.
  ECO_ASSIGN_OR_RETURN(const Csv linear, read_csv(read, "linear.csv", "model,tp,op,tokens,k,n,time_us"));
  std::map<std::tuple<std::string, int32_t, int32_t>, Points> series;  // (model, tp, op) -> tokens -> (us, line)
  std::map<std::tuple<int32_t, int32_t, int32_t>, double> by_shape;    // (k, n, tokens) -> min us
  std::map<std::tuple<std::string, int32_t, int32_t>, std::pair<int32_t, int32_t>> shape_of;  // -> (k, n)
  for (const CsvRow& row : linear.rows) {
    ECO_ASSIGN_OR_RETURN(const ProfiledModel* m, model_of(linear, row));
    ECO_ASSIGN_OR_RETURN(const int32_t tp, int_field(linear, row, 1, 1));
    const auto op_it = std::find(ProfileTables::kGemmNames.begin(), ProfileTables::kGemmNames.end(), row.fields[2]);
    if (op_it == ProfileTables::kGemmNames.end()) {
      return invalid_argument_error("{} line {}: unknown op '{}' (expected {})", linear.file, row.line, row.fields[2],
                                    fmt::join(ProfileTables::kGemmNames, ", "));
    }
    const auto op = static_cast<int32_t>(op_it - ProfileTables::kGemmNames.begin());
    ECO_ASSIGN_OR_RETURN(const int32_t tokens, int_field(linear, row, 3, 1));
    ECO_ASSIGN_OR_RETURN(const int32_t k, int_field(linear, row, 4, 1));
    ECO_ASSIGN_OR_RETURN(const int32_t n, int_field(linear, row, 5, 1));
    ECO_ASSIGN_OR_RETURN(const double us, positive_field(linear, row, 6));
    const auto key = std::make_tuple(m->name, tp, op);
    auto [sit, fresh] = shape_of.emplace(key, std::make_pair(k, n));
    if (!fresh && sit->second != std::make_pair(k, n)) {
      return invalid_argument_error("{} line {}: {} tp={} {} has k={} n={}, other rows have k={} n={}", linear.file,
                                    row.line, m->name, tp, row.fields[2], k, n, sit->second.first, sit->second.second);
    }
    ECO_RETURN_IF_ERROR(add_point(series[key], tokens, us, linear, row));
    auto [bit, first] = by_shape.emplace(std::make_tuple(k, n, tokens), us);
    if (!first) bit->second = std::min(bit->second, us);
  }
  for (auto& [key, pts] : series) {
    const auto& [name, tp, op] = key;
    const auto [k, n] = shape_of.at(key);
    for (auto& [tokens, yl] : pts) yl.first = by_shape.at({k, n, static_cast<int32_t>(tokens)});
    ProfileTables& t = tables_[{name, tp}];
    t.gemm[op] = monotone_series(pts);
  }

  // attn_prefill.csv: by cached context (kv_len - q_len), then q_len.
  ECO_ASSIGN_OR_RETURN(const Csv prefill, read_csv(read, "attn_prefill.csv", "model,tp,q_len,kv_len,time_us"));
  std::map<std::pair<std::string, int32_t>, std::map<double, Points>> prefill_rows;
  for (const CsvRow& row : prefill.rows) {
    ECO_ASSIGN_OR_RETURN(const ProfiledModel* m, model_of(prefill, row));
    ECO_ASSIGN_OR_RETURN(const int32_t tp, int_field(prefill, row, 1, 1));
    ECO_ASSIGN_OR_RETURN(const int32_t q, int_field(prefill, row, 2, 1));
    ECO_ASSIGN_OR_RETURN(const int32_t kv, int_field(prefill, row, 3, q));
    ECO_ASSIGN_OR_RETURN(const double us, positive_field(prefill, row, 4));
    ECO_RETURN_IF_ERROR(add_point(prefill_rows[{m->name, tp}][kv - q], q, us, prefill, row));
  }
  for (const auto& [key, rows] : prefill_rows) tables_[key].prefill = monotone_grid(rows);

  // attn_decode.csv: by kv_len, then batch.
  ECO_ASSIGN_OR_RETURN(const Csv decode,
                       read_csv(read, "attn_decode.csv", "model,tp,batch,kv_len,time_us,kv_read_GBps"));
  std::map<std::pair<std::string, int32_t>, std::map<double, Points>> decode_rows;
  for (const CsvRow& row : decode.rows) {
    ECO_ASSIGN_OR_RETURN(const ProfiledModel* m, model_of(decode, row));
    ECO_ASSIGN_OR_RETURN(const int32_t tp, int_field(decode, row, 1, 1));
    ECO_ASSIGN_OR_RETURN(const int32_t batch, int_field(decode, row, 2, 1));
    ECO_ASSIGN_OR_RETURN(const int32_t kv, int_field(decode, row, 3, 1));
    ECO_ASSIGN_OR_RETURN(const double us, positive_field(decode, row, 4));
    ECO_RETURN_IF_ERROR(add_point(decode_rows[{m->name, tp}][kv], batch, us, decode, row));
  }
  for (const auto& [key, rows] : decode_rows) tables_[key].decode = monotone_grid(rows);

  // elementwise.csv: per op, the median over models of the bandwidth-bound slope.
  ECO_ASSIGN_OR_RETURN(const Csv elem, read_csv(read, "elementwise.csv", "model,op,tokens,time_us"));
  std::map<std::pair<std::string, int32_t>, Points> elem_series;  // (model, op) -> tokens -> us
  for (const CsvRow& row : elem.rows) {
    ECO_ASSIGN_OR_RETURN(const ProfiledModel* m, model_of(elem, row));
    const auto op_it = std::find(kElementwiseOps.begin(), kElementwiseOps.end(), row.fields[1]);
    if (op_it == kElementwiseOps.end()) {
      return invalid_argument_error("{} line {}: unknown op '{}' (expected {})", elem.file, row.line, row.fields[1],
                                    fmt::join(kElementwiseOps, ", "));
    }
    ECO_ASSIGN_OR_RETURN(const int32_t tokens, int_field(elem, row, 2, 1));
    ECO_ASSIGN_OR_RETURN(const double us, positive_field(elem, row, 3));
    const auto op = static_cast<int32_t>(op_it - kElementwiseOps.begin());
    ECO_RETURN_IF_ERROR(add_point(elem_series[{m->name, op}], tokens, us, elem, row));
  }
  for (size_t op = 0; op < kElementwiseOps.size(); ++op) {
    std::vector<double> slopes;
    for (const ProfiledModel& m : models_) {
      auto it = elem_series.find({m.name, static_cast<int32_t>(op)});
      if (it == elem_series.end()) continue;
      const double width = op == 2 ? m.ffn : m.hidden;
      std::vector<std::pair<double, double>> pts;
      for (const auto& [tokens, yl] : it->second) {
        if (tokens >= kElementwiseFitMinTokens) pts.emplace_back(tokens * width, yl.first);
      }
      if (pts.size() < 2) continue;
      double mx = 0.0, my = 0.0;
      for (const auto& [x, y] : pts) mx += x, my += y;
      mx /= pts.size();
      my /= pts.size();
      double sxy = 0.0, sxx = 0.0;
      for (const auto& [x, y] : pts) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
      slopes.push_back(std::max(sxy / sxx, 0.0));
    }
    if (slopes.empty()) {
      return invalid_argument_error("{}: no model has 2 or more '{}' rows of >= {} tokens to fit its bandwidth",
                                    elem.file, kElementwiseOps[op], kElementwiseFitMinTokens);
    }
    elementwise_slopes_[op] = median(slopes);
  }
  for (auto& [key, t] : tables_) {
    t.model = find_model(key.first);
    t.tp = key.second;
    t.elementwise_us_per_element = elementwise_slopes_;
  }

  // layer_mixed.csv: the CUDA-graph truth the launch overhead is fitted on.
  ECO_ASSIGN_OR_RETURN(const Csv mixed, read_csv(read, "layer_mixed.csv",
                                                 "model,prefill_tokens,decode_batch,decode_kv_len,measured_eager_us,"
                                                 "measured_cuda_graph_us,op_sum_us"));
  std::vector<ProfileLayerOps> ops;
  std::vector<double> truth;
  for (const CsvRow& row : mixed.rows) {
    ECO_ASSIGN_OR_RETURN(const ProfiledModel* m, model_of(mixed, row));
    LayerMixedRow r;
    r.model = m->name;
    r.line = row.line;
    ECO_ASSIGN_OR_RETURN(r.prefill_tokens, int_field(mixed, row, 1, 0));
    ECO_ASSIGN_OR_RETURN(r.decode_batch, int_field(mixed, row, 2, 0));
    ECO_ASSIGN_OR_RETURN(r.decode_kv_len, int_field(mixed, row, 3, 0));
    ECO_ASSIGN_OR_RETURN(r.eager_us, positive_field(mixed, row, 4));
    ECO_ASSIGN_OR_RETURN(r.cuda_graph_us, positive_field(mixed, row, 5));
    ECO_ASSIGN_OR_RETURN(r.op_sum_us, positive_field(mixed, row, 6));
    if (r.prefill_tokens == 0 && r.decode_batch == 0) {  // (their sum may overflow an int32)
      return invalid_argument_error("{} line {}: a layer of no tokens", mixed.file, row.line);
    }
    auto t = tables(m->name, 1);
    if (!t.ok()) return t.status().with_prefix(fmt::format("{} line {}", mixed.file, row.line));
    layer_mixed_.push_back(r);
  }
  if (layer_mixed_.empty()) {
    return invalid_argument_error("{}: no rows to fit the launch overhead on", mixed.file);
  }
  for (const LayerMixedRow& r : layer_mixed_) {
    const ProfileTables* t = *tables(r.model, 1);
    ops.push_back(t->layer_ops(policy::StepShape{.prefill_seqs = r.prefill_tokens > 0 ? 1 : 0,
                                                 .prefill_tokens = r.prefill_tokens,
                                                 .decode_seqs = r.decode_batch,
                                                 .decode_context_tokens = int64_t{r.decode_batch} * r.decode_kv_len}));
    truth.push_back(r.cuda_graph_us);
  }
  launch_overhead_s_ = fit_launch_overhead(ops, truth);
  return ok_status();
}

double fit_launch_overhead(const std::vector<ProfileLayerOps>& layers, const std::vector<double>& truth_us) {
  const auto steps = static_cast<int32_t>(std::lround(kLaunchOverheadFitMaxSeconds / kLaunchOverheadFitStepSeconds));
  double best_loss = std::numeric_limits<double>::infinity();
  int32_t best = 0;
  for (int32_t i = 0; i <= steps; ++i) {
    const double l_us = i * kLaunchOverheadFitStepSeconds * 1e6;
    double loss = 0.0;
    for (size_t r = 0; r < layers.size(); ++r) {
      const double e = (layers[r].corrected_us(l_us) - truth_us[r]) / truth_us[r];
      loss += e * e;
    }
    if (loss < best_loss) best_loss = loss, best = i;
  }
  return best * kLaunchOverheadFitStepSeconds;
}

// ---- the cost model -------------------------------------------------------------

StatusOr<std::unique_ptr<GpuProfileCostModel>> GpuProfileCostModel::load(const std::string& dir,
                                                                         std::string_view profile_model_name,
                                                                         int32_t tp, Options options) {
  ECO_ASSIGN_OR_RETURN(std::shared_ptr<const GpuProfile> profile, GpuProfile::load(dir));
  return create(std::move(profile), profile_model_name, tp, options);
}

StatusOr<std::unique_ptr<GpuProfileCostModel>> GpuProfileCostModel::create(std::shared_ptr<const GpuProfile> profile,
                                                                           std::string_view profile_model_name,
                                                                           int32_t tp, Options options) {
  if (profile == nullptr) return invalid_argument_error("gpu profile cost model: no profile");
  ECO_ASSIGN_OR_RETURN(const ProfileTables* tables, profile->tables(profile_model_name, tp));
  if (options.pp < 1 || options.pp > tables->model->layers) {
    return invalid_argument_error("gpu profile cost model: pp={} must be in [1, {}] (the layers of {})", options.pp,
                                  tables->model->layers, profile_model_name);
  }
  if (!(options.link_bytes_per_s > 0.0) || !(options.link_hop_latency_s >= 0.0)) {
    return invalid_argument_error("gpu profile cost model: link_bytes_per_s must be > 0 and link_hop_latency_s >= 0");
  }
  const double launch =
      options.launch_overhead_seconds >= 0.0 ? options.launch_overhead_seconds : profile->launch_overhead_seconds();
  return std::unique_ptr<GpuProfileCostModel>(new GpuProfileCostModel(std::move(profile), tables, options, launch));
}

double GpuProfileCostModel::layer_seconds(const policy::StepShape& shape) const {
  const bool flash = options_.prefill_attention == PrefillAttention::kFlashEquivalent;
  return tables_->layer_ops(shape, flash).corrected_us(launch_overhead_s_ * 1e6) * 1e-6;
}

double GpuProfileCostModel::lm_head_seconds(int64_t rows) const {
  if (rows <= 0) return 0.0;
  const double us = tables_->gemm_us(ProfileTables::kLmHead, static_cast<double>(rows));
  return std::max(us - launch_overhead_s_ * 1e6, 0.0) * 1e-6;
}

double GpuProfileCostModel::step_seconds(const policy::StepShape& s) const {
  const int64_t tokens = int64_t{std::max(s.prefill_tokens, 0)} + std::max(s.decode_seqs, 0);
  if (tokens == 0) return 0.0;
  const ProfiledModel& m = *tables_->model;
  GpuSpec link;
  link.intra_link_bytes_per_s = options_.link_bytes_per_s;
  link.intra_link_hop_latency_s = options_.link_hop_latency_s;
  const double activation_bytes = static_cast<double>(tokens) * m.hidden * 2.0;
  const double comm = 2.0 * ring_allreduce_seconds(activation_bytes, tables_->tp, link);
  const int64_t rows = (s.prefill_tokens > 0 ? std::max(s.prefill_seqs, 1) : 0) + std::max(s.decode_seqs, 0);
  return m.layers * (layer_seconds(s) + comm) + lm_head_seconds(rows) +
         (options_.pp - 1) * send_seconds(activation_bytes, link);
}

// ---- errors on layer_mixed.csv and the roofline calibration ----------------------

namespace {

policy::StepShape mixed_shape(const LayerMixedRow& r) {
  return policy::StepShape{.prefill_seqs = r.prefill_tokens > 0 ? 1 : 0,
                           .prefill_tokens = r.prefill_tokens,
                           .decode_seqs = r.decode_batch,
                           .decode_context_tokens = int64_t{r.decode_batch} * r.decode_kv_len};
}

LayerMixedRowError row_error(const LayerMixedRow& r, double predicted_us) {
  LayerMixedRowError e;
  e.model = r.model;
  e.prefill_tokens = r.prefill_tokens;
  e.decode_batch = r.decode_batch;
  e.decode_kv_len = r.decode_kv_len;
  e.measured_us = r.cuda_graph_us;
  e.predicted_us = predicted_us;
  e.error_pct = 100.0 * (predicted_us - r.cuda_graph_us) / r.cuda_graph_us;
  return e;
}

void summarize(LayerMixedError& out) {
  out.rows = static_cast<int32_t>(out.per_row.size());
  double sum = 0.0;
  for (const LayerMixedRowError& e : out.per_row) {
    sum += std::abs(e.error_pct);
    out.max_abs_pct = std::max(out.max_abs_pct, std::abs(e.error_pct));
  }
  out.mean_abs_pct = out.rows > 0 ? sum / out.rows : 0.0;
}

}  // namespace

LayerMixedError profile_layer_mixed_error(const GpuProfile& profile, LayerMixedFit fit) {
  const auto& rows = profile.layer_mixed();
  std::vector<ProfileLayerOps> ops;
  std::vector<double> truth;
  for (const LayerMixedRow& r : rows) {
    ops.push_back((*profile.tables(r.model, 1))->layer_ops(mixed_shape(r)));  // load() checked coverage
    truth.push_back(r.cuda_graph_us);
  }
  LayerMixedError out;
  for (size_t i = 0; i < rows.size(); ++i) {
    double launch_s = profile.launch_overhead_seconds();
    if (fit == LayerMixedFit::kLeaveOneOut) {
      std::vector<ProfileLayerOps> rest_ops;
      std::vector<double> rest_truth;
      for (size_t j = 0; j < rows.size(); ++j) {
        if (j == i) continue;
        rest_ops.push_back(ops[j]);
        rest_truth.push_back(truth[j]);
      }
      launch_s = rest_ops.empty() ? 0.0 : fit_launch_overhead(rest_ops, rest_truth);
    }
    LayerMixedRowError e = row_error(rows[i], ops[i].corrected_us(launch_s * 1e6));
    e.launch_overhead_us = launch_s * 1e6;
    out.per_row.push_back(e);
  }
  summarize(out);
  return out;
}

StatusOr<LayerMixedError> roofline_layer_mixed_error(const GpuProfile& profile, const RooflineOptions& options) {
  ECO_ASSIGN_OR_RETURN(const GpuSpec h100, gpu_preset("h100-sxm"));
  LayerMixedError out;
  std::map<std::string, std::unique_ptr<RooflineCostModel>> models;
  for (const LayerMixedRow& r : profile.layer_mixed()) {
    auto& model = models[r.model];
    if (model == nullptr) {
      ECO_ASSIGN_OR_RETURN(model, RooflineCostModel::create(profile.find_model(r.model)->spec(), h100, {}, options));
    }
    out.per_row.push_back(row_error(r, model->layer_seconds(mixed_shape(r)) * 1e6));
  }
  summarize(out);
  return out;
}

StatusOr<RooflineCalibration> calibrate_roofline(const std::string& dir) {
  ECO_ASSIGN_OR_RETURN(std::shared_ptr<const GpuProfile> profile, GpuProfile::load(dir));
  ECO_ASSIGN_OR_RETURN(const GpuSpec h100, gpu_preset("h100-sxm"));
  // Every point: the roofline's operators (independent of the options) and the
  // profile predictor's layer time.
  struct Point {
    std::vector<RooflineOp> ops;
    double truth_s = 0.0;
  };
  std::vector<Point> points;
  for (const ProfiledModel& m : profile->models()) {
    for (int32_t tp : m.tps) {
      ECO_ASSIGN_OR_RETURN(auto teacher, GpuProfileCostModel::create(profile, m.name, tp, {}));
      ECO_ASSIGN_OR_RETURN(auto roof, RooflineCostModel::create(m.spec(), h100, Parallelism{.tp = tp}, {}));
      std::vector<policy::StepShape> shapes;
      const ProfileTables& t = teacher->tables();
      for (double q : t.prefill.rows.front().x) {
        shapes.push_back({.prefill_seqs = 1, .prefill_tokens = static_cast<int32_t>(q)});
      }
      for (size_t j = 0; j < t.decode.contexts.size(); ++j) {
        for (double b : t.decode.rows[j].x) {
          shapes.push_back({.decode_seqs = static_cast<int32_t>(b),
                            .decode_context_tokens = static_cast<int64_t>(b * t.decode.contexts[j])});
        }
      }
      for (const LayerMixedRow& r : profile->layer_mixed()) {
        if (r.model == profile->layer_mixed().front().model) shapes.push_back(mixed_shape(r));
      }
      for (const policy::StepShape& s : shapes) {
        points.push_back(Point{.ops = roof->layer_ops(s), .truth_s = teacher->layer_seconds(s)});
      }
    }
  }
  auto layer_s = [&](const Point& p, const RooflineOptions& o) {
    double total = o.layer_overhead_seconds;
    for (const RooflineOp& op : p.ops) total += roofline_op_seconds(op, h100, o);
    return total;
  };
  auto loss = [&](const RooflineOptions& o) {
    double sum = 0.0;
    for (const Point& p : points) {
      const double e = std::log(layer_s(p, o) / p.truth_s);
      sum += e * e;
    }
    return sum;
  };
  // A neutral start (not the defaults, so the fit does not just confirm them).
  RooflineOptions best{.compute_efficiency_max = 0.7,
                       .compute_efficiency_tokens = 50.0,
                       .memory_efficiency = 0.8,
                       .layer_overhead_seconds = 20e-6,
                       .elementwise_traffic = 1.0};
  double best_loss = loss(best);
  double RooflineOptions::*const fields[] = {
      &RooflineOptions::compute_efficiency_max, &RooflineOptions::compute_efficiency_tokens,
      &RooflineOptions::memory_efficiency, &RooflineOptions::layer_overhead_seconds,
      &RooflineOptions::elementwise_traffic};
  for (double step : {0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001}) {
    for (int sweep = 0; sweep < 200; ++sweep) {
      bool improved = false;
      for (auto field : fields) {
        for (double factor : {1.0 + step, 1.0 / (1.0 + step)}) {
          RooflineOptions trial = best;
          trial.*field *= factor;
          if (trial.compute_efficiency_max > 1.0 || trial.memory_efficiency > 1.0) continue;
          const double l = loss(trial);
          if (l < best_loss - 1e-12) best = trial, best_loss = l, improved = true;
        }
      }
      if (!improved) break;
    }
  }
  RooflineCalibration out;
  out.options = best;
  out.points = static_cast<int32_t>(points.size());
  out.rms_log_error = std::sqrt(best_loss / std::max<size_t>(points.size(), 1));
  double sum = 0.0;
  for (const Point& p : points) {
    const double pct = 100.0 * std::abs(layer_s(p, best) / p.truth_s - 1.0);
    sum += pct;
    out.max_abs_pct = std::max(out.max_abs_pct, pct);
  }
  out.mean_abs_pct = points.empty() ? 0.0 : sum / points.size();
  return out;
}

}  // namespace ecoserve::sim
