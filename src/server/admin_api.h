// The operator endpoints' bodies, as pure functions of a GenerationBackend:
//   GET /admin/cluster            the instances behind the endpoint (role, health, load, KV usage)
//                                 and the router's counters;
//   GET /admin/timeline?seconds=N each instance's recent engine steps (default 10 s, at most 3600),
//                                 times in seconds relative to `now` (negative: the past).
// Thread-safe as the backend's snapshot calls are.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "cluster/generation_backend.h"
#include "server/api_error.h"

namespace ecoserve::server {

nlohmann::json admin_cluster_json(const cluster::GenerationBackend& backend, const std::string& model_name,
                                  TimePoint now);

// `target` is the request target ("/admin/timeline?seconds=30"); a bad `seconds` is a 400.
std::variant<nlohmann::json, ApiError> admin_timeline_json(const cluster::GenerationBackend& backend,
                                                           std::string_view target, TimePoint now);

}  // namespace ecoserve::server
