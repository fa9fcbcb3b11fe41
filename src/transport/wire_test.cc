#include "transport/wire.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include <gtest/gtest.h>

#include <msgpack.hpp>

namespace ecoserve::transport {
namespace {

const TimePoint kSent = TimePoint{} + std::chrono::hours(1000);
const TimePoint kReceived = kSent + std::chrono::seconds(5);  // another clock, or later

// A time t crosses as its age: it comes back as kReceived - (kSent - t).
TimePoint moved(TimePoint t) { return kReceived - (kSent - t); }

void expect_near(TimePoint got, TimePoint want) {
  EXPECT_LT(std::abs(to_seconds(got - want)), 1e-6) << to_seconds(got - want);
}

Message round_trip(const Message& m) {
  StatusOr<Message> d = decode(encode(m, kSent), kReceived);
  EXPECT_TRUE(d.ok()) << d.status().to_string();
  if (!d.ok()) return {};
  EXPECT_EQ(d->kind, m.kind);
  EXPECT_EQ(d->call, m.call);
  return *d;
}

instance::GenerationRequest full_request() {
  instance::GenerationRequest r;
  r.id = RequestId(0xfedcba9876543210ull);
  r.prompt = {1, 0, -1, 2147483647, -2147483647 - 1, 300};
  SamplingParams& s = r.sampling;
  s.temperature = 0.75f;
  s.top_k = 40;
  s.top_p = 0.9f;
  s.min_p = 0.05f;
  s.repetition_penalty = 1.1f;
  s.frequency_penalty = -0.5f;
  s.presence_penalty = 0.25f;
  s.seed = 0xffffffffffffffffull;
  s.has_seed = true;
  s.top_logprobs = 5;
  s.logprobs = true;
  s.max_tokens = 123;
  s.stop_token_ids = {2, 13};
  s.ignore_eos = true;
  r.priority = -3;
  return r;
}

void expect_same(const instance::GenerationRequest& a, const instance::GenerationRequest& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.priority, b.priority);
  const SamplingParams &x = a.sampling, &y = b.sampling;
  EXPECT_EQ(x.temperature, y.temperature);
  EXPECT_EQ(x.top_k, y.top_k);
  EXPECT_EQ(x.top_p, y.top_p);
  EXPECT_EQ(x.min_p, y.min_p);
  EXPECT_EQ(x.repetition_penalty, y.repetition_penalty);
  EXPECT_EQ(x.frequency_penalty, y.frequency_penalty);
  EXPECT_EQ(x.presence_penalty, y.presence_penalty);
  EXPECT_EQ(x.seed, y.seed);
  EXPECT_EQ(x.has_seed, y.has_seed);
  EXPECT_EQ(x.top_logprobs, y.top_logprobs);
  EXPECT_EQ(x.logprobs, y.logprobs);
  EXPECT_EQ(x.max_tokens, y.max_tokens);
  EXPECT_EQ(x.stop_token_ids, y.stop_token_ids);
  EXPECT_EQ(x.ignore_eos, y.ignore_eos);
}

TEST(WireTest, HelloAndStatusRequestsCarryOnlyTheirCall) {
  for (Kind k : {Kind::kHello, Kind::kStatus}) {
    Message m;
    m.kind = k;
    m.call = 42;
    round_trip(m);
  }
}

TEST(WireTest, HelloReplyCarriesTheInstanceInfo) {
  Message m;
  m.kind = Kind::kHelloReply;
  m.call = 1;
  m.info = {"tcp://127.0.0.1:5555", "prefill", 2048, 16, "/models/a b.gguf", "a b.gguf:123", 0x123456789abcdefull,
            "prefill-only"};
  const Message d = round_trip(m);
  EXPECT_EQ(d.info.name, m.info.name);
  EXPECT_EQ(d.info.role, "prefill");
  EXPECT_EQ(d.info.max_context, 2048);
  EXPECT_EQ(d.info.block_size, 16);
  EXPECT_EQ(d.info.model_path, m.info.model_path);
  EXPECT_EQ(d.info.model_id, m.info.model_id);
  EXPECT_EQ(d.info.boot_id, m.info.boot_id);
  EXPECT_EQ(d.info.policy, "prefill-only");
}

TEST(WireTest, SubmitCarriesEverySamplingField) {
  Message m;
  m.kind = Kind::kSubmit;
  m.call = 7;
  m.request = full_request();
  expect_same(round_trip(m).request, m.request);
}

TEST(WireTest, SubmitPrefilledMovesAMegabytesKvBlobBitExact) {
  Message m;
  m.kind = Kind::kSubmitPrefilled;
  m.call = 8;
  m.request = full_request();
  m.output_tokens = {17};
  m.kv.resize(3 << 20);
  for (size_t i = 0; i < m.kv.size(); ++i) m.kv[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  const Message d = round_trip(m);
  expect_same(d.request, m.request);
  EXPECT_EQ(d.output_tokens, m.output_tokens);
  EXPECT_TRUE(d.kv == m.kv);
}

TEST(WireTest, AckErrorAndKvReplyCarryCodeAndText) {
  Message ack = ack_message(3, resource_exhausted_error("queue full ({} waiting)", 256));
  Message d = round_trip(ack);
  EXPECT_EQ(d.kind, Kind::kAck);
  EXPECT_EQ(d.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(d.error, "queue full (256 waiting)");
  EXPECT_EQ(round_trip(ack_message(4, ok_status())).code, StatusCode::kOk);
  d = round_trip(error_message(5, permission_denied_error("no")));
  EXPECT_EQ(d.kind, Kind::kError);
  EXPECT_EQ(d.code, StatusCode::kPermissionDenied);
  EXPECT_EQ(d.error, "no");
  Message kv;
  kv.kind = Kind::kKvReply;
  kv.call = 9;
  kv.code = StatusCode::kNotFound;
  kv.error = "request 3 holds no KV";
  kv.kv = {1, 2, 3};
  d = round_trip(kv);
  EXPECT_EQ(d.code, StatusCode::kNotFound);
  EXPECT_EQ(d.error, kv.error);
  EXPECT_EQ(d.kv, kv.kv);
}

TEST(WireTest, CancelTakeKvTimelineAndFreezeCarryTheirField) {
  for (Kind k : {Kind::kCancel, Kind::kTakeKv}) {
    Message m;
    m.kind = k;
    m.id = RequestId(99);
    EXPECT_EQ(round_trip(m).id, RequestId(99));
  }
  for (Kind k : {Kind::kTimeline, Kind::kFreeze}) {
    Message m;
    m.kind = k;
    m.seconds = 2.5;
    EXPECT_EQ(round_trip(m).seconds, 2.5);
    m.seconds = -1;
    EXPECT_EQ(decode(encode(m, kSent), kReceived).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(WireTest, EventsCarryLogprobsAndTheirTimesAsAges) {
  Message m;
  m.kind = Kind::kEvent;
  instance::TokenEvent& e = m.event;
  e.id = RequestId(12);
  e.token = 345;
  e.logprob = -0.125f;
  e.top_logprobs = {{345, -0.125f}, {7, -2.5f}};
  e.finished = true;
  e.finish_reason = "error";
  e.error = "instance tcp://x stopped answering";
  e.prompt_tokens = 50;
  e.cached_prompt_tokens = 32;
  e.scheduled_time = kSent - std::chrono::milliseconds(1500);
  const Message d = round_trip(m);
  EXPECT_EQ(d.event.id, e.id);
  EXPECT_EQ(d.event.token, 345);
  EXPECT_EQ(d.event.logprob, -0.125f);
  ASSERT_EQ(d.event.top_logprobs.size(), 2u);
  EXPECT_EQ(d.event.top_logprobs[1].token, 7);
  EXPECT_EQ(d.event.top_logprobs[1].logprob, -2.5f);
  EXPECT_TRUE(d.event.finished);
  EXPECT_EQ(d.event.finish_reason, "error");
  EXPECT_EQ(d.event.error, e.error);
  EXPECT_EQ(d.event.prompt_tokens, 50);
  EXPECT_EQ(d.event.cached_prompt_tokens, 32);
  expect_near(d.event.scheduled_time, moved(e.scheduled_time));
  // An unset time stays unset.
  m.event.scheduled_time = TimePoint{};
  EXPECT_EQ(round_trip(m).event.scheduled_time, TimePoint{});
}

TEST(WireTest, StatusReplyCarriesEveryCounterAndTheHeartbeatAsAnAge) {
  Message m;
  m.kind = Kind::kStatusReply;
  m.call = 2;
  instance::InstanceStatus& s = m.status;
  s.num_waiting = 1, s.num_running = 2, s.num_swapped = 3, s.kv_usage = 0.25;
  s.num_waiting_tokens = 1ll << 40, s.num_running_tokens = 5, s.num_free_blocks = 6, s.num_total_blocks = 7;
  s.block_size = 16, s.last_heartbeat = kSent - std::chrono::milliseconds(20), s.running = true, s.steps = 8;
  s.last_step_seconds = 0.5, s.mean_step_seconds = 0.25, s.mean_plan_seconds = 0.125;
  s.prompt_tokens_total = 9, s.generation_tokens_total = 10, s.prefix_cache_queries = 11;
  s.prefix_cache_hits = 12, s.preemptions = 13;
  s.in_step = true, s.step_started = kSent - std::chrono::milliseconds(1500);
  m.info.boot_id = 77;
  const Message d = round_trip(m);
  const instance::InstanceStatus& t = d.status;
  EXPECT_EQ(t.num_waiting, 1);
  EXPECT_EQ(t.num_running, 2);
  EXPECT_EQ(t.num_swapped, 3);
  EXPECT_EQ(t.kv_usage, 0.25);
  EXPECT_EQ(t.num_waiting_tokens, 1ll << 40);
  EXPECT_EQ(t.num_running_tokens, 5);
  EXPECT_EQ(t.num_free_blocks, 6);
  EXPECT_EQ(t.num_total_blocks, 7);
  EXPECT_EQ(t.block_size, 16);
  expect_near(t.last_heartbeat, moved(s.last_heartbeat));
  EXPECT_TRUE(t.running);
  EXPECT_EQ(t.steps, 8);
  EXPECT_EQ(t.last_step_seconds, 0.5);
  EXPECT_EQ(t.mean_step_seconds, 0.25);
  EXPECT_EQ(t.mean_plan_seconds, 0.125);
  EXPECT_EQ(t.prompt_tokens_total, 9);
  EXPECT_EQ(t.generation_tokens_total, 10);
  EXPECT_EQ(t.prefix_cache_queries, 11);
  EXPECT_EQ(t.prefix_cache_hits, 12);
  EXPECT_EQ(t.preemptions, 13);
  EXPECT_TRUE(t.in_step);  // a step 1.5 s old when sent, as old on arrival
  expect_near(t.step_started, moved(s.step_started));
  EXPECT_EQ(d.info.boot_id, 77u);
  // 2^64 (which msgpack-c's packer cannot take as a float) goes through exactly.
  m.status.kv_usage = 18446744073709551616.0;
  EXPECT_EQ(round_trip(m).status.kv_usage, 18446744073709551616.0);
  // Between steps: no step age, whatever step_started held.
  m.status.in_step = false;
  EXPECT_FALSE(round_trip(m).status.in_step);
  EXPECT_EQ(round_trip(m).status.step_started, TimePoint{});
}

TEST(WireTest, TimelineReplyCarriesSteps) {
  Message m;
  m.kind = Kind::kTimelineReply;
  m.steps.push_back({kSent - std::chrono::seconds(2), 0.03, 1, 4, 200, 4});
  m.steps.push_back({kSent - std::chrono::milliseconds(10), 0.01, 0, 8, 0, 8});
  const Message d = round_trip(m);
  ASSERT_EQ(d.steps.size(), 2u);
  expect_near(d.steps[0].start, moved(m.steps[0].start));
  EXPECT_EQ(d.steps[0].seconds, 0.03);
  EXPECT_EQ(d.steps[0].num_prefill_seqs, 1);
  EXPECT_EQ(d.steps[0].num_decode_seqs, 4);
  EXPECT_EQ(d.steps[0].num_prefill_tokens, 200);
  EXPECT_EQ(d.steps[1].num_decode_tokens, 8);
}

// Hand-built envelopes: [magic, version, kind, call, body...].
std::vector<uint8_t> envelope(const std::string& magic, uint64_t version, int64_t kind,
                              const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& body = {},
                              uint32_t body_fields = 0) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> p(&buf);
  p.pack_array(4 + body_fields);
  p.pack(magic);
  p.pack_uint64(version);
  p.pack_int64(kind);
  p.pack_uint64(1);
  if (body) body(p);
  const auto* d = reinterpret_cast<const uint8_t*>(buf.data());
  return std::vector<uint8_t>(d, d + buf.size());
}

TEST(WireTest, AnotherVersionIsAFailedPreconditionNamingBoth) {
  auto d = decode(envelope("ecoserve", kWireVersion + 1, static_cast<int>(Kind::kHello)), kReceived);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("version " + std::to_string(kWireVersion + 1)), std::string::npos);
  EXPECT_NE(d.status().message().find("version " + std::to_string(kWireVersion)), std::string::npos);
}

TEST(WireTest, ForeignOrBrokenMessagesAreInvalidArguments) {
  auto code = [](const std::vector<uint8_t>& b) { return decode(b, kReceived).status().code(); };
  EXPECT_EQ(code(envelope("ecoservf", kWireVersion, 1)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(envelope("ecoserve", kWireVersion, 0)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(envelope("ecoserve", kWireVersion, 99)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({0xc1}), StatusCode::kInvalidArgument);  // never used in msgpack
  const std::string http = "GET / HTTP/1.1\r\n\r\n";
  EXPECT_EQ(code(std::vector<uint8_t>(http.begin(), http.end())), StatusCode::kInvalidArgument);
  // A submit whose body is missing.
  EXPECT_EQ(code(envelope("ecoserve", kWireVersion, static_cast<int>(Kind::kSubmit))), StatusCode::kInvalidArgument);
  // Trailing bytes after a valid message.
  Message m;
  m.kind = Kind::kStatus;
  std::vector<uint8_t> b = encode(m, kSent);
  b.push_back(0x00);
  EXPECT_EQ(code(b), StatusCode::kInvalidArgument);
}

TEST(WireTest, EveryTruncationOfASubmitIsAnError) {
  Message m;
  m.kind = Kind::kSubmit;
  m.request = full_request();
  const std::vector<uint8_t> b = encode(m, kSent);
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(decode(cut, kReceived).ok()) << n << " of " << b.size() << " bytes";
  }
}

TEST(WireTest, LimitsAreEnforcedBeforeAllocating) {
  Message m;
  m.kind = Kind::kSubmit;
  m.request = full_request();
  m.request.prompt.assign(100, 1);
  Limits small;
  small.max_tokens = 99;
  EXPECT_EQ(decode(encode(m, kSent), kReceived, small).status().code(), StatusCode::kInvalidArgument);
  small.max_tokens = 100;
  EXPECT_TRUE(decode(encode(m, kSent), kReceived, small).ok());
  Message e = error_message(1, internal_error("{}", std::string(300, 'x')));
  small.max_string_bytes = 299;
  EXPECT_FALSE(decode(encode(e, kSent), kReceived, small).ok());
  Message kv;
  kv.kind = Kind::kKvReply;
  kv.kv.assign(1000, 7);
  small.max_kv_bytes = 999;
  EXPECT_FALSE(decode(encode(kv, kSent), kReceived, small).ok());
  // Five bytes claiming a 2^31-element array: refused by the size pre-pass, quickly.
  const std::vector<uint8_t> huge = {0xdd, 0x80, 0x00, 0x00, 0x00};
  EXPECT_EQ(decode(huge, kReceived).status().code(), StatusCode::kInvalidArgument);
  // Nested arrays each claiming a million elements in a few bytes.
  std::vector<uint8_t> nested;
  for (int i = 0; i < 40; ++i) nested.insert(nested.end(), {0xdd, 0x00, 0x10, 0x00, 0x00});
  EXPECT_EQ(decode(nested, kReceived).status().code(), StatusCode::kInvalidArgument);
}

TEST(WireTest, OutOfRangeAndMistypedFieldsAreRefused) {
  // A prompt token beyond int32.
  // temperature < 0: sent as the integer 2^64 - 1 (msgpack-c cannot pack a float of 2^64).
  auto body = [](int64_t token, bool string_prompt, double slo_ttft = 1.0, double temperature = 1.0) {
    return [=](msgpack::packer<msgpack::sbuffer>& p) {
      p.pack_array(6);
      p.pack_uint64(1);
      if (string_prompt) {
        p.pack(std::string("hello"));
      } else {
        p.pack_array(1);
        p.pack_int64(token);
      }
      p.pack_array(14);
      if (temperature < 0) {
        p.pack_uint64(UINT64_MAX);
      } else {
        p.pack_double(temperature);
      }
      p.pack_int32(0), p.pack_float(1), p.pack_float(0), p.pack_float(1), p.pack_float(0);
      p.pack_float(0), p.pack_uint64(0), p.pack(false), p.pack_int32(0), p.pack(false), p.pack_int32(16);
      p.pack_array(0), p.pack(false);
      p.pack_int32(0);
      p.pack_double(slo_ttft), p.pack_double(0.05);
    };
  };
  const int submit = static_cast<int>(Kind::kSubmit);
  EXPECT_TRUE(decode(envelope("ecoserve", kWireVersion, submit, body(5, false), 1), kReceived).ok());
  // SLOs are durations in [0, 1e6] s.
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, submit, body(5, false, -1.0), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, submit, body(5, false, 1e300), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, submit, body(1ll << 31, false), 1), kReceived).ok());
  // Sampling parameters are finite and within +-1e6 (a float beyond its range, 2^64, NaN).
  EXPECT_TRUE(decode(envelope("ecoserve", kWireVersion, submit, body(5, false, 1.0, 2.0), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, submit, body(5, false, 1.0, 1e300), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, submit, body(5, false, 1.0, -1.0), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, submit, body(5, false, 1.0, std::nan("")), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, submit, body(0, true), 1), kReceived).ok());
  // A status code outside the enum.
  auto ack = [](int64_t c) {
    return [=](msgpack::packer<msgpack::sbuffer>& p) {
      p.pack_int64(c);
      p.pack(std::string("x"));
    };
  };
  const int ack_kind = static_cast<int>(Kind::kAck);
  EXPECT_TRUE(decode(envelope("ecoserve", kWireVersion, ack_kind, ack(3), 2), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, ack_kind, ack(999), 2), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, ack_kind, ack(-1), 2), kReceived).ok());
}

TEST(WireTest, ExtraTrailingFieldsAreAcceptedForMinorAdditions) {
  // A newer sender of the same version may append fields to a body or envelope.
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> p(&buf);
  p.pack_array(6);
  p.pack(std::string("ecoserve"));
  p.pack_uint32(kWireVersion);
  p.pack_uint8(static_cast<uint8_t>(Kind::kCancel));
  p.pack_uint64(0);
  p.pack_uint64(31);
  p.pack(std::string("a later field"));
  auto d = decode({reinterpret_cast<const uint8_t*>(buf.data()), buf.size()}, kReceived);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->id, RequestId(31));
}

