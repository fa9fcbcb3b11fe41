// RemoteBackend <-> InstanceService over real ZeroMQ sockets on loopback, with
// real engines: the same tokens as an embedded instance (nodg and fudg, f32 and
// f16 KV, a prefix-cache hit on the decode instance), errors returned as with an
// embedded instance, version mismatches refused, a dead instance's requests
// ended, a silent router's requests cancelled and its held KV freed, and a frozen
// engine caught by the router's readiness probe.
#include "cluster/remote_backend.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <msgpack.hpp>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "base/eventually.h"
#include "base/test_data.h"
#include "cluster/instance_backend.h"
#include "cluster/instance_service.h"
#include "cluster/router.h"
#include "engine/generator.h"

namespace ecoserve::cluster {
namespace {

constexpr const char* kModel = "models/tinystories-656k-q8_0.gguf";

struct Result {
  std::vector<int32_t> tokens;
  std::string finish_reason;
  std::string error;
};

// Collects events of many requests; wait() until `n` have finished.
class Collector {
 public:
  instance::EventSink sink() {
    return [this](const instance::TokenEvent& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      Result& r = got_[ev.id.value];
      if (ev.token >= 0) r.tokens.push_back(ev.token);
      if (ev.finished) {
        r.finish_reason = ev.finish_reason;
        r.error = ev.error;
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  bool wait(size_t n, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return finished_ >= n; });
  }
  Result get(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return got_[id];
  }
  size_t tokens_of(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return got_[id].tokens.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Result> got_;
  size_t finished_ = 0;
};

// One embedded instance served over ZeroMQ on a loopback port.
struct Served {
  std::unique_ptr<InstanceBackend> backend;
  std::unique_ptr<InstanceService> service;
  ~Served() {
    if (backend) backend->stop();
    if (service) service->stop();
  }
  void kill() {  // as SIGKILL looks from outside: no more answers, nothing said
    service->stop();
    backend->stop();
  }
};

class RemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = shared_data_path(kModel);
    if (!path) GTEST_SKIP() << missing_data_message(kModel);
    auto m = model::LlamaModel::load(*path);
    ASSERT_TRUE(m.ok());
    model_ = *m;
  }

  std::unique_ptr<Served> serve(const std::string& role, engine::KvCacheType kv = engine::KvCacheType::kF32,
                                Duration router_timeout = from_ms(10000), bool hooks = false) {
    engine::EngineOptions eo;
    eo.num_threads = 1;
    eo.num_kv_blocks = 128;
    eo.kv_cache_type = kv;
    // Tokens compared bitwise across batchings: the int8 levels' guarantee, not the bf16
    // tiles' (which, with their weights made at load, take Q8_0 batches from 16 tokens).
    eo.amx_bf16 = false;
    instance::InstanceOptions io;
    io.policy = role == "prefill" ? "prefill-only" : "chunked";
    fill_model_fields(*model_, io);
    auto s = std::make_unique<Served>();
    auto b = InstanceBackend::create(model_, eo, io, &clock_);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    s->backend = std::move(*b);
    s->backend->set_role(role);
    s->backend->start();
    InstanceServiceOptions so;
    so.role = role;
    so.model_id = "tinystories";
    so.block_size = eo.block_size;
    so.router_timeout = router_timeout;
    InstanceBackend* raw = s->backend.get();
    if (hooks) so.freeze_for_testing = [raw](Duration d) { raw->freeze_for_testing(d); };
    auto svc = InstanceService::create(s->backend.get(), so, &clock_);
    EXPECT_TRUE(svc.ok()) << svc.status().to_string();
    s->service = std::move(*svc);
    s->service->start();
    return s;
  }

  std::unique_ptr<RemoteBackend> connect(const Served& s, Duration peer_timeout = from_ms(3000)) {
    RemoteBackendOptions o;
    o.address = s.service->endpoint();
    o.peer_timeout = peer_timeout;
    o.status_interval = from_ms(50);
    auto r = RemoteBackend::connect(o, &clock_);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return nullptr;
    (*r)->set_model(model_);
    return std::move(*r);
  }

  instance::GenerationRequest request(uint64_t id, const std::string& prompt, int32_t max_tokens = 24,
                                      float temperature = 0.0f) {
    instance::GenerationRequest r;
    r.id = RequestId(id);
    r.prompt = model_->tokenizer().encode(prompt, true);
    r.sampling.temperature = temperature;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.sampling.has_seed = true;
    r.sampling.seed = 1000 + id;
    return r;
  }

