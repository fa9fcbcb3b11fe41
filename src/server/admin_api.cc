#include "server/admin_api.h"

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

namespace ecoserve::server {

using nlohmann::json;

namespace {

const char* phase_name(int32_t phase) { return phase == 1 ? "prefill" : phase == 2 ? "decode" : "mixed"; }

ApiError status_error(const Status& s) {
  ApiError e;
  e.message = s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument: e.http_status = 400; break;
    case StatusCode::kNotFound: e.http_status = 404; e.code = "instance_not_found"; break;
    case StatusCode::kFailedPrecondition: e.http_status = 409; e.code = "conflict"; break;
    case StatusCode::kUnimplemented: e.http_status = 501; e.code = "not_implemented"; break;
    case StatusCode::kUnavailable: e.http_status = 503; e.type = "service_unavailable"; break;
    default: e.http_status = 500; e.type = "internal_error"; break;
  }
  return e;
}

}  // namespace

json admin_cluster_json(const cluster::GenerationBackend& backend, const std::string& model_name, TimePoint now) {
  json list = json::array();
  for (const cluster::InstanceReport& r : backend.instances()) {
    const instance::InstanceStatus& s = r.status;
    json phase = {{"phase", phase_name(s.phase)},
                  {"phase_switches", s.phase_switches},
                  {"seconds_in_phase", s.last_phase_switch == TimePoint{} ? json(nullptr)
                                                                            : json(to_seconds(now - s.last_phase_switch))}};
    if (r.macro >= 0) {
      phase["macro_instance"] = r.macro;
      phase["pending_prefill_seconds"] = r.pending_prefill_seconds;
      phase["num_slo_decoding"] = r.num_slo_decoding;
      phase["mean_saved_tpot_seconds"] = r.num_slo_decoding > 0 ? json(r.mean_saved_tpot_seconds) : json(nullptr);
    }
    list.push_back({{"name", r.name},
                    {"role", r.role},
                    {"state", r.state},
                    {"healthy", r.healthy},
                    {"padg", phase},
                    {"heartbeat_age_seconds", to_seconds(now - s.last_heartbeat)},
                    // How long the step now running has run (null between steps).
                    {"step_seconds", s.in_step ? json(to_seconds(now - s.step_started)) : json(nullptr)},
                    {"num_waiting", s.num_waiting},
                    {"num_running", s.num_running},
                    {"num_swapped", s.num_swapped},
                    {"num_waiting_tokens", s.num_waiting_tokens},
                    {"num_running_tokens", s.num_running_tokens},
                    {"kv_cache_usage", s.kv_usage},
                    {"num_free_blocks", s.num_free_blocks},
                    {"num_total_blocks", s.num_total_blocks},
                    {"steps", s.steps},
                    {"mean_step_seconds", s.mean_step_seconds},
                    {"prompt_tokens_total", s.prompt_tokens_total},
                    {"generation_tokens_total", s.generation_tokens_total}});
  }
  const cluster::ClusterStats c = backend.cluster_stats();
  json macros = json::array();
  for (const cluster::MacroReport& m : c.macros) macros.push_back({{"id", m.id}, {"members", m.members}});
  json aborted = json::object();
  for (const auto& [reason, n] : c.migrations_aborted) aborted[reason] = n;
  return json{{"model", model_name},
              {"instances", list},
              {"macro_instances", macros},
              {"router",
               {{"routed", c.routed},
                {"rejected", c.rejected},
                {"retries", c.retries},
                {"route_seconds_total", c.route_seconds_total},
                {"unhealthy_instances", c.unhealthy_instances},
                {"kv_transfers", c.kv_transfers},
                {"kv_transfer_bytes", c.kv_transfer_bytes},
                {"kv_transfer_seconds", c.kv_transfer_seconds},
                {"kv_transfer_failures", c.kv_transfer_failures},
                {"local_prefills", c.local_prefills},
                {"instances_added", c.instances_added},
                {"instances_removed", c.instances_removed},
                {"layout_changes", c.layout_changes},
                {"last_layout_change_seconds", c.last_layout_change_seconds},
                {"migrations_started", c.migrations_started},
                {"migrations_completed", c.migrations_completed},
                {"migrations_aborted", aborted},
                {"migrated_bytes", c.migrated_bytes},
                {"freeness_scale_ups", c.freeness_scale_ups},
                {"freeness_scale_downs", c.freeness_scale_downs}}}};
}

