// FakeBackend: a GenerationBackend for router tests. It keeps the requests it is
// given and their sinks; the test emits their events (token, finish) by hand and
// sets the status snapshot the router reads. Test-only header.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "cluster/generation_backend.h"

namespace ecoserve::cluster::testing {

class FakeBackend : public GenerationBackend {
 public:
  explicit FakeBackend(int32_t max_context = 512) : max_context_(max_context) {
    status_.running = true;
    status_.block_size = 16;
    status_.num_free_blocks = 100;
    status_.num_total_blocks = 100;
  }

  void start() override { started = true; }
  Status submit(instance::GenerationRequest request, instance::EventSink sink) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!refuse.ok()) return refuse;
    submitted_.push_back(request.id);
    sinks_[request.id.value] = std::move(sink);
    prompts_[request.id.value] = std::move(request.prompt);
    return ok_status();
  }
  void cancel(RequestId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.push_back(id);
  }
  std::shared_ptr<const model::LlamaModel> model() const override { return nullptr; }
  int32_t max_context() const override { return max_context_; }
  instance::InstanceStatus status() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  std::vector<InstanceReport> instances() const override {
    InstanceReport r;
    r.name = "fake";
    r.status = status();
    return {r};
  }
  std::vector<InstanceTimeline> timeline(TimePoint) const override { return {}; }
  void begin_drain() override { draining = true; }
  bool idle() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return sinks_.empty();
  }
  void stop() override {
    std::map<uint64_t, instance::EventSink> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(sinks_);
    }
    for (auto& [id, sink] : left) {
      instance::TokenEvent ev;
      ev.id = RequestId(id);
      ev.finished = true;
      ev.finish_reason = "abort";
      sink(ev);
    }
    stopped = true;
  }

  // Emits a token (and, when `finish_reason` is given, the final event) for a request.
  void emit(uint64_t id, int32_t token, const char* finish_reason = nullptr) {
    instance::EventSink sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sink = sinks_.at(id);
      if (finish_reason) sinks_.erase(id);
    }
    if (token >= 0) {
      instance::TokenEvent ev;
      ev.id = RequestId(id);
      ev.token = token;
      sink(ev);
    }
    if (finish_reason) {
      instance::TokenEvent ev;
      ev.id = RequestId(id);
      ev.finished = true;
      ev.finish_reason = finish_reason;
      sink(ev);
    }
  }
  void set_status(const instance::InstanceStatus& s) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
  }

  // What reached submit() and cancel(), in order (copies: the router's watchdog may submit probes meanwhile).
  std::vector<RequestId> submitted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  std::vector<RequestId> cancelled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  void clear_submitted() {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_.clear();
  }
  Status refuse;  // non-OK: submit() fails with it (set before requests are sent)
  bool started = false, draining = false, stopped = false;

 private:
  mutable std::mutex mu_;
  int32_t max_context_;
  instance::InstanceStatus status_;
  std::map<uint64_t, instance::EventSink> sinks_;
  std::map<uint64_t, std::vector<int32_t>> prompts_;
  std::vector<RequestId> submitted_, cancelled_;
};

}  // namespace ecoserve::cluster::testing
