// Test helpers shared by the cluster tests (header-only, tests only).
#pragma once

#include <string_view>

#include "policy/cost_model.h"

namespace ecoserve::cluster::testing {

// Predicts 0.4 s per prefill chunk and 10 ms per decode step, whatever their size:
// with a 1 s TTFT SLO two prompts fit an instance under padg.
class ConstantPrefillCost final : public policy::CostModel {
 public:
  double step_seconds(const policy::StepShape& s) const override {
    return 0.4 * s.prefill_seqs + (s.decode_seqs > 0 ? 0.01 : 0.0);
  }
  std::string_view name() const override { return "constant"; }
};

}  // namespace ecoserve::cluster::testing
