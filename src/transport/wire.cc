#include "transport/wire.h"

#include <msgpack.hpp>

#include <cmath>
#include <limits>
#include <exception>
#include <string_view>

namespace ecoserve::transport {

namespace {

constexpr std::string_view kMagic = "ecoserve";

using Packer = msgpack::packer<msgpack::sbuffer>;

// msgpack-c packs an integral float as an integer, and for exactly 2^64 its range
// check passes and the conversion to uint64_t is undefined. 2^64 goes out as the
// integer 2^64 - 1 instead, which reads back (as a double or float) as 2^64 exactly.
constexpr double kTwoTo64 = 18446744073709551616.0;
void pack_f64(Packer& p, double v) {
  if (v == kTwoTo64) {
    p.pack_uint64(std::numeric_limits<uint64_t>::max());
  } else {
    p.pack_double(v);
  }
}
void pack_f32(Packer& p, float v) {
  if (static_cast<double>(v) == kTwoTo64) {
    p.pack_uint64(std::numeric_limits<uint64_t>::max());
  } else {
    p.pack_float(v);
  }
}

double age_of(TimePoint t, TimePoint now) { return t == TimePoint{} ? -1.0 : to_seconds(now - t); }
TimePoint time_of(double age, TimePoint now) {
  if (!(age >= 0.0) || !std::isfinite(age)) return TimePoint{};
  age = std::min(age, 1e6);  // an age beyond ~11 days is a broken peer: keep the cast defined
  return now - std::chrono::duration_cast<Duration>(std::chrono::duration<double>(age));
}

void pack_str(Packer& p, std::string_view s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}
void pack_tokens(Packer& p, const std::vector<int32_t>& v) {
  p.pack_array(static_cast<uint32_t>(v.size()));
  for (int32_t t : v) p.pack_int32(t);
}
void pack_bin(Packer& p, const std::vector<uint8_t>& v) {
  p.pack_bin(static_cast<uint32_t>(v.size()));
  p.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<uint32_t>(v.size()));
}

void pack_request(Packer& p, const instance::GenerationRequest& r) {
  const SamplingParams& s = r.sampling;
  p.pack_array(6);
  p.pack_uint64(r.id.value);
  pack_tokens(p, r.prompt);
  p.pack_array(14);
  pack_f32(p, s.temperature);
  p.pack_int32(s.top_k);
  pack_f32(p, s.top_p);
  pack_f32(p, s.min_p);
  pack_f32(p, s.repetition_penalty);
  pack_f32(p, s.frequency_penalty);
  pack_f32(p, s.presence_penalty);
  p.pack_uint64(s.seed);
  p.pack(s.has_seed);
  p.pack_int32(s.top_logprobs);
  p.pack(s.logprobs);
  p.pack_int32(s.max_tokens);
  pack_tokens(p, s.stop_token_ids);
  p.pack(s.ignore_eos);
  p.pack_int32(r.priority);
  pack_f64(p, to_seconds(r.slo_ttft));
  pack_f64(p, to_seconds(r.slo_tpot));
}

void pack_event(Packer& p, const instance::TokenEvent& e, TimePoint now) {
  p.pack_array(10);
  p.pack_uint64(e.id.value);
  p.pack_int32(e.token);
  pack_f32(p, e.logprob);
  p.pack_array(static_cast<uint32_t>(e.top_logprobs.size()));
  for (const TokenLogprob& t : e.top_logprobs) {
    p.pack_array(2);
    p.pack_int32(t.token);
    pack_f32(p, t.logprob);
  }
  p.pack(e.finished);
  pack_str(p, e.finish_reason);
  pack_str(p, e.error);
  p.pack_int32(e.prompt_tokens);
  p.pack_int32(e.cached_prompt_tokens);
  pack_f64(p, age_of(e.scheduled_time, now));
}

void pack_status(Packer& p, const instance::InstanceStatus& s, TimePoint now) {
  p.pack_array(24);
  p.pack_int32(s.num_waiting);
  p.pack_int32(s.num_running);
  p.pack_int32(s.num_swapped);
  pack_f64(p, s.kv_usage);
  p.pack_int64(s.num_waiting_tokens);
  p.pack_int64(s.num_running_tokens);
  p.pack_int32(s.num_free_blocks);
  p.pack_int32(s.num_total_blocks);
  p.pack_int32(s.block_size);
  pack_f64(p, age_of(s.last_heartbeat, now));
  p.pack(s.running);
  p.pack_int64(s.steps);
  pack_f64(p, s.last_step_seconds);
  pack_f64(p, s.mean_step_seconds);
  pack_f64(p, s.mean_plan_seconds);
  p.pack_int64(s.prompt_tokens_total);
  p.pack_int64(s.generation_tokens_total);
  p.pack_int64(s.prefix_cache_queries);
  p.pack_int64(s.prefix_cache_hits);
  p.pack_int64(s.preemptions);
  p.pack_int32(s.phase);
  pack_f64(p, s.last_phase_switch == TimePoint{} ? -1.0 : age_of(s.last_phase_switch, now));
  p.pack_int64(s.phase_switches);
  pack_f64(p, s.in_step ? std::max(0.0, to_seconds(now - s.step_started)) : -1.0);  // the step's age; -1 between steps
}

void pack_info(Packer& p, const InstanceInfo& i) {
  p.pack_array(8);
  pack_str(p, i.name);
  pack_str(p, i.role);
  p.pack_int32(i.max_context);
  p.pack_int32(i.block_size);
  pack_str(p, i.model_path);
  pack_str(p, i.model_id);
  p.pack_uint64(i.boot_id);
  pack_str(p, i.policy);
}

// [kv, begin, end, num_tokens, last, handover or nil]; the handover is
// [request, output_tokens, arrival, scheduled, first_token_time (ages), num_cached_prompt_tokens].
void pack_chunk(Packer& p, const instance::MigrationChunk& c, TimePoint now) {
  p.pack_array(6);
  pack_bin(p, c.kv);
  p.pack_int32(c.begin);
  p.pack_int32(c.end);
  p.pack_int32(c.num_tokens);
  p.pack(c.last);
  if (!c.last) {
    p.pack_nil();
    return;
  }
  const instance::MigrationHandover& h = c.handover;
  p.pack_array(6);
  pack_request(p, h.request);
  pack_tokens(p, h.output_tokens);
  pack_f64(p, age_of(h.arrival, now));
  pack_f64(p, age_of(h.scheduled, now));
  pack_f64(p, age_of(h.first_token_time, now));
  p.pack_int32(h.num_cached_prompt_tokens);
}

// --- decoding ---

// Reads the elements of one msgpack array in order; the first failure sticks and
// later reads return defaults, so a decoder reads a whole body and checks once.
class Reader {
 public:
  Reader(const msgpack::object& o, const Limits& limits, std::string what, Status* status)
      : limits_(limits), what_(std::move(what)), status_(status) {
    if (o.type != msgpack::type::ARRAY) {
      fail("is not an array");
      return;
    }
    arr_ = o.via.array.ptr;
    size_ = o.via.array.size;
  }
  bool ok() const { return status_->ok(); }
  // Fewer elements than `n` is an error; more are allowed (a later minor addition).
  bool need(uint32_t n) {
    if (ok() && size_ < n) fail("has " + std::to_string(size_) + " fields, needs " + std::to_string(n));
    return ok();
  }
  const msgpack::object* next() {
    if (!ok()) return nullptr;
    if (i_ >= size_) {
      fail("ends early");
      return nullptr;
    }
    return &arr_[i_++];
  }
  int64_t i64(int64_t lo, int64_t hi) {
    const msgpack::object* o = next();
    if (!o) return 0;
    int64_t v = 0;
    if (o->type == msgpack::type::POSITIVE_INTEGER) {
      if (o->via.u64 > static_cast<uint64_t>(INT64_MAX)) return fail_at("integer out of range"), 0;
      v = static_cast<int64_t>(o->via.u64);
    } else if (o->type == msgpack::type::NEGATIVE_INTEGER) {
      v = o->via.i64;
    } else {
      return fail_at("is not an integer"), 0;
    }
    if (v < lo || v > hi) return fail_at("integer " + std::to_string(v) + " out of range"), 0;
    return v;
  }
  int32_t i32() { return static_cast<int32_t>(i64(INT32_MIN, INT32_MAX)); }
  uint64_t u64() {
    const msgpack::object* o = next();
    if (!o) return 0;
    if (o->type != msgpack::type::POSITIVE_INTEGER) return fail_at("is not an unsigned integer"), 0;
    return o->via.u64;
  }
  double f64() {
    const msgpack::object* o = next();
    if (!o) return 0.0;
    switch (o->type) {
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64: return o->via.f64;
      case msgpack::type::POSITIVE_INTEGER: return static_cast<double>(o->via.u64);
      case msgpack::type::NEGATIVE_INTEGER: return static_cast<double>(o->via.i64);
      default: return fail_at("is not a number"), 0.0;
    }
  }
  // A float: a finite double beyond float's range is an error (converting it would
  // be undefined); infinities and NaN convert as they are.
  float f32() {
    const double v = f64();
    if (ok() && std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max()) {
      return fail_at("is out of float range"), 0.0f;
    }
    return static_cast<float>(v);
  }
  // A sampling parameter: finite and within +-1e6 (the server accepts far less;
  // msgpack-c's packer converts an integral float of 2^64 to uint64_t, undefined).
  float sampling() {
    const float v = f32();
    if (ok() && !(std::isfinite(v) && std::fabs(v) <= 1e6f)) return fail_at("sampling parameter out of range"), 0.0f;
    return v;
  }
  // A duration in seconds: finite, in [0, 1e6].
  double seconds() {
    const double v = f64();
    if (ok() && !(v >= 0.0 && v <= 1e6)) return fail_at("seconds out of range"), 0.0;
    return v;
  }
  bool boolean() {
    const msgpack::object* o = next();
    if (!o) return false;
    if (o->type != msgpack::type::BOOLEAN) return fail_at("is not a boolean"), false;
    return o->via.boolean;
  }
  std::string str() {
    const msgpack::object* o = next();
    if (!o) return {};
    if (o->type != msgpack::type::STR) return fail_at("is not a string"), std::string();
    if (o->via.str.size > limits_.max_string_bytes) return fail_at("string too long"), std::string();
    return std::string(o->via.str.ptr, o->via.str.size);
  }
  std::vector<uint8_t> bin() {
    const msgpack::object* o = next();
    if (!o) return {};
    if (o->type != msgpack::type::BIN) return fail_at("is not binary"), std::vector<uint8_t>();
    if (o->via.bin.size > limits_.max_kv_bytes) return fail_at("binary too large"), std::vector<uint8_t>();
    const auto* p = reinterpret_cast<const uint8_t*>(o->via.bin.ptr);
    return std::vector<uint8_t>(p, p + o->via.bin.size);
  }
  std::vector<int32_t> tokens() {
    std::vector<int32_t> out;
    const msgpack::object* o = next();
    if (!o) return out;
    if (o->type != msgpack::type::ARRAY) return fail_at("is not a token list"), out;
    if (o->via.array.size > limits_.max_tokens) return fail_at("token list too long"), out;
    Reader r(*o, limits_, field_name(), status_);
    out.reserve(o->via.array.size);
    for (uint32_t k = 0; k < o->via.array.size && r.ok(); ++k) out.push_back(r.i32());
    return out;
  }
  // A nested array, read by its own Reader (errors land in the same status).
  Reader sub(uint32_t max_size, uint32_t need_fields) {
    const msgpack::object* o = next();
    static const msgpack::object kNil;
    Reader r(o ? *o : kNil, limits_, field_name(), status_);
    if (r.ok() && r.size_ > max_size) r.fail("has too many elements");
    r.need(need_fields);
    return r;
  }
  uint32_t size() const { return size_; }
  bool is_nil_next() const { return ok() && i_ < size_ && arr_[i_].type == msgpack::type::NIL; }
  // Refuses the message (the first failure sticks), naming this array.
  void refuse(const std::string& why) { fail(why); }

