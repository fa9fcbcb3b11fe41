#include "server/admin_api.h"

#include <chrono>
#include <cstdlib>

namespace ecoserve::server {

using nlohmann::json;

json admin_cluster_json(const cluster::GenerationBackend& backend, const std::string& model_name, TimePoint now) {
  json list = json::array();
  for (const cluster::InstanceReport& r : backend.instances()) {
    const instance::InstanceStatus& s = r.status;
    list.push_back({{"name", r.name},
                    {"role", r.role},
                    {"healthy", r.healthy},
                    {"heartbeat_age_seconds", to_seconds(now - s.last_heartbeat)},
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
  return json{{"model", model_name},
              {"instances", list},
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
                {"local_prefills", c.local_prefills}}}};
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
                                   r.num_prefill_seqs, r.num_decode_seqs}));
    }
    lanes.push_back({{"name", t.name}, {"role", t.role}, {"steps", steps}});
  }
  return json{{"seconds", seconds},
              {"columns", {"start_s", "duration_s", "prefill_tokens", "decode_tokens", "prefill_seqs", "decode_seqs"}},
              {"instances", lanes}};
}

}  // namespace ecoserve::server
