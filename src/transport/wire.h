// The router <-> instance wire format: versioned msgpack messages carried one per
// ZeroMQ frame (see transport/socket_loop.h for the sockets).
//
// Every message is a msgpack array [magic, version, kind, call, body...]:
//   magic   "ecoserve" (a stray client is told apart from a peer at once)
//   version kWireVersion of the sender. The first four elements never change
//           between versions, so any version can read a peer's version and a
//           kError, and a router and an instance of different versions refuse
//           each other with a clear error (decode() returns FAILED_PRECONDITION
//           naming both versions; the receiver answers kError).
//   kind    Kind below
//   call    the caller's id for replies (kHelloReply, kAck, kStatusReply,
//           kTimelineReply, kKvReply, kMigrateChunk, kError answer the call
//           with this id);
//           0 when no reply is wanted
//   body    positional fields of the kind (Message documents which)
//
// Times cross processes as ages ("seconds before the sender's now"), never as
// clock readings: encode() takes the sender's now, decode() the receiver's.
//
// decode() is a parser of untrusted bytes: it never throws, bounds every length
// before allocating (Limits), and is fuzzed (fuzz/wire_fuzz.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "base/instance_types.h"

namespace ecoserve::transport {

// Bump on any change of a body's layout.
// (New kinds count too: a peer that cannot read them must refuse the hello, not
// time out on its first migration.)
inline constexpr uint32_t kWireVersion = 4;  // 2: SLOs, phases; 3: live migration; 4: the status's step age

enum class Kind : uint8_t {
  kHello = 1,        // router -> instance: first message; answered by kHelloReply or kError
  kHelloReply,       // info
  kSubmit,           // request; answered by kAck; then kEvent per token (call = 0)
  kSubmitPrefilled,  // request, output_tokens, kv; answered by kAck
  kAck,              // code, error
  kCancel,           // id
  kEvent,            // event
  kStatus,           // answered by kStatusReply
  kStatusReply,      // status (last_heartbeat as an age), info.boot_id
  kTimeline,         // seconds (the window); answered by kTimelineReply
  kTimelineReply,    // steps
  kTakeKv,           // id; answered by kKvReply
  kKvReply,          // code, error, kv
  kFreeze,           // seconds: test hook (instances started with --test-hooks)
  kError,            // code, error: the request could not be read or is refused
  // Live migration (llumnix), router -> instance; see GenerationBackend's migrate_*.
  kMigrateOut,        // id, begin, stop; answered by kMigrateChunk
  kMigrateChunk,      // code, error, chunk
  kMigrateOutFinish,  // id, committed; answered by kAck
  kMigrateInReserve,  // id, num_tokens; answered by kAck
  kMigrateInLoad,     // id, chunk; answered by kAck
  kMigrateInCommit,   // chunk (the last stage: its handover names the request); answered
                      // by kAck; then kEvent per token (call = 0), as after kSubmit
  kMigrateInCancel,   // id (no reply)
};
inline constexpr Kind kLastKind = Kind::kMigrateInCancel;
const char* kind_name(Kind kind);

// What an instance says of itself (kHelloReply; boot_id also in kStatusReply).
struct InstanceInfo {
  std::string name;        // how it calls itself (its listen address)
  std::string role;        // "mixed" | "prefill" | "decode"
  int32_t max_context = 0;
  int32_t block_size = 0;
  std::string model_path;  // the GGUF it serves, as a path on the instance's host
  std::string model_id;    // file name and size: routers check their instances agree
  uint64_t boot_id = 0;    // random per process: a restarted instance is a new one
  std::string policy;      // its scheduling policy ("chunked", "temporal", ...): padg needs "temporal"
};

struct Message {
  Kind kind = Kind::kError;
  uint64_t call = 0;
  InstanceInfo info;                        // kHelloReply; kStatusReply (boot_id only)
  instance::GenerationRequest request;      // kSubmit, kSubmitPrefilled
  std::vector<int32_t> output_tokens;       // kSubmitPrefilled
  std::vector<uint8_t> kv;                  // kSubmitPrefilled, kKvReply (a chunk's KV is chunk.kv)
  instance::TokenEvent event;               // kEvent
  instance::InstanceStatus status;          // kStatusReply
  std::vector<instance::StepRecord> steps;  // kTimelineReply
  double seconds = 0.0;                     // kTimeline, kFreeze
  RequestId id;                             // kCancel, kTakeKv, kMigrate* but kMigrateChunk and kMigrateInCommit
  StatusCode code = StatusCode::kOk;        // kAck, kKvReply, kMigrateChunk, kError
  std::string error;                        // kAck, kKvReply, kMigrateChunk, kError
  // Live migration.
  int32_t begin = 0;                        // kMigrateOut: first position to copy (>= 0)
  bool stop = false;                        // kMigrateOut: stop-and-copy
  bool committed = false;                   // kMigrateOutFinish
  int32_t num_tokens = 0;                   // kMigrateInReserve: positions to reserve (>= 0)
  // kMigrateChunk, kMigrateInLoad, kMigrateInCommit. Decoded only when consistent:
  // 0 <= begin <= end <= num_tokens, KV bytes exactly when begin < end, a handover
  // exactly when `last`; then the request has generated tokens, end is its last
  // computed position (prompt + output - 1 = num_tokens - 1) and the cached prompt
  // tokens are within the prompt. Times cross as ages.
  instance::MigrationChunk chunk;
};

// Bounds decode() enforces before it allocates.
struct Limits {
  uint32_t max_tokens = 1u << 20;         // per token list (prompt, outputs, stop ids)
  uint32_t max_string_bytes = 1u << 16;   // names, paths, error texts
  uint64_t max_kv_bytes = 4ull << 30;     // one KV blob
  uint32_t max_steps = 1u << 16;          // per timeline reply
  uint32_t max_top_logprobs = 64;
};

std::vector<uint8_t> encode(const Message& m, TimePoint now);
StatusOr<Message> decode(std::span<const uint8_t> bytes, TimePoint now, const Limits& limits = {});

// Shorthands for the common messages.
Message error_message(uint64_t call, const Status& s);
Message ack_message(uint64_t call, const Status& s);

}  // namespace ecoserve::transport