 private:
  void fail(const std::string& why) {
    if (ok()) *status_ = invalid_argument_error("wire: {} {}", what_, why);
  }
  void fail_at(const std::string& why) { fail("field " + std::to_string(i_ - 1) + " " + why); }
  std::string field_name() const { return what_ + "[" + std::to_string(i_ - 1) + "]"; }

  const Limits& limits_;
  std::string what_;
  Status* status_;
  const msgpack::object* arr_ = nullptr;
  uint32_t size_ = 0;
  uint32_t i_ = 0;
};

void read_request(Reader r, instance::GenerationRequest& q) {
  if (!r.need(6)) return;
  q.id = RequestId(r.u64());
  q.prompt = r.tokens();
  Reader s = r.sub(64, 14);
  SamplingParams& p = q.sampling;
  p.temperature = s.sampling();
  p.top_k = s.i32();
  p.top_p = s.sampling();
  p.min_p = s.sampling();
  p.repetition_penalty = s.sampling();
  p.frequency_penalty = s.sampling();
  p.presence_penalty = s.sampling();
  p.seed = s.u64();
  p.has_seed = s.boolean();
  p.top_logprobs = s.i32();
  p.logprobs = s.boolean();
  p.max_tokens = s.i32();
  p.stop_token_ids = s.tokens();
  p.ignore_eos = s.boolean();
  q.priority = r.i32();
  q.slo_ttft = from_seconds(r.seconds());
  q.slo_tpot = from_seconds(r.seconds());
}

void read_event(Reader r, instance::TokenEvent& e, const Limits& limits, TimePoint now) {
  if (!r.need(10)) return;
  e.id = RequestId(r.u64());
  e.token = r.i32();
  e.logprob = r.f32();
  Reader tops = r.sub(limits.max_top_logprobs, 0);
  for (uint32_t k = 0; k < tops.size() && tops.ok(); ++k) {
    Reader pair = tops.sub(2, 2);
    TokenLogprob t;
    t.token = pair.i32();
    t.logprob = pair.f32();
    e.top_logprobs.push_back(t);
  }
  e.finished = r.boolean();
  e.finish_reason = r.str();
  e.error = r.str();
  e.prompt_tokens = r.i32();
  e.cached_prompt_tokens = r.i32();
  e.scheduled_time = time_of(r.f64(), now);
}

void read_chunk(Reader r, instance::MigrationChunk& c, TimePoint now) {
  if (!r.need(6)) return;
  c.kv = r.bin();
  c.begin = static_cast<int32_t>(r.i64(0, INT32_MAX));
  c.end = static_cast<int32_t>(r.i64(c.begin, INT32_MAX));
  c.num_tokens = static_cast<int32_t>(r.i64(c.end, INT32_MAX));
  c.last = r.boolean();
  if (!r.ok()) return;
  if (c.kv.empty() != (c.begin == c.end)) return r.refuse("carries KV bytes exactly when begin < end");
  if (!c.last) {
    if (!r.is_nil_next()) return r.refuse("has a handover but is not the last stage");
    return;
  }
  Reader h = r.sub(64, 6);
  instance::MigrationHandover& m = c.handover;
  read_request(h.sub(64, 6), m.request);
  m.output_tokens = h.tokens();
  m.arrival = time_of(h.f64(), now);
  m.scheduled = time_of(h.f64(), now);
  m.first_token_time = time_of(h.f64(), now);
  m.num_cached_prompt_tokens = static_cast<int32_t>(h.i64(0, INT32_MAX));
  if (!h.ok()) return;
  const int64_t tokens = static_cast<int64_t>(m.request.prompt.size()) + static_cast<int64_t>(m.output_tokens.size());
  if (m.output_tokens.empty()) return h.refuse("hands over a request with no generated token");
  if (c.num_tokens != tokens || c.end != tokens - 1) {
    return h.refuse("does not match the stage: " + std::to_string(tokens) + " tokens, stage ends at " +
                    std::to_string(c.end) + " of " + std::to_string(c.num_tokens));
  }
  if (m.num_cached_prompt_tokens > static_cast<int64_t>(m.request.prompt.size())) {
    return h.refuse("caches more prompt tokens than the prompt has");
  }
}

void read_status(Reader r, instance::InstanceStatus& s, TimePoint now) {
  if (!r.need(24)) return;
  s.num_waiting = r.i32();
  s.num_running = r.i32();
  s.num_swapped = r.i32();
  s.kv_usage = r.f64();
  s.num_waiting_tokens = r.i64(INT64_MIN, INT64_MAX);
  s.num_running_tokens = r.i64(INT64_MIN, INT64_MAX);
  s.num_free_blocks = r.i32();
  s.num_total_blocks = r.i32();
  s.block_size = r.i32();
  s.last_heartbeat = time_of(r.f64(), now);
  s.running = r.boolean();
  s.steps = r.i64(INT64_MIN, INT64_MAX);
  s.last_step_seconds = r.f64();
  s.mean_step_seconds = r.f64();
  s.mean_plan_seconds = r.f64();
  s.prompt_tokens_total = r.i64(INT64_MIN, INT64_MAX);
  s.generation_tokens_total = r.i64(INT64_MIN, INT64_MAX);
  s.prefix_cache_queries = r.i64(INT64_MIN, INT64_MAX);
  s.prefix_cache_hits = r.i64(INT64_MIN, INT64_MAX);
  s.preemptions = r.i64(INT64_MIN, INT64_MAX);
  s.phase = static_cast<int32_t>(r.i64(0, 2));
  s.last_phase_switch = time_of(r.f64(), now);  // -1: never switched
  s.phase_switches = r.i64(0, INT64_MAX);
  const double step_age = r.f64();
  s.in_step = step_age >= 0.0 && std::isfinite(step_age);
  s.step_started = s.in_step ? time_of(step_age, now) : TimePoint{};
}

void read_info(Reader r, InstanceInfo& i) {
  if (!r.need(8)) return;
  i.name = r.str();
  i.role = r.str();
  i.max_context = r.i32();
  i.block_size = r.i32();
  i.model_path = r.str();
  i.model_id = r.str();
  i.boot_id = r.u64();
  i.policy = r.str();
}

// A pre-pass that allocates nothing: msgpack's unpacker allocates an array's
// element table when it reads the header, so a few bytes claiming 2^20-element
// arrays would cost gigabytes. Every element takes at least one byte of input, so
// the claimed elements of all arrays together cannot exceed the input's length.
struct SizeCheck : msgpack::null_visitor {
  explicit SizeCheck(size_t len) : budget(len) {}
  bool start_array(uint32_t n) { return take(n); }
  bool start_map(uint32_t n) { return take(2ull * n); }
  bool take(uint64_t n) {
    if (n > budget) return false;
    budget -= n;
    return true;
  }
  void parse_error(size_t, size_t) {}
  void insufficient_bytes(size_t, size_t) {}
  uint64_t budget;
};

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kHello: return "hello";
    case Kind::kHelloReply: return "hello_reply";
    case Kind::kSubmit: return "submit";
    case Kind::kSubmitPrefilled: return "submit_prefilled";
    case Kind::kAck: return "ack";
    case Kind::kCancel: return "cancel";
    case Kind::kEvent: return "event";
    case Kind::kStatus: return "status";
    case Kind::kStatusReply: return "status_reply";
    case Kind::kTimeline: return "timeline";
    case Kind::kTimelineReply: return "timeline_reply";
    case Kind::kTakeKv: return "take_kv";
    case Kind::kKvReply: return "kv_reply";
    case Kind::kFreeze: return "freeze";
    case Kind::kError: return "error";
    case Kind::kMigrateOut: return "migrate_out";
    case Kind::kMigrateChunk: return "migrate_chunk";
    case Kind::kMigrateOutFinish: return "migrate_out_finish";
    case Kind::kMigrateInReserve: return "migrate_in_reserve";
    case Kind::kMigrateInLoad: return "migrate_in_load";
    case Kind::kMigrateInCommit: return "migrate_in_commit";
    case Kind::kMigrateInCancel: return "migrate_in_cancel";
  }
  return "unknown";
}

