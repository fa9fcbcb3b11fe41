// ProfiledCostModel: step times interpolated from a CostProfile measured on this
// machine (`ecoserve profile cost`, engine/cost_profiler.h).
//
// The model. A step is a prefill part plus a decode part:
//
//   step_seconds = P(prefill_tokens, prefill_context_tokens / prefill_seqs)
//                + D(decode_seqs, decode_context_tokens / decode_seqs)
//                - overlap                       (only when both parts are present)
//
//  - P(t, c) interpolates the prefill table: within each measured context c_j,
//    piecewise-linear in tokens t; between contexts, linear in c. D(b, c)
//    interpolates the decode table the same way (bilinear on a grid: batch b
//    within each measured context, then linear in the mean context c). Rows need
//    not share their sizes (a long context may have fewer token counts).
//  - Beyond the table (in either coordinate, on either side) each value follows
//    the nearest segment's line, with that slope clamped to >= 0: a size larger
//    than any measured never costs less than the largest measured point, a smaller
//    one never more than the smallest. A row with one point is constant. A result
//    is never negative (clamped at 0).
//  - Several prefill chunks in one step are charged as one chunk of their summed
//    tokens at their mean context: the linear layers (the bulk of a CPU step) see
//    all tokens together; causal attention inside the chunk is over-estimated,
//    i.e. the prediction errs long.
//  - overlap: a prefill step and a decode step each paid a fixed per-step cost
//    (thread hand-offs, per-step set-up, reading what every step reads) that a
//    mixed step pays once. Each table shows its fixed cost as its intercept at
//    size 0; the part both pay is at most the smaller one, so
//      overlap = min(intercept(prefill), intercept(decode)),
//    where intercept(table) fits a least-squares line to the lowest-context row's
//    points of size <= 8 x its smallest size (the small end, where the fixed cost
//    shows and attention is negligible; more points than one segment, so one
//    noisy measurement does not decide it), extends it to size 0 and clamps it to
//    [0, the row's first value]; 0 for a row of one point. Taking the smaller
//    intercept errs long: on a CPU the decode table's intercept is small (a decode
//    step of any small batch is one weight read plus per-token work) and a noisy
//    prefill row can extrapolate to a large one. The overlap subtracted is also at
//    most min(P, D), so a mixed step never costs less than either part alone.
//  - prefill_seconds() is CostModel's default: the chunks run one after another
//    as prefill-only steps, the cached prefix raising each chunk's context.
//
// Owns a validated copy of the profile and the per-context rows built from it.
// Immutable after create(); pure (no clock, no I/O); const methods may be called
// from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/cost_profile.h"
#include "base/status.h"
#include "policy/cost_model.h"

namespace ecoserve::policy {

class ProfiledCostModel final : public CostModel {
 public:
  // INVALID_ARGUMENT naming the table, point and field when a table is empty, a
  // point has tokens/batch <= 0, context < 0 or seconds not finite and > 0, or the
  // points are not strictly increasing in (context, tokens) / (context, batch).
  static StatusOr<std::unique_ptr<ProfiledCostModel>> create(CostProfile profile);

  double step_seconds(const StepShape& shape) const override;
  std::string_view name() const override { return "profiled"; }

  // The two interpolated tables (before any overlap is subtracted). tokens/batch
  // may be fractional positions between measured sizes. A prefill smaller than
  // the smallest measured one takes at least that one's time scaled down in
  // proportion (tokens / its tokens), so a noisy profile whose extrapolation
  // below its smallest chunk reaches zero never predicts a free prompt.
  double prefill_part_seconds(double tokens, double context) const;
  double decode_part_seconds(double batch, double context) const;
  // The fixed per-step cost a mixed step pays once (see the class comment).
  double step_overhead_seconds() const { return overhead_seconds_; }
  const CostProfile& profile() const { return profile_; }

 private:
  // One context of a table: sizes (tokens or batch, increasing) and their seconds.
  struct Row {
    std::vector<double> sizes;
    std::vector<double> seconds;
  };
  // A table as rows of increasing context.
  struct Table {
    std::vector<double> contexts;
    std::vector<Row> rows;  // rows[j] is measured at contexts[j]
    void add(int32_t context, int32_t size, double seconds);
    double at(double size, double context) const;
    double intercept() const;  // see the class comment (overlap)
  };
  ProfiledCostModel() = default;

  CostProfile profile_;
  Table prefill_;
  Table decode_;
  double overhead_seconds_ = 0.0;
};

}  // namespace ecoserve::policy
