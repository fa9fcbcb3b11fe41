// The operator endpoints' bodies, as pure functions of a GenerationBackend:
//   GET /admin/cluster            the instances behind the endpoint (role, health, load, KV usage)
//                                 and the router's counters;
//   GET /admin/timeline?seconds=N each instance's recent engine steps (default 10 s, at most 3600),
//                                 times in seconds relative to `now` (negative: the past);
//   POST /admin/instances         adds an instance: body empty or {} for an embedded one (a new
//                                 engine in this process), {"address": "tcp://HOST:PORT"} to attach a
//                                 running `ecoserve instance`; 201 {"name", "seconds"};
//   DELETE /admin/instances/NAME  stops routing to NAME now and stops it once its requests finish;
//                                 202 {"name", "state": "removing"}.
//   GET /health                   health_reply (the answer HttpServer sends).
// Errors are OpenAI-style: 400 bad body, 404 unknown instance, 409 not possible now
// (the last instance, fudg's fixed roles, shutting down), 501 a single-instance server.
// Thread-safe as the backend's snapshot calls are.
#pragma once

#include <optional>
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

// The answer of an admin change: `error` set, or `status` and `body`.
struct AdminReply {
  int status = 200;
  nlohmann::json body;
  std::optional<ApiError> error;
};

// GET /health: 200 {"status": "ok"}, or 503 with the reason: draining, the loop not running,
// or not instance::loop_alive (its heartbeat older than heartbeat_timeout between steps, or its
// step longer than step_timeout). `status` is the backend's (a router's: live as of its check).
AdminReply health_reply(const instance::InstanceStatus& status, bool draining, TimePoint now,
                        Duration heartbeat_timeout, Duration step_timeout);

// Block while an instance starts or connects: call off the I/O threads. Never throw.
AdminReply admin_add_instance(cluster::GenerationBackend& backend, std::string_view body, const Clock& clock);
AdminReply admin_remove_instance(cluster::GenerationBackend& backend, const std::string& name);

}  // namespace ecoserve::server