std::vector<uint8_t> encode(const Message& m, TimePoint now) {
  msgpack::sbuffer buf(256 + m.kv.size() + m.chunk.kv.size());
  Packer p(&buf);
  auto head = [&](uint32_t body_fields) {
    p.pack_array(4 + body_fields);
    pack_str(p, kMagic);
    p.pack_uint32(kWireVersion);
    p.pack_uint8(static_cast<uint8_t>(m.kind));
    p.pack_uint64(m.call);
  };
  switch (m.kind) {
    case Kind::kHello:
    case Kind::kStatus: head(0); break;
    case Kind::kHelloReply: head(1), pack_info(p, m.info); break;
    case Kind::kSubmit: head(1), pack_request(p, m.request); break;
    case Kind::kSubmitPrefilled:
      head(3), pack_request(p, m.request), pack_tokens(p, m.output_tokens), pack_bin(p, m.kv);
      break;
    case Kind::kAck:
    case Kind::kError: head(2), p.pack_int32(static_cast<int32_t>(m.code)), pack_str(p, m.error); break;
    case Kind::kCancel:
    case Kind::kTakeKv: head(1), p.pack_uint64(m.id.value); break;
    case Kind::kEvent: head(1), pack_event(p, m.event, now); break;
    case Kind::kStatusReply: head(2), pack_status(p, m.status, now), p.pack_uint64(m.info.boot_id); break;
    case Kind::kTimeline:
    case Kind::kFreeze: head(1), pack_f64(p, m.seconds); break;
    case Kind::kTimelineReply:
      head(1);
      p.pack_array(static_cast<uint32_t>(m.steps.size()));
      for (const instance::StepRecord& s : m.steps) {
        p.pack_array(7);
        pack_f64(p, age_of(s.start, now));
        pack_f64(p, s.seconds);
        p.pack_int32(s.num_prefill_seqs);
        p.pack_int32(s.num_decode_seqs);
        p.pack_int64(s.num_prefill_tokens);
        p.pack_int64(s.num_decode_tokens);
        p.pack_int32(s.phase);
      }
      break;
    case Kind::kKvReply:
      head(3), p.pack_int32(static_cast<int32_t>(m.code)), pack_str(p, m.error), pack_bin(p, m.kv);
      break;
    case Kind::kMigrateOut: head(3), p.pack_uint64(m.id.value), p.pack_int32(m.begin), p.pack(m.stop); break;
    case Kind::kMigrateChunk:
      head(3), p.pack_int32(static_cast<int32_t>(m.code)), pack_str(p, m.error), pack_chunk(p, m.chunk, now);
      break;
    case Kind::kMigrateOutFinish: head(2), p.pack_uint64(m.id.value), p.pack(m.committed); break;
    case Kind::kMigrateInReserve: head(2), p.pack_uint64(m.id.value), p.pack_int32(m.num_tokens); break;
    case Kind::kMigrateInLoad: head(2), p.pack_uint64(m.id.value), pack_chunk(p, m.chunk, now); break;
    case Kind::kMigrateInCommit: head(1), pack_chunk(p, m.chunk, now); break;
    case Kind::kMigrateInCancel: head(1), p.pack_uint64(m.id.value); break;
  }
  const auto* d = reinterpret_cast<const uint8_t*>(buf.data());
  return std::vector<uint8_t>(d, d + buf.size());
}

