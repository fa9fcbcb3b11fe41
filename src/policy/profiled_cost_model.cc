#include "policy/profiled_cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ecoserve::policy {

namespace {

// Value at x of the piecewise-linear function through (xs[i], y_at(i)) (xs strictly
// increasing, at least one point), extended beyond either end along the end
// segment with its slope clamped to >= 0. y_at is called for at most two indices.
template <typename YAt>
double piecewise_linear(const std::vector<double>& xs, const YAt& y_at, double x) {
  const size_t n = xs.size();
  if (n == 1) return y_at(0);
  size_t i = 0;  // segment [i, i + 1]
  if (x >= xs[n - 1]) {
    i = n - 2;
  } else if (x > xs[0]) {
    i = static_cast<size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin()) - 1;
  }
  const double y0 = y_at(i), y1 = y_at(i + 1);
  const double slope = (y1 - y0) / (xs[i + 1] - xs[i]);
  if (x < xs[0]) return y0 + (x - xs[0]) * std::max(slope, 0.0);
  if (x > xs[n - 1]) return y1 + (x - xs[n - 1]) * std::max(slope, 0.0);
  return y0 + (x - xs[i]) * slope;
}

// Checks one table (points of type P, whose size field is `size_of`, named
// `size_name`).
template <typename P, typename SizeOf>
Status validate_table(const std::vector<P>& points, std::string_view table, std::string_view size_name,
                      const SizeOf& size_of) {
  if (points.empty()) return invalid_argument_error("cost profile: the {} table is empty", table);
  for (size_t i = 0; i < points.size(); ++i) {
    const P& p = points[i];
    const int32_t size = size_of(p);
    if (size <= 0) {
      return invalid_argument_error("cost profile: {}[{}].{} is {}, must be > 0", table, i, size_name, size);
    }
    if (p.context < 0) {
      return invalid_argument_error("cost profile: {}[{}].context is {}, must be >= 0", table, i, p.context);
    }
    if (!std::isfinite(p.seconds) || p.seconds <= 0.0) {
      return invalid_argument_error("cost profile: {}[{}].seconds is {}, must be finite and > 0", table, i,
                                    p.seconds);
    }
    if (i > 0) {
      const P& q = points[i - 1];
      if (std::pair(q.context, size_of(q)) >= std::pair(p.context, size)) {
        return invalid_argument_error(
            "cost profile: {} table not strictly sorted by (context, {}): {}[{}] ({} {}, context {}) after "
            "{}[{}] ({} {}, context {})",
            table, size_name, table, i, size_name, size, p.context, table, i - 1, size_name, size_of(q), q.context);
      }
    }
  }
  return ok_status();
}

}  // namespace

StatusOr<std::unique_ptr<ProfiledCostModel>> ProfiledCostModel::create(CostProfile profile) {
  ECO_RETURN_IF_ERROR(validate_table(profile.prefill, "prefill", "tokens",
                                     [](const CostProfile::PrefillPoint& p) { return p.tokens; }));
  ECO_RETURN_IF_ERROR(validate_table(profile.decode, "decode", "batch",
                                     [](const CostProfile::DecodePoint& p) { return p.batch; }));
  std::unique_ptr<ProfiledCostModel> m(new ProfiledCostModel());
  for (const auto& p : profile.prefill) m->prefill_.add(p.context, p.tokens, p.seconds);
  for (const auto& p : profile.decode) m->decode_.add(p.context, p.batch, p.seconds);
  m->overhead_seconds_ = std::min(m->prefill_.intercept(), m->decode_.intercept());
  m->profile_ = std::move(profile);
  return m;
}

void ProfiledCostModel::Table::add(int32_t context, int32_t size, double seconds) {
  if (contexts.empty() || contexts.back() != context) {
    contexts.push_back(context);
    rows.emplace_back();
  }
  rows.back().sizes.push_back(size);
  rows.back().seconds.push_back(seconds);
}

double ProfiledCostModel::Table::intercept() const {
  // Least squares over the small end of the lowest-context row (see the class comment).
  const Row& r = rows.front();
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < r.sizes.size() && r.sizes[i] <= 8 * r.sizes.front(); ++i) {
    n += 1;
    sx += r.sizes[i];
    sy += r.seconds[i];
    sxx += r.sizes[i] * r.sizes[i];
    sxy += r.sizes[i] * r.seconds[i];
  }
  if (n < 2) return 0.0;
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  return std::clamp((sy - slope * sx) / n, 0.0, r.seconds.front());
}

double ProfiledCostModel::Table::at(double size, double context) const {
  const double v = piecewise_linear(
      contexts,
      [&](size_t j) {
        const Row& r = rows[j];
        return piecewise_linear(r.sizes, [&](size_t i) { return r.seconds[i]; }, size);
      },
      context);
  return std::max(v, 0.0);
}

double ProfiledCostModel::prefill_part_seconds(double tokens, double context) const {
  const double v = prefill_.at(tokens, context);
  const Row& smallest = prefill_.rows.front();  // the lowest context's row
  if (tokens <= 0 || tokens >= smallest.sizes.front()) return v;
  return std::max(v, smallest.seconds.front() * tokens / smallest.sizes.front());
}

double ProfiledCostModel::decode_part_seconds(double batch, double context) const {
  return decode_.at(batch, context);
}

double ProfiledCostModel::step_seconds(const StepShape& shape) const {
  const bool has_prefill = shape.prefill_tokens > 0;
  const bool has_decode = shape.decode_seqs > 0;
  double prefill = 0.0, decode = 0.0;
  if (has_prefill) {
    const double seqs = std::max(shape.prefill_seqs, 1);
    prefill = prefill_part_seconds(shape.prefill_tokens, static_cast<double>(shape.prefill_context_tokens) / seqs);
  }
  if (has_decode) {
    decode = decode_part_seconds(shape.decode_seqs,
                                 static_cast<double>(shape.decode_context_tokens) / shape.decode_seqs);
  }
  double total = prefill + decode;
  if (has_prefill && has_decode) total -= std::min({overhead_seconds_, prefill, decode});
  return total;
}

}  // namespace ecoserve::policy