// The stop-and-copy stage of a request with full_request()'s 6 prompt tokens and 3
// generated: positions [4, 8) of 9 tokens, and the handover.
instance::MigrationChunk last_stage() {
  instance::MigrationChunk c;
  c.begin = 4;
  c.end = 8;
  c.num_tokens = 9;
  c.last = true;
  c.kv = {9, 8, 7, 6, 5};
  instance::MigrationHandover& h = c.handover;
  h.request = full_request();
  h.request.slo_ttft = std::chrono::milliseconds(250);
  h.request.slo_tpot = std::chrono::milliseconds(20);
  h.output_tokens = {17, -1, 2147483647};
  h.arrival = kSent - std::chrono::seconds(3);
  h.scheduled = kSent - std::chrono::milliseconds(2500);
  h.first_token_time = kSent - std::chrono::seconds(2);
  h.num_cached_prompt_tokens = 6;
  return c;
}

void expect_same_chunk(const instance::MigrationChunk& got, const instance::MigrationChunk& want) {
  EXPECT_TRUE(got.kv == want.kv);
  EXPECT_EQ(got.begin, want.begin);
  EXPECT_EQ(got.end, want.end);
  EXPECT_EQ(got.num_tokens, want.num_tokens);
  EXPECT_EQ(got.last, want.last);
  if (!want.last) return;
  const instance::MigrationHandover &g = got.handover, &w = want.handover;
  expect_same(g.request, w.request);
  EXPECT_EQ(g.request.slo_ttft, w.request.slo_ttft);
  EXPECT_EQ(g.request.slo_tpot, w.request.slo_tpot);
  EXPECT_EQ(g.output_tokens, w.output_tokens);
  EXPECT_EQ(g.num_cached_prompt_tokens, w.num_cached_prompt_tokens);
  for (auto [a, b] : {std::pair{g.arrival, w.arrival}, {g.scheduled, w.scheduled},
                      {g.first_token_time, w.first_token_time}}) {
    if (b == TimePoint{}) {
      EXPECT_EQ(a, TimePoint{});  // unset stays unset
    } else {
      expect_near(a, moved(b));
    }
  }
}