StatusOr<Message> decode(std::span<const uint8_t> bytes, TimePoint now, const Limits& limits) {
  const char* data = reinterpret_cast<const char*>(bytes.data());
  SizeCheck check(bytes.size());
  size_t off = 0;
  try {
    if (!msgpack::parse(data, bytes.size(), off, check) || off != bytes.size()) {
      return invalid_argument_error("wire: not one msgpack value ({} bytes)", bytes.size());
    }
  } catch (const std::exception& e) {
    return invalid_argument_error("wire: not msgpack: {}", e.what());
  }
  msgpack::object_handle handle;
  try {
    off = 0;
    bool referenced = false;
    // Binary bodies (KV blobs) are referenced in place, not copied into the zone.
    auto reference_bin = [](msgpack::type::object_type t, std::size_t, void*) { return t == msgpack::type::BIN; };
    const msgpack::unpack_limit bounds(limits.max_tokens, 0, limits.max_string_bytes,
                                       static_cast<std::size_t>(std::min<uint64_t>(limits.max_kv_bytes, 0xffffffffu)),
                                       0, 8);
    handle = msgpack::unpack(data, bytes.size(), off, referenced, reference_bin, nullptr, bounds);
  } catch (const std::exception& e) {
    return invalid_argument_error("wire: not msgpack within limits: {}", e.what());
  }
  Status status = ok_status();
  Reader r(handle.get(), limits, "message", &status);
  if (!r.need(4)) return status;
  if (r.str() != kMagic || !r.ok()) return invalid_argument_error("wire: not an ecoserve message (no magic)");
  const uint64_t version = r.u64();
  if (!r.ok()) return status;
  if (version != kWireVersion) {
    return failed_precondition_error("wire version mismatch: the peer speaks version {}, this ecoserve version {}",
                                     version, kWireVersion);
  }
  const int64_t kind = r.i64(1, static_cast<int64_t>(kLastKind));
  if (!r.ok()) return invalid_argument_error("wire: unknown message kind");
  Message m;
  m.kind = static_cast<Kind>(kind);
  m.call = r.u64();
  auto read_code = [&] {
    const int64_t c = r.i64(0, static_cast<int64_t>(StatusCode::kUnauthenticated));
    m.code = static_cast<StatusCode>(c);
  };
  switch (m.kind) {
    case Kind::kHello:
    case Kind::kStatus: break;
    case Kind::kHelloReply: read_info(r.sub(64, 7), m.info); break;
    case Kind::kSubmit: read_request(r.sub(64, 4), m.request); break;
    case Kind::kSubmitPrefilled:
      read_request(r.sub(64, 4), m.request);
      m.output_tokens = r.tokens();
      m.kv = r.bin();
      break;
    case Kind::kAck:
    case Kind::kError: read_code(), m.error = r.str(); break;
    case Kind::kCancel:
    case Kind::kTakeKv: m.id = RequestId(r.u64()); break;
    case Kind::kEvent: read_event(r.sub(64, 10), m.event, limits, now); break;
    case Kind::kStatusReply: read_status(r.sub(64, 20), m.status, now), m.info.boot_id = r.u64(); break;
    case Kind::kTimeline:
    case Kind::kFreeze:
      m.seconds = r.f64();
      if (r.ok() && !(m.seconds >= 0.0 && m.seconds <= 1e6)) return invalid_argument_error("wire: seconds out of range");
      break;
    case Kind::kTimelineReply: {
      Reader steps = r.sub(limits.max_steps, 0);
      for (uint32_t k = 0; k < steps.size() && steps.ok(); ++k) {
        Reader s = steps.sub(16, 7);
        instance::StepRecord rec;
        rec.start = time_of(s.f64(), now);
        rec.seconds = s.f64();
        rec.num_prefill_seqs = s.i32();
        rec.num_decode_seqs = s.i32();
        rec.num_prefill_tokens = s.i64(INT64_MIN, INT64_MAX);
        rec.num_decode_tokens = s.i64(INT64_MIN, INT64_MAX);
        rec.phase = static_cast<int32_t>(s.i64(0, 2));
        m.steps.push_back(rec);
      }
      break;
    }
    case Kind::kKvReply: read_code(), m.error = r.str(), m.kv = r.bin(); break;
    case Kind::kMigrateOut:
      m.id = RequestId(r.u64());
      m.begin = static_cast<int32_t>(r.i64(0, INT32_MAX));
      m.stop = r.boolean();
      break;
    case Kind::kMigrateChunk: read_code(), m.error = r.str(), read_chunk(r.sub(64, 6), m.chunk, now); break;
    case Kind::kMigrateOutFinish: m.id = RequestId(r.u64()), m.committed = r.boolean(); break;
    case Kind::kMigrateInReserve:
      m.id = RequestId(r.u64());
      m.num_tokens = static_cast<int32_t>(r.i64(0, INT32_MAX));
      break;
    case Kind::kMigrateInLoad: m.id = RequestId(r.u64()), read_chunk(r.sub(64, 6), m.chunk, now); break;
    case Kind::kMigrateInCommit: read_chunk(r.sub(64, 6), m.chunk, now); break;
    case Kind::kMigrateInCancel: m.id = RequestId(r.u64()); break;
  }
  if (!status.ok()) return status;
  return m;
}

Message error_message(uint64_t call, const Status& s) {
  Message m;
  m.kind = Kind::kError;
  m.call = call;
  m.code = s.code();
  m.error = s.message();
  return m;
}

Message ack_message(uint64_t call, const Status& s) {
  Message m = error_message(call, s);
  m.kind = Kind::kAck;
  return m;
}

}  // namespace ecoserve::transport