AdminReply admin_add_instance(cluster::GenerationBackend& backend, std::string_view body, const Clock& clock) {
  AdminReply reply;
  std::string address;
  const json j = json::parse(body.empty() ? std::string_view("{}") : body, nullptr, false);
  if (!j.is_object()) {
    reply.error = bad_request("the body must be a JSON object: {} or {\"address\": \"tcp://HOST:PORT\"}");
    return reply;
  }
  if (auto it = j.find("address"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty()) {
      reply.error = bad_request("'address' must be a non-empty string (tcp://HOST:PORT)", "address");
      return reply;
    }
    address = it->get<std::string>();
  }
  const TimePoint t0 = clock.now();
  StatusOr<std::string> name = internal_error("not run");
  try {
    name = backend.add_instance(address);
  } catch (const std::exception& e) {
    name = internal_error("adding an instance failed: {}", e.what());
  }
  if (!name.ok()) {
    reply.error = status_error(name.status());
    return reply;
  }
  reply.status = 201;
  reply.body = {{"name", *name}, {"state", "active"}, {"seconds", to_seconds(clock.now() - t0)}};
  return reply;
}

AdminReply admin_remove_instance(cluster::GenerationBackend& backend, const std::string& name) {
  AdminReply reply;
  Status s = internal_error("not run");
  try {
    s = backend.remove_instance(name);
  } catch (const std::exception& e) {
    s = internal_error("removing an instance failed: {}", e.what());
  }
  if (!s.ok()) {
    reply.error = status_error(s);
    return reply;
  }
  reply.status = 202;
  reply.body = {{"name", name}, {"state", "removing"}};
  return reply;
}

std::variant<json, ApiError> admin_timeline_json(const cluster::GenerationBackend& backend, std::string_view target,
                                                 TimePoint now) {
  double seconds = 10.0;
  if (auto q = target.find("seconds="); q != std::string_view::npos) {
    const size_t amp = target.find('&', q);
    const std::string v(target.substr(q + 8, amp == std::string_view::npos ? std::string_view::npos : amp - q - 8));
    char* end = nullptr;
    const double parsed = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !(parsed > 0) || parsed > 3600) {
      return bad_request("'seconds' must be a number in (0, 3600], got '" + v.substr(0, 40) + "'", "seconds");
    }
    seconds = parsed;
  }
  const TimePoint since = now - std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
  json lanes = json::array();
  for (const cluster::InstanceTimeline& t : backend.timeline(since)) {
    json steps = json::array();
    for (const instance::StepRecord& r : t.steps) {
      steps.push_back(json::array({to_seconds(r.start - now), r.seconds, r.num_prefill_tokens, r.num_decode_tokens,
                                   r.num_prefill_seqs, r.num_decode_seqs, r.phase}));
    }
    lanes.push_back({{"name", t.name}, {"role", t.role}, {"steps", steps}});
  }
  json migrations = json::array();
  for (const cluster::MigrationRecord& m : backend.cluster_stats().recent_migrations) {
    if (m.finished < since) continue;
    migrations.push_back({{"request", m.request.value},
                          {"from", m.from},
                          {"to", m.to},
                          {"reason", m.reason},
                          {"outcome", m.outcome},
                          {"start_s", to_seconds(m.started - now)},
                          {"stop_s", m.stopped == TimePoint{} ? json(nullptr) : json(to_seconds(m.stopped - now))},
                          {"end_s", to_seconds(m.finished - now)},
                          {"context_tokens", m.context_tokens},
                          {"stages", m.stages},
                          {"bytes", m.bytes},
                          {"downtime_s", m.downtime_seconds}});
  }
  return json{{"seconds", seconds},
              {"columns", {"start_s", "duration_s", "prefill_tokens", "decode_tokens", "prefill_seqs", "decode_seqs", "phase"}},
              {"instances", lanes},
              {"migrations", migrations}};
}

AdminReply health_reply(const instance::InstanceStatus& s, bool draining, TimePoint now, Duration heartbeat_timeout,
                        Duration step_timeout) {
  AdminReply r;
  r.status = 503;
  if (draining) {
    r.body = json{{"status", "draining"}};
  } else if (!s.running) {
    r.body = json{{"status", "instance loop not running"}};
  } else if (!instance::loop_alive(s, now, heartbeat_timeout, step_timeout)) {
    const double age = to_seconds(now - (s.in_step ? s.step_started : s.last_heartbeat));
    r.body = json{{"status", s.in_step ? fmt::format("instance step has run {:.1f} s", age)
                                       : fmt::format("instance loop heartbeat is {:.1f} s old", age)}};
  } else {
    r.status = 200;
    r.body = json{{"status", "ok"}};
  }
  return r;
}

}  // namespace ecoserve::server