TEST(WireTest, MigrationCallsCarryTheirFields) {
  Message out;
  out.kind = Kind::kMigrateOut;
  out.call = 11;
  out.id = RequestId(0xfedcba9876543210ull);
  out.begin = 2147483647;
  out.stop = true;
  Message d = round_trip(out);
  EXPECT_EQ(d.id, out.id);
  EXPECT_EQ(d.begin, 2147483647);
  EXPECT_TRUE(d.stop);
  out.begin = 0;
  out.stop = false;
  d = round_trip(out);
  EXPECT_EQ(d.begin, 0);
  EXPECT_FALSE(d.stop);
  for (bool committed : {true, false}) {
    Message fin;
    fin.kind = Kind::kMigrateOutFinish;
    fin.call = 12;
    fin.id = RequestId(5);
    fin.committed = committed;
    d = round_trip(fin);
    EXPECT_EQ(d.id, RequestId(5));
    EXPECT_EQ(d.committed, committed);
  }
  Message reserve;
  reserve.kind = Kind::kMigrateInReserve;
  reserve.call = 13;
  reserve.id = RequestId(6);
  reserve.num_tokens = 300;
  d = round_trip(reserve);
  EXPECT_EQ(d.id, RequestId(6));
  EXPECT_EQ(d.num_tokens, 300);
  Message cancel;
  cancel.kind = Kind::kMigrateInCancel;
  cancel.id = RequestId(7);
  EXPECT_EQ(round_trip(cancel).id, RequestId(7));
}

