// FreenessRouter: Llumnix's dispatch (OSDI'24, section 4.4.1) - a new request
// goes to the instance with the highest freeness (policy/freeness.h) once the
// request's own virtual usage is added there.
//
// Candidates: healthy, kMixed, non-draining instances. For each, the new request
// is a queued RequestLoad {num_tokens = prompt_len, num_generated = 0,
// max_tokens, priority, running = false}: its demand blocks_for(prompt_len + 1)
// (plus the high-priority headroom when priority > 0) is added to sum V, and B
// stays the instance's running count (the new request is queued, not in the
// batch yet). The candidate with the highest resulting freeness wins; ties go to
// the lowest position. route() returns nullopt when there is no candidate.
// Uses the request lists when the view has with_requests, the InstanceLoad
// aggregates otherwise.
//
// Stateless and pure (no clock, no I/O); one thread at a time like every RouterPolicy.
#pragma once

#include <optional>
#include <string_view>

#include "policy/cluster_view.h"
#include "policy/freeness.h"
#include "policy/router_policy.h"

namespace ecoserve::policy {

class FreenessRouter final : public RouterPolicy {
 public:
  FreenessRouter() = default;
  explicit FreenessRouter(const FreenessOptions& options) : options_(options) {}

  std::optional<InstanceId> route(const ClusterView& view, const RouteRequest& req) override;
  std::string_view name() const override { return "freeness"; }

  // The freeness `inst` would have with `req` queued on it (-infinity for a
  // draining or unhealthy instance). Exposed for tests and the admin API.
  double freeness_with(const InstanceLoad& inst, bool with_requests, const RouteRequest& req) const;

  const FreenessOptions& options() const { return options_; }

 private:
  FreenessOptions options_;
};

}  // namespace ecoserve::policy
