// Fuzz target: the router <-> instance wire format (transport::decode), which
// reads bytes from any peer that connects to an instance's or router's port.
//
// Properties: decode() never crashes, throws or allocates beyond its Limits; a
// message it accepts encodes again, and that encoding decodes to the same kind,
// call, ids, token lists, KV bytes and migration stages (encode/decode are
// inverse on what decode accepts), and an accepted migration stage is consistent
// (positions ordered, KV exactly for a non-empty range, a handover that matches).
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_util.h"
#include "transport/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ecoserve;
  const TimePoint now = TimePoint{} + std::chrono::hours(1);
  StatusOr<transport::Message> m = transport::decode(std::span<const uint8_t>(data, size), now);
  if (!m.ok()) {
    FUZZ_CHECK(m.status().code() == StatusCode::kInvalidArgument ||
                   m.status().code() == StatusCode::kFailedPrecondition,
               m.status().to_string());
    return 0;
  }
  const std::vector<uint8_t> again = transport::encode(*m, now);
  StatusOr<transport::Message> m2 = transport::decode(again, now);
  FUZZ_CHECK(m2.ok(), m2.status().to_string());
  FUZZ_CHECK(m2->kind == m->kind && m2->call == m->call, std::string(transport::kind_name(m->kind)));
  FUZZ_CHECK(m2->id == m->id && m2->request.id == m->request.id && m2->event.id == m->event.id);
  FUZZ_CHECK(m2->request.prompt == m->request.prompt && m2->output_tokens == m->output_tokens);
  FUZZ_CHECK(m2->request.sampling.stop_token_ids == m->request.sampling.stop_token_ids);
  FUZZ_CHECK(m2->kv == m->kv && m2->error == m->error && m2->code == m->code);
  FUZZ_CHECK(m2->info.name == m->info.name && m2->info.boot_id == m->info.boot_id);
  FUZZ_CHECK(m2->steps.size() == m->steps.size() && m2->event.top_logprobs.size() == m->event.top_logprobs.size());
  // Live migration: the call fields and the stage (KV, positions, handover).
  FUZZ_CHECK(m2->begin == m->begin && m2->stop == m->stop && m2->committed == m->committed &&
             m2->num_tokens == m->num_tokens);
  const instance::MigrationChunk &c = m->chunk, &c2 = m2->chunk;
  FUZZ_CHECK(c2.kv == c.kv && c2.begin == c.begin && c2.end == c.end && c2.num_tokens == c.num_tokens &&
             c2.last == c.last);
  FUZZ_CHECK(0 <= c.begin && c.begin <= c.end && c.end <= c.num_tokens && c.kv.empty() == (c.begin == c.end));
  FUZZ_CHECK(c2.handover.request.id == c.handover.request.id && c2.handover.request.prompt == c.handover.request.prompt &&
             c2.handover.output_tokens == c.handover.output_tokens &&
             c2.handover.num_cached_prompt_tokens == c.handover.num_cached_prompt_tokens);
  if (c.last) {
    FUZZ_CHECK(!c.handover.output_tokens.empty() &&
               static_cast<int64_t>(c.handover.request.prompt.size() + c.handover.output_tokens.size()) ==
                   c.num_tokens &&
               c.end == c.num_tokens - 1);
  }
  return 0;
}