TEST(WireTest, MigrationStagesCarryTheirKvBitExactAndTheHandover) {
  // A copy stage of megabytes, loaded at the destination.
  Message load;
  load.kind = Kind::kMigrateInLoad;
  load.call = 21;
  load.id = RequestId(3);
  load.chunk.begin = 0;
  load.chunk.end = 700;
  load.chunk.num_tokens = 701;
  load.chunk.kv.resize(3 << 20);
  for (size_t i = 0; i < load.chunk.kv.size(); ++i) load.chunk.kv[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  Message d = round_trip(load);
  EXPECT_EQ(d.id, RequestId(3));
  expect_same_chunk(d.chunk, load.chunk);
  // An empty stage (nothing computed since the last one).
  load.chunk.begin = load.chunk.end = 700;
  load.chunk.kv.clear();
  expect_same_chunk(round_trip(load).chunk, load.chunk);
  // The stop-and-copy stage with the handover, committed at the destination.
  Message commit;
  commit.kind = Kind::kMigrateInCommit;
  commit.call = 22;
  commit.chunk = last_stage();
  d = round_trip(commit);
  expect_same_chunk(d.chunk, commit.chunk);
  EXPECT_EQ(d.chunk.handover.request.id, full_request().id);
  // A request never scheduled before its first token has no scheduled time of its own.
  commit.chunk.handover.first_token_time = TimePoint{};
  expect_same_chunk(round_trip(commit).chunk, commit.chunk);
  // The source's answer: a chunk, or an error and no chunk.
  Message reply;
  reply.kind = Kind::kMigrateChunk;
  reply.call = 23;
  reply.chunk = last_stage();
  d = round_trip(reply);
  EXPECT_EQ(d.code, StatusCode::kOk);
  expect_same_chunk(d.chunk, reply.chunk);
  reply.chunk = {};
  reply.code = StatusCode::kFailedPrecondition;
  reply.error = "request 3 is not running here";
  d = round_trip(reply);
  EXPECT_EQ(d.code, StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.error, reply.error);
  expect_same_chunk(d.chunk, instance::MigrationChunk{});
}

TEST(WireTest, BadMigrationValuesAreRefused) {
  auto refused = [](const Message& m) {
    StatusOr<Message> d = decode(encode(m, kSent), kReceived);
    return !d.ok() && d.status().code() == StatusCode::kInvalidArgument;
  };
  Message out;
  out.kind = Kind::kMigrateOut;
  out.begin = -1;
  EXPECT_TRUE(refused(out));
  Message reserve;
  reserve.kind = Kind::kMigrateInReserve;
  reserve.num_tokens = -16;
  EXPECT_TRUE(refused(reserve));
  // Stages: as the commit, the load and the source's answer carry them.
  for (Kind kind : {Kind::kMigrateInCommit, Kind::kMigrateInLoad, Kind::kMigrateChunk}) {
    const std::string k = kind_name(kind);
    Message m;
    m.kind = kind;
    m.chunk = last_stage();
    ASSERT_FALSE(refused(m)) << k;
    auto bad = [&](const std::function<void(instance::MigrationChunk&)>& change) {
      Message b = m;
      change(b.chunk);
      return refused(b);
    };
    EXPECT_TRUE(bad([](auto& c) { c.begin = -1; })) << k << ": negative begin";
    EXPECT_TRUE(bad([](auto& c) { c.begin = 9, c.end = 8, c.num_tokens = 9; })) << k << ": end < begin";
    EXPECT_TRUE(bad([](auto& c) { c.end = 8, c.num_tokens = 7; })) << k << ": num_tokens < end";
    EXPECT_TRUE(bad([](auto& c) { c.kv.clear(); })) << k << ": positions without KV";
    EXPECT_TRUE(bad([](auto& c) { c.begin = c.end; })) << k << ": KV without positions";
    EXPECT_TRUE(bad([](auto& c) { c.end = 7; })) << k << ": stops before the last computed position";
    EXPECT_TRUE(bad([](auto& c) { c.handover.output_tokens.push_back(1); })) << k << ": tokens do not match";
    EXPECT_TRUE(bad([](auto& c) {
      c.handover.output_tokens.clear();
      c.num_tokens = 6, c.end = 5, c.begin = 4;
    })) << k << ": no generated token";
    EXPECT_TRUE(bad([](auto& c) { c.handover.num_cached_prompt_tokens = 7; })) << k << ": caches beyond the prompt";
    EXPECT_TRUE(bad([](auto& c) { c.handover.num_cached_prompt_tokens = -1; })) << k << ": negative cache hits";
    EXPECT_TRUE(bad([](auto& c) { c.handover.request.sampling.temperature = std::nanf(""); })) << k << ": bad sampling";
    EXPECT_TRUE(bad([](auto& c) { c.handover.request.slo_tpot = -std::chrono::seconds(1); })) << k << ": negative SLO";
  }
  // The handover is there exactly when the stage is the last: hand-built chunks.
  auto chunk = [](bool last, bool with_handover) {
    return [=](msgpack::packer<msgpack::sbuffer>& p) {
      p.pack_array(6);
      p.pack_bin(1);
      p.pack_bin_body("x", 1);
      p.pack_int32(0), p.pack_int32(1), p.pack_int32(2), p.pack(last);
      if (!with_handover) {
        p.pack_nil();
        return;
      }
      p.pack_array(6);
      p.pack_array(6);
      p.pack_uint64(1);
      p.pack_array(1), p.pack_int32(5);
      p.pack_array(14);
      p.pack_float(1), p.pack_int32(0), p.pack_float(1), p.pack_float(0), p.pack_float(1), p.pack_float(0);
      p.pack_float(0), p.pack_uint64(0), p.pack(false), p.pack_int32(0), p.pack(false), p.pack_int32(16);
      p.pack_array(0), p.pack(false);
      p.pack_int32(0), p.pack_double(0), p.pack_double(0);
      p.pack_array(1), p.pack_int32(9);
      p.pack_double(1), p.pack_double(1), p.pack_double(-1), p.pack_int32(0);
    };
  };
  const int commit = static_cast<int>(Kind::kMigrateInCommit);
  EXPECT_TRUE(decode(envelope("ecoserve", kWireVersion, commit, chunk(false, false), 1), kReceived).ok());
  EXPECT_TRUE(decode(envelope("ecoserve", kWireVersion, commit, chunk(true, true), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, commit, chunk(true, false), 1), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, commit, chunk(false, true), 1), kReceived).ok());
  // Mistyped fields: stop as an integer, an id as a string.
  const int out_kind = static_cast<int>(Kind::kMigrateOut);
  auto out_body = [](bool int_stop, bool string_id) {
    return [=](msgpack::packer<msgpack::sbuffer>& p) {
      if (string_id) {
        p.pack(std::string("7"));
      } else {
        p.pack_uint64(7);
      }
      p.pack_int32(3);
      if (int_stop) {
        p.pack_int32(1);
      } else {
        p.pack(true);
      }
    };
  };
  EXPECT_TRUE(decode(envelope("ecoserve", kWireVersion, out_kind, out_body(false, false), 3), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, out_kind, out_body(true, false), 3), kReceived).ok());
  EXPECT_FALSE(decode(envelope("ecoserve", kWireVersion, out_kind, out_body(false, true), 3), kReceived).ok());
}