  // What one embedded instance generates for these requests.
  std::map<uint64_t, std::vector<int32_t>> reference(const std::vector<instance::GenerationRequest>& reqs,
                                                     engine::KvCacheType kv) {
    auto s = serve("mixed", kv);
    Collector c;
    for (const auto& r : reqs) EXPECT_TRUE(s->backend->submit(r, c.sink()).ok());
    EXPECT_TRUE(c.wait(reqs.size()));
    std::map<uint64_t, std::vector<int32_t>> out;
    for (const auto& r : reqs) out[r.id.value] = c.get(r.id.value).tokens;
    return out;
  }

  std::shared_ptr<const model::LlamaModel> model_;
  SteadyClock clock_;
};

TEST_F(RemoteTest, HelloTellsWhatTheInstanceServes) {
  auto s = serve("decode");
  auto r = connect(*s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->info().role, "decode");
  EXPECT_EQ(r->info().model_id, "tinystories");
  EXPECT_EQ(r->info().max_context, s->backend->max_context());
  EXPECT_EQ(r->info().block_size, 16);
  EXPECT_EQ(r->info().boot_id, s->service->boot_id());
  EXPECT_EQ(r->max_context(), s->backend->max_context());
  // Status snapshots arrive within a few intervals.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const instance::InstanceStatus st = r->status();
  EXPECT_TRUE(st.running);
  EXPECT_EQ(st.num_total_blocks, 128);
  EXPECT_EQ(st.block_size, 16);
  EXPECT_LT(to_seconds(clock_.now() - st.last_heartbeat), 1.0);
  EXPECT_EQ(r->instances().at(0).name, s->service->endpoint());
}

TEST_F(RemoteTest, TokensEqualAnEmbeddedInstanceAndErrorsAreReturned) {
  std::vector<instance::GenerationRequest> reqs = {request(1, "Once upon a time"), request(2, "The little dog", 24, 0.8f),
                                                   request(3, "One day")};
  const auto want = reference(reqs, engine::KvCacheType::kF32);
  auto s = serve("mixed");
  auto r = connect(*s);
  ASSERT_TRUE(r);
  Collector c;
  for (const auto& q : reqs) ASSERT_TRUE(r->submit(q, c.sink()).ok());
  ASSERT_TRUE(c.wait(reqs.size()));
  for (const auto& q : reqs) {
    EXPECT_EQ(c.get(q.id.value).tokens, want.at(q.id.value)) << "request " << q.id.value;
    EXPECT_EQ(c.get(q.id.value).finish_reason, "length");
  }
  // A prompt longer than the context: the instance's INVALID_ARGUMENT comes back from submit().
  instance::GenerationRequest too_long = request(9, "x");
  too_long.prompt.assign(static_cast<size_t>(s->backend->max_context()) + 1, 5);
  Status st = r->submit(too_long, c.sink());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  // The same id twice while running.
  ASSERT_TRUE(r->submit(request(10, "Once upon a time", 400), c.sink()).ok());
  EXPECT_EQ(r->submit(request(10, "Once", 4), c.sink()).code(), StatusCode::kAlreadyExists);
  r->cancel(RequestId(10));
  ASSERT_TRUE(c.wait(reqs.size() + 1));
  EXPECT_EQ(c.get(10).finish_reason, "abort");
  // After the router's drain this backend takes nothing (the instance still would).
  r->begin_drain();
  EXPECT_EQ(r->submit(request(11, "One day"), c.sink()).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(r->idle());
}

TEST_F(RemoteTest, FudgOverTheWireEqualsOneInstanceIncludingF16AndPrefixHits) {
  for (engine::KvCacheType kv : {engine::KvCacheType::kF32, engine::KvCacheType::kF16}) {
    std::vector<instance::GenerationRequest> reqs = {
        request(1, "Once upon a time"), request(2, "The little dog ran to the park and", 24, 0.9f),
        request(3, "One day")};
    const auto want = reference(reqs, kv);
    auto prefill = serve("prefill", kv);
    auto decode = serve("decode", kv);
    std::vector<std::unique_ptr<GenerationBackend>> members;
    members.push_back(connect(*prefill));
    members.push_back(connect(*decode));
    RouterOptions ro;
    ro.strategy = "fudg";
    ro.num_prefill_instances = 1;
    ro.probe_interval = Duration::zero();
    auto router = Router::create(std::move(members), ro, &clock_);
    ASSERT_TRUE(router.ok()) << router.status().to_string();
    (*router)->start();
    Collector c;
    for (const auto& q : reqs) ASSERT_TRUE((*router)->submit(q, c.sink()).ok());
    ASSERT_TRUE(c.wait(reqs.size()));
    for (const auto& q : reqs) {
      EXPECT_EQ(c.get(q.id.value).tokens, want.at(q.id.value))
          << engine::kv_cache_type_name(kv) << " request " << q.id.value << ": " << c.get(q.id.value).error;
    }
    EXPECT_EQ((*router)->cluster_stats().kv_transfers, 3);
    EXPECT_GT((*router)->cluster_stats().kv_transfer_bytes, 0);
    // The decode instance now caches "Once upon a time": the same prompt again hits
    // its prefix cache when the moved KV is loaded, and the tokens still agree.
    instance::GenerationRequest again = reqs[0];
    again.id = RequestId(4);
    ASSERT_TRUE((*router)->submit(again, c.sink()).ok());
    ASSERT_TRUE(c.wait(reqs.size() + 1));
    EXPECT_EQ(c.get(4).tokens, want.at(1));
    const ClusterStats stats = (*router)->cluster_stats();
    EXPECT_EQ(stats.kv_transfers + stats.local_prefills, 4);
    // Nothing is held anywhere afterwards.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(prefill->backend->status().num_free_blocks, 128);
    (*router)->stop();
  }
}

TEST_F(RemoteTest, AnInstanceThatStopsAnsweringEndsItsRequestsWithAnError) {
  auto s = serve("mixed");
  auto r = connect(*s, from_ms(400));
  ASSERT_TRUE(r);
  Collector c;
  ASSERT_TRUE(r->submit(request(1, "Once upon a time", 500), c.sink()).ok());
  // Let it start, then the instance vanishes without a word.
  while (c.tokens_of(1) < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s->kill();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.wait(1, std::chrono::seconds(10)));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Result got = c.get(1);
  // Either it finished in the instant before the kill, or it failed naming the instance.
  if (got.finish_reason != "length") {
    EXPECT_EQ(got.finish_reason, "error");
    EXPECT_NE(got.error.find(s->service->endpoint()), std::string::npos) << got.error;
    EXPECT_LT(took, 3.0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_FALSE(r->status().running);
  EXPECT_EQ(r->submit(request(2, "One day"), c.sink()).code(), StatusCode::kUnavailable);
  bool called = false;
  r->take_prefilled_kv(RequestId(1), [&](StatusOr<std::vector<uint8_t>> b) {
    called = true;
    EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  });
  EXPECT_TRUE(called);
}

TEST_F(RemoteTest, ASilentRoutersRequestsAreCancelledAndItsHeldKvFreed) {
  auto prefill = serve("prefill", engine::KvCacheType::kF32, from_ms(300));
  auto mixed = serve("mixed", engine::KvCacheType::kF32, from_ms(300));
  {
    // A router process, as raw sockets: it submits, then vanishes without a word
    // (no cancel, no status polls), as a SIGKILLed router does.
    zmq::context_t ctx;
    auto submit = [&](Served& s, instance::GenerationRequest q, zmq::socket_t& sock) {
      sock.set(zmq::sockopt::linger, 0);
      sock.set(zmq::sockopt::rcvtimeo, 10000);
      sock.connect(s.service->endpoint());
      transport::Message m;
      m.kind = transport::Kind::kSubmit;
      m.call = 1;
      m.request = std::move(q);
      const std::vector<uint8_t> bytes = transport::encode(m, clock_.now());
      sock.send(zmq::buffer(bytes));
      zmq::message_t reply;
      ASSERT_TRUE(sock.recv(reply));
    };
    zmq::socket_t to_prefill(ctx, zmq::socket_type::dealer), to_mixed(ctx, zmq::socket_type::dealer);
    // A prefill that ends holding its KV for a transfer nobody will take, and a long decode.
    submit(*prefill, request(1, "Once upon a time, there was a little girl"), to_prefill);
    submit(*mixed, request(2, "One day", 500), to_mixed);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until && prefill->backend->status().num_free_blocks == 128) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_LT(prefill->backend->status().num_free_blocks, 128);
    EXPECT_FALSE(mixed->backend->idle());
  }
  // Within the router timeout both instances give everything back.
  eventually([&] { return prefill->backend->status().num_free_blocks == 128 && mixed->backend->idle(); }, 10,
             std::chrono::milliseconds(20));
  EXPECT_EQ(prefill->backend->status().num_free_blocks, 128);
  EXPECT_TRUE(mixed->backend->idle());
  EXPECT_EQ(prefill->service->num_routers(), 0u);
}

TEST_F(RemoteTest, AnotherWireVersionIsRefusedBothWays) {
  // A router of another version says hello to this instance: it answers kError.
  auto s = serve("mixed");
  {
    zmq::context_t ctx;
    zmq::socket_t sock(ctx, zmq::socket_type::dealer);
    sock.set(zmq::sockopt::linger, 0);
    sock.connect(s->service->endpoint());
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> p(&buf);
    p.pack_array(4);
    p.pack(std::string("ecoserve"));
    p.pack_uint32(transport::kWireVersion + 1);
    p.pack_uint8(static_cast<uint8_t>(transport::Kind::kHello));
    p.pack_uint64(7);
    sock.send(zmq::buffer(buf.data(), buf.size()));
    zmq::message_t reply;
    sock.set(zmq::sockopt::rcvtimeo, 5000);
    ASSERT_TRUE(sock.recv(reply));
    auto m = transport::decode({static_cast<const uint8_t*>(reply.data()), reply.size()}, clock_.now());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->kind, transport::Kind::kError);
    EXPECT_EQ(m->code, StatusCode::kFailedPrecondition);
    EXPECT_NE(m->error.find("version " + std::to_string(transport::kWireVersion + 1)), std::string::npos) << m->error;
  }
  // An instance of another version answers this router's hello: connect() says so.
  zmq::context_t ctx;
  zmq::socket_t fake(ctx, zmq::socket_type::router);
  fake.set(zmq::sockopt::linger, 0);
  fake.bind("tcp://127.0.0.1:0");
  const std::string address = fake.get(zmq::sockopt::last_endpoint);
  std::thread answer([&] {
    fake.set(zmq::sockopt::rcvtimeo, 5000);
    zmq::message_t id, body;
    if (!fake.recv(id) || !fake.recv(body)) return;
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> p(&buf);
    p.pack_array(6);
    p.pack(std::string("ecoserve"));
    p.pack_uint32(transport::kWireVersion + 1);
    p.pack_uint8(static_cast<uint8_t>(transport::Kind::kError));
    p.pack_uint64(1);
    p.pack_int32(static_cast<int32_t>(StatusCode::kFailedPrecondition));
    p.pack(std::string("wire version mismatch"));
    fake.send(id, zmq::send_flags::sndmore);
    fake.send(zmq::buffer(buf.data(), buf.size()));
  });
  RemoteBackendOptions o;
  o.address = address;
  o.connect_timeout = from_ms(5000);
  auto r = RemoteBackend::connect(o, &clock_);
  answer.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().to_string();
  EXPECT_NE(r.status().message().find("version"), std::string::npos);
}

TEST_F(RemoteTest, NobodyListeningIsUnavailableNamingTheAddress) {
  RemoteBackendOptions o;
  o.address = "tcp://127.0.0.1:1";
  o.connect_timeout = from_ms(600);
  auto r = RemoteBackend::connect(o, &clock_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("tcp://127.0.0.1:1"), std::string::npos);
  o.address = "127.0.0.1:5555";
  EXPECT_EQ(RemoteBackend::connect(o, &clock_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RemoteTest, AFrozenEngineBehindALivePortIsCaughtByTheReadinessProbe) {
  auto a = serve("mixed", engine::KvCacheType::kF32, from_ms(10000), /*hooks=*/true);
  auto b = serve("mixed");
  auto ra = connect(*a);
  auto rb = connect(*b);
  ASSERT_TRUE(ra && rb);
  // Without --test-hooks the message is refused.
  EXPECT_EQ(rb->freeze_for_testing(from_ms(100)).code(), StatusCode::kPermissionDenied);
  RemoteBackend* raw_a = ra.get();
  std::vector<std::unique_ptr<GenerationBackend>> members;
  members.push_back(std::move(ra));
  members.push_back(std::move(rb));
  RouterOptions ro;
  ro.router = "round-robin";
  ro.probe_interval = from_ms(100);
  ro.probe_timeout = from_ms(300);
  ro.watchdog_interval = from_ms(50);
  auto router = Router::create(std::move(members), ro, &clock_);
  ASSERT_TRUE(router.ok());
  (*router)->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE((*router)->instances().at(0).healthy);
  ASSERT_TRUE(raw_a->freeze_for_testing(from_ms(3000)).ok());
  // The port answers status (the socket thread is alive) but the engine does not step.
  eventually([&] { return !(*router)->instances().at(0).healthy; }, 3, std::chrono::milliseconds(20));
  EXPECT_FALSE((*router)->instances().at(0).healthy);
  EXPECT_TRUE((*router)->instances().at(1).healthy);
  // New requests go to the healthy one and complete.
  Collector c;
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE((*router)->submit(request(id, "One day", 8), c.sink()).ok());
  ASSERT_TRUE(c.wait(3, std::chrono::seconds(10)));
  for (uint64_t id = 1; id <= 3; ++id) EXPECT_EQ(c.get(id).finish_reason, "length");
  (*router)->stop();
}

}  // namespace
}  // namespace ecoserve::cluster