TEST(WireTest, EveryTruncationOfACommitIsAnError) {
  Message m;
  m.kind = Kind::kMigrateInCommit;
  m.chunk = last_stage();
  const std::vector<uint8_t> b = encode(m, kSent);
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(decode(cut, kReceived).ok()) << n << " of " << b.size() << " bytes";
  }
}

// Writes one seed per kind into $ECOSERVE_WIRE_CORPUS_DIR (fuzz/corpus/wire).
TEST(WireTest, DISABLED_WriteCorpus) {
  const char* dir = std::getenv("ECOSERVE_WIRE_CORPUS_DIR");
  ASSERT_NE(dir, nullptr);
  std::vector<Message> seeds;
  for (int k = 1; k <= static_cast<int>(kLastKind); ++k) {
    Message m;
    m.kind = static_cast<Kind>(k);
    m.call = static_cast<uint64_t>(k);
    m.info = {"tcp://127.0.0.1:1", "decode", 512, 16, "/m.gguf", "m.gguf:1", 5, "chunked"};
    m.request = full_request();
    m.output_tokens = {4};
    m.kv = {1, 2, 3, 4, 5, 6, 7, 8};
    m.event.id = RequestId(3);
    m.event.token = 9;
    m.event.top_logprobs = {{9, -0.5f}};
    m.event.finish_reason = "length";
    m.status.num_running = 2;
    m.steps.push_back({kSent, 0.01, 1, 2, 3, 4});
    m.seconds = 1.5;
    m.id = RequestId(3);
    m.code = StatusCode::kUnavailable;
    m.error = "x";
    m.begin = 2;
    m.stop = true;
    m.committed = true;
    m.num_tokens = 9;
    m.chunk = last_stage();
    seeds.push_back(m);
  }
  // Migration messages in their other shapes: a copy stage (no handover) loaded and
  // answered, a successful answer.
  Message load;
  load.kind = Kind::kMigrateInLoad;
  load.call = 40;
  load.id = RequestId(3);
  load.chunk.begin = 0, load.chunk.end = 4, load.chunk.num_tokens = 5, load.chunk.kv = {1, 2, 3, 4};
  seeds.push_back(load);
  Message stage = load;
  stage.kind = Kind::kMigrateChunk;
  seeds.push_back(stage);
  Message done = stage;
  done.chunk = last_stage();
  seeds.push_back(done);
  std::map<std::string, int> named;
  for (const Message& m : seeds) {
    const std::vector<uint8_t> b = encode(m, kSent);
    std::string name = kind_name(m.kind);
    if (named[name]++ > 0) name += "_" + std::to_string(named[name]);
    const std::string path = std::string(dir) + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    std::fwrite(b.data(), 1, b.size(), f);
    std::fclose(f);
  }
}

}  // namespace
}  // namespace ecoserve::transport
